// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"
#include "charts/chart_frame.h"
#include "charts/color_map.h"

#include <QImage>
#include <QStringList>

#include <cstdint>

namespace cppl::charts {

/// How cells are combined when there are more rows or columns than device pixels.
enum class Aggregation {
    Max,  // the highest value survives (e.g. comm share: a bad rank must not vanish)
    Min,  // the lowest survives (e.g. tok/s: a stalled rank must not vanish)
    Mean,
};

/**
 * rows x columns of values (e.g. 1024 ranks x time) through a perceptual colour map, painted as a
 * QImage at the device's resolution (aggregated per device pixel when the matrix is larger), with
 * a colour bar, thinned row labels and a cell pick API. Row 0 is at the top. NaN = no data.
 */
class HeatMap : public Chart
{
    Q_OBJECT

public:
    explicit HeatMap(QObject *parent = nullptr);

    /// values is row-major, rows * columns long (shorter is padded with NaN).
    void setData(int rows, int columns, std::vector<float> values);
    /// Writes in place without emitting changed(): call notifyChanged() after a batch.
    void setValue(int row, int column, float value);
    int rows() const { return m_rows; }
    int columns() const { return m_columns; }
    float value(int row, int column) const;

    /// x of the first column's left edge and of the last column's right edge (e.g. seconds).
    void setColumnRange(double x0, double x1);
    void setXAxis(const AxisSpec &axis);
    /// Colour bar: title (with unit), format, and optionally a fixed min/max.
    void setValueAxis(const AxisSpec &axis);
    void setRowAxisTitle(const QString &title);
    /// Row names; empty = row numbers.
    void setRowLabels(QStringList labels);
    void setAggregation(Aggregation aggregation);
    void setColorMap(const ColorMap &map);

    /// The colour value v gets with the current value range (what the cells are painted with).
    QRgb colorFor(double value) const;
    /// The value range the colours span: the value axis's min/max, else the data's.
    std::pair<double, double> valueRange() const;

    /// Cell under a point of the last paint (kind Cell with row, column, x and value as y).
    Hit hitTest(const QPointF &point) const override;
    QRectF lastPlotRect() const { return m_frame.plot; }

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;

private:
    QImage buildImage(int imageRows, int imageColumns) const;
    QString rowLabel(int row) const;

    int m_rows = 0, m_columns = 0;
    std::vector<float> m_values;
    double m_x0 = 0, m_x1 = 1;
    AxisSpec m_xAxis{QStringLiteral("time"), ValueFormat::Seconds, {}, {}, false};
    AxisSpec m_valueAxis;
    QString m_rowTitle = QStringLiteral("rank");
    QStringList m_rowLabels;
    Aggregation m_aggregation = Aggregation::Max;
    const ColorMap *m_map = &ColorMap::viridis();
    ColorMap m_ownMap = ColorMap::viridis();

    mutable QImage m_image;
    mutable std::uint64_t m_imageRevision = ~std::uint64_t{0};
    mutable std::uint64_t m_rangeRevision = ~std::uint64_t{0};
    mutable std::pair<double, double> m_range{0, 1};
    mutable detail::Frame m_frame;
};

} // namespace cppl::charts
