// SPDX-License-Identifier: MIT
#include "charts/chart_theme.h"

#include <QPainter>
#include <QPainterPath>
#include <QPolygonF>

#include <array>
#include <cmath>

namespace cppl::charts {

Theme Theme::light()
{
    Theme t;
    t.isDark = false;
    t.background = QColor(0xff, 0xff, 0xff);
    t.plotBackground = QColor(0xfb, 0xfb, 0xfc);
    t.text = QColor(0x1f, 0x23, 0x28);
    t.mutedText = QColor(0x55, 0x5b, 0x63);
    t.axis = QColor(0x6e, 0x75, 0x7d);
    t.grid = QColor(0xe3, 0xe6, 0xea);
    t.band = QColor(0x00, 0x72, 0xb2, 60);
    t.median = QColor(0x00, 0x4f, 0x7c);
    t.reference = QColor(0x8a, 0x2b, 0x2b);
    t.noData = QColor(0xd8, 0xdb, 0xdf);
    t.alert = QColor(0xd5, 0x5e, 0x00);
    t.highlight = QColor(0x00, 0x00, 0x00);
    // Okabe-Ito, darkened where the original is too light on white (yellow, sky blue).
    t.seriesColors = {QColor(0x00, 0x72, 0xb2), QColor(0xd5, 0x5e, 0x00), QColor(0x00, 0x9e, 0x73),
                      QColor(0xcc, 0x79, 0xa7), QColor(0x1f, 0x23, 0x28), QColor(0xe6, 0x9f, 0x00),
                      QColor(0x3a, 0x9a, 0xd9), QColor(0x9a, 0x8c, 0x00)};
    return t;
}

Theme Theme::dark()
{
    Theme t;
    t.isDark = true;
    t.background = QColor(0x1e, 0x20, 0x24);
    t.plotBackground = QColor(0x24, 0x27, 0x2c);
    t.text = QColor(0xe8, 0xea, 0xed);
    t.mutedText = QColor(0xa9, 0xae, 0xb5);
    t.axis = QColor(0x8a, 0x90, 0x98);
    t.grid = QColor(0x3a, 0x3e, 0x45);
    t.band = QColor(0x56, 0xb4, 0xe9, 70);
    t.median = QColor(0x9f, 0xd6, 0xf5);
    t.reference = QColor(0xff, 0x8a, 0x80);
    t.noData = QColor(0x3a, 0x3d, 0x42);
    t.alert = QColor(0xd5, 0x5e, 0x00);
    t.highlight = QColor(0xff, 0xff, 0xff);
    // Okabe-Ito, lightened where the original is too dark on a dark background (blue, black).
    t.seriesColors = {QColor(0x56, 0xb4, 0xe9), QColor(0xe6, 0x9f, 0x00), QColor(0x2e, 0xc4, 0x96),
                      QColor(0xe0, 0x9a, 0xc4), QColor(0xf0, 0xf0, 0xf0), QColor(0xff, 0x7a, 0x2a),
                      QColor(0x4a, 0x8f, 0xe0), QColor(0xf0, 0xe4, 0x42)};
    return t;
}

Theme Theme::fromPalette(const QPalette &palette)
{
    const QColor window = palette.color(QPalette::Window);
    Theme t = window.lightnessF() < 0.5 ? dark() : light();
    t.background = window;
    t.plotBackground = palette.color(QPalette::Base);
    t.text = palette.color(QPalette::WindowText);
    // Muted text halfway between text and window keeps contrast in both schemes.
    const QColor fg = t.text;
    t.mutedText = QColor::fromRgbF((fg.redF() * 3 + window.redF()) / 4, (fg.greenF() * 3 + window.greenF()) / 4,
                                   (fg.blueF() * 3 + window.blueF()) / 4);
    return t;
}

SeriesStyle Theme::seriesStyle(int index) const
{
    static constexpr std::array<Qt::PenStyle, 4> kDashes{Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine};
    static constexpr std::array<MarkerShape, 7> kMarkers{MarkerShape::Circle,      MarkerShape::Square,
                                                         MarkerShape::TriangleUp,  MarkerShape::Diamond,
                                                         MarkerShape::TriangleDown, MarkerShape::Cross,
                                                         MarkerShape::Plus};
    const int i = std::max(index, 0);
    SeriesStyle s;
    s.color = seriesColors.empty() ? text : seriesColors[static_cast<size_t>(i) % seriesColors.size()];
    s.dash = kDashes[static_cast<size_t>(i) % kDashes.size()];
    s.marker = kMarkers[static_cast<size_t>(i) % kMarkers.size()];
    return s;
}

void drawMarker(QPainter &painter, const QPointF &c, MarkerShape shape, qreal size, const QColor &color,
                const QColor &outline)
{
    const qreal r = size / 2;
    painter.save();
    painter.setRenderHint(QPainter::Antialiasing, true);
    QPen pen(outline, 1.0);
    pen.setJoinStyle(Qt::MiterJoin);
    painter.setPen(pen);
    painter.setBrush(color);
    switch (shape) {
    case MarkerShape::Circle:
        painter.drawEllipse(c, r, r);
        break;
    case MarkerShape::Square:
        painter.drawRect(QRectF(c.x() - r * 0.85, c.y() - r * 0.85, r * 1.7, r * 1.7));
        break;
    case MarkerShape::TriangleUp:
        painter.drawPolygon(QPolygonF{{c.x(), c.y() - r * 1.1}, {c.x() + r, c.y() + r * 0.8}, {c.x() - r, c.y() + r * 0.8}});
        break;
    case MarkerShape::TriangleDown:
        painter.drawPolygon(QPolygonF{{c.x(), c.y() + r * 1.1}, {c.x() + r, c.y() - r * 0.8}, {c.x() - r, c.y() - r * 0.8}});
        break;
    case MarkerShape::Diamond:
        painter.drawPolygon(QPolygonF{{c.x(), c.y() - r * 1.2}, {c.x() + r, c.y()}, {c.x(), c.y() + r * 1.2}, {c.x() - r, c.y()}});
        break;
    case MarkerShape::Cross:
    case MarkerShape::Plus: {
        // Strokes only: drawn twice, wide in the outline colour then narrow in the series colour.
        const qreal a = shape == MarkerShape::Cross ? r * 0.85 : r;
        QLineF l1 = shape == MarkerShape::Cross ? QLineF(c.x() - a, c.y() - a, c.x() + a, c.y() + a)
                                                : QLineF(c.x() - a, c.y(), c.x() + a, c.y());
        QLineF l2 = shape == MarkerShape::Cross ? QLineF(c.x() - a, c.y() + a, c.x() + a, c.y() - a)
                                                : QLineF(c.x(), c.y() - a, c.x(), c.y() + a);
        painter.setPen(QPen(outline, 3.6, Qt::SolidLine, Qt::FlatCap));
        painter.drawLine(l1);
        painter.drawLine(l2);
        painter.setPen(QPen(color, 2.0, Qt::SolidLine, Qt::FlatCap));
        painter.drawLine(l1);
        painter.drawLine(l2);
        break;
    }
    }
    painter.restore();
}

} // namespace cppl::charts
