// SPDX-License-Identifier: MIT
#include "run_charts.h"

#include "charts/chart_axis.h"
#include "charts/chart_theme.h"
#include "charts/color_map.h"
#include "charts/time_series_chart.h"

#include <QEvent>
#include <QGridLayout>
#include <QMouseEvent>
#include <QPainter>
#include <QTimer>
#include <QToolTip>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace Qt::StringLiterals;
using cppl::core::run::GlobalMetric;
using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::Snapshot;

namespace cppl::app {

namespace {

constexpr int kLinesUpTo = 32;       // beyond: percentile band + the slowest ranks named
constexpr int kNamedSlowest = 3;
constexpr qint64 kRebuildMs = 250;   // series are rebuilt at most 4 times a second

int rankFromName(const QString &name)
{
    if (!name.startsWith(u"rank "_s))
        return -1;
    bool ok = false;
    const int r = name.mid(5).section(u' ', 0, 0).toInt(&ok);
    return ok ? r : -1;
}

// Percentile lines over ranks at every sample: what a band chart shows, computed once per rebuild.
void percentiles(const RunTimeline &tl, RankMetric metric, int ranks, std::vector<double> &p5, std::vector<double> &p50,
                 std::vector<double> &p95)
{
    const size_t n = tl.size();
    p5.assign(n, 0);
    p50.assign(n, 0);
    p95.assign(n, 0);
    std::vector<float> column(static_cast<size_t>(ranks), 0.0f);
    for (size_t t = 0; t < n; ++t) {
        for (int r = 0; r < ranks; ++r)
            column[size_t(r)] = tl.rank(metric, r)[t];
        auto at = [&](double q) {
            const size_t k = std::min(column.size() - 1, size_t(q * double(column.size() - 1) + 0.5));
            std::nth_element(column.begin(), column.begin() + std::ptrdiff_t(k), column.end());
            return double(column[k]);
        };
        p5[t] = at(0.05);
        p50[t] = at(0.5);
        p95[t] = at(0.95);
    }
}

std::vector<double> toDouble(std::span<const float> s)
{
    return {s.begin(), s.end()};
}

} // namespace

// ---- ChartView -------------------------------------------------------------------------------

ChartView::ChartView(cppl::charts::Chart *chart, QWidget *parent)
    : QWidget(parent)
    , m_chart(chart)
{
    setMouseTracking(true);
    setMinimumSize(240, 150);
    // changed() can arrive per snapshot; one repaint per 40 ms is all the eye needs.
    connect(chart, &cppl::charts::Chart::changed, this, [this] {
        if (m_pending)
            return;
        m_pending = true;
        QTimer::singleShot(40, this, [this] {
            m_pending = false;
            QWidget::update();
        });
    });
}

void ChartView::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    m_chart->paint(p, QRectF(rect()));
}

void ChartView::mousePressEvent(QMouseEvent *event)
{
    const auto hit = m_chart->hitTest(event->position());
    if (hit.kind == cppl::charts::Hit::Kind::Series) {
        if (auto *ts = qobject_cast<cppl::charts::TimeSeriesChart *>(m_chart); ts && hit.series < ts->seriesCount()) {
            const int r = rankFromName(ts->series(hit.series).name);
            if (r >= 0)
                Q_EMIT rankClicked(r);
        }
    }
}

bool ChartView::event(QEvent *event)
{
    if (event->type() == QEvent::ToolTip) {
        auto *he = static_cast<QHelpEvent *>(event);
        const auto hit = m_chart->hitTest(QPointF(he->pos()));
        if (hit.isValid() && !hit.text.isEmpty())
            QToolTip::showText(he->globalPos(), hit.text, this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

// ---- RankHeatMap -----------------------------------------------------------------------------

RankHeatMap::RankHeatMap(QWidget *parent)
    : QWidget(parent)
{
    setMinimumSize(240, 150);
    setToolTip(tr("Tokens/s of every rank over time: brighter is faster. ✗ failed, ‖ stalled. Click a row to select its rank."));
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

void RankHeatMap::setData(const RunTimeline &tl, const Snapshot &snapshot)
{
    m_ranks = tl.worldSize();
    m_columns = int(tl.size());
    m_seconds = tl.size() ? tl.times().back() : 0;
    m_marks.assign(size_t(m_ranks), 0);
    for (const auto &r : snapshot.ranks)
        if (r.rank >= 0 && r.rank < m_ranks)
            m_marks[size_t(r.rank)] = r.state == RankState::Failed ? 'F' : r.state == RankState::Stalled ? 'S' : 0;
    m_rates.clear();
    m_imageRows = -1;
    if (m_ranks == 0 || m_columns == 0) {
        m_image = QImage();
        QWidget::update();
        return;
    }
    m_rates.reserve(size_t(m_ranks) * size_t(m_columns));
    for (int r = 0; r < m_ranks; ++r) {
        const auto s = tl.rank(RankMetric::TokensPerSecond, r);
        m_rates.insert(m_rates.end(), s.begin(), s.end());
    }
    // The colour scale tops out at the 99th percentile, so one outlier does not darken the rest.
    std::vector<float> all = m_rates;
    const size_t k = size_t(0.99 * double(all.size() - 1));
    std::nth_element(all.begin(), all.begin() + std::ptrdiff_t(k), all.end());
    m_maxRate = std::max(1e-9, double(all[k]));
    QWidget::update();
}

void RankHeatMap::buildImage(int rows)
{
    // More ranks than device pixel rows: each row shows the slowest rank of its bin, so a slow or
    // stalled rank is never averaged (or sampled) away.
    m_imageRows = rows;
    m_image = QImage(m_columns, rows, QImage::Format_RGB32);
    const auto &map = cppl::charts::ColorMap::viridis();
    std::vector<float> line(static_cast<size_t>(m_columns), 0.0f);
    for (int b = 0; b < rows; ++b) {
        const int r0 = int(qint64(b) * m_ranks / rows);
        const int r1 = std::max(r0 + 1, int(qint64(b + 1) * m_ranks / rows));
        std::fill(line.begin(), line.end(), std::numeric_limits<float>::infinity());
        for (int r = r0; r < r1; ++r) {
            const float *src = m_rates.data() + size_t(r) * size_t(m_columns);
            for (int c = 0; c < m_columns; ++c)
                if (std::isfinite(src[c]))
                    line[size_t(c)] = std::min(line[size_t(c)], src[c]);
        }
        auto *px = reinterpret_cast<QRgb *>(m_image.scanLine(b));
        for (int c = 0; c < m_columns; ++c)
            px[c] = std::isfinite(line[size_t(c)]) ? map.map(double(line[size_t(c)]) / m_maxRate) : qRgb(128, 128, 128);
    }
}

void RankHeatMap::setSelectedRank(int rank)
{
    m_selected = rank;
    QWidget::update();
}

void RankHeatMap::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    const auto theme = cppl::charts::Theme::fromPalette(palette());
    p.fillRect(rect(), theme.background);
    const QRectF plot = plotRect();
    const QFontMetricsF fm(font());
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(theme.text);
    p.drawText(QRectF(0, 2, width(), fm.height() + 4), Qt::AlignHCenter,
               m_ranks <= 1 ? tr("Tokens/s over time") : tr("Tokens/s of %1 ranks over time").arg(m_ranks));
    p.setFont(font());
    if (m_rates.empty()) {
        p.setPen(theme.mutedText);
        p.drawText(plot, Qt::AlignCenter, tr("no data yet"));
        return;
    }
    const int deviceRows = std::max(1, int(plot.height() * devicePixelRatioF()));
    const int rows = std::min(m_ranks, deviceRows);
    if (rows != m_imageRows)
        buildImage(rows);
    p.drawImage(plot, m_image); // nearest neighbour: no smoothing across ranks
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
    const auto &map = cppl::charts::ColorMap::viridis();
    for (int i = 0; i < int(ramp.height()); ++i)
        p.fillRect(QRectF(ramp.left(), ramp.bottom() - i - 1, ramp.width(), 1), QColor(map.map(i / ramp.height())));
    p.setPen(theme.mutedText);
    const QRectF labels(ramp.right() + 4, ramp.top(), width() - ramp.right() - 4, ramp.height());
    p.drawText(labels, Qt::AlignLeft | Qt::AlignTop, cppl::charts::formatValue(m_maxRate, cppl::charts::ValueFormat::Si));
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

// ---- CommShareBars ---------------------------------------------------------------------------

CommShareBars::CommShareBars(QWidget *parent)
    : QWidget(parent)
{
    setMinimumSize(240, 150);
    setToolTip(tr("Share of each rank's time spent communicating: solid = waiting for stragglers, hatched = "
                  "transfer. The dashed line is the alert threshold. Click a bar to select its rank."));
}

QRectF CommShareBars::plotRect() const
{
    const QFontMetricsF fm(font());
    const double left = fm.horizontalAdvance(u"100%"_s) + 10;
    return QRectF(left, fm.height() * 2.6 + 6, std::max(10.0, width() - left - 10),
                  std::max(10.0, height() - fm.height() * 4.6 - 10));
}

void CommShareBars::setData(const Snapshot &snapshot, double alertShare)
{
    m_wait.resize(snapshot.ranks.size());
    m_transfer.resize(snapshot.ranks.size());
    for (size_t i = 0; i < snapshot.ranks.size(); ++i) {
        m_wait[i] = float(snapshot.ranks[i].waitShare);
        m_transfer[i] = float(snapshot.ranks[i].transferShare);
    }
    m_alert = alertShare;
    QWidget::update();
}

void CommShareBars::setSelectedRank(int rank)
{
    m_selected = rank;
    QWidget::update();
}

void CommShareBars::paintEvent(QPaintEvent *)
{
    QPainter p(this);
    const auto theme = cppl::charts::Theme::fromPalette(palette());
    p.fillRect(rect(), theme.background);
    const QFontMetricsF fm(font());
    const QRectF plot = plotRect();
    const int n = int(m_wait.size());
    QFont bold = font();
    bold.setBold(true);
    p.setFont(bold);
    p.setPen(theme.text);
    p.drawText(QRectF(0, 2, width(), fm.height() + 2), Qt::AlignHCenter, tr("Comm share per rank"));
    p.setFont(font());
    const QColor waitColor = theme.seriesColors.empty() ? QColor(0x00, 0x72, 0xb2) : theme.seriesColors[0];
    const QColor transferColor = theme.seriesColors.size() > 1 ? theme.seriesColors[1] : QColor(0xe6, 0x9f, 0x00);
    // Legend with swatches that differ in pattern too.
    {
        const double y = fm.height() + 4;
        double x = plot.left();
        p.fillRect(QRectF(x, y + 3, 12, fm.height() - 6), waitColor);
        x += 16;
        p.setPen(theme.mutedText);
        const QString w = tr("waiting for stragglers");
        p.drawText(QPointF(x, y + fm.ascent()), w);
        x += fm.horizontalAdvance(w) + 14;
        p.fillRect(QRectF(x, y + 3, 12, fm.height() - 6), QBrush(transferColor, Qt::BDiagPattern));
        p.setPen(transferColor);
        p.drawRect(QRectF(x, y + 3, 12, fm.height() - 6));
        x += 16;
        p.setPen(theme.mutedText);
        p.drawText(QPointF(x, y + fm.ascent()), tr("transfer"));
    }
    double maxShare = std::max(0.02, m_alert * 1.5);
    for (int i = 0; i < n; ++i)
        maxShare = std::max(maxShare, double(m_wait[size_t(i)] + m_transfer[size_t(i)]));
    const auto ticks = cppl::charts::niceTicks(0.0, std::min(1.0, maxShare), 5, cppl::charts::ValueFormat::Percent);
    maxShare = ticks.max;
    for (double v : ticks.values) {
        const double y = plot.bottom() - plot.height() * v / maxShare;
        p.setPen(theme.grid);
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.setPen(theme.mutedText);
        p.drawText(QRectF(0, y - fm.height() / 2, plot.left() - 4, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
                   cppl::charts::formatTick(v, ticks.step, cppl::charts::ValueFormat::Percent));
    }
    if (n == 0) {
        p.setPen(theme.mutedText);
        p.drawText(plot, Qt::AlignCenter, tr("no data yet"));
        return;
    }
    // Neighbouring ranks share a bar when there are more ranks than pixel pairs; the bar shows the
    // group's maximum so a bad rank is never averaged away.
    const int bars = std::min(n, std::max(1, int(plot.width() / 2)));
    const double barW = plot.width() / bars;
    for (int b = 0; b < bars; ++b) {
        const int r0 = int(qint64(b) * n / bars);
        const int r1 = std::max(r0 + 1, int(qint64(b + 1) * n / bars));
        float w = 0, t = 0;
        for (int r = r0; r < r1; ++r)
            if (m_wait[size_t(r)] + m_transfer[size_t(r)] > w + t) {
                w = m_wait[size_t(r)];
                t = m_transfer[size_t(r)];
            }
        const double x = plot.left() + b * barW;
        const double gap = barW > 4 ? barW * 0.15 : 0;
        const double hw = plot.height() * std::min(1.0, w / maxShare);
        const double ht = plot.height() * std::min(1.0, (w + t) / maxShare) - hw;
        p.fillRect(QRectF(x + gap, plot.bottom() - hw, barW - 2 * gap, hw), waitColor);
        const QRectF tr(x + gap, plot.bottom() - hw - ht, barW - 2 * gap, ht);
        p.fillRect(tr, QBrush(transferColor, barW > 4 ? Qt::BDiagPattern : Qt::SolidPattern));
        if (barW > 4 && ht >= 1.0) { // a zero-height outline would read as a value
            p.setPen(transferColor);
            p.drawRect(tr);
        }
        if (m_selected >= r0 && m_selected < r1) {
            // Outline the bar itself and point at it from below the axis: a full-height frame
            // would read as a value.
            p.setPen(QPen(theme.text, 1.5));
            p.setBrush(Qt::NoBrush);
            p.drawRect(QRectF(x, plot.bottom() - hw - ht - 1, std::max(barW, 2.0), hw + ht + 1));
            const double cx = x + barW / 2;
            QPolygonF tri;
            tri << QPointF(cx, plot.bottom() + 1) << QPointF(cx - 5, plot.bottom() + 8) << QPointF(cx + 5, plot.bottom() + 8);
            p.setBrush(theme.text);
            p.drawPolygon(tri);
            p.setBrush(Qt::NoBrush);
        }
    }
    // Alert threshold and the axis labels.
    if (m_alert > 0 && m_alert <= maxShare) {
        const double y = plot.bottom() - plot.height() * m_alert / maxShare;
        p.setPen(QPen(theme.reference, 1, Qt::DashLine));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
        p.drawText(QRectF(plot.left(), y - fm.height() - 1, plot.width() - 2, fm.height()), Qt::AlignRight,
                   tr("alert %1%").arg(100 * m_alert, 0, 'f', 1));
    }
    p.setPen(theme.mutedText);
    const QRectF axis(plot.left(), plot.bottom() + 2, plot.width(), fm.height());
    p.drawText(axis, Qt::AlignLeft, u"0"_s);
    p.drawText(axis, Qt::AlignRight, QString::number(n - 1));
    p.drawText(axis, Qt::AlignHCenter, n > bars ? tr("rank (max of %1 per bar)").arg((n + bars - 1) / bars) : tr("rank"));
}

void CommShareBars::mousePressEvent(QMouseEvent *event)
{
    const QRectF plot = plotRect();
    const int n = int(m_wait.size());
    if (n > 0 && plot.contains(event->position())) {
        const int bars = std::min(n, std::max(1, int(plot.width() / 2)));
        const int b = int((event->position().x() - plot.left()) / plot.width() * bars);
        const int r0 = int(qint64(b) * n / bars);
        const int r1 = std::max(r0 + 1, int(qint64(b + 1) * n / bars));
        int best = r0;
        for (int r = r0; r < r1; ++r)
            if (m_wait[size_t(r)] + m_transfer[size_t(r)] > m_wait[size_t(best)] + m_transfer[size_t(best)])
                best = r;
        Q_EMIT rankClicked(std::clamp(best, 0, n - 1));
    }
}

// ---- RunCharts -------------------------------------------------------------------------------

RunCharts::RunCharts(QWidget *parent)
    : QWidget(parent)
{
    using namespace cppl::charts;
    m_ppl = new TimeSeriesChart(this);
    m_ppl->setTitle(tr("Global running PPL (exact merge) ± 1 standard error"));
    m_ppl->setYAxis({tr("PPL"), ValueFormat::Plain, {}, {}, false});
    m_rates = new TimeSeriesChart(this);
    m_rates->setTitle(tr("Tokens/s per rank"));
    m_rates->setYAxis({tr("tok/s"), ValueFormat::Si, {}, {}, true});
    m_deviation = new TimeSeriesChart(this);
    m_deviation->setTitle(tr("Rank PPL vs global PPL (shard bias)"));
    m_deviation->setYAxis({tr("deviation"), ValueFormat::Percent, {}, {}, true});
    m_heat = new RankHeatMap(this);
    m_comm = new CommShareBars(this);

    auto *grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setSpacing(4);
    auto *pplView = new ChartView(m_ppl, this);
    auto *rateView = new ChartView(m_rates, this);
    auto *devView = new ChartView(m_deviation, this);
    pplView->setObjectName(u"pplChart"_s);
    rateView->setObjectName(u"rateChart"_s);
    devView->setObjectName(u"deviationChart"_s);
    m_heat->setObjectName(u"heatMap"_s);
    m_comm->setObjectName(u"commBars"_s);
    grid->addWidget(pplView, 0, 0);
    grid->addWidget(rateView, 0, 1);
    grid->addWidget(m_heat, 0, 2, 2, 1); // tall: 1024 ranks need the rows
    grid->addWidget(m_comm, 1, 0);
    grid->addWidget(devView, 1, 1);
    for (int c = 0; c < 3; ++c)
        grid->setColumnStretch(c, 1);
    for (auto *v : {rateView, devView})
        connect(v, &ChartView::rankClicked, this, &RunCharts::rankClicked);
    connect(m_heat, &RankHeatMap::rankClicked, this, &RunCharts::rankClicked);
    connect(m_comm, &CommShareBars::rankClicked, this, &RunCharts::rankClicked);
    applyTheme();
}

RunCharts::~RunCharts() = default;

void RunCharts::changeEvent(QEvent *event)
{
    QWidget::changeEvent(event);
    if (event->type() == QEvent::PaletteChange)
        applyTheme();
}

void RunCharts::applyTheme()
{
    const auto theme = cppl::charts::Theme::fromPalette(palette());
    for (auto *c : {m_ppl, m_rates, m_deviation})
        c->setTheme(theme);
}

void RunCharts::reset(int worldSize, double commShareAlert)
{
    m_worldSize = worldSize;
    m_commAlert = commShareAlert;
    m_selected = -1;
    m_slowest.clear();
    m_rateSeriesRank.clear();
    for (auto *c : {m_ppl, m_rates, m_deviation})
        c->clearSeries();
    m_lastRebuild.invalidate();
    Snapshot empty;
    m_comm->setData(empty, commShareAlert);
    m_heat->setData(RunTimeline{}, empty);
}

void RunCharts::update(const RunTimeline &timeline, const Snapshot &snapshot, bool force)
{
    if (!force && m_lastRebuild.isValid() && m_lastRebuild.elapsed() < kRebuildMs)
        return;
    m_lastRebuild.start();
    rebuild(timeline, snapshot);
}

void RunCharts::rebuild(const RunTimeline &tl, const Snapshot &snapshot)
{
    using cppl::charts::SeriesData;
    const auto times = tl.times();
    const std::vector<double> x(times.begin(), times.end());
    const int ranks = tl.worldSize();

    {
        std::vector<SeriesData> s;
        const auto ppl = tl.global(GlobalMetric::Ppl);
        const auto se = tl.global(GlobalMetric::PplStderr);
        std::vector<double> lo(ppl.size()), hi(ppl.size());
        for (size_t i = 0; i < ppl.size(); ++i) {
            const double e = std::isfinite(se[i]) ? se[i] : 0.0;
            lo[i] = ppl[i] - e;
            hi[i] = ppl[i] + e;
        }
        s.push_back({tr("PPL"), x, {ppl.begin(), ppl.end()}});
        s.push_back({tr("+1 s.e."), x, std::move(hi)});
        s.push_back({tr("−1 s.e."), x, std::move(lo)});
        m_ppl->setSeries(std::move(s));
    }

    std::vector<SeriesData> rates;
    std::vector<SeriesData> devs;
    m_rateSeriesRank.clear();
    m_slowest.clear();
    if (ranks <= kLinesUpTo) {
        for (int r = 0; r < ranks; ++r) {
            QString name = tr("rank %1").arg(r);
            if (r < int(snapshot.ranks.size()) && !snapshot.ranks[size_t(r)].host.empty())
                name += u" ("_s + QString::fromStdString(snapshot.ranks[size_t(r)].host) + u')';
            rates.push_back({name, x, toDouble(tl.rank(RankMetric::TokensPerSecond, r))});
            devs.push_back({name, x, toDouble(tl.rank(RankMetric::DeviationRelative, r))});
            m_rateSeriesRank.push_back(r);
        }
    } else {
        std::vector<double> p5, p50, p95;
        percentiles(tl, RankMetric::TokensPerSecond, ranks, p5, p50, p95);
        rates.push_back({tr("p95 of ranks"), x, p95});
        rates.push_back({tr("median"), x, p50});
        rates.push_back({tr("p5 of ranks"), x, p5});
        percentiles(tl, RankMetric::DeviationRelative, ranks, p5, p50, p95);
        devs.push_back({tr("p95 of ranks"), x, p95});
        devs.push_back({tr("median"), x, p50});
        devs.push_back({tr("p5 of ranks"), x, p5});
        for (int i = 0; i < 3; ++i)
            m_rateSeriesRank.push_back(-1);
        // The slowest ranks by their recent rate (the last few samples), failed ranks excluded:
        // those are in the alerts already and their rate is 0 by definition.
        std::vector<std::pair<double, int>> recent;
        const size_t n = tl.size();
        for (int r = 0; r < ranks; ++r) {
            if (r < int(snapshot.ranks.size()) && (snapshot.ranks[size_t(r)].state == RankState::Failed
                                                   || snapshot.ranks[size_t(r)].state == RankState::Done))
                continue;
            const auto s = tl.rank(RankMetric::TokensPerSecond, r);
            double sum = 0;
            const size_t from = n > 8 ? n - 8 : 0;
            for (size_t i = from; i < n; ++i)
                sum += s[i];
            recent.emplace_back(n > from ? sum / double(n - from) : 0.0, r);
        }
        const size_t k = std::min<size_t>(kNamedSlowest, recent.size());
        std::partial_sort(recent.begin(), recent.begin() + std::ptrdiff_t(k), recent.end());
        for (size_t i = 0; i < k; ++i) {
            const int r = recent[i].second;
            QString name = tr("rank %1").arg(r);
            if (r < int(snapshot.ranks.size()))
                name += u" ("_s + QString::fromStdString(snapshot.ranks[size_t(r)].host) + u") slow"_s;
            m_slowest << name;
            rates.push_back({name, x, toDouble(tl.rank(RankMetric::TokensPerSecond, r))});
            m_rateSeriesRank.push_back(r);
        }
        if (m_selected >= 0 && m_selected < ranks) {
            if (std::find(m_rateSeriesRank.begin(), m_rateSeriesRank.end(), m_selected) == m_rateSeriesRank.end()) {
                rates.push_back({tr("rank %1 (selected)").arg(m_selected), x,
                                 toDouble(tl.rank(RankMetric::TokensPerSecond, m_selected))});
                m_rateSeriesRank.push_back(m_selected);
            }
            devs.push_back({tr("rank %1 (selected)").arg(m_selected), x,
                            toDouble(tl.rank(RankMetric::DeviationRelative, m_selected))});
        }
    }
    m_rates->setTitle(ranks <= kLinesUpTo ? tr("Tokens/s per rank") : tr("Tokens/s: p5–p95 of %1 ranks, slowest named").arg(ranks));
    m_rates->setSeries(std::move(rates));
    m_deviation->setSeries(std::move(devs));
    setSelectedRank(m_selected);
    m_heat->setData(tl, snapshot);
    m_comm->setData(snapshot, m_commAlert);
}

void RunCharts::setSelectedRank(int rank)
{
    m_selected = rank;
    const auto it = std::find(m_rateSeriesRank.begin(), m_rateSeriesRank.end(), rank);
    const int series = rank >= 0 && it != m_rateSeriesRank.end() ? int(it - m_rateSeriesRank.begin()) : -1;
    m_rates->setHighlightedSeries(series);
    // Beyond 32 ranks the selected rank is the deviation chart's last series (rebuild adds it).
    m_deviation->setHighlightedSeries(m_worldSize <= kLinesUpTo ? series
                                      : rank >= 0 && m_deviation->seriesCount() > 3 ? m_deviation->seriesCount() - 1
                                                                                     : -1);
    m_heat->setSelectedRank(rank);
    m_comm->setSelectedRank(rank);
}

} // namespace cppl::app
