// SPDX-License-Identifier: MIT
#include "run_charts.h"

#include "comm_share_bars.h"
#include "rank_heat_map.h"
#include "rank_series_chart.h"

#include "charts/chart_widget.h"
#include "charts/time_series_chart.h"

#include <QGridLayout>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace Qt::StringLiterals;
using cppl::charts::ChartWidget;
using cppl::charts::ValueFormat;
using cppl::core::run::GlobalMetric;
using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::Snapshot;

namespace cppl::app {

namespace {

constexpr int kNamedSlowest = 3;
constexpr int kThrottleAbove = 256; // beyond: rank-level charts rebuilt at most every kRebuildMs
constexpr qint64 kRebuildMs = 190;   // ~5 Hz, what the timeline samples at (a little less: snapshot jitter)

/// "rank N", with its host when the ranks are on several: four "rank N (localhost)" took a row each
/// in a 1024 px window's legend, and the fourth became "+1 more".
QStringList rankNames(const Snapshot &snapshot, int ranks)
{
    const bool severalHosts = std::any_of(snapshot.ranks.begin(), snapshot.ranks.end(),
                                          [&](const auto &v) { return v.host != snapshot.ranks.front().host; });
    QStringList names;
    for (int r = 0; r < ranks; ++r) {
        QString name = RunCharts::tr("rank %1").arg(r);
        if (severalHosts && r < int(snapshot.ranks.size()) && !snapshot.ranks[size_t(r)].host.empty())
            name += u" ("_s + QString::fromStdString(snapshot.ranks[size_t(r)].host) + u')';
        names << name;
    }
    return names;
}

/// A rank's deviation is from the global PPL, which is its own PPL while it is the only rank that
/// has reported: a comparison from the second rank's first progress on. Before, every deviation
/// is 0 by definition (and the axis was widened to ±100 % around it). The first rank to report
/// (-1: none) and when the second did (+inf: none yet).
std::pair<int, double> secondRankStart(const RunTimeline &tl)
{
    double firstAt = std::numeric_limits<double>::infinity(), compareFrom = firstAt;
    int firstRank = -1;
    for (int r = 0; r < tl.worldSize(); ++r) {
        const double f = tl.firstProgressSeconds(r);
        if (f < firstAt) {
            compareFrom = firstAt;
            firstAt = f;
            firstRank = r;
        } else if (f < compareFrom) {
            compareFrom = f;
        }
    }
    return {firstRank, compareFrom};
}

/// The heat map's colour scale tops out at the largest 99th percentile across ranks of any sample,
/// so one outlier does not darken the rest. Samples where few ranks had reported (the run's first
/// seconds) would set it from a handful: those where nine in ten had count, unless there are none
/// yet. NaN in @p p99: no rank had reported.
double heatScaleTop(const RunTimeline &tl, const std::vector<double> &p99)
{
    const int ranks = tl.worldSize();
    std::vector<double> firsts(static_cast<size_t>(std::max(ranks, 0)));
    for (int r = 0; r < ranks; ++r)
        firsts[size_t(r)] = tl.firstProgressSeconds(r);
    double from = -std::numeric_limits<double>::infinity();
    if (!firsts.empty()) {
        const size_t k = (firsts.size() * 9 + 9) / 10 - 1;
        std::nth_element(firsts.begin(), firsts.begin() + std::ptrdiff_t(k), firsts.end());
        from = firsts[k];
    }
    const auto times = tl.times();
    double top = 0, anyTop = 0;
    for (size_t i = 0; i < p99.size(); ++i)
        if (std::isfinite(p99[i])) {
            anyTop = std::max(anyTop, p99[i]);
            if (times[i] >= from)
                top = std::max(top, p99[i]);
        }
    return top > 0 ? top : anyTop;
}

} // namespace

RunCharts::RunCharts(QWidget *parent)
    : QWidget(parent)
{
    m_ppl = new cppl::charts::TimeSeriesChart(this);
    m_ppl->setTitle(tr("Global running PPL (exact merge) ± 1 standard error"));
    m_ppl->setYAxis({tr("PPL"), ValueFormat::Plain, {}, {}, false});
    m_ppl->setEmptyText(tr("no data yet"));
    m_rates = new RankSeriesChart(RankMetric::TokensPerSecond, {0.05, 0.5, 0.95, 0.99}, this);
    m_rates->setTitle(tr("Tokens/s per rank"));
    m_rates->setYAxis({tr("tok/s"), ValueFormat::Si, {}, {}, true});
    m_rates->setEmptyText(tr("no data yet"));
    m_deviation = new RankSeriesChart(RankMetric::DeviationRelative, {0.05, 0.5, 0.95}, this);
    m_deviation->setYAxis({tr("deviation"), ValueFormat::Percent, {}, {}, true});
    m_deviation->setEmptyText(tr("no data yet"));
    m_kld = new RankSeriesChart(RankMetric::KldMean, {0.05, 0.5, 0.95}, this);
    m_kld->setYAxis({tr("KLD (nats)"), ValueFormat::Plain, {}, {}, true});
    m_kld->setEmptyText(tr("no data yet"));
    m_sameTop = new RankSeriesChart(RankMetric::SameTop, {0.05, 0.5, 0.95}, this);
    m_sameTop->setYAxis({tr("same top"), ValueFormat::Percent, {}, {}, false});
    m_sameTop->setEmptyText(tr("no data yet"));
    m_heat = new RankHeatMap(this);
    m_comm = new CommShareBars(this);

    auto *grid = new QGridLayout(this);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->setSpacing(4);
    auto *heatView = m_heatView = addView(m_heat, m_heat, u"heatMap"_s, {420, 260});
    auto *commView = addView(m_comm, m_comm, u"commBars"_s, {420, 220});
    heatView->setToolTip(RankHeatMap::description()); // away from the cells and bars
    commView->setToolTip(CommShareBars::description());
    m_deviationView = addView(m_deviation, m_deviation, u"deviationChart"_s, {420, 220});
    grid->addWidget(addView(m_ppl, nullptr, u"pplChart"_s, {420, 220}), 0, 0);
    grid->addWidget(addView(m_rates, m_rates, u"rateChart"_s, {420, 220}), 0, 1);
    grid->addWidget(heatView, 0, 2, 2, 1); // tall: 1024 ranks need the rows
    grid->addWidget(commView, 1, 0);
    grid->addWidget(m_deviationView, 1, 1);
    m_kldView = addView(m_kld, m_kld, u"kldChart"_s, {420, 220});
    m_sameTopView = addView(m_sameTop, m_sameTop, u"sameTopChart"_s, {420, 220});
    m_kldView->setToolTip(tr("Each rank's running mean KL divergence KL(P_ref ‖ P_model) over the tokens it scored, "
                             "against the reference model; the title's global figure is the exact merge of every rank's sums."));
    m_sameTopView->setToolTip(tr("Each rank's share of tokens whose most likely token is the same under the model and "
                                 "the reference; the title's global figure is over every rank's tokens."));
    // A third row: lower, so the page still fits a 1024 x 768 window (it grew by 10 px at 150).
    m_kldView->setMinimumSize(240, 120);
    m_sameTopView->setMinimumSize(240, 120);
    grid->addWidget(m_kldView, 2, 0);
    grid->addWidget(m_sameTopView, 2, 1);
    for (int c = 0; c < 3; ++c)
        grid->setColumnStretch(c, 1);
    setSchedule(u"dynamic"_s);
    setReferenceModel(false);
}

void RunCharts::setReferenceModel(bool on)
{
    m_reference = on;
    m_kldView->setVisible(on);
    m_sameTopView->setVisible(on);
    // The heat map keeps to the rows beside it: with the reference charts, three.
    auto *grid = static_cast<QGridLayout *>(layout());
    grid->removeWidget(m_heatView);
    grid->addWidget(m_heatView, 0, 2, on ? 3 : 2, 1);
    for (int row = 0; row < 3; ++row) // three equal rows (stretch 0 kept rows 0 and 1 at their hints, the third got the rest)
        grid->setRowStretch(row, on ? 1 : 0);
    constexpr double none = std::numeric_limits<double>::quiet_NaN();
    setReferenceTitles(none, none);
}

void RunCharts::setReferenceTitles(double kld, double sameTop)
{
    // Short enough for one line in a 1500 px window: a second line took the plot's room.
    m_kld->setTitle(std::isfinite(kld) ? tr("KLD per rank · global %1").arg(kld, 0, 'g', 4) : tr("KLD to the reference per rank"));
    m_sameTop->setTitle(std::isfinite(sameTop) ? tr("Same top token · global %1%").arg(100 * sameTop, 0, 'f', 2)
                                                : tr("Same top token as the reference per rank"));
}

const cppl::charts::TimeSeriesChart *RunCharts::kldChart() const noexcept
{
    return m_kld;
}

const cppl::charts::TimeSeriesChart *RunCharts::sameTopChart() const noexcept
{
    return m_sameTop;
}

RunCharts::~RunCharts() = default;

ChartWidget *RunCharts::addView(cppl::charts::Chart *chart, RankPlot *plot, const QString &name, QSize hint)
{
    auto *view = new ChartWidget(chart, this); // its theme follows the page's palette, light or dark
    view->setObjectName(name);
    view->setSizeHints(hint, {240, 150});
    view->setMinimumSize(240, 150);
    if (plot) {
        m_rankPlots.push_back(plot);
        connect(view, &ChartWidget::picked, this, [this, plot](const cppl::charts::Hit &hit) {
            if (const int rank = plot->rankOf(hit); rank >= 0)
                Q_EMIT rankClicked(rank);
        });
    }
    return view;
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
}

QString RunCharts::deviationTitle() const
{
    return m_deviation->title();
}

QString RunCharts::deviationEmptyText() const
{
    return m_deviation->emptyText();
}

const cppl::charts::TimeSeriesChart *RunCharts::deviationChart() const noexcept
{
    return m_deviation;
}

void RunCharts::reset(int worldSize, double commShareAlert)
{
    m_worldSize = worldSize;
    m_commAlert = commShareAlert;
    m_selected = -1;
    m_lost.clear(); // the last run's: a rank lost there is not lost in the next
    m_slowest.clear();
    m_deviation->setEmptyText(tr("no data yet"));
    m_deviation->setYAxis({tr("deviation"), ValueFormat::Percent, {}, {}, true});
    m_ppl->clearSeries();
    m_rates->clear();
    m_deviation->clear();
    m_kld->clear();
    m_sameTop->clear();
    setReferenceTitles(std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN());
    for (auto &d : m_drawn)
        d = Drawn{};
    m_comm->setData(Snapshot{}, commShareAlert);
    m_heat->clear();
    setSelectedRank(-1);
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
    const int ranks = tl.worldSize();
    const QStringList names = ranks <= RankSeriesChart::kLinesUpTo ? rankNames(snapshot, ranks) : QStringList();
    std::vector<std::pair<int, QString>> named;
    m_slowest.clear();
    if (ranks > RankSeriesChart::kLinesUpTo) {
        named = slowest(tl, snapshot);
        for (const auto &rank : named)
            m_slowest << rank.second;
        const bool shown = std::any_of(named.begin(), named.end(), [&](const auto &n) { return n.first == m_selected; });
        if (m_selected >= 0 && m_selected < ranks && !shown)
            named.emplace_back(m_selected, tr("rank %1 (selected)").arg(m_selected));
    }
    m_rates->rebuild(tl, names, named);
    // "slowest named" only while some are.
    m_rates->setTitle(ranks <= RankSeriesChart::kLinesUpTo ? tr("Tokens/s per rank")
                      : m_slowest.empty()                 ? tr("Tokens/s: p5–p95 of %1 ranks").arg(ranks)
                                                          : tr("Tokens/s: p5–p95 of %1 ranks, slowest named").arg(ranks));
    rebuildDeviation(tl, names);
    if (m_reference)
        rebuildReference(tl, names);
    m_heat->setData(tl, snapshot, heatScaleTop(tl, m_rates->quantiles().values(3)));
}

void RunCharts::rebuildDeviation(const RunTimeline &tl, const QStringList &names)
{
    const int ranks = tl.worldSize();
    const auto [firstRank, compareFrom] = secondRankStart(tl);
    m_deviation->setEmptyText(ranks == 1 ? tr("one rank: its PPL is the global PPL, there is no other rank to compare it with")
                              : firstRank >= 0 ? tr("nothing to compare yet: only rank %1 has reported").arg(firstRank)
                                               : tr("no data yet"));
    const bool compared = std::isfinite(compareFrom);
    if (compared) {
        std::vector<std::pair<int, QString>> selected; // beyond 32 ranks: the selected rank over the quantiles
        if (m_selected >= 0 && m_selected < ranks)
            selected.emplace_back(m_selected, tr("rank %1 (selected)").arg(m_selected));
        m_deviation->rebuild(tl, names, selected, compareFrom);
    } else {
        m_deviation->clearSeries();
    }
    if (compared == m_deviation->yAxis().min.has_value()) {
        // With nothing to compare, a small range around 0: an empty chart's 0 to 100 % read as a
        // deviation scale.
        cppl::charts::AxisSpec yAxis{tr("deviation"), ValueFormat::Percent, {}, {}, true};
        if (!compared) {
            yAxis.min = -0.01;
            yAxis.max = 0.01;
        }
        m_deviation->setYAxis(yAxis);
    }
}

void RunCharts::rebuildReference(const RunTimeline &tl, const QStringList &names)
{
    std::vector<std::pair<int, QString>> selected; // beyond 32 ranks: the selected rank over the quantiles
    if (m_selected >= 0 && m_selected < tl.worldSize())
        selected.emplace_back(m_selected, tr("rank %1 (selected)").arg(m_selected));
    m_kld->rebuild(tl, names, selected);
    m_sameTop->rebuild(tl, names, selected);
    const auto kld = tl.global(GlobalMetric::KldMean), same = tl.global(GlobalMetric::SameTop);
    setReferenceTitles(kld.empty() ? std::numeric_limits<double>::quiet_NaN() : kld.back(),
                       same.empty() ? std::numeric_limits<double>::quiet_NaN() : same.back());
}

std::vector<std::pair<int, QString>> RunCharts::slowest(const RunTimeline &tl, const Snapshot &snapshot) const
{
    // The slowest ranks by their recent rate (the last few samples), failed ranks excluded: those
    // are in the alerts already and their rate is 0 by definition; so are ranks with no progress
    // yet (no rate, not a rate of 0), and samples before a rank's first. Once every other rank is
    // done (the run ended), the slowest over the whole run: a finished run named none, and which
    // ranks held it back is what a user looks for then.
    const bool ended = !snapshot.ranks.empty() && std::all_of(snapshot.ranks.begin(), snapshot.ranks.end(), [](const auto &v) {
        return v.state == RankState::Done || v.state == RankState::Failed;
    });
    const auto times = tl.times();
    const size_t n = tl.size();
    std::vector<std::pair<double, int>> recent;
    for (int r = 0; r < tl.worldSize(); ++r) {
        if (r < int(snapshot.ranks.size())
            && (snapshot.ranks[size_t(r)].state == RankState::Failed || (!ended && snapshot.ranks[size_t(r)].state == RankState::Done)))
            continue;
        const auto s = tl.rank(RankMetric::TokensPerSecond, r);
        size_t from = ended ? 0 : n > 8 ? n - 8 : 0;
        while (from < n && times[from] < tl.firstProgressSeconds(r))
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
    std::vector<std::pair<int, QString>> named;
    for (size_t i = 0; i < k; ++i) {
        const int r = recent[i].second;
        QString name = tr("rank %1").arg(r);
        if (r < int(snapshot.ranks.size()))
            name += u" ("_s + QString::fromStdString(snapshot.ranks[size_t(r)].host) + u") "_s
                    + (std::find(m_lost.begin(), m_lost.end(), r) != m_lost.end() ? tr("lost")
                       : snapshot.ranks[size_t(r)].state == RankState::Stalled ? tr("stalled") // as the table and heat map say
                                                                                : tr("slow"));
        named.emplace_back(r, name);
    }
    return named;
}

void RunCharts::setSelectedRank(int rank)
{
    m_selected = rank;
    for (RankPlot *plot : m_rankPlots)
        plot->setSelectedRank(rank);
}

} // namespace cppl::app
