// SPDX-License-Identifier: MIT
#pragma once

// What the Run page's per-rank charts add to the chart module's (which paints them, hovers and
// picks, gui/charts): the rank a pick falls on, and the rank selected elsewhere (table, alert,
// another chart) shown on the chart. RunCharts wires every chart that is a RankPlot alike, so a
// new per-rank chart is a configuration of a chart-module chart plus these two functions.

#include "charts/chart.h"

namespace cppl::app {

class RankPlot
{
public:
    virtual ~RankPlot() = default;
    /// The rank @p hit (the chart's hitTest() or a ChartWidget's picked()) is on; -1: none.
    [[nodiscard]] virtual int rankOf(const cppl::charts::Hit &hit) const = 0;
    /// Shows @p rank as selected (-1: none); repaints only when it changes.
    virtual void setSelectedRank(int rank) = 0;
};

} // namespace cppl::app
