// SPDX-License-Identifier: MIT
#pragma once

#include <QColor>
#include <QFont>
#include <QPalette>

#include <optional>
#include <vector>

class QPainter;
class QPointF;

namespace cppl::charts {

/// Marker shapes: with dash patterns they keep series apart when colour is not seen (greyscale
/// print, colour blindness).
enum class MarkerShape { Circle, Square, TriangleUp, Diamond, TriangleDown, Cross, Plus };

/// How one series looks: colour, dash pattern and marker differ from its neighbours all at once.
struct SeriesStyle
{
    QColor color;
    Qt::PenStyle dash = Qt::SolidLine;
    MarkerShape marker = MarkerShape::Circle;
};

/**
 * Colours and sizes of every chart. Built from a QPalette (the widget's, so charts follow the
 * desktop's light or dark scheme) or taken as light()/dark() for reports. Sizes are in
 * device-independent pixels; QPainter applies the device pixel ratio.
 */
struct Theme
{
    bool isDark = false;
    QColor background;     // whole chart
    QColor plotBackground; // inside the axes
    QColor text;
    QColor mutedText;      // tick labels, secondary labels
    QColor axis;
    QColor grid;
    QColor band;       // p5..p95 fill (alpha included)
    QColor median;     // band median line
    QColor reference;  // reference lines (threshold, ideal)
    QColor noData;     // heat map cells without a value
    QColor alert;      // marks that want attention (a heat map row's failed or stalled rank)
    QColor highlight;  // hover outline
    // Okabe-Ito based: distinguishable with the common colour vision deficiencies, and ordered so
    // that neighbours also differ in lightness.
    std::vector<QColor> seriesColors;
    /// Font of the chart; unset = the paint device's (widget font, application font for images).
    std::optional<QFont> font;
    qreal lineWidth = 1.0; // series lines, device-independent px
    qreal markerSize = 7.0;

    static Theme light();
    static Theme dark();
    /// Dark when the palette's window colour is dark; background and text come from the palette.
    static Theme fromPalette(const QPalette &palette);

    /// Style of series i: colour cycles through seriesColors, dashes through 4 patterns and markers
    /// through 7 shapes, so consecutive series differ in all three.
    SeriesStyle seriesStyle(int index) const;
};

/// Draws a marker centred on `center`, `size` device-independent px across, outlined in the
/// theme background so that overlapping markers stay apart.
void drawMarker(QPainter &painter, const QPointF &center, MarkerShape shape, qreal size, const QColor &color,
                const QColor &outline);

} // namespace cppl::charts
