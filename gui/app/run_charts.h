// SPDX-License-Identifier: MIT
#pragma once

// The Run page's charts, fed from the engine's RunTimeline and latest snapshot: global PPL with its
// ± band, per-rank tokens/s (lines up to 32 ranks, p5/median/p95 plus the slowest ranks named
// beyond), a rank x time heat map of tokens/s, comm share per rank as stacked bars (waiting vs
// transfer) and each rank's deviation from the global PPL. Redraws are coalesced: update() may be
// called per snapshot, painting happens at most every 40 ms and the series are rebuilt at most
// every 250 ms.

#include "run/run_timeline.h"
#include "telemetry/collector_state.h"

#include <QElapsedTimer>
#include <QImage>
#include <QWidget>

#include <memory>
#include <vector>

namespace cppl::charts {
class Chart;
class TimeSeriesChart;
} // namespace cppl::charts

namespace cppl::app {

/// Paints one chart of the chart module; a click on a series whose name starts with "rank N"
/// reports that rank.
class ChartView : public QWidget
{
    Q_OBJECT

public:
    explicit ChartView(cppl::charts::Chart *chart, QWidget *parent = nullptr);
    [[nodiscard]] cppl::charts::Chart *chart() const noexcept { return m_chart; }
    QSize sizeHint() const override { return {420, 220}; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    bool event(QEvent *event) override;

private:
    cppl::charts::Chart *m_chart;
    bool m_pending = false;
};

/// Ranks x time, tokens/s as colour (viridis, lightness rises with the rate, so it reads in
/// greyscale); failed/stalled ranks are marked in a strip at the right with a symbol. 1024 ranks
/// fit: rows are at least one device pixel and labelled every so many ranks.
class RankHeatMap : public QWidget
{
    Q_OBJECT

public:
    explicit RankHeatMap(QWidget *parent = nullptr);
    void setData(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot);
    void setSelectedRank(int rank);
    QSize sizeHint() const override { return {420, 260}; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;

private:
    QRectF plotRect() const;
    void buildImage(int rows);
    std::vector<float> m_rates; // ranks x columns, row-major
    int m_columns = 0;
    QImage m_image;      // one pixel per (time column, row of ranks)
    int m_imageRows = -1; // rows the image was built for (-1: rebuild)
    std::vector<char> m_marks; // per rank: 0 fine, 'F' failed, 'S' stalled
    double m_maxRate = 0;
    double m_seconds = 0;
    int m_ranks = 0;
    int m_selected = -1;
};

/// Comm share per rank as stacked bars: waiting for stragglers (solid) + transfer (hatched).
/// Beyond what fits, neighbouring ranks are merged into one bar showing their maximum.
class CommShareBars : public QWidget
{
    Q_OBJECT

public:
    explicit CommShareBars(QWidget *parent = nullptr);
    void setData(const cppl::core::telemetry::Snapshot &snapshot, double alertShare);
    void setSelectedRank(int rank);
    QSize sizeHint() const override { return {420, 220}; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;

private:
    QRectF plotRect() const;
    std::vector<float> m_wait, m_transfer;
    double m_alert = 0;
    int m_selected = -1;
};

class RunCharts : public QWidget
{
    Q_OBJECT

public:
    explicit RunCharts(QWidget *parent = nullptr);
    ~RunCharts() override;

    void reset(int worldSize, double commShareAlert);
    void update(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot,
                bool force = false);
    void setSelectedRank(int rank);
    /// The names of the slowest ranks as shown in the rate chart's legend (tests, status line).
    [[nodiscard]] QStringList slowestRanks() const { return m_slowest; }

Q_SIGNALS:
    void rankClicked(int rank);

protected:
    void changeEvent(QEvent *event) override;

private:
    void applyTheme();
    void rebuild(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot);

    cppl::charts::TimeSeriesChart *m_ppl = nullptr;
    cppl::charts::TimeSeriesChart *m_rates = nullptr;
    cppl::charts::TimeSeriesChart *m_deviation = nullptr;
    RankHeatMap *m_heat = nullptr;
    CommShareBars *m_comm = nullptr;
    std::vector<int> m_rateSeriesRank; // series index -> rank (-1: a percentile line)
    QStringList m_slowest;
    QElapsedTimer m_lastRebuild;
    int m_worldSize = 0;
    int m_selected = -1;
    double m_commAlert = 0.01;
};

} // namespace cppl::app
