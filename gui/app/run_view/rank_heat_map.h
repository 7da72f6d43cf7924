// SPDX-License-Identifier: MIT
#pragma once

// Ranks x time, tokens/s as colour: the chart module's HeatMap configured for a run (it paints;
// this feeds it and names the ranks). Viridis, whose lightness rises with the rate, so it reads in
// greyscale. 1024 ranks fit: when ranks outnumber pixel rows each row shows the slowest rank of its
// bin (Aggregation::Min), so a slow or stalled rank is never averaged away. A cell before the
// rank's first progress message (RunTimeline::firstProgressSeconds) has no rate yet: it is no data
// (hatched grey, outside the colour scale, not 0 tok/s, the darkest colour, which read as the
// slowest rank), and a row of several ranks is no data until every one of them has reported.
// Failed, stalled and lost ranks are marked beside the map with a symbol (✗ ‖ ⊘).
//
// Kept incremental for live runs: only the columns of the timeline samples that changed since the
// last update are written (usually the newest one or two), and the map colours only those; every
// column is coloured again only when the timeline compacts, the plot's pixel rows change or the
// colour scale crosses one of its steps.

#include "rank_plot.h"
#include "run/run_timeline.h"
#include "telemetry/collector_state.h"

#include "charts/heat_map.h"

#include <cstdint>
#include <vector>

namespace cppl::app {

class RankHeatMap : public cppl::charts::HeatMap, public RankPlot
{
    Q_OBJECT

public:
    explicit RankHeatMap(QObject *parent = nullptr);
    /// What the map shows, for its widget's tooltip away from the cells.
    [[nodiscard]] static QString description();

    /// @p colourMax: the rate at the top of the colour scale (the run charts pass the largest 99th
    /// percentile across ranks of any sample, so one outlier does not darken the rest); rounded up
    /// here to a step of a quarter of its decade.
    void setData(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot,
                 double colourMax);
    /// Failed and stalled ranks from @p snapshot (repaints only when they change).
    void setMarks(const cppl::core::telemetry::Snapshot &snapshot);
    /// Ranks a recovered run finished without, or a running one goes on without (--on-rank-loss
    /// continue): marked ⊘ whatever their last state; kept until clear(). A rank dropped from the
    /// list (the run failed after all) is marked as its state says again.
    void setLostRanks(const std::vector<int> &ranks);
    /// For tests: the mark of @p rank: 0 none, 'F' failed, 'S' stalled, 'L' lost.
    [[nodiscard]] char markOf(int rank) const { return rank >= 0 && size_t(rank) < m_marks.size() ? m_marks[size_t(rank)] : 0; }
    void clear();
    [[nodiscard]] double colourMax() const noexcept { return m_scale; }

    /// The cell's rank (or the ranks of its row), its time and rate, or that the rank had not
    /// reported progress by then.
    cppl::charts::Hit hitTest(const QPointF &point) const override;
    [[nodiscard]] int rankOf(const cppl::charts::Hit &hit) const override;
    void setSelectedRank(int rank) override { setHighlightedRow(rank); }

private:
    /// The rates of the samples from @p from on, NaN before each rank's first progress message.
    void writeColumns(const cppl::core::run::RunTimeline &timeline, int from);
    void showMarks();
    [[nodiscard]] QString cellText(const cppl::charts::Hit &hit) const;

    std::vector<double> m_times;
    std::uint64_t m_compactions = ~std::uint64_t{0};
    int m_ranks = 0;
    int m_columns = 0;
    std::vector<char> m_marks;      // per rank: 0 fine, 'F' failed, 'S' stalled, 'L' lost (recovered run)
    std::vector<char> m_stateMarks; // m_marks as the snapshot alone has them (no 'L')
    std::vector<int> m_lost;        // setLostRanks()
    double m_scale = 0;             // tok/s at the top of the colour scale
};

} // namespace cppl::app
