// SPDX-License-Identifier: MIT
#include "rank_heat_map.h"

#include "charts/chart_axis.h"
#include "charts/chart_theme.h"
#include "charts/color_map.h"

#include <QMouseEvent>
#include <QPainter>

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

} // namespace

RankHeatMap::RankHeatMap(QWidget *parent)
    : RankPlot(parent)
{
    setMinimumSize(240, 150);
    setToolTip(tr("Tokens/s of every rank over time: brighter is faster. ✗ failed, ‖ stalled. Click a row to select its rank."));
    const auto &map = cppl::charts::ColorMap::viridis();
    m_ramp = QImage(1, cppl::charts::ColorMap::kSize, QImage::Format_RGB32);
    for (int i = 0; i < cppl::charts::ColorMap::kSize; ++i)
        m_ramp.setPixel(0, cppl::charts::ColorMap::kSize - 1 - i, map.table()[size_t(i)]);
}

QRectF RankHeatMap::plotRect() const
{
    const QFontMetricsF fm(font());
    const double left = fm.horizontalAdvance(u"▶ 0000"_s) + 8;
    const double top = fm.height() + 8;
    const double bottom = fm.height() * 2.4 + 4;
    // Marks strip, colour ramp and its labels on the right.
    const double right = 16 + 12 + 6 + fm.horizontalAdvance(u"99.9k"_s) + 4;
    return QRectF(left, top, std::max(10.0, width() - left - right), std::max(10.0, height() - top - bottom));
}

void RankHeatMap::clear()
{
    m_rates.clear();
    m_times.clear();
    m_marks.clear();
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
    if (marks == m_marks)
        return;
    m_marks = std::move(marks);
    QWidget::update();
}

void RankHeatMap::ensureImage(int rows)
{
    if (rows != m_rows || m_image.isNull()) {
        m_rows = rows;
        m_image = QImage(std::max(1, m_capacity), rows, QImage::Format_RGB32);
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
        for (int r = r0; r < r1; ++r) {
            const float *src = m_rates.data() + size_t(r) * size_t(m_capacity) + size_t(c0);
            for (int c = 0; c < span; ++c)
                if (std::isfinite(src[c]))
                    line[size_t(c)] = std::min(line[size_t(c)], src[c]);
        }
        auto *px = reinterpret_cast<QRgb *>(m_image.scanLine(b)) + c0;
        for (int c = 0; c < span; ++c)
            px[c] = std::isfinite(line[size_t(c)]) ? map.map(double(line[size_t(c)]) / m_scale) : qRgb(128, 128, 128);
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
    QPainter p(this);
    const auto theme = cppl::charts::Theme::fromPalette(palette());
    paintTitled(p, theme, m_ranks <= 1 ? tr("Tokens/s over time") : tr("Tokens/s of %1 ranks over time").arg(m_ranks));
    const QRectF plot = plotRect();
    const QFontMetricsF fm(font());
    if (m_ranks == 0 || m_columns == 0) {
        p.setPen(theme.mutedText);
        p.drawText(plot, Qt::AlignCenter, tr("no data yet"));
        return;
    }
    const int deviceRows = std::max(1, int(plot.height() * devicePixelRatioF()));
    const int rows = std::min(m_ranks, deviceRows);
    ensureImage(rows);
    // Nearest neighbour: no smoothing across ranks.
    p.drawImage(plot, m_image, QRectF(0, 0, m_columns, m_rows));
    p.setPen(theme.axis);
    p.drawRect(plot);
    const double rowH = plot.height() / m_ranks;
    auto yOf = [&](int r) { return plot.top() + (r + 0.5) * rowH; };
    // Rank labels at a step that keeps them apart (1024 ranks: every 128 or so), none under the
    // selected rank's own label.
    int step = 1;
    while (step * rowH < fm.height() * 1.4)
        step = step < 2 ? 2 : step < 4 ? 4 : step < 8 ? 8 : step * 2;
    p.setPen(theme.mutedText);
    for (int r = 0; r < m_ranks; r += step) {
        if (m_selected >= 0 && std::abs(yOf(r) - yOf(m_selected)) < fm.height())
            continue;
        p.drawText(QRectF(0, yOf(r) - fm.height() / 2, plot.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   QString::number(r));
    }
    const QRectF xAxis(plot.left(), plot.bottom() + 2, plot.width(), fm.height());
    p.drawText(xAxis, Qt::AlignLeft, u"0 s"_s);
    p.drawText(xAxis, Qt::AlignRight, QString::number(m_seconds, 'f', 0) + u" s"_s);
    p.drawText(xAxis, Qt::AlignHCenter, tr("time"));
    if (rows < m_ranks)
        p.drawText(QRectF(plot.left(), plot.bottom() + 2 + fm.height(), plot.width(), fm.height()), Qt::AlignHCenter,
                   tr("rank (each row: the slowest of %1)").arg((m_ranks + rows - 1) / rows));
    // Failed and stalled ranks: a symbol in the strip, not only a colour.
    p.setPen(QColor(0xd5, 0x5e, 0x00));
    for (int r = 0; r < m_ranks; ++r)
        if (m_marks[size_t(r)])
            p.drawText(QRectF(plot.right() + 2, yOf(r) - fm.height() / 2, 14, fm.height()), Qt::AlignCenter,
                       m_marks[size_t(r)] == 'F' ? u"✗"_s : u"‖"_s);
    if (m_selected >= 0 && m_selected < m_ranks) {
        p.setPen(QPen(theme.text, 1.5));
        p.setBrush(Qt::NoBrush);
        const double h = std::max(rowH, 2.0);
        p.drawRect(QRectF(plot.left() - 1, yOf(m_selected) - h / 2 - 1, plot.width() + 2, h + 2));
        p.drawText(QRectF(0, yOf(m_selected) - fm.height() / 2, plot.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   u"▶ "_s + QString::number(m_selected));
    }
    // Colour ramp with its ends labelled to its right.
    const QRectF ramp(plot.right() + 18, plot.top(), 12, plot.height());
    p.drawImage(ramp, m_ramp);
    p.setPen(theme.mutedText);
    const QRectF labels(ramp.right() + 4, ramp.top(), width() - ramp.right() - 4, ramp.height());
    p.drawText(labels, Qt::AlignLeft | Qt::AlignTop, cppl::charts::formatValue(m_scale, cppl::charts::ValueFormat::Si));
    p.drawText(labels, Qt::AlignLeft | Qt::AlignBottom, u"0"_s);
    p.drawText(QRectF(ramp.left() - 6, ramp.bottom() + 2, width() - ramp.left() + 6, fm.height()), Qt::AlignLeft, u"tok/s"_s);
}

void RankHeatMap::mousePressEvent(QMouseEvent *event)
{
    const QRectF plot = plotRect();
    if (m_ranks > 0 && plot.contains(event->position())) {
        const int r = int((event->position().y() - plot.top()) / plot.height() * m_ranks);
        Q_EMIT rankClicked(std::clamp(r, 0, m_ranks - 1));
    }
}

} // namespace cppl::app
