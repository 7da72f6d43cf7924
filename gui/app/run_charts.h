// SPDX-License-Identifier: MIT
#pragma once

// The Run page's charts, fed from the engine's RunTimeline and latest snapshot: global PPL with its
// ± band, per-rank tokens/s (lines up to 32 ranks, p5/median/p95 plus the slowest ranks named
// beyond), a rank x time heat map of tokens/s, comm share per rank as stacked bars (waiting vs
// transfer) and each rank's deviation from the global PPL. update() may be called per snapshot: the
// charts are rebuilt only when the timeline took a sample (at most 5 Hz), beyond 256 ranks at most
// every 200 ms, and incrementally (bands and heat map columns of the new samples only). Repaints
// join the page's paint pass of that snapshot (no second pass later).

#include "rank_plot.h"
#include "run/run_timeline.h"
#include "telemetry/collector_state.h"

#include <QElapsedTimer>
#include <QWidget>

#include <cstdint>
#include <memory>
#include <vector>

namespace cppl::charts {
class Chart;
class TimeSeriesChart;
} // namespace cppl::charts

namespace cppl::app {

class RankHeatMap;
class RankQuantiles;

/// Paints one chart of the chart module; a click on a series whose name starts with "rank N"
/// reports that rank.
class ChartView : public QWidget
{
    Q_OBJECT

public:
    explicit ChartView(cppl::charts::Chart *chart, QWidget *parent = nullptr);
    [[nodiscard]] cppl::charts::Chart *chart() const noexcept { return m_chart; }
    QSize sizeHint() const override { return {420, 220}; }
    /// What the plot says while the chart has no series ("no data yet" unless set).
    void setEmptyText(const QString &text);
    [[nodiscard]] QString emptyText() const { return m_emptyText; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    bool event(QEvent *event) override;

private:
    cppl::charts::Chart *m_chart;
    QElapsedTimer m_lastPaint;
    bool m_pending = false;
    QString m_emptyText;
};

/// Comm share per rank as stacked bars: waiting for stragglers (solid) + transfer (hatched).
/// Beyond what fits, neighbouring ranks are merged into one bar showing their maximum.
class CommShareBars : public RankPlot
{
    Q_OBJECT

public:
    explicit CommShareBars(QWidget *parent = nullptr);
    void setData(const cppl::core::telemetry::Snapshot &snapshot, double alertShare);
    QSize sizeHint() const override { return {420, 220}; }
    /// What the legend lists: only what is drawn (no bars before any rank's share is known, the
    /// threshold only with the bars and when it is on the scale).
    [[nodiscard]] QStringList legendLabels() const;
    /// Where the last paint wrote "no data yet" / "none known before the first sync round"
    /// (empty when it drew bars).
    [[nodiscard]] QRectF noteRect() const noexcept { return m_noteRect; }

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;

private:
    int m_bars = 0;
    QRectF m_noteRect;
    std::vector<float> m_wait, m_transfer; // 0 for a rank whose share is not known yet
    bool m_anyKnown = false;               // else the plot says so instead of showing empty bars
    double m_alert = 0;
    [[nodiscard]] bool barsDrawn() const { return !m_wait.empty() && m_anyKnown; }
    /// The dashed line: with the bars, and within the scale (which ends at 100 %).
    [[nodiscard]] bool thresholdDrawn() const { return barsDrawn() && m_alert > 0 && m_alert <= 1.0; }
    [[nodiscard]] QString thresholdLabel() const;
};

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
    [[nodiscard]] QString deviationTitle() const;
    /// What the deviation chart says while it draws nothing: "no data yet", or that there is
    /// nothing to compare yet (one rank has reported; a one-rank run).
    [[nodiscard]] QString deviationEmptyText() const;
    /// The deviation chart (tests: its series and, once painted, its y range).
    [[nodiscard]] const cppl::charts::TimeSeriesChart *deviationChart() const noexcept { return m_deviation; }
    /// A recovered run's lost ranks, marked on the heat map (RankHeatMap::setLostRanks) and named
    /// "lost", not "slow", among the slowest ranks of the tok/s chart.
    void setLostRanks(const std::vector<int> &ranks);
    [[nodiscard]] RankHeatMap *heatMap() const noexcept { return m_heat; }
    /// The names of the slowest ranks as shown in the rate chart's legend (tests, status line).
    [[nodiscard]] QStringList slowestRanks() const { return m_slowest; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    void changeEvent(QEvent *event) override;

private:
    void applyTheme();
    void rebuildGlobal(const cppl::core::run::RunTimeline &timeline);
    void rebuildRanks(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot);

    cppl::charts::TimeSeriesChart *m_ppl = nullptr;
    cppl::charts::TimeSeriesChart *m_rates = nullptr;
    cppl::charts::TimeSeriesChart *m_deviation = nullptr;
    ChartView *m_deviationView = nullptr; // its ChartView (the tooltip where no series is hit, the empty text)
    RankHeatMap *m_heat = nullptr;
    CommShareBars *m_comm = nullptr;
    std::unique_ptr<RankQuantiles> m_rateBand;      // p5, median, p95, p99 of tok/s
    std::unique_ptr<RankQuantiles> m_deviationBand; // p5, median, p95 of the deviation
    struct Drawn // what a part last showed
    {
        std::uint64_t revision = ~std::uint64_t{0};
        const cppl::core::run::RunTimeline *timeline = nullptr; // compared, never read
        QElapsedTimer clock;
    };
    Drawn m_drawn[2]; // GlobalPart, RankPart
    std::vector<int> m_rateSeriesRank; // series index -> rank (-1: a percentile line)
    QStringList m_slowest;
    std::vector<int> m_lost;
    int m_worldSize = 0;
    int m_selected = -1;
    double m_commAlert = 0.01;
};

} // namespace cppl::app
