// SPDX-License-Identifier: MIT
#include "run_charts.h"

#include "rank_heat_map.h"
#include "rank_table_model.h" // commShareKnown
#include "rank_quantiles.h"

#include "charts/chart_axis.h"
#include "charts/chart_frame.h"
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
constexpr qint64 kMinRepaintMs = 40;
constexpr int kThrottleAbove = 256; // beyond: rank-level charts rebuilt at most every kRebuildMs
constexpr qint64 kRebuildMs = 190;   // ~5 Hz, what the timeline samples at (a little less: snapshot jitter)
constexpr int kQuantileBudget = 48;  // samples recomputed per update after a compaction

int rankFromName(const QString &name)
{
    if (!name.startsWith(u"rank "_s))
        return -1;
    bool ok = false;
    const int r = name.mid(5).section(u' ', 0, 0).toInt(&ok);
    return ok ? r : -1;
}

/// A rank's series with a gap (NaN) before its first progress message: its 0 there is no data,
/// not a rate of 0 (nor a deviation of 0).
std::vector<double> rankSeries(const RunTimeline &tl, RankMetric metric, int rank)
{
    const std::span<const float> samples = tl.rank(metric, rank);
    std::vector<double> v(samples.begin(), samples.end());
    const double first = tl.firstProgressSeconds(rank);
    const auto times = tl.times();
    for (size_t i = 0; i < v.size() && i < times.size() && times[i] < first; ++i)
        v[i] = std::numeric_limits<double>::quiet_NaN();
    return v;
}

} // namespace

// ---- ChartView -------------------------------------------------------------------------------

ChartView::ChartView(cppl::charts::Chart *chart, QWidget *parent)
    : QWidget(parent)
    , m_chart(chart)
{
    setMouseTracking(true);
    setMinimumSize(240, 150);
    m_emptyText = tr("no data yet");
    // changed() can arrive per snapshot; one repaint per 40 ms is all the eye needs. A change
    // after a quiet spell paints in the pass the page is about to make anyway (the snapshot's),
    // not in a second one 40 ms later; a change sooner waits for the rest of the 40 ms.
    connect(chart, &cppl::charts::Chart::changed, this, [this] {
        if (m_pending)
            return;
        const qint64 since = m_lastPaint.isValid() ? m_lastPaint.elapsed() : kMinRepaintMs;
        if (since >= kMinRepaintMs) {
            QWidget::update();
            return;
        }
        m_pending = true;
        QTimer::singleShot(int(kMinRepaintMs - since), this, [this] {
            m_pending = false;
            QWidget::update();
        });
    });
}

void ChartView::setEmptyText(const QString &text)
{
    if (text == m_emptyText)
        return;
    m_emptyText = text;
    QWidget::update();
}

void ChartView::paintEvent(QPaintEvent *)
{
    m_lastPaint.start();
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    m_chart->paint(p, QRectF(rect()));
    // Empty axes alone read as "a run with nothing in it"; say that nothing has arrived yet, as the
    // heat map and the bars do.
    if (auto *ts = qobject_cast<cppl::charts::TimeSeriesChart *>(m_chart); ts && ts->seriesCount() == 0) {
        p.setPen(palette().color(QPalette::PlaceholderText));
        p.drawText(rect().adjusted(8, 0, -8, 0), Qt::AlignCenter | Qt::TextWordWrap, m_emptyText);
    }
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
        else if (!toolTip().isEmpty()) // what the chart shows, away from its lines
            QToolTip::showText(he->globalPos(), toolTip(), this);
        else
            QToolTip::hideText();
        return true;
    }
    return QWidget::event(event);
}

// ---- CommShareBars ---------------------------------------------------------------------------

CommShareBars::CommShareBars(QWidget *parent)
    : RankPlot(parent)
{
    setMinimumSize(240, 150);
    setToolTip(tr("Share of each rank's time spent communicating: solid = waiting for stragglers, hatched = "
                  "transfer. The dashed line is the alert threshold. Click a bar to select its rank."));
}

void CommShareBars::setData(const Snapshot &snapshot, double alertShare)
{
    m_wait.resize(snapshot.ranks.size());
    m_transfer.resize(snapshot.ranks.size());
    m_anyKnown = false;
    for (size_t i = 0; i < snapshot.ranks.size(); ++i) {
        // A rank that has not reported communication time yet gets no bar: unknown, not 0 %.
        const bool known = commShareKnown(snapshot.ranks[i]);
        m_anyKnown = m_anyKnown || known;
        m_wait[i] = known ? float(snapshot.ranks[i].waitShare) : 0.0f;
        m_transfer[i] = known ? float(snapshot.ranks[i].transferShare) : 0.0f;
    }
    m_alert = alertShare;
    QWidget::update();
}

void CommShareBars::paintEvent(QPaintEvent *)
{
    using cppl::charts::ValueFormat;
    namespace detail = cppl::charts::detail;
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const auto theme = cppl::charts::Theme::fromPalette(palette());
    const int n = int(m_wait.size());
    const QColor waitColor = theme.seriesColors.empty() ? QColor(0x00, 0x72, 0xb2) : theme.seriesColors[0];
    const QColor transferColor = theme.seriesColors.size() > 1 ? theme.seriesColors[1] : QColor(0xe6, 0x9f, 0x00);
    double maxShare = std::max(0.02, m_alert * 1.5);
    for (int i = 0; i < n; ++i)
        maxShare = std::max(maxShare, double(m_wait[size_t(i)] + m_transfer[size_t(i)]));
    // The frame (title, legend, ticks, grid) is the chart module's, as on the other charts. The
    // threshold is named in the legend, not on the plot, where it would cover a bar.
    detail::FrameSpec spec;
    spec.title = tr("Comm share per rank");
    auto entry = [](const QString &label, detail::LegendEntry::Swatch swatch, const QColor &color) {
        detail::LegendEntry e;
        e.label = label;
        e.swatch = swatch;
        e.color = color;
        return e;
    };
    // Only what is drawn (legendLabels()): before any share is known there are no bars and no line.
    if (barsDrawn()) {
        spec.legend.push_back(entry(tr("waiting for stragglers"), detail::LegendEntry::Swatch::Fill, waitColor));
        spec.legend.push_back(entry(tr("transfer"), detail::LegendEntry::Swatch::Fill, transferColor));
        spec.legend.back().pattern = Qt::BDiagPattern;
    }
    if (thresholdDrawn()) {
        spec.legend.push_back(entry(thresholdLabel(), detail::LegendEntry::Swatch::Line, theme.reference));
        spec.legend.back().dash = Qt::DashLine;
    }
    cppl::charts::Ticks yTicks;
    spec.yTicks = detail::numericTicks(0.0, std::min(1.0, maxShare), ValueFormat::Percent, true, true, &yTicks);
    spec.xGrid = false;
    // At least two pixels per bar: beyond that, neighbouring ranks share one (the plot's width
    // less the axis labels and margins, ~70 px, decides; clicks use the same count).
    const int bars = std::min(n, std::max(1, (width() - 70) / 2));
    m_bars = bars;
    if (n > 0) {
        spec.xTicks = [&](double length, const QFontMetricsF &fm) {
            // Every stride-th rank (1, 2, 5, 10, 20…) under its bar, as far apart as a label needs.
            const int stride = cppl::charts::labelStride(length / n, fm.horizontalAdvance(QString::number(n - 1)) + 14);
            std::vector<detail::Tick> ticks;
            for (int r = 0; r < n; r += stride)
                ticks.push_back({(r + 0.5) / n, QString::number(r)});
            return ticks;
        };
    }
    spec.xTitle = n > bars ? tr("rank (each bar: the most of %1 ranks)").arg((n + bars - 1) / bars) : tr("rank");
    const detail::Frame frame = detail::paintFrame(p, QRectF(rect()), theme, spec);
    const QRectF plot = frame.plot;
    m_plot = plot;
    m_noteRect = QRectF();
    if (n == 0 || !m_anyKnown) {
        p.setPen(theme.mutedText);
        // Wrapped inside the plot: on one line, a 1024 px window's ~230 px plot cut it at both ends.
        p.drawText(plot.adjusted(8, 0, -8, 0), Qt::AlignCenter | Qt::TextWordWrap,
                   n == 0 ? tr("no data yet") : tr("none known before the first sync round"), &m_noteRect);
        return;
    }
    maxShare = yTicks.max;
    // Neighbouring ranks share a bar when there are more ranks than pixel pairs; the bar shows the
    // group's maximum so a bad rank is never averaged away.
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
            // Outline the bar itself and point at it from above (below the axis are the rank
            // labels): a full-height frame would read as a value.
            p.setPen(QPen(theme.text, 1.5));
            p.setBrush(Qt::NoBrush);
            p.drawRect(QRectF(x, plot.bottom() - hw - ht - 1, std::max(barW, 2.0), hw + ht + 1));
            const double cx = x + barW / 2, tip = plot.bottom() - hw - ht - 3;
            QPolygonF tri;
            tri << QPointF(cx, tip) << QPointF(cx - 5, tip - 7) << QPointF(cx + 5, tip - 7);
            p.setBrush(theme.text);
            p.drawPolygon(tri);
            p.setBrush(Qt::NoBrush);
        }
    }
    if (thresholdDrawn()) { // maxShare >= min(1.5 x the threshold, 100 %): on the scale
        const double y = plot.bottom() - plot.height() * m_alert / maxShare;
        p.setRenderHint(QPainter::Antialiasing, false);
        p.setPen(detail::seriesPen(theme.reference, 1, Qt::DashLine));
        p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    }
}

QString CommShareBars::thresholdLabel() const
{
    return tr("alert threshold %1").arg(cppl::charts::formatValue(m_alert, cppl::charts::ValueFormat::Percent));
}

QStringList CommShareBars::legendLabels() const
{
    QStringList labels;
    if (barsDrawn())
        labels << tr("waiting for stragglers") << tr("transfer");
    if (thresholdDrawn())
        labels << thresholdLabel();
    return labels;
}

void CommShareBars::mousePressEvent(QMouseEvent *event)
{
    const QRectF plot = m_plot;
    const int n = int(m_wait.size());
    if (n > 0 && m_bars > 0 && plot.isValid() && plot.contains(event->position())) {
        const int bars = std::min(n, m_bars);
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
    m_deviation->setYAxis({tr("deviation"), ValueFormat::Percent, {}, {}, true});
    m_heat = new RankHeatMap(this);
    m_rateBand = std::make_unique<RankQuantiles>(RankMetric::TokensPerSecond, std::vector<double>{0.05, 0.5, 0.95, 0.99});
    m_deviationBand = std::make_unique<RankQuantiles>(RankMetric::DeviationRelative, std::vector<double>{0.05, 0.5, 0.95});
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
    m_deviationView = devView;
    setSchedule(u"dynamic"_s);
    applyTheme();
}

void RunCharts::setSchedule(const QString &schedule)
{
    // Under the dynamic schedule no rank owns a shard: it claims global batches as it goes, so its
    // PPL is over whichever batches it evaluated (a fast rank's over more of the text).
    const bool fixedShards = schedule == u"static"_s;
    m_deviation->setTitle(fixedShards ? tr("PPL of each rank's shard vs global PPL") : tr("PPL of each rank's batches vs global PPL"));
    m_deviationView->setToolTip(
        fixedShards ? tr("Each rank's running PPL over its own shard (a fixed part of the windows, static schedule), relative to the "
                         "global running PPL: how the shards' text differs. The result does not depend on it.")
                    : tr("Each rank's running PPL over the global batches it evaluated, relative to the global running PPL. "
                         "Under the dynamic schedule the ranks claim batches as they go, so this follows the text each rank "
                         "happened to get; the result does not depend on it."));
    m_deviationView->update();
}

QString RunCharts::deviationTitle() const
{
    return m_deviation->title();
}

QString RunCharts::deviationEmptyText() const
{
    return m_deviationView->emptyText();
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
    m_lost.clear(); // the last run's: a rank lost there is not lost in the next
    m_slowest.clear();
    m_deviationView->setEmptyText(tr("no data yet"));
    m_deviation->setYAxis({tr("deviation"), cppl::charts::ValueFormat::Percent, {}, {}, true});
    m_rateSeriesRank.clear();
    for (auto *c : {m_ppl, m_rates, m_deviation})
        c->clearSeries();
    for (auto &d : m_drawn)
        d = Drawn{};
    m_rateBand->clear();
    m_deviationBand->clear();
    Snapshot empty;
    m_comm->setData(empty, commShareAlert);
    m_heat->clear();
}

void RunCharts::setLostRanks(const std::vector<int> &ranks)
{
    m_heat->setLostRanks(ranks);
    if (ranks != m_lost)
        m_drawn[1].revision = ~std::uint64_t{0}; // the next update renames them in the tok/s legend
    m_lost = ranks;
}

bool RunCharts::due(const RunTimeline &timeline, Part part) const
{
    const Drawn &d = m_drawn[part == RankPart ? 1 : 0];
    // Rank-level charts follow the timeline, which samples at most 5 times a second; beyond 256
    // ranks they are also rebuilt at most that often, whatever the snapshot rate.
    if (timeline.worldSize() > kThrottleAbove && d.clock.isValid() && d.clock.elapsed() < kRebuildMs)
        return false;
    return part == GlobalPart || timeline.revision() != d.revision || &timeline != d.timeline;
}

void RunCharts::update(const RunTimeline &timeline, const Snapshot &snapshot, bool force, unsigned parts)
{
    auto take = [&](Part part) {
        if (!(parts & part) || !(force || due(timeline, part)))
            return false;
        Drawn &d = m_drawn[part == RankPart ? 1 : 0];
        const bool changed = force || timeline.revision() != d.revision || &timeline != d.timeline;
        d.clock.start();
        d.revision = timeline.revision();
        d.timeline = &timeline;
        return changed;
    };
    const bool global = parts & GlobalPart;
    if (take(GlobalPart))
        rebuildGlobal(timeline);
    if (global)
        m_comm->setData(snapshot, m_commAlert);
    if (take(RankPart))
        rebuildRanks(timeline, snapshot);
    else
        m_heat->setMarks(snapshot); // states change without a new sample (a stall, the end)
}

void RunCharts::rebuildGlobal(const RunTimeline &tl)
{
    using cppl::charts::SeriesData;
    const auto times = tl.times();
    const std::vector<double> x(times.begin(), times.end());
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

void RunCharts::rebuildRanks(const RunTimeline &tl, const Snapshot &snapshot)
{
    using cppl::charts::SeriesData;
    const auto times = tl.times();
    const std::vector<double> x(times.begin(), times.end());
    const int ranks = tl.worldSize();
    m_rateBand->update(tl, kQuantileBudget);

    std::vector<SeriesData> rates;
    std::vector<SeriesData> devs;
    m_rateSeriesRank.clear();
    m_slowest.clear();
    // A rank's deviation is from the global PPL, which is its own PPL while it is the only rank
    // that has reported: a comparison only from the second rank's first progress on. Before, every
    // deviation is 0 by definition (and the axis was widened to ±100 % around it).
    double firstAt = std::numeric_limits<double>::infinity(), compareFrom = firstAt;
    int firstRank = -1;
    for (int r = 0; r < ranks; ++r) {
        const double f = tl.firstProgressSeconds(r);
        if (f < firstAt) {
            compareFrom = firstAt;
            firstAt = f;
            firstRank = r;
        } else if (f < compareFrom) {
            compareFrom = f;
        }
    }
    const bool compared = std::isfinite(compareFrom);
    auto fromSecondRank = [&](std::vector<double> v) {
        for (size_t i = 0; i < v.size() && i < times.size() && times[i] < compareFrom; ++i)
            v[i] = std::numeric_limits<double>::quiet_NaN();
        return v;
    };
    m_deviationView->setEmptyText(ranks == 1 ? tr("one rank: its PPL is the global PPL, there is no other rank to compare it with")
                                  : firstRank >= 0 ? tr("nothing to compare yet: only rank %1 has reported").arg(firstRank)
                                                   : tr("no data yet"));
    if (ranks <= kLinesUpTo) {
        // The host names a rank only when there are several: four "rank N (localhost)" took a row
        // each in a 1024 px window's legend, and the fourth became "+1 more".
        const bool severalHosts = std::any_of(snapshot.ranks.begin(), snapshot.ranks.end(),
                                              [&](const auto &v) { return v.host != snapshot.ranks.front().host; });
        for (int r = 0; r < ranks; ++r) {
            QString name = tr("rank %1").arg(r);
            if (severalHosts && r < int(snapshot.ranks.size()) && !snapshot.ranks[size_t(r)].host.empty())
                name += u" ("_s + QString::fromStdString(snapshot.ranks[size_t(r)].host) + u')';
            rates.push_back({name, x, rankSeries(tl, RankMetric::TokensPerSecond, r)});
            if (compared)
                devs.push_back({name, x, fromSecondRank(rankSeries(tl, RankMetric::DeviationRelative, r))});
            m_rateSeriesRank.push_back(r);
        }
    } else {
        m_deviationBand->update(tl, kQuantileBudget);
        rates.push_back({tr("p95 of ranks"), x, m_rateBand->values(2)});
        rates.push_back({tr("median"), x, m_rateBand->values(1)});
        rates.push_back({tr("p5 of ranks"), x, m_rateBand->values(0)});
        if (compared) {
            devs.push_back({tr("p95 of ranks"), x, fromSecondRank(m_deviationBand->values(2))});
            devs.push_back({tr("median"), x, fromSecondRank(m_deviationBand->values(1))});
            devs.push_back({tr("p5 of ranks"), x, fromSecondRank(m_deviationBand->values(0))});
        }
        for (int i = 0; i < 3; ++i)
            m_rateSeriesRank.push_back(-1);
        // The slowest ranks by their recent rate (the last few samples), failed ranks excluded:
        // those are in the alerts already and their rate is 0 by definition; so are ranks with no
        // progress yet (no rate, not a rate of 0), and samples before a rank's first. Once every other
        // rank is done (the run ended), the slowest over the whole run: a finished run named none,
        // and which ranks held it back is what a user looks for then.
        const bool ended = !snapshot.ranks.empty()
                           && std::all_of(snapshot.ranks.begin(), snapshot.ranks.end(), [](const auto &v) {
                                  return v.state == RankState::Done || v.state == RankState::Failed;
                              });
        std::vector<std::pair<double, int>> recent;
        recent.reserve(size_t(ranks));
        const size_t n = tl.size();
        for (int r = 0; r < ranks; ++r) {
            if (r < int(snapshot.ranks.size()) && (snapshot.ranks[size_t(r)].state == RankState::Failed
                                                   || (!ended && snapshot.ranks[size_t(r)].state == RankState::Done)))
                continue;
            const auto s = tl.rank(RankMetric::TokensPerSecond, r);
            const double first = tl.firstProgressSeconds(r);
            size_t from = ended ? 0 : n > 8 ? n - 8 : 0;
            while (from < n && times[from] < first)
                ++from;
            if (from == n)
                continue; // nothing known of it yet
            double sum = 0;
            for (size_t i = from; i < n; ++i)
                sum += s[i];
            recent.emplace_back(sum / double(n - from), r);
        }
        const size_t k = std::min<size_t>(kNamedSlowest, recent.size());
        std::partial_sort(recent.begin(), recent.begin() + std::ptrdiff_t(k), recent.end());
        for (size_t i = 0; i < k; ++i) {
            const int r = recent[i].second;
            QString name = tr("rank %1").arg(r);
            if (r < int(snapshot.ranks.size()))
                name += u" ("_s + QString::fromStdString(snapshot.ranks[size_t(r)].host) + u") "_s
                        + (std::find(m_lost.begin(), m_lost.end(), r) != m_lost.end() ? tr("lost")
                           : snapshot.ranks[size_t(r)].state == RankState::Stalled ? tr("stalled") // as the table and heat map say
                                                                                    : tr("slow"));
            m_slowest << name;
            rates.push_back({name, x, rankSeries(tl, RankMetric::TokensPerSecond, r)});
            m_rateSeriesRank.push_back(r);
        }
        if (m_selected >= 0 && m_selected < ranks) {
            if (std::find(m_rateSeriesRank.begin(), m_rateSeriesRank.end(), m_selected) == m_rateSeriesRank.end()) {
                rates.push_back({tr("rank %1 (selected)").arg(m_selected), x,
                                 rankSeries(tl, RankMetric::TokensPerSecond, m_selected)});
                m_rateSeriesRank.push_back(m_selected);
            }
            if (compared)
                devs.push_back({tr("rank %1 (selected)").arg(m_selected), x,
                                fromSecondRank(rankSeries(tl, RankMetric::DeviationRelative, m_selected))});
        }
    }
    // "slowest named" only while some are.
    m_rates->setTitle(ranks <= kLinesUpTo  ? tr("Tokens/s per rank")
                      : m_slowest.empty() ? tr("Tokens/s: p5–p95 of %1 ranks").arg(ranks)
                                          : tr("Tokens/s: p5–p95 of %1 ranks, slowest named").arg(ranks));
    m_rates->setSeries(std::move(rates));
    if (devs.empty() != m_deviation->yAxis().min.has_value()) {
        // With nothing to compare, a small range around 0: an empty chart's 0 to 100 % read as a
        // deviation scale.
        cppl::charts::AxisSpec yAxis{tr("deviation"), cppl::charts::ValueFormat::Percent, {}, {}, true};
        if (devs.empty()) {
            yAxis.min = -0.01;
            yAxis.max = 0.01;
        }
        m_deviation->setYAxis(yAxis);
    }
    m_deviation->setSeries(std::move(devs));
    setSelectedRank(m_selected);
    // The heat map's colour scale tops out at the largest 99th percentile across ranks of any
    // sample, so one outlier does not darken the rest.
    const auto &p99 = m_rateBand->values(3);
    // Samples where few ranks had reported (the run's first seconds) would set it from a handful:
    // those where nine in ten had count, unless there are none yet. NaN: no rank had reported.
    std::vector<double> firsts(static_cast<size_t>(std::max(ranks, 0)));
    for (int r = 0; r < ranks; ++r)
        firsts[size_t(r)] = tl.firstProgressSeconds(r);
    double from = -std::numeric_limits<double>::infinity();
    if (!firsts.empty()) {
        const size_t k = (firsts.size() * 9 + 9) / 10 - 1;
        std::nth_element(firsts.begin(), firsts.begin() + std::ptrdiff_t(k), firsts.end());
        from = firsts[k];
    }
    double top = 0, anyTop = 0;
    for (size_t i = 0; i < p99.size(); ++i)
        if (std::isfinite(p99[i])) {
            anyTop = std::max(anyTop, p99[i]);
            if (times[i] >= from)
                top = std::max(top, p99[i]);
        }
    if (top <= 0)
        top = anyTop;
    m_heat->setData(tl, snapshot, top);
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
