// SPDX-License-Identifier: MIT
#include "charts/color_map.h"

#include <algorithm>

namespace cppl::charts {
namespace {

struct Lab
{
    double l, a, b;
};

double toLinear(double c)
{
    return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4);
}

double toGamma(double c)
{
    c = std::clamp(c, 0.0, 1.0);
    return c <= 0.0031308 ? c * 12.92 : 1.055 * std::pow(c, 1 / 2.4) - 0.055;
}

// OKLab (Björn Ottosson, 2020): the published matrices from linear sRGB.
Lab toLab(const QColor &c)
{
    const double r = toLinear(c.redF()), g = toLinear(c.greenF()), b = toLinear(c.blueF());
    const double l = std::cbrt(0.4122214708 * r + 0.5363325363 * g + 0.0514459929 * b);
    const double m = std::cbrt(0.2119034982 * r + 0.6806995451 * g + 0.1073969566 * b);
    const double s = std::cbrt(0.0883024619 * r + 0.2817188376 * g + 0.6299787005 * b);
    return {0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s,
            1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
            0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s};
}

QRgb fromLab(const Lab &lab)
{
    const double l = lab.l + 0.3963377774 * lab.a + 0.2158037573 * lab.b;
    const double m = lab.l - 0.1055613458 * lab.a - 0.0638541728 * lab.b;
    const double s = lab.l - 0.0894841775 * lab.a - 1.2914855480 * lab.b;
    const double l3 = l * l * l, m3 = m * m * m, s3 = s * s * s;
    const double r = 4.0767416621 * l3 - 3.3077115913 * m3 + 0.2309699292 * s3;
    const double g = -1.2684380046 * l3 + 2.6097574011 * m3 - 0.3413193965 * s3;
    const double b = -0.0041960863 * l3 - 0.7034186147 * m3 + 1.7076147010 * s3;
    auto byte = [](double v) { return static_cast<int>(std::lround(toGamma(v) * 255)); };
    return qRgb(byte(r), byte(g), byte(b));
}

} // namespace

ColorMap::ColorMap(const std::vector<QColor> &controlPoints)
{
    std::vector<Lab> labs;
    for (const QColor &c : controlPoints)
        labs.push_back(toLab(c));
    if (labs.size() < 2)
        labs = {Lab{0, 0, 0}, Lab{1, 0, 0}};
    const size_t segments = labs.size() - 1;
    for (int i = 0; i < kSize; ++i) {
        const double t = static_cast<double>(i) / (kSize - 1) * static_cast<double>(segments);
        const size_t k = std::min(static_cast<size_t>(t), segments - 1);
        const double f = t - static_cast<double>(k);
        const Lab &a = labs[k], &b = labs[k + 1];
        m_table[static_cast<size_t>(i)] = fromLab({a.l + (b.l - a.l) * f, a.a + (b.a - a.a) * f, a.b + (b.b - a.b) * f});
    }
}

const ColorMap &ColorMap::viridis()
{
    // Nine stops read off matplotlib's viridis at 0, 1/8, ..., 1 (its defining property, rising
    // lightness from violet through teal to yellow, is what matters; the table is our own).
    static const ColorMap map({QColor(0x44, 0x01, 0x54), QColor(0x47, 0x2c, 0x7a), QColor(0x3b, 0x51, 0x8b),
                               QColor(0x2c, 0x71, 0x8e), QColor(0x21, 0x90, 0x8d), QColor(0x27, 0xad, 0x81),
                               QColor(0x5c, 0xc8, 0x63), QColor(0xaa, 0xdc, 0x32), QColor(0xfd, 0xe7, 0x25)});
    return map;
}

double oklabLightness(const QColor &color)
{
    return toLab(color).l;
}

} // namespace cppl::charts
