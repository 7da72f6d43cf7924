// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"
#include "charts/chart_frame.h"

#include <QStringList>

namespace cppl::charts {

/// How neighbouring categories share a bar when there are more of them than fit.
enum class BarBinning {
    Mean,    // the mean of each segment, with a line from the lowest to the highest total
    Largest, // the category with the largest total, whole (one bad rank is never averaged away)
};

/**
 * One bar per category (e.g. rank) stacked from segments (e.g. waiting vs transfer). Segment 0 is
 * a plain fill, later segments add a hatch so that they differ in greyscale too. With few bars the
 * values are written on them; with more bars than fit (minBarPitch) neighbouring categories are
 * binned into one bar (BarBinning), so one bad category still shows. setViewRange() scrolls or
 * zooms instead. A category whose values are all NaN is not known yet: it gets no bar. Reference
 * lines (a threshold) run dashed across the bars and are named in the legend, not on the plot,
 * where a label would cover a bar. The legend lists what is drawn: nothing before any value.
 */
class StackedBarChart : public Chart
{
    Q_OBJECT

public:
    /// One painted bar: categories [first, end), the stacked segment values and the totals' range.
    struct Bar
    {
        int first = 0;
        int end = 0;
        QRectF rect; // whole stack, in paint coordinates
        std::vector<double> segments;
        double minTotal = 0;
        double maxTotal = 0;
        int shown = -1;        // BarBinning::Largest: the category whose values the bar shows
        bool hasValue = true;  // some category of the bar has a value (else nothing is drawn)
    };

    explicit StackedBarChart(QObject *parent = nullptr);

    void setSegmentNames(QStringList names);
    /// values[category * segmentCount + segment]; categories = values.size() / segmentCount.
    void setValues(std::vector<double> values);
    void setCategoryLabels(QStringList labels);
    void setXAxis(const AxisSpec &axis); // title only ("rank")
    void setYAxis(const AxisSpec &axis); // value format (Percent for shares), fixed max
    /// Show categories [first, first + count) only (scrolling, zoom); count <= 0 = all.
    void setViewRange(int first, int count);
    /// With a view range set: moves it by a tenth of its width per step (at least one category).
    bool scrollBy(int steps) override;
    std::pair<int, int> viewRange() const { return {m_viewFirst, m_viewCount}; }
    /// Narrowest bar pitch in device-independent px before categories are aggregated.
    void setMinBarPitch(qreal px);
    void setBinning(BarBinning binning);
    /// The category axis' title while bars are binned, %1 = categories per bar ("rank (each bar:
    /// the most of %1 ranks)"); empty: the plain title.
    void setBinnedAxisTitle(const QString &title);
    /// Dashed lines across the bars (an alert threshold), named "label value" in the legend. The
    /// y axis reaches half as far again above each, so a line never sits on the plot's top edge.
    void setReferenceLines(std::vector<ReferenceLine> lines);
    /// The bar holding this category is outlined and pointed at from above; -1: none.
    void setHighlightedCategory(int category);
    int highlightedCategory() const { return m_highlighted; }

    int categoryCount() const;
    int segmentCount() const { return static_cast<int>(m_segments.size()); }
    double value(int category, int segment) const;
    /// The bars of the last paint, left to right.
    const std::vector<Bar> &lastBars() const { return m_bars; }
    std::pair<double, double> lastYRange() const { return {m_yTicks.min, m_yTicks.max}; }

    Hit hitTest(const QPointF &point) const override;
    /// Some category in view has a value.
    bool hasData() const override;

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;

private:
    /// Where the bars go along the plot and how they are drawn.
    struct Layout
    {
        double y0 = 0, sy = 1;   // the y axis' start, px per unit
        double pitch = 0, gap = 0;
        bool labelValues = false; // values written on segments and totals above bars
    };
    QString categoryLabel(int category) const;
    std::pair<int, int> visibleRange() const;
    std::vector<Bar> makeBars(int first, int end, qreal width) const;
    Bar makeBar(int first, int end) const;
    double yMax(const std::vector<Bar> &bars) const;
    std::vector<detail::LegendEntry> legendEntries(bool aggregated) const;
    detail::TickFunction categoryTicks(int first, int end) const;
    QColor segmentColor(int segment) const;
    void paintBar(QPainter &painter, const QRectF &plot, const Layout &l, size_t index) const;
    void paintReferenceLines(QPainter &painter, const QRectF &plot, const Layout &l) const;
    void paintHighlight(QPainter &painter, const QRectF &plot, const Layout &l) const;

    QStringList m_segments{QStringLiteral("value")};
    std::vector<double> m_values;
    QStringList m_labels;
    AxisSpec m_xAxis{QStringLiteral("rank"), ValueFormat::Plain, {}, {}, false};
    AxisSpec m_yAxis;
    int m_viewFirst = 0, m_viewCount = 0;
    qreal m_minPitch = 4;
    BarBinning m_binning = BarBinning::Mean;
    QString m_binnedTitle;
    std::vector<ReferenceLine> m_references;
    int m_highlighted = -1;

    mutable std::vector<Bar> m_bars;
    mutable detail::Frame m_frame;
    mutable Ticks m_yTicks;
};

/// Hatch of segment i (none for 0): diagonal, cross, reverse diagonal, dense...
Qt::BrushStyle segmentPattern(int segment);

} // namespace cppl::charts
