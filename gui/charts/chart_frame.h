// SPDX-License-Identifier: MIT
#pragma once

// Internal to the chart module: the layout and painting every chart shares (title, legend, axes,
// grid, reference lines). Not installed API.

#include "charts/chart.h"

#include <QFontMetricsF>
#include <QStringList>

#include <functional>
#include <optional>

namespace cppl::charts::detail {

/// A tick at pos along its axis, 0 = left/bottom edge of the plot, 1 = right/top.
struct Tick
{
    double pos = 0;
    QString label;
};

struct LegendEntry
{
    enum class Swatch { Line, Fill, Band };
    QString label;
    Swatch swatch = Swatch::Line;
    QColor color;
    Qt::PenStyle dash = Qt::SolidLine;
    std::optional<MarkerShape> marker;
    Qt::BrushStyle pattern = Qt::NoBrush; // Fill: a hatch over the fill colour
};

using TickFunction = std::function<std::vector<Tick>(double lengthPx, const QFontMetricsF &fm)>;

struct FrameSpec
{
    QString title;
    std::vector<LegendEntry> legend;
    int legendOverflow = 0; // entries not listed: shown as "+N more"
    QString xTitle;
    QString yTitle;
    TickFunction xTicks;
    TickFunction yTicks;
    qreal reserveRight = 0; // room right of the plot (heat map colour bar)
    bool xGrid = true;
    bool yGrid = true;
};

struct Frame
{
    QRectF plot;
    QRectF rightArea; // the reserved room right of the plot
    QFont tickFont;
    QString yTitle;   // the y axis's title as drawn (elided only when even its room below the plot is short)
    std::vector<Tick> xTicks, yTicks; // as laid out for the plot's size
    double mapX(double t) const { return plot.left() + t * plot.width(); }
    double mapY(double t) const { return plot.bottom() - t * plot.height(); }
};

/// Where the legend's entries go (flowing in rows of the area's width, at most three rows) and,
/// when not all fit, the "+N more" that follows the last one listed. A lone entry left over is
/// listed instead of "+1 more", which would take about its room (a fourth row at most).
struct LegendLayout
{
    std::vector<QRectF> entries; // the first entries.size() of the spec's legend
    QRectF more;
    QString moreText; // empty: every entry is listed
    qreal height = 0;
};
LegendLayout legendLayout(const QFontMetricsF &fm, const QRectF &area, const Theme &theme, const FrameSpec &spec);

/// The title's lines in @p width: one when it fits, else wrapped at spaces onto two, the second
/// elided if still too long (a narrow chart elided "Global running PPL (exact merge) ± 1 standard…").
QStringList titleLines(const QFontMetricsF &fm, const QString &title, qreal width);

/// Lays out and paints everything but the data; returns the plot rectangle the data goes into.
Frame paintFrame(QPainter &painter, const QRectF &rect, const Theme &theme, const FrameSpec &spec);
/// The layout paintFrame() would paint with @p font, painting nothing: for a chart whose frame
/// depends on the plot's size (a heat map's row axis says how many rows share a pixel row). The y
/// title's text does not move the plot (it is turned along the left edge).
Frame layoutFrame(const QFont &font, const QRectF &rect, const Theme &theme, const FrameSpec &spec);

/// Numeric ticks for a linear axis from lo to hi; returns positions 0..1 and sets the range the
/// ticks use (widened to whole steps when expand). A horizontal axis that is not widened gets two
/// ticks or more while their labels fit apart (a narrow plot's 6 minutes read "5:00" alone).
TickFunction numericTicks(double lo, double hi, ValueFormat format, bool expand, bool vertical, Ticks *out);

/// Whether a label's box would hide data (a line or a marker of a series).
using CoversData = std::function<bool(const QRectF &box)>;

/// Horizontal reference lines with labels painted over the data: at the line's right end, above
/// it (below when it hugs the plot's top), or where @p covers says no data is under the label:
/// right below, left above, left below; right above when every place covers some. Returns the
/// labels' boxes.
std::vector<QRectF> paintReferenceLines(QPainter &painter, const Frame &frame, const Theme &theme,
                                        const std::vector<ReferenceLine> &lines, double y0, double y1, ValueFormat format,
                                        const CoversData &covers = {});

/// A legend swatch (line with dash and marker, or a filled box with its hatch) in box.
void paintSwatch(QPainter &painter, const QRectF &box, const LegendEntry &entry, const Theme &theme);

/// Pen for data lines: width in device-independent px, round joins, the dash pattern.
QPen seriesPen(const QColor &color, qreal width, Qt::PenStyle dash);

/// f at factor times its size (bold when asked).
QFont scaledFont(QFont f, qreal factor, bool bold = false);

/// The font of tick labels: the chart font at 90 %.
QFont tickFont(const QFont &base);

/// Polyline of decimated points (NaN y = break) mapped with x -> left + (x - x0) * sx, y -> bottom - (y - y0) * sy.
void paintDecimated(QPainter &painter, const std::vector<DecimatedPoint> &points, const QRectF &plot, double x0,
                    double sx, double y0, double sy);

/// drawPolyline in chunks (see the .cpp for why).
void drawPolylineChunked(QPainter &painter, const QPolygonF &poly);

/// Text colour with contrast on a fill (value labels inside bars).
QColor textOn(const QColor &fill);

} // namespace cppl::charts::detail
