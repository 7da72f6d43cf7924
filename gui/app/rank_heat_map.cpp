// SPDX-License-Identifier: MIT
#include "rank_heat_map.h"

#include "clock_text.h"

#include "charts/chart_axis.h"
#include "charts/chart_frame.h"
#include "charts/chart_theme.h"
#include "charts/color_map.h"

#include "cppl/cluster_profile.h"

#include <QHelpEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace Qt::StringLiterals;
using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::Snapshot;

namespace cppl::app {

namespace {

/// Rounded up to a quarter of its decade (9.82k -> 10k, 2.64k -> 2.75k): the image is recoloured
/// only when the scale crosses such a step, not at every change of the maximum.
double scaleStep(double v)
{
    if (!(v > 0) || !std::isfinite(v))
        return 1;
    const double step = std::pow(10.0, std::floor(std::log10(v))) / 4;
    return std::ceil(v / step - 1e-9) * step;
}

/// How cells without data look: the theme's no-data grey, hatched as the legend's swatch is
/// (charts/chart_frame.cpp paintSwatch), so no colour of the scale can be taken for it.
void paintNoData(QPainter &p, const QRectF &r, const cppl::charts::Theme &theme)
{
    p.fillRect(r, theme.noData);
    p.fillRect(r, QBrush(cppl::charts::detail::textOn(theme.noData), Qt::BDiagPattern));
}

} // namespace

RankHeatMap::RankHeatMap(QWidget *parent)
    : RankPlot(parent)
{
    setMinimumSize(240, 150);
    setToolTip(tr("Tokens/s of every rank over time: brighter is faster; hatched grey: no data yet (the rank has not sent "
                  "its first progress message). ✗ failed, ‖ stalled, ⊘ lost (the run recovered without it). Click a row to "
                  "select its rank."));
    const auto &map = cppl::charts::ColorMap::viridis();
    m_ramp = QImage(1, cppl::charts::ColorMap::kSize, QImage::Format_RGB32);
    for (int i = 0; i < cppl::charts::ColorMap::kSize; ++i)
        m_ramp.setPixel(0, cppl::charts::ColorMap::kSize - 1 - i, map.table()[size_t(i)]);
}

void RankHeatMap::clear()
{
    m_rates.clear();
    m_times.clear();
    m_firstData.clear();
    m_anyWithoutData = false;
    m_marks.clear();
    m_stateMarks.clear();
    m_lost.clear();
    m_capacity = m_columns = m_ranks = 0;
    m_compactions = ~std::uint64_t{0};
    m_image = QImage();
    m_rows = m_imageColumns = 0;
    m_scale = m_seconds = 0;
    QWidget::update();
}

void RankHeatMap::setData(const RunTimeline &tl, const Snapshot &snapshot, double colourMax)
{
    const int ranks = tl.worldSize();
    const int n = int(tl.size());
    const auto times = tl.times();
    // The columns before `from` are what we hold already: same run (times), no compaction since.
    int from = 0;
    if (ranks == m_ranks && tl.compactions() == m_compactions && n >= m_columns && m_columns > 0
        && std::equal(m_times.begin(), m_times.end() - 1, times.begin()))
        from = m_columns - 1; // the newest sample may have been updated in place
    if (n > m_capacity || ranks != m_ranks) {
        // Room for a few hundred more samples; the timeline's own bound (maxPoints) caps it.
        const int capacity = std::max(256, (n + 255) / 256 * 256);
        std::vector<float> grown(size_t(ranks) * size_t(capacity), 0.0f);
        if (ranks == m_ranks)
            for (int r = 0; r < ranks; ++r)
                std::copy_n(m_rates.begin() + std::ptrdiff_t(size_t(r) * size_t(m_capacity)), from,
                            grown.begin() + std::ptrdiff_t(size_t(r) * size_t(capacity)));
        else
            from = 0;
        m_rates = std::move(grown);
        m_capacity = capacity;
        m_image = QImage(); // reallocated at the next paint, every column coloured again
        m_imageColumns = 0;
    }
    for (int r = 0; r < ranks; ++r) {
        const auto s = tl.rank(RankMetric::TokensPerSecond, r);
        std::copy(s.begin() + from, s.begin() + n, m_rates.begin() + std::ptrdiff_t(size_t(r) * size_t(m_capacity) + size_t(from)));
    }
    m_ranks = ranks;
    m_columns = n;
    m_compactions = tl.compactions();
    m_times.assign(times.begin(), times.end());
    m_seconds = n ? times.back() : 0;
    // Before its first progress message a rank's rate is 0 in the timeline: no data, not a rate.
    // A rank's time only ever goes from +inf to the sample that first held its progress, the
    // newest one then, so the columns coloured before stay right.
    m_firstData.resize(size_t(ranks));
    m_anyWithoutData = false;
    for (int r = 0; r < ranks; ++r) {
        m_firstData[size_t(r)] = tl.firstProgressSeconds(r);
        m_anyWithoutData = m_anyWithoutData || (n > 0 && m_firstData[size_t(r)] > times.front());
    }
    m_imageColumns = std::min(m_imageColumns, from);
    // The scale follows the data up at once, down only when it fell by a quarter (no flicker).
    const double wanted = scaleStep(colourMax);
    if (wanted > m_scale || wanted < 0.75 * m_scale) {
        m_scale = wanted;
        m_imageColumns = 0;
    }
    m_marks.clear();
    setMarks(snapshot);
    QWidget::update();
}

void RankHeatMap::setMarks(const Snapshot &snapshot)
{
    std::vector<char> marks(size_t(m_ranks), 0);
    for (const auto &r : snapshot.ranks)
        if (r.rank >= 0 && r.rank < m_ranks)
            marks[size_t(r.rank)] = r.state == RankState::Failed ? 'F' : r.state == RankState::Stalled ? 'S' : 0;
    m_stateMarks = marks;
    for (const int r : m_lost)
        if (r >= 0 && r < m_ranks)
            marks[size_t(r)] = 'L';
    if (marks == m_marks)
        return;
    m_marks = std::move(marks);
    QWidget::update();
}

void RankHeatMap::setLostRanks(const std::vector<int> &ranks)
{
    for (const int r : m_lost) // marked lost while the run went on, and the run then failed: its own state again
        if (r >= 0 && size_t(r) < m_marks.size() && std::find(ranks.begin(), ranks.end(), r) == ranks.end())
            m_marks[size_t(r)] = size_t(r) < m_stateMarks.size() ? m_stateMarks[size_t(r)] : 0;
    m_lost = ranks;
    for (const int r : m_lost)
        if (r >= 0 && size_t(r) < m_marks.size())
            m_marks[size_t(r)] = 'L';
    QWidget::update();
}

void RankHeatMap::ensureImage(int rows)
{
    if (rows != m_rows || m_image.isNull()) {
        m_rows = rows;
        // Cells without data stay transparent: the hatching painted under the image shows there.
        m_image = QImage(std::max(1, m_capacity), rows, QImage::Format_ARGB32_Premultiplied);
        m_imageColumns = 0;
    }
    if (m_imageColumns >= m_columns)
        return;
    if (m_imageColumns == 0)
        ++m_fullBuilds;
    // Each row: the slowest rank of its bin, so a slow or stalled rank is never averaged (or
    // sampled) away.
    const auto &map = cppl::charts::ColorMap::viridis();
    const int c0 = m_imageColumns, c1 = m_columns, span = c1 - c0;
    std::vector<float> line(size_t(span), 0.0f);
    for (int b = 0; b < rows; ++b) {
        const int r0 = int(qint64(b) * m_ranks / rows);
        const int r1 = std::max(r0 + 1, int(qint64(b + 1) * m_ranks / rows));
        std::fill(line.begin(), line.end(), std::numeric_limits<float>::infinity());
        double firstData = -std::numeric_limits<double>::infinity(); // every rank of the bin has data from here on
        for (int r = r0; r < r1; ++r) {
            firstData = std::max(firstData, m_firstData[size_t(r)]);
            const float *src = m_rates.data() + size_t(r) * size_t(m_capacity) + size_t(c0);
            for (int c = 0; c < span; ++c)
                if (std::isfinite(src[c]))
                    line[size_t(c)] = std::min(line[size_t(c)], src[c]);
        }
        auto *px = reinterpret_cast<QRgb *>(m_image.scanLine(b)) + c0;
        for (int c = 0; c < span; ++c)
            px[c] = m_times[size_t(c0 + c)] < firstData        ? qRgba(0, 0, 0, 0)
                    : std::isfinite(line[size_t(c)]) ? map.map(double(line[size_t(c)]) / m_scale)
                                                     : qRgb(128, 128, 128);
    }
    m_imageColumns = m_columns;
}

QImage RankHeatMap::imageForRows(int rows)
{
    if (m_ranks == 0 || m_columns == 0)
        return {};
    ensureImage(std::min(rows, m_ranks));
    return m_image.copy(0, 0, m_columns, m_rows);
}

void RankHeatMap::paintEvent(QPaintEvent *)
{
    namespace detail = cppl::charts::detail;
    using cppl::charts::ValueFormat;
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const auto theme = cppl::charts::Theme::fromPalette(palette());
    const QFontMetricsF fm(font());
    const QFontMetricsF tickFm(detail::tickFont(font()));
    // The frame (title, ticks, axis titles) is the chart module's, as on the other charts: time
    // in the same m:ss labels, ranks at a stride that keeps their labels apart.
    detail::FrameSpec spec;
    spec.title = m_ranks <= 1 ? tr("Tokens/s over time") : tr("Tokens/s of %1 ranks over time").arg(m_ranks);
    spec.xGrid = spec.yGrid = false;
    // Right of the plot: the failed/stalled marks (14 px), the colour ramp (12 px) and its labels.
    const double rampLabelW = std::max(tickFm.horizontalAdvance(u"99.9k"_s), tickFm.horizontalAdvance(u"tok/s"_s)) + 4;
    spec.reserveRight = 26 + rampLabelW;
    const bool hasData = m_ranks > 0 && m_columns > 0;
    // The legend lists what is drawn: the hatching only while some cell has no data.
    if (hasData && m_anyWithoutData) {
        detail::LegendEntry e;
        // Also once finished: the first seconds before each rank's first progress stay hatched.
        e.label = tr("no data (before the rank's first progress message)");
        e.swatch = detail::LegendEntry::Swatch::Fill;
        e.color = theme.noData;
        e.pattern = Qt::BDiagPattern;
        spec.legend.push_back(e);
    }
    // Pixel rows of the image, decided before the frame is laid out (its axis title says how many
    // ranks share a row): a little fewer than the plot will have, so that no row is dropped when
    // the image is drawn (some are doubled instead).
    const double legendH = spec.legend.empty() ? 0.0 : std::max(fm.height(), 12.0) + 8;
    const int rows = std::clamp(int((height() - 4.5 * fm.height() - 32 - legendH) * devicePixelRatioF()), 1, std::max(1, m_ranks));
    if (hasData) {
        const int binned = (m_ranks + rows - 1) / rows;
        spec.xTitle = tr("time");
        spec.yTitle = binned > 1 ? tr("rank (each row: the slowest of %1)").arg(binned) : tr("rank");
        const double t0 = m_times.front(), t1 = m_times.back();
        // The time axis is linear, as on the other charts: columns are drawn as wide as their
        // samples' spacing (paintColumns), so round times get evenly spaced ticks even when the
        // first samples came at irregular moments.
        auto columnPos = [t0, t1](double t) { return t1 > t0 ? (t - t0) / (t1 - t0) : 0.5; };
        spec.xTicks = [=, this](double length, const QFontMetricsF &tfm) {
            const double textW = tfm.horizontalAdvance(cppl::charts::formatTick(t1, 1, ValueFormat::Seconds, t1));
            const double labelW = textW + 24;
            // A narrow plot (a 1024 px window: ~150 px for 6 minutes) got one tick, "5:00", from
            // which no scale can be read: more steps while two or more fit with room between them.
            auto visible = [&](const cppl::charts::Ticks &t) {
                return std::count_if(t.values.begin(), t.values.end(), [&](double v) { return v >= t0 - 1e-9 && v <= t1 + 1e-9; });
            };
            const double span = std::max(t1, t0 + 1) - t0;
            auto ticks = cppl::charts::niceTicks(t0, std::max(t1, t0 + 1), std::clamp(int(length / labelW) + 1, 2, 12),
                                                 ValueFormat::Seconds, false);
            for (int count = std::clamp(int(length / labelW) + 2, 3, 12); visible(ticks) < 2 && count <= 12; ++count) {
                const auto more = cppl::charts::niceTicks(t0, std::max(t1, t0 + 1), count, ValueFormat::Seconds, false);
                if (more.step * length / span < textW + 8)
                    break; // labels would touch
                ticks = more;
            }
            std::vector<detail::Tick> out;
            m_timeTicks.clear();
            for (double v : ticks.values)
                if (v >= t0 - 1e-9 && v <= t1 + 1e-9) {
                    out.push_back({columnPos(v), cppl::charts::formatTick(v, ticks.step, ValueFormat::Seconds, t1)});
                    m_timeTicks << out.back().label;
                }
            return out;
        };
        spec.yTicks = [this](double length, const QFontMetricsF &tfm) {
            const double rowH = length / m_ranks;
            const int stride = cppl::charts::labelStride(rowH, tfm.height() * 1.4);
            auto posOf = [&](int r) { return 1.0 - (r + 0.5) / m_ranks; };
            std::vector<detail::Tick> ticks;
            for (int r = 0; r < m_ranks; r += stride)
                if (m_selected < 0 || std::abs(posOf(r) - posOf(m_selected)) * length >= tfm.height())
                    ticks.push_back({posOf(r), QString::number(r)});
            if (m_selected >= 0 && m_selected < m_ranks)
                ticks.push_back({posOf(m_selected), u"▶ "_s + QString::number(m_selected)});
            return ticks;
        };
    }
    const detail::Frame frame = detail::paintFrame(p, QRectF(rect()), theme, spec);
    const QRectF plot = frame.plot;
    m_plot = plot;
    if (!hasData) {
        p.setPen(theme.mutedText);
        p.drawText(plot, Qt::AlignCenter, tr("no data yet"));
        return;
    }
    ensureImage(rows);
    if (m_anyWithoutData)
        paintNoData(p, plot, theme);
    // Nearest neighbour: no smoothing across ranks.
    p.setRenderHint(QPainter::SmoothPixmapTransform, false);
    paintColumns(p, plot);
    p.setPen(theme.axis);
    p.setRenderHint(QPainter::Antialiasing, false);
    p.drawRect(plot);
    p.setRenderHint(QPainter::Antialiasing, true);
    const double rowH = plot.height() / m_ranks;
    auto yOf = [&](int r) { return plot.top() + (r + 0.5) * rowH; };
    // Failed and stalled ranks: a symbol in the strip, not only a colour.
    p.setPen(QColor(0xd5, 0x5e, 0x00));
    for (int r = 0; r < m_ranks; ++r)
        if (m_marks[size_t(r)])
            p.drawText(QRectF(plot.right() + 2, yOf(r) - fm.height() / 2, 14, fm.height()), Qt::AlignCenter,
                       m_marks[size_t(r)] == 'F' ? u"✗"_s : m_marks[size_t(r)] == 'L' ? u"⊘"_s : u"‖"_s);
    if (m_selected >= 0 && m_selected < m_ranks) {
        p.setPen(QPen(theme.text, 1.5));
        p.setBrush(Qt::NoBrush);
        const double h = std::max(rowH, 2.0);
        p.drawRect(QRectF(plot.left() - 1, yOf(m_selected) - h / 2 - 1, plot.width() + 2, h + 2));
    }
    // Colour ramp with its ends labelled to its right, its unit below.
    const QRectF ramp(plot.right() + 18, plot.top(), 12, plot.height());
    p.drawImage(ramp, m_ramp);
    p.setFont(detail::tickFont(font()));
    p.setPen(theme.mutedText);
    const QRectF labels(ramp.right() + 4, ramp.top() - tickFm.height() / 2, rampLabelW, ramp.height() + tickFm.height());
    p.drawText(labels, Qt::AlignLeft | Qt::AlignTop, cppl::charts::formatValue(m_scale, ValueFormat::Si));
    p.drawText(labels.translated(0, tickFm.height()), Qt::AlignLeft | Qt::AlignTop, u"tok/s"_s); // the unit, under the top
    p.drawText(labels, Qt::AlignLeft | Qt::AlignBottom, u"0"_s);
}

void RankHeatMap::paintColumns(QPainter &p, const QRectF &plot) const
{
    // Column c covers the time from halfway after the previous sample to halfway before the next
    // (the first and last reach the axis ends). Runs of columns of one width (within half a
    // pixel: timeline samples are regular once it compacts) go in one drawImage; the early
    // irregular samples take a few more.
    const double t0 = m_times.front(), t1 = m_times.back();
    if (m_columns < 2 || !(t1 > t0)) {
        p.drawImage(plot, m_image, QRectF(0, 0, m_columns, m_rows));
        return;
    }
    const double scale = plot.width() / (t1 - t0);
    const double dpr = std::max(1.0, devicePixelRatioF());
    auto edge = [&](int c) { // left edge of column c; edge(m_columns) is the right end
        if (c <= 0)
            return plot.left();
        if (c >= m_columns)
            return plot.right();
        // On device pixels, so that neighbouring runs meet without an antialiased seam.
        return std::round((plot.left() + ((m_times[size_t(c - 1)] + m_times[size_t(c)]) / 2 - t0) * scale) * dpr) / dpr;
    };
    const bool antialiased = p.testRenderHint(QPainter::Antialiasing);
    p.setRenderHint(QPainter::Antialiasing, false);
    const double tolerance = 0.5 / dpr;
    int first = 0;
    while (first < m_columns) {
        const double left = edge(first);
        const double width = edge(first + 1) - left;
        int end = first + 1;
        while (end < m_columns && std::abs(edge(end + 1) - (left + width * (end + 1 - first))) <= tolerance)
            ++end;
        p.drawImage(QRectF(left, plot.top(), edge(end) - left, plot.height()), m_image, QRectF(first, 0, end - first, m_rows));
        first = end;
    }
    p.setRenderHint(QPainter::Antialiasing, antialiased);
}

QString RankHeatMap::toolTipAt(const QPointF &pos) const
{
    const QRectF plot = m_plot;
    if (m_ranks == 0 || m_columns == 0 || m_rows == 0 || !plot.isValid() || !plot.contains(pos))
        return toolTip();
    // The row as painted (its bin of ranks) and the sample nearest the pointer's time.
    const int b = std::clamp(int((pos.y() - plot.top()) / plot.height() * m_rows), 0, m_rows - 1);
    const int r0 = int(qint64(b) * m_ranks / m_rows);
    const int r1 = std::max(r0 + 1, int(qint64(b + 1) * m_ranks / m_rows));
    const double t0 = m_times.front(), t1 = m_times.back();
    const double t = t1 > t0 ? t0 + (pos.x() - plot.left()) / plot.width() * (t1 - t0) : t0;
    auto it = std::lower_bound(m_times.begin(), m_times.end(), t);
    if (it == m_times.end() || (it != m_times.begin() && t - *(it - 1) < *it - t))
        --it;
    const auto c = size_t(it - m_times.begin());
    const QString who = r1 - r0 == 1 ? tr("rank %1").arg(r0) : tr("ranks %1").arg(QString::fromStdString(cppl::rankRangeText(r0, r1 - 1)));
    const QString when = clockText(qint64(std::max(0.0, m_times[c]) + 0.5));
    std::vector<int> without;
    int slowest = -1;
    for (int r = r0; r < r1; ++r) {
        if (m_times[c] < m_firstData[size_t(r)]) {
            without.push_back(r);
            continue;
        }
        const float v = m_rates[size_t(r) * size_t(m_capacity) + c];
        if (slowest < 0 || v < m_rates[size_t(slowest) * size_t(m_capacity) + c])
            slowest = r;
    }
    if (!without.empty()) {
        if (r1 - r0 == 1)
            return tr("%1 at %2: no data yet (no progress message from it by then; a rank sends its first once it has "
                      "evaluated its first batch)").arg(who, when);
        return tr("%1 at %2: no data yet from %3 (no progress message by then; a rank sends its first once it has "
                  "evaluated its first batch)")
            .arg(who, when,
                 (without.size() == 1 ? tr("rank %1") : tr("ranks %1")).arg(QString::fromStdString(cppl::rankListText(without))));
    }
    const QString rate = tr("%1 tok/s").arg(QLocale().toString(double(m_rates[size_t(slowest) * size_t(m_capacity) + c]), 'f', 0));
    return r1 - r0 == 1 ? tr("%1 at %2: %3").arg(who, when, rate) : tr("%1 at %2: slowest rank %3, %4").arg(who, when).arg(slowest).arg(rate);
}

bool RankHeatMap::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *he = static_cast<QHelpEvent *>(event);
        const QString text = toolTipAt(QPointF(he->pos()));
        if (text.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(he->globalPos(), text, this);
        return true;
    }
    return RankPlot::event(event);
}

void RankHeatMap::mousePressEvent(QMouseEvent *event)
{
    const QRectF plot = m_plot;
    if (m_ranks > 0 && plot.isValid() && plot.contains(event->position())) {
        const int r = int((event->position().y() - plot.top()) / plot.height() * m_ranks);
        Q_EMIT rankClicked(std::clamp(r, 0, m_ranks - 1));
    }
}

} // namespace cppl::app
