// SPDX-License-Identifier: MIT
#pragma once

#include "charts/chart_axis.h"
#include "charts/chart_theme.h"

#include <QObject>
#include <QPolygonF>
#include <QRectF>
#include <QString>
#include <QStringList>

#include <cstdint>
#include <limits>
#include <vector>

class QPainter;

namespace cppl::charts {

namespace detail {
struct Frame;
struct FrameSpec;
} // namespace detail

/// One named series of (x, y) points; x ascending (seconds for time charts).
struct SeriesData
{
    QString name;
    std::vector<double> x;
    std::vector<double> y;
};

/// A point of a decimated series, in data units (float: screen precision is all it needs).
struct DecimatedPoint
{
    float x;
    float y;
};

/**
 * Min/max decimation: keeps, for every pixel column of [x0, x1] split into `columns`, the first,
 * lowest, highest and last point in time order, so a one-sample spike survives however many
 * points share its column. NaN y breaks the line: a break is a point with NaN y. One point on each
 * side outside [x0, x1] is kept so that lines run to the plot's edges. x must be ascending.
 */
void decimateMinMax(const double *x, const double *y, size_t n, double x0, double x1, int columns,
                    std::vector<DecimatedPoint> &out);

/**
 * Density of many polylines (decimated points, NaN = break) on a columns x rows pixel grid:
 * counts[column * rows + row] = how many series pass through that pixel, each series counted once
 * per pixel. x -> (x - x0) * sx, y -> (y0 - y) * sy + 0 (row 0 at the top, y0 = top value).
 */
void accumulateDensity(const std::vector<DecimatedPoint> &points, double x0, double sx, double yTop, double sy,
                       int columns, int rows, std::vector<std::int32_t> &diff);

/**
 * Drops the points of a polyline that the line through its neighbours already passes within
 * about @p tolerance of (sleeve fitting, one pass): every dropped point lies within 1.5 x
 * tolerance of the simplified line, the first and last points are kept, and a spike stays (the
 * line must keep moving away from the last kept point to absorb a point). For calm lines drawn
 * with a wide or dashed pen, whose stroking costs per vertex: a smooth 1000-point band line
 * becomes a few dozen segments at a quarter device pixel.
 */
void simplifyPolyline(const QPointF *points, qsizetype count, qreal tolerance, QPolygonF &out);

/// Polyline length in px of decimated points (how noisy a line is: dashes are unreadable on a
/// line that zigzags a column's height in every column).
double polylineLength(const std::vector<DecimatedPoint> &points, double sx, double sy);

/// A horizontal line across the plot (a threshold, the ideal rate) with a label at its right end.
struct ReferenceLine
{
    double y = 0;
    QString label;
    QColor color; // invalid = the theme's reference colour
    Qt::PenStyle style = Qt::DashLine;
};

/// What is under a point of the last painted chart. kind None = nothing (outside the plot).
struct Hit
{
    enum class Kind { None, Series, Band, Cell, Bar };
    Kind kind = Kind::None;
    int series = -1; // Series: index in the chart's series (BandChart: highlighted series index)
    int row = -1;    // Cell: heat map row
    int rowFirst = -1, rowEnd = -1; // Cell: the rows painted as one pixel row with it (a bin when rows outnumber pixels)
    int column = -1; // Cell: heat map column; Bar: first category of the bar
    int columnEnd = -1; // Bar: one past the last category (aggregated bars cover several)
    int shown = -1;     // Bar: the category whose values the bar shows (BarBinning::Largest), else -1
    double x = std::numeric_limits<double>::quiet_NaN();
    double y = std::numeric_limits<double>::quiet_NaN();
    QString text; // tooltip text, several lines
    bool isValid() const { return kind != Kind::None; }
};

/**
 * Base of every chart: a model (data + look) that paints itself on any QPainter - a widget, a
 * QImage, QSvgGenerator or QPdfWriter - so exported reports show the charts the user saw.
 * Setters emit changed(); ChartWidget coalesces those into at most one repaint per 40 ms. hitTest()
 * answers in the coordinates of the last paint (the widget always paints before it is hovered).
 * GUI thread only.
 */
class Chart : public QObject
{
    Q_OBJECT

public:
    explicit Chart(QObject *parent = nullptr);
    ~Chart() override;

    void setTitle(const QString &title);
    const QString &title() const { return m_title; }
    void setTheme(const Theme &theme);
    const Theme &theme() const { return m_theme; }

    /// What the plot says while the chart has nothing to draw (hasData() is false), wrapped
    /// inside the plot: "no data yet", or why there is none. Empty (the default): nothing.
    void setEmptyText(const QString &text);
    const QString &emptyText() const { return m_emptyText; }
    /// Whether the chart has anything to draw; the plot shows emptyText() while it has not.
    virtual bool hasData() const { return true; }

    /// Paints the whole chart (background, title, legend, axes, data) into rect.
    void paint(QPainter &painter, const QRectF &rect) const;
    virtual Hit hitTest(const QPointF &point) const = 0;
    /// Scrolls by steps (mouse wheel notches; positive = forward); false when the chart does not scroll.
    virtual bool scrollBy(int steps);

    /// For data fed in place (e.g. many appendPoint calls): one changed() after the batch.
    void notifyChanged();

    /// The last paint, in its coordinates: the plot (inside the axes), the legend's labels as
    /// listed (the legend lists what is drawn), the x axis' tick labels, and where the empty text
    /// went (empty when there was data).
    QRectF lastPlotRect() const { return m_lastPlot; }
    const QStringList &lastLegendLabels() const { return m_lastLegend; }
    const QStringList &lastXTickLabels() const { return m_lastXTicks; }
    QRectF lastEmptyTextRect() const { return m_lastEmptyText; }

Q_SIGNALS:
    void changed();

protected:
    virtual void paintChart(QPainter &painter, const QRectF &rect) const = 0;

    /// Title (this chart's), legend, axes and grid of @p spec (detail::paintFrame), remembered for
    /// the last-paint accessors above. Every chart lays out its frame through here.
    detail::Frame paintFrame(QPainter &painter, const QRectF &rect, detail::FrameSpec &spec) const;

    /// A setter's change of data or look: bumps revision() and emits changed().
    void touch();
    /// Data changed in place (appendPoint, setValue): the paint caches see it at once, the
    /// repaint waits for the caller's notifyChanged() after the batch.
    void bumpRevision() { ++m_revision; }
    /// What a paint cache compares with the revision it was built at.
    std::uint64_t revision() const { return m_revision; }

private:
    void paintEmptyText(QPainter &painter) const;

    QString m_title;
    QString m_emptyText;
    std::uint64_t m_revision = 0;
    Theme m_theme = Theme::light();
    mutable QRectF m_lastPlot;
    mutable QStringList m_lastLegend;
    mutable QStringList m_lastXTicks;
    mutable QRectF m_lastEmptyText;
};

} // namespace cppl::charts
