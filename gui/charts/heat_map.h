// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart.h"
#include "charts/chart_frame.h"
#include "charts/color_map.h"

#include <QImage>
#include <QStringList>

#include <climits>
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
 * a colour bar, thinned row labels, an optional mark per row in a strip beside the plot, one
 * highlighted row and a cell pick API. Row 0 is at the top. NaN = no data: such cells are hatched
 * in the theme's no-data grey, outside the colour scale, and the legend says what they are.
 *
 * Live data is cheap: resizeData() keeps the cells and room for more columns, setValue() writes
 * in place, and a paint colours again only the columns written since (setColumnPositions() moves
 * columns without colouring anything). The whole image is coloured again when the value range,
 * the look or the number of pixel rows changes.
 */
class HeatMap : public Chart
{
    Q_OBJECT

public:
    explicit HeatMap(QObject *parent = nullptr);

    /// values is row-major, rows * columns long (shorter is padded with NaN).
    void setData(int rows, int columns, std::vector<float> values);
    /// rows x columns, keeping the cells that stay (new ones NaN). Room for more columns is kept,
    /// so a live map that gains a column at a time copies nothing.
    void resizeData(int rows, int columns);
    /// Writes in place without emitting changed(): call notifyChanged() after a batch. The next
    /// paint colours again only the columns written (and those right of them).
    void setValue(int row, int column, float value);
    int rows() const { return m_rows; }
    int columns() const { return m_columns; }
    float value(int row, int column) const;

    /// x of the first column's left edge and of the last column's right edge (e.g. seconds).
    void setColumnRange(double x0, double x1);
    /// The x of each column (ascending), e.g. the times of irregular samples: a column reaches
    /// halfway to its neighbours, the first and last to the axis' ends [x.front(), x.back()], so
    /// round values get evenly spaced ticks however irregular the columns are. Each column keeps
    /// its own texel then. Empty: columns evenly spaced over setColumnRange().
    void setColumnPositions(std::vector<double> x);
    void setXAxis(const AxisSpec &axis);
    /// Colour bar: title (with unit), format, and optionally a fixed min/max.
    void setValueAxis(const AxisSpec &axis);
    void setRowAxisTitle(const QString &title);
    /// The row axis' title while several rows share a pixel row, %1 = how many ("rank (each row:
    /// the slowest of %1)"); empty: the plain title.
    void setBinnedRowAxisTitle(const QString &title);
    /// Row names; empty = row numbers.
    void setRowLabels(QStringList labels);
    void setAggregation(Aggregation aggregation);
    /// A bin (rows sharing a pixel row) with a cell without data shows no data rather than the
    /// aggregate of the others: a row of ranks reads "no data" until every one of them has some.
    void setPartialBinsAsNoData(bool on);
    void setColorMap(const ColorMap &map);
    /// The legend's entry for cells without data, listed while any cell is (default "no data").
    void setNoDataLabel(const QString &label);
    /// A symbol per row (a null QChar: none) in a strip right of the plot, in the theme's alert
    /// colour: ✗ failed, ‖ stalled, ⊘ lost. Not only a colour. A non-empty list reserves the strip.
    void setRowMarks(std::vector<QChar> marks);
    const std::vector<QChar> &rowMarks() const { return m_marks; }
    /// Outlined across the plot and labelled "▶ label" (other labels give way); -1: none.
    void setHighlightedRow(int row);
    int highlightedRow() const { return m_highlighted; }

    /// The colour value v gets with the current value range (what the cells are painted with).
    QRgb colorFor(double value) const;
    /// The value range the colours span: the value axis's min/max, else the data's.
    std::pair<double, double> valueRange() const;
    /// Whether some cell has no data (NaN).
    bool hasCellsWithoutData() const { return m_nanCells > 0; }

    /// The cells as painted into @p imageRows pixel rows: a texel per column (columns are merged
    /// only beyond @p maxColumns, and never with column positions), transparent where a bin has
    /// no data. Kept up to date as described above; the copy is for tests.
    QImage cellImage(int imageRows, int maxColumns = INT_MAX) const;
    /// How many times every cell was coloured (the other paints coloured the columns written since).
    int fullBuilds() const { return m_fullBuilds; }

    /// Cell under a point of the last paint (kind Cell with row, column, x and value as y; the
    /// rows painted as one pixel row with it in rowFirst..rowEnd).
    Hit hitTest(const QPointF &point) const override;
    bool hasData() const override { return m_rows > 0 && m_columns > 0; }

protected:
    void paintChart(QPainter &painter, const QRectF &rect) const override;
    /// Row @p row's name: its label, else its number.
    QString rowLabel(int row) const;

private:
    /// How the texels of the image are coloured: changes colour every cell again.
    void touchLook();
    void countCellsWithoutData();
    qreal colorBarWidth(const QFontMetricsF &fm, const QFontMetricsF &tickFm) const;
    detail::FrameSpec frameSpec(qreal reserveRight) const;
    detail::TickFunction rowTicks() const;
    void ensureImage(int imageRows, int maxColumns) const;
    void colourColumns(int first, int end, bool merged) const;
    /// Left edge of column c (c = columns(): the right end) when columns have positions.
    double columnEdge(const QRectF &plot, int c, double dpr) const;
    int columnAt(double x) const;
    void paintCells(QPainter &painter, const QRectF &plot) const;
    void paintMarks(QPainter &painter, const QRectF &plot) const;
    void paintHighlight(QPainter &painter, const QRectF &plot) const;
    void paintColorBar(QPainter &painter, const QRectF &bar) const;

    int m_rows = 0, m_columns = 0;
    int m_stride = 0; // values per row in m_values (room for more columns)
    std::vector<float> m_values;
    std::vector<int> m_nanPerColumn; // cells without data, per column
    std::int64_t m_nanCells = 0;
    double m_x0 = 0, m_x1 = 1;
    std::vector<double> m_positions;
    AxisSpec m_xAxis{QStringLiteral("time"), ValueFormat::Seconds, {}, {}, false};
    AxisSpec m_valueAxis;
    QString m_rowTitle = QStringLiteral("rank");
    QString m_binnedRowTitle;
    QStringList m_rowLabels;
    Aggregation m_aggregation = Aggregation::Max;
    bool m_partialBinsAsNoData = false;
    const ColorMap *m_map = &ColorMap::viridis();
    ColorMap m_ownMap = ColorMap::viridis();
    QString m_noDataLabel = QStringLiteral("no data");
    std::vector<QChar> m_marks;
    int m_highlighted = -1;
    std::uint64_t m_look = 0;

    // The image of the last paint: valid columns, what it was coloured with, what changed since.
    mutable QImage m_image;
    mutable int m_imageRows = 0, m_imageColumns = 0;
    mutable bool m_imageMerged = false;
    mutable std::uint64_t m_imageLook = ~std::uint64_t{0}, m_imageRevision = ~std::uint64_t{0};
    mutable std::pair<double, double> m_imageRange{0, 0};
    mutable int m_dirtyFrom = 0; // columns from here on were written since the image was coloured
    mutable std::vector<int> m_noDataTexels; // per texel column
    mutable int m_fullBuilds = 0;
    mutable std::uint64_t m_rangeRevision = ~std::uint64_t{0};
    mutable std::pair<double, double> m_range{0, 1};
    mutable detail::Frame m_frame;
    mutable Ticks m_xTicks;
    mutable int m_paintedRows = 0; // pixel rows of the last paint (hits report their bin)
};

} // namespace cppl::charts
