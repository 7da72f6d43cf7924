// SPDX-License-Identifier: MIT
#pragma once

// Ranks x time, tokens/s as colour (viridis, lightness rises with the rate, so it reads in
// greyscale); failed/stalled ranks are marked in a strip at the right with a symbol. 1024 ranks
// fit: rows are at least one device pixel; when ranks outnumber pixel rows each row shows the
// slowest rank of its bin, so a slow or stalled rank is never averaged away. A cell before the
// rank's first progress message (RunTimeline::firstProgressSeconds) has no rate yet: it is drawn
// hatched grey, outside the colour scale (not as 0 tok/s, the darkest colour, which read as the
// slowest rank), and the legend says "no data yet" while any cell is; a row of several ranks is
// hatched until every one of them has reported.
//
// Kept incremental for live runs: the rates are copied and the image's columns coloured only for
// the timeline samples that changed since the last update (usually the newest one or two); the
// whole image is rebuilt only when the timeline compacts, the plot's pixel rows change or the
// colour scale crosses one of its steps.

#include "rank_plot.h"
#include "run/run_timeline.h"
#include "telemetry/collector_state.h"

#include <QImage>
#include <QStringList>

#include <cstdint>
#include <vector>

class QPainter;

namespace cppl::app {

class RankHeatMap : public RankPlot
{
    Q_OBJECT

public:
    explicit RankHeatMap(QWidget *parent = nullptr);
    /// @p colourMax: the rate at the top of the colour scale (the run charts pass the largest 99th
    /// percentile across ranks of any sample, so one outlier does not darken the rest); rounded up
    /// here to a step of a quarter of its decade.
    void setData(const cppl::core::run::RunTimeline &timeline, const cppl::core::telemetry::Snapshot &snapshot,
                 double colourMax);
    /// Failed and stalled ranks from @p snapshot (repaints only when they change).
    void setMarks(const cppl::core::telemetry::Snapshot &snapshot);
    /// Ranks a recovered run finished without, or a running one goes on without (--on-rank-loss
    /// continue): marked ⊘ whatever their last state; kept until clear(). A rank dropped from the
    /// list (the run failed after all) is marked failed.
    void setLostRanks(const std::vector<int> &ranks);
    /// For tests: the mark of @p rank: 0 none, 'F' failed, 'S' stalled, 'L' lost.
    [[nodiscard]] char markOf(int rank) const { return rank >= 0 && size_t(rank) < m_marks.size() ? m_marks[size_t(rank)] : 0; }
    void clear();
    QSize sizeHint() const override { return {420, 260}; }
    /// What the tooltip says at @p pos (widget coordinates, as last painted): the rank (or the
    /// ranks of a row), the time and the rate, or that the rank has not reported progress yet;
    /// away from the cells the map's general tooltip.
    [[nodiscard]] QString toolTipAt(const QPointF &pos) const;
    /// For tests: whether any cell has no data yet (the legend then lists "no data yet").
    [[nodiscard]] bool hasCellsWithoutData() const noexcept { return m_anyWithoutData; }

    // For tests: the image as it is painted with @p rows pixel rows (columns: timeline samples;
    // a cell without data is transparent, painted over the hatching), and how many times every
    // column was coloured (not just the changed ones).
    [[nodiscard]] QImage imageForRows(int rows);
    [[nodiscard]] int fullBuilds() const noexcept { return m_fullBuilds; }
    [[nodiscard]] double colourMax() const noexcept { return m_scale; }
    /// The time axis' labels at the last paint (tests).
    [[nodiscard]] QStringList timeTickLabels() const { return m_timeTicks; }

protected:
    void paintEvent(QPaintEvent *event) override;
    void mousePressEvent(QMouseEvent *event) override;
    bool event(QEvent *event) override;

private:
    void ensureImage(int rows);
    void paintColumns(QPainter &p, const QRectF &plot) const;

    std::vector<float> m_rates; // rank-major, m_capacity columns per rank
    std::vector<double> m_times;
    std::vector<double> m_firstData; // per rank: the time of its first sample with progress (+inf: none yet)
    bool m_anyWithoutData = false;
    int m_capacity = 0;
    int m_columns = 0;
    int m_ranks = 0;
    std::uint64_t m_compactions = ~std::uint64_t{0};
    QImage m_image;           // m_capacity x m_rows; columns [0, m_imageColumns) are current
    int m_rows = 0;
    int m_imageColumns = 0;
    int m_fullBuilds = 0;
    QImage m_ramp;            // the colour bar, 1 x 256, top = fastest
    std::vector<char> m_marks; // per rank: 0 fine, 'F' failed, 'S' stalled, 'L' lost (recovered run)
    std::vector<int> m_lost;   // setLostRanks()
    std::vector<char> m_stateMarks; // m_marks as the snapshot alone has them (no 'L')
    double m_scale = 0;       // tok/s at the top of the colour scale
    QStringList m_timeTicks;  // the time axis' labels at the last paint
    double m_seconds = 0;
};

} // namespace cppl::app
