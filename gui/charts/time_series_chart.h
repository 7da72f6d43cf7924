// SPDX-License-Identifier: MIT
#pragma once

#include "charts/xy_chart.h"

#include <QImage>

#include <cstdint>

namespace cppl::charts {

/**
 * Many series of (seconds, value) over time: nice axes with units, title, legend, reference
 * lines (XYChart's). Series differ by colour, dash pattern and marker. Beyond styledSeriesLimit
 * series (16) single lines are unreadable: the chart shades each pixel by how many series pass through it
 * (a spike of one series stays visible) and draws only the highlighted series as a line. Painting decimates every
 * series to min/max per device pixel column and caches the result until the data, range or
 * size change.
 */
class TimeSeriesChart : public XYChart
{
    Q_OBJECT

public:
    explicit TimeSeriesChart(QObject *parent = nullptr);

    /// Replaces all series.
    void setSeries(std::vector<SeriesData> series);
    int addSeries(const QString &name);
    /// Appends without emitting changed(): call notifyChanged() once after a batch.
    void appendPoint(int index, double x, double y);
    void clearSeries();
    int seriesCount() const { return static_cast<int>(m_series.size()); }
    const SeriesData &series(int index) const { return m_series.at(static_cast<size_t>(index)); }

    /// Drawn last and thicker (the rank selected elsewhere); -1 = none.
    void setHighlightedSeries(int index);
    int highlightedSeries() const { return m_highlighted; }
    /// Above this many series, lines lose markers and dashes (they would be noise) and the legend
    /// lists the first few only.
    void setStyledSeriesLimit(int limit);

    Hit hitTest(const QPointF &point) const override;
    /// A finite value in some series (a chart of NaN gaps alone has nothing to draw).
    bool hasData() const override;

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;

private:
    std::pair<double, double> dataXRange() const;
    /// Every series decimated to @p columns over [x0, x1], and their y range (cached).
    void decimate(double x0, double x1, int columns) const;
    std::vector<detail::LegendEntry> legendEntries() const;
    void paintSeries(QPainter &painter, const Plot &axes, size_t index, const SeriesStyle &style, qreal width) const;
    void paintMarkers(QPainter &painter, const Plot &axes, size_t index, const SeriesStyle &style) const;
    void paintDensity(QPainter &painter, const QRectF &plot, double x0, double x1, double ya, double yb) const;

    std::vector<SeriesData> m_series;
    int m_highlighted = -1;
    int m_styledLimit = 16;

    // Cache of the last paint: decimated series.
    mutable std::vector<std::vector<DecimatedPoint>> m_decimated;
    mutable std::uint64_t m_cacheRevision = ~std::uint64_t{0};
    mutable double m_cacheX0 = 0, m_cacheX1 = 0;
    mutable double m_cacheY0 = 0, m_cacheY1 = 1;
    mutable int m_cacheColumns = 0;
    mutable QImage m_density; // dense mode: series per device pixel, shaded
    mutable std::uint64_t m_densityRevision = ~std::uint64_t{0};
    mutable std::pair<double, double> m_densityRange, m_densityX;
    mutable QRgb m_densityColor = 0;
};

} // namespace cppl::charts
