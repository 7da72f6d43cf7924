// SPDX-License-Identifier: MIT
#pragma once

// A per-rank metric of the run over time (tok/s; each rank's PPL against the global one; with a
// reference model its running KL divergence and top-token agreement), as the chart module's
// TimeSeriesChart: a line per rank up to kLinesUpTo ranks; beyond, p95, median and p5 across the
// ranks that had reported by then (RankQuantiles, kept up incrementally) and a few named ranks
// over them (the slowest, the selected). A rank's line starts at its first progress message: its
// value before is no data, not 0. A new per-rank chart on the Run page is one of these with its
// RankMetric, titles and axis.

#include "rank_plot.h"
#include "rank_quantiles.h"
#include "run/run_timeline.h"

#include "charts/time_series_chart.h"

#include <QStringList>

#include <limits>
#include <memory>
#include <utility>
#include <vector>

namespace cppl::app {

class RankSeriesChart : public cppl::charts::TimeSeriesChart, public RankPlot
{
    Q_OBJECT

public:
    static constexpr int kLinesUpTo = 32; // beyond: the p5-p95 summary and named ranks

    /// @p quantiles: p5, median and p95 first (the lines beyond kLinesUpTo ranks), then any other
    /// the page wants across ranks (the heat map's scale takes the rates' p99).
    RankSeriesChart(cppl::core::run::RankMetric metric, std::vector<double> quantiles, QObject *parent = nullptr);

    void clear();
    /// The lines of @p timeline: up to kLinesUpTo ranks one per rank named @p names[r]; beyond,
    /// the quantiles and the @p named ranks. Nothing before @p from (a NaN gap).
    void rebuild(const cppl::core::run::RunTimeline &timeline, const QStringList &names,
                 const std::vector<std::pair<int, QString>> &named,
                 double from = -std::numeric_limits<double>::infinity());
    [[nodiscard]] const RankQuantiles &quantiles() const noexcept { return *m_band; }

    [[nodiscard]] int rankOf(const cppl::charts::Hit &hit) const override;
    /// Highlights the selected rank's line where it has one (beyond kLinesUpTo ranks, after the
    /// next rebuild names it).
    void setSelectedRank(int rank) override;

private:
    cppl::core::run::RankMetric m_metric;
    std::unique_ptr<RankQuantiles> m_band;
    std::vector<int> m_seriesRank; // series index -> rank (-1: a quantile line)
    int m_selected = -1;
};

/// A rank's series with a gap (NaN) before its first progress message, and before @p from: its 0
/// there is no data, not a rate of 0 (nor a deviation of 0).
[[nodiscard]] std::vector<double> rankSeries(const cppl::core::run::RunTimeline &timeline, cppl::core::run::RankMetric metric,
                                             int rank, double from = -std::numeric_limits<double>::infinity());

} // namespace cppl::app
