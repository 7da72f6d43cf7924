// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"
#include "charts/chart_frame.h"

#include <QStringList>

namespace cppl::charts {

/**
 * One bar per category (e.g. rank) stacked from segments (e.g. waiting vs transfer). Segment 0 is
 * a plain fill, later segments add a hatch so that they differ in greyscale too. With few bars the
 * values are written on them; with more bars than fit (minBarPitch) neighbouring categories are
 * aggregated into one bar: the mean of each segment, with a line from the lowest to the highest
 * total in the bin, so one bad category still shows. setViewRange() scrolls or zooms instead.
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

    int categoryCount() const;
    int segmentCount() const { return static_cast<int>(m_segments.size()); }
    double value(int category, int segment) const;
    /// The bars of the last paint, left to right.
    const std::vector<Bar> &lastBars() const { return m_bars; }
    QRectF lastPlotRect() const { return m_frame.plot; }
    std::pair<double, double> lastYRange() const { return {m_yTicks.min, m_yTicks.max}; }

    Hit hitTest(const QPointF &point) const override;

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;

private:
    QString categoryLabel(int category) const;

    QStringList m_segments{QStringLiteral("value")};
    std::vector<double> m_values;
    QStringList m_labels;
    AxisSpec m_xAxis{QStringLiteral("rank"), ValueFormat::Plain, {}, {}, false};
    AxisSpec m_yAxis;
    int m_viewFirst = 0, m_viewCount = 0;
    qreal m_minPitch = 4;

    mutable std::vector<Bar> m_bars;
    mutable detail::Frame m_frame;
    mutable Ticks m_yTicks;
};

/// Hatch of segment i (none for 0): diagonal, cross, reverse diagonal, dense...
Qt::BrushStyle segmentPattern(int segment);

} // namespace cppl::charts
