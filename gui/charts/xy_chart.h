// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"
#include "charts/chart_frame.h"

#include <optional>
#include <utility>

namespace cppl::charts {

/**
 * Base of the charts that plot values over a numeric x axis (time by default): TimeSeriesChart and
 * BandChart. It owns what they share: the two axes, the reference lines, the frame with its nice
 * y range, the value-to-pixel mapping of the last paint, and the search for the sample nearest
 * to a point (hover and pick). What is drawn inside the plot is the subclass's.
 */
class XYChart : public Chart
{
    Q_OBJECT

public:
    void setXAxis(const AxisSpec &axis);
    void setYAxis(const AxisSpec &axis);
    const AxisSpec &xAxis() const { return m_xAxis; }
    const AxisSpec &yAxis() const { return m_yAxis; }
    /// Horizontal lines across the plot (a threshold, the ideal rate); the y range includes them.
    void setReferenceLines(std::vector<ReferenceLine> lines);

    /// The ranges of the last paint (y after nice widening), for callers that align other charts.
    std::pair<double, double> lastXRange() const { return {m_xTicks.min, m_xTicks.max}; }
    std::pair<double, double> lastYRange() const { return {m_yTicks.min, m_yTicks.max}; }
    /// Where the last paint put the reference lines' labels.
    const std::vector<QRectF> &lastReferenceLabels() const { return m_referenceLabels; }

protected:
    explicit XYChart(QObject *parent = nullptr);

    /// Where the data goes: the plot and the mapping of values onto it (y0..y1: the y axis' ticks).
    struct Plot
    {
        QRectF rect;
        double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
        double sx = 1, sy = 1; // px per x unit, per y unit
        double mapX(double x) const { return rect.left() + (x - x0) * sx; }
        double mapY(double y) const { return rect.bottom() - (y - y0) * sy; }
    };

    /**
     * Paints title, legend, axes and grid (the subclass has filled in spec's legend and room on the
     * right) for x over [x0, x1] and the data's y over [dataY0, dataY1] (+inf, -inf: no data). The y
     * range takes in the reference lines, zero when the y axis includes it and the axis' fixed ends,
     * and is widened to whole ticks unless both ends are fixed.
     */
    Plot paintAxes(QPainter &painter, const QRectF &rect, detail::FrameSpec &spec, double x0, double x1, double dataY0,
                   double dataY1) const;
    /// The reference lines, over the data; their labels where they hide no line or marker of
    /// @p series (values mapped as @p plot maps them).
    void paintReferences(QPainter &painter, const Plot &plot, const std::vector<SeriesData> &series = {}) const;

    /// The x value under @p point in the last paint; none outside the plot or before a paint.
    std::optional<double> xAt(const QPointF &point) const;
    /// The sample of @p series nearest to @p point, within 10 px (of the two around the point's x
    /// in each series; NaN samples are gaps): kind Series, its index, x and y; no text.
    Hit nearestSample(const std::vector<SeriesData> &series, const QPointF &point) const;
    /// A tooltip's x line: the x axis' title (or "x") and the value ("time: 1:05").
    QString xText(double x) const;

private:
    AxisSpec m_xAxis{QStringLiteral("time"), ValueFormat::Seconds, {}, {}, false};
    AxisSpec m_yAxis;
    std::vector<ReferenceLine> m_references;

    // The geometry of the last paint, which hitTest() answers in.
    mutable detail::Frame m_frame;
    mutable Ticks m_xTicks, m_yTicks;
    mutable std::vector<QRectF> m_referenceLabels;
};

} // namespace cppl::charts
