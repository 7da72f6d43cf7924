// SPDX-License-Identifier: MIT
#pragma once

#include <QColor>
#include <QRgb>

#include <array>
#include <cmath>
#include <vector>

namespace cppl::charts {

/**
 * A sequential colour map as a 256-entry table, interpolated in OKLab between control points so
 * that equal steps in value look like equal steps in colour. viridis() is dark blue-violet ->
 * green -> yellow: lightness rises monotonically, so it reads in greyscale and with colour vision
 * deficiencies.
 */
class ColorMap
{
public:
    static constexpr int kSize = 256;

    /// Control colours at evenly spaced positions 0..1 (at least two).
    explicit ColorMap(const std::vector<QColor> &controlPoints);

    static const ColorMap &viridis();

    /// t in [0, 1], clamped; NaN is the caller's "no data".
    QRgb map(double t) const
    {
        const double c = std::clamp(t, 0.0, 1.0);
        return m_table[static_cast<size_t>(c * (kSize - 1) + 0.5)];
    }
    QColor color(double t) const { return QColor::fromRgb(map(t)); }
    const std::array<QRgb, kSize> &table() const { return m_table; }

private:
    std::array<QRgb, kSize> m_table{};
};

/// Perceptual lightness L of OKLab (0 black .. 1 white), used by tests and by text-contrast choices.
double oklabLightness(const QColor &color);

} // namespace cppl::charts
