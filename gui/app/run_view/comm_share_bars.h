// SPDX-License-Identifier: MIT
#pragma once

// Comm share per rank: the chart module's StackedBarChart configured for a run. Waiting for
// stragglers (solid) under transfer (hatched), with --tensor-parallel the group's reductions inside
// the forward passes a third part (hatched otherwise) apart from the sync rounds, the alert threshold dashed across the bars and named
// in the legend. Beyond one bar per two pixels neighbouring ranks share a bar showing the one with
// the largest share (BarBinning::Largest), so a bad rank is never averaged away. A rank that has
// not reported communication time yet gets no bar (unknown, not 0 %); until one has, the plot says
// so and the legend lists nothing.

#include "rank_plot.h"
#include "telemetry/collector_state.h"

#include "charts/stacked_bar_chart.h"

namespace cppl::app {

class CommShareBars : public cppl::charts::StackedBarChart, public RankPlot
{
    Q_OBJECT

public:
    explicit CommShareBars(QObject *parent = nullptr);
    /// What the bars show, for their widget's tooltip away from a bar.
    [[nodiscard]] static QString description();

    void setData(const cppl::core::telemetry::Snapshot &snapshot, double alertShare);
    [[nodiscard]] int rankOf(const cppl::charts::Hit &hit) const override;
    /// With --tensor-parallel: the group's reductions' share of the rank's time (part of its
    /// compute), the bars' third part.
    [[nodiscard]] static double tensorParallelShare(const cppl::core::telemetry::RankView &r);
    void setSelectedRank(int rank) override { setHighlightedCategory(rank); }

private:
    bool m_tensorParallel = false; // the third part shown (any rank in a group of several)
};

} // namespace cppl::app
