// SPDX-License-Identifier: MIT
#pragma once

// The Run page's charts, fed from the engine's RunTimeline and latest snapshot: global PPL with its
// ± band, per-rank tokens/s (lines up to 32 ranks, p5/median/p95 plus the slowest ranks named
// beyond), a rank x time heat map of tokens/s, comm share per rank as stacked bars (waiting vs
// transfer) and each rank's deviation from the global PPL. Every one is a chart of the chart
// module (gui/charts), configured here or in a small subclass (RankSeriesChart, RankHeatMap,
// CommShareBars), shown in a ChartWidget; nothing here paints. update() may be called per
// snapshot: the charts are rebuilt only when the timeline took a sample (at most 5 Hz), beyond 256
// ranks at most every 200 ms, and incrementally (bands and heat map columns of the new samples
// only). Repaints join the page's paint pass of that snapshot (no second pass later).

#include "rank_plot.h"
#include "run/run_timeline.h"
#include "telemetry/collector_state.h"

#include <QElapsedTimer>
#include <QWidget>

#include <cstdint>
#include <utility>
#include <vector>

namespace cppl::charts {
class Chart;
class ChartWidget;
class TimeSeriesChart;
} // namespace cppl::charts

namespace cppl::app {

class CommShareBars;
class RankHeatMap;
class RankSeriesChart;

class RunCharts : public QWidget
{
    Q_OBJECT

public:
    explicit RunCharts(QWidget *parent = nullptr);
    ~RunCharts() override;

    /// The charts in two parts that can be brought up to date apart (beyond 256 ranks the Run
    /// page spreads them over successive snapshots, so no paint pass holds every chart): the
    /// global PPL and the comm bars; the rank-level charts over time (tok/s, heat map, deviation).
    enum Part : unsigned { GlobalPart = 1, RankPart = 2, AllParts = 3 };

    void reset(int worldSize, double commShareAlert);
    /// Rebuilds the @p parts that are due (or all of them when @p force); the comm bars and the
    /// heat map's failed/stalled marks follow every call.
    void update(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot,
                bool force = false, unsigned parts = AllParts);
    /// Whether update() would rebuild @p part now: the timeline took a sample since, and beyond
    /// 256 ranks 200 ms have passed (the global part is due on time alone: the comm bars).
    [[nodiscard]] bool due(const cppl::core::run::RunTimeline &timeline, Part part) const;
    void setSelectedRank(int rank);
    /// The run's schedule ("dynamic" or "static"), which says what a rank's own PPL is over: the
    /// global batches it claimed, or its fixed shard. The deviation chart's title and tooltip
    /// follow it; kept across reset() (dynamic, the default, until told otherwise).
    void setSchedule(const QString &schedule);
    /// Whether the run evaluates against a reference model (--reference-model): then the running
    /// KL divergence and top-token agreement per rank are shown beside the PPL, hidden otherwise.
    /// Kept across reset().
    void setReferenceModel(bool on);
    [[nodiscard]] bool referenceShown() const noexcept { return m_reference; }
    /// The reference charts (tests: their series and titles).
    [[nodiscard]] const cppl::charts::TimeSeriesChart *kldChart() const noexcept;
    [[nodiscard]] const cppl::charts::TimeSeriesChart *sameTopChart() const noexcept;
    [[nodiscard]] QString deviationTitle() const;
    /// What the deviation chart says while it draws nothing: "no data yet", or that there is
    /// nothing to compare yet (one rank has reported; a one-rank run).
    [[nodiscard]] QString deviationEmptyText() const;
    /// The deviation chart (tests: its series and, once painted, its y range).
    [[nodiscard]] const cppl::charts::TimeSeriesChart *deviationChart() const noexcept;
    /// A recovered run's lost ranks, marked on the heat map (RankHeatMap::setLostRanks) and named
    /// "lost", not "slow", among the slowest ranks of the tok/s chart.
    void setLostRanks(const std::vector<int> &ranks);
    [[nodiscard]] RankHeatMap *heatMap() const noexcept { return m_heat; }
    /// The names of the slowest ranks as shown in the rate chart's legend (tests, status line).
    [[nodiscard]] QStringList slowestRanks() const { return m_slowest; }

Q_SIGNALS:
    void rankClicked(int rank);

private:
    /// @p chart in a ChartWidget named @p name (tests find it), its picks reported as ranks.
    cppl::charts::ChartWidget *addView(cppl::charts::Chart *chart, RankPlot *plot, const QString &name, QSize hint);
    void rebuildGlobal(const cppl::core::run::RunTimeline &timeline);
    void rebuildRanks(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot);
    void rebuildDeviation(const cppl::core::run::RunTimeline &timeline, const QStringList &names);
    /// The running comparison per rank, titled with the global figures (the exact merge).
    void rebuildReference(const cppl::core::run::RunTimeline &timeline, const QStringList &names);
    /// The reference charts' titles with the global figures (NaN: none yet).
    void setReferenceTitles(double kld, double sameTop);
    /// Beyond 32 ranks: the slowest ranks, named with their host and why ("slow", "stalled", "lost").
    [[nodiscard]] std::vector<std::pair<int, QString>> slowest(const cppl::core::run::RunTimeline &timeline,
                                                               const cppl::core::telemetry::Snapshot &snapshot) const;

    cppl::charts::TimeSeriesChart *m_ppl = nullptr;
    RankSeriesChart *m_rates = nullptr;     // quantiles p5, median, p95, p99 of tok/s
    RankSeriesChart *m_deviation = nullptr; // quantiles p5, median, p95 of the deviation
    cppl::charts::ChartWidget *m_deviationView = nullptr; // the tooltip where no series is hit
    RankSeriesChart *m_kld = nullptr;     // --reference-model: running KLD per rank
    RankSeriesChart *m_sameTop = nullptr; // and top-token agreement
    cppl::charts::ChartWidget *m_kldView = nullptr;
    cppl::charts::ChartWidget *m_sameTopView = nullptr;
    cppl::charts::ChartWidget *m_heatView = nullptr;
    bool m_reference = false;
    RankHeatMap *m_heat = nullptr;
    CommShareBars *m_comm = nullptr;
    std::vector<RankPlot *> m_rankPlots; // every chart the selected rank is shown on
    struct Drawn // what a part last showed
    {
        std::uint64_t revision = ~std::uint64_t{0};
        const cppl::core::run::RunTimeline *timeline = nullptr; // compared, never read
        QElapsedTimer clock;
    };
    Drawn m_drawn[2]; // GlobalPart, RankPart
    QStringList m_slowest;
    std::vector<int> m_lost;
    int m_worldSize = 0;
    int m_selected = -1;
    double m_commAlert = 0.01;
};

} // namespace cppl::app
