// SPDX-License-Identifier: MIT
#pragma once

// Pixel helpers for the chart tests: they read real rendered images, in logical coordinates.

#include "charts/chart.h"
#include "charts/chart_export.h"

#include <QImage>
#include <QSet>
#include <QTest>

#include <cmath>

namespace cppl::charts::test {

/// The data rows of every rendering test: device pixel ratio 1 and 2, light and dark ("dpr", "dark").
inline void addScaleAndThemeRows()
{
    QTest::addColumn<qreal>("dpr");
    QTest::addColumn<bool>("dark");
    QTest::addRow("1x light") << qreal(1) << false;
    QTest::addRow("2x light") << qreal(2) << false;
    QTest::addRow("1x dark") << qreal(1) << true;
    QTest::addRow("2x dark") << qreal(2) << true;
}

inline QRgb pixelAt(const QImage &image, qreal x, qreal y)
{
    const qreal d = image.devicePixelRatio();
    const int px = std::clamp(static_cast<int>(x * d), 0, image.width() - 1);
    const int py = std::clamp(static_cast<int>(y * d), 0, image.height() - 1);
    return image.pixel(px, py);
}

inline int colorDistance(QRgb a, QRgb b)
{
    return std::abs(qRed(a) - qRed(b)) + std::abs(qGreen(a) - qGreen(b)) + std::abs(qBlue(a) - qBlue(b));
}

/// Distinct colours in the image (a blank or single-fill image has one or two).
inline int colorVariety(const QImage &image)
{
    QSet<QRgb> colors;
    for (int y = 0; y < image.height(); y += 2)
        for (int x = 0; x < image.width(); x += 2)
            colors.insert(image.pixel(x, y));
    return static_cast<int>(colors.size());
}

/// In the device-pixel column at logical x between logical y0 and y1, the logical y whose pixel is
/// closest to colour c, and that distance.
inline std::pair<qreal, int> closestRow(const QImage &image, qreal x, qreal y0, qreal y1, QRgb c)
{
    const qreal d = image.devicePixelRatio();
    const int px = static_cast<int>(x * d);
    int best = 1 << 30;
    qreal bestY = -1;
    for (int py = static_cast<int>(y0 * d); py <= static_cast<int>(y1 * d) && py < image.height(); ++py) {
        const int dist = colorDistance(image.pixel(px, py), c);
        if (dist < best) {
            best = dist;
            bestY = (py + 0.5) / d;
        }
    }
    return {bestY, best};
}

/// With CPPL_CHART_DUMP=dir set, saves the image there (to look at what a test saw).
inline void dump(const QImage &image, const QString &name)
{
    const QString dir = qEnvironmentVariable("CPPL_CHART_DUMP");
    if (!dir.isEmpty())
        image.save(dir + QLatin1Char('/') + name + QStringLiteral(".png"));
}

inline int grey(QRgb c)
{
    return qGray(c);
}

} // namespace cppl::charts::test
