// SPDX-License-Identifier: MIT
#include "charts/chart_axis.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

namespace cppl::charts {
namespace {

// Decimals needed so that consecutive multiples of step print differently.
int decimalsFor(double step)
{
    if (!(step > 0) || !std::isfinite(step))
        return 0;
    int d = 0;
    double s = step;
    while (d < 9 && std::abs(s - std::round(s)) > 1e-6 * std::max(1.0, std::abs(s))) {
        s *= 10;
        ++d;
    }
    return d;
}

QString number(double v, int decimals)
{
    if (std::abs(v) < 1e-12)
        v = 0; // no "-0"
    return QString::number(v, 'f', decimals);
}

QString clock(double seconds, int decimals)
{
    const bool negative = seconds < 0;
    double s = std::abs(seconds);
    const auto h = static_cast<long long>(s / 3600);
    s -= static_cast<double>(h) * 3600;
    const auto m = static_cast<long long>(s / 60);
    s -= static_cast<double>(m) * 60;
    QString sec = QString::number(s, 'f', decimals);
    if (s < 10)
        sec.prepend(QLatin1Char('0'));
    QString out = h > 0 ? QString::number(h) + QLatin1Char(':') + QString::number(m).rightJustified(2, QLatin1Char('0'))
                        : QString::number(m);
    out += QLatin1Char(':') + sec;
    return negative ? QLatin1Char('-') + out : out;
}

// Log10Si: ticks at log10 of 1, 2 and 5 x 10^n when that many fit, else at every decade (or
// every 2nd, 5th...); uneven in log space, as a log axis' ticks are. step: the spacing of decades.
Ticks logDecadeTicks(double lo, double hi, int maxCount, bool expand)
{
    Ticks t;
    const double d0 = std::floor(lo + 1e-9), d1 = std::ceil(hi - 1e-9);
    std::vector<double> fine;
    for (double d = d0; d <= d1 + 1e-9; d += 1)
        for (double m : {1.0, 2.0, 5.0})
            fine.push_back(d + std::log10(m));
    // Keep the 1-2-5 ticks that bracket [lo, hi] (expand) or lie inside it.
    auto first = std::upper_bound(fine.begin(), fine.end(), lo + 1e-9);
    if (expand && first != fine.begin())
        --first;
    auto last = std::lower_bound(fine.begin(), fine.end(), hi - 1e-9);
    if (!expand && last != fine.begin() && (last == fine.end() || *last > hi + 1e-9))
        --last;
    if (last == fine.end())
        --last;
    std::vector<double> values(first, last + 1);
    if (values.size() >= 2 && int(values.size()) <= maxCount) {
        t.values = values;
        t.step = 1;
    } else {
        double stride = 1;
        for (double s : {1.0, 2.0, 5.0, 10.0, 20.0}) {
            stride = s;
            if ((d1 - d0) / s + 1 <= maxCount)
                break;
        }
        const double a = std::floor(lo / stride + 1e-9) * stride, b = std::ceil(hi / stride - 1e-9) * stride;
        for (double v = expand ? a : std::ceil(lo / stride - 1e-9) * stride; v <= (expand ? b : hi) + 1e-9; v += stride)
            t.values.push_back(v);
        t.step = stride;
    }
    if (expand && !t.values.empty()) {
        t.min = std::min(lo, t.values.front());
        t.max = std::max(hi, t.values.back());
    } else {
        t.min = lo;
        t.max = hi;
    }
    return t;
}

} // namespace

Ticks niceTicks(double lo, double hi, int maxCount, ValueFormat format, bool expand)
{
    Ticks t;
    if (!std::isfinite(lo) || !std::isfinite(hi)) {
        lo = 0;
        hi = 1;
    }
    if (lo > hi)
        std::swap(lo, hi);
    if (hi - lo <= 1e-12 * std::max(1.0, std::abs(hi))) {
        // A log axis of one value: a step either side (half a power of two, a decade's third).
        const double pad = format == ValueFormat::Log2Count || format == ValueFormat::Log10Si ? 0.5
                           : lo == 0                                                      ? 1.0
                                                                                          : std::abs(lo) * 0.1;
        lo -= pad;
        hi += pad;
    }
    maxCount = std::max(maxCount, 2);
    if (format == ValueFormat::Log10Si)
        return logDecadeTicks(lo, hi, maxCount, expand);
    const double rough = (hi - lo) / (maxCount - 1);
    double step = 0;
    if (format == ValueFormat::Seconds && rough >= 1) {
        static constexpr std::array<double, 16> kTime{1,   2,   5,    10,   15,   30,   60,    120,
                                                      300, 600, 900,  1800, 3600, 7200, 10800, 21600};
        step = kTime.back();
        for (double c : kTime) {
            if (c >= rough) {
                step = c;
                break;
            }
        }
        while (step < rough)
            step *= 2;
    } else {
        const double mag = std::pow(10.0, std::floor(std::log10(rough)));
        // Shares step by 1, 2 or 5 points (of ten): 2.5 would print "2.5%, 5.0%, 7.5%", or, where
        // a label is rounded, "3%, 5%, 8%".
        static constexpr std::array<double, 5> kNice{1, 2, 2.5, 5, 10};
        static constexpr std::array<double, 4> kNicePercent{1, 2, 5, 10};
        const auto candidates = format == ValueFormat::Percent || format == ValueFormat::Log2Count ? std::span<const double>(kNicePercent)
                                                                                                   : std::span<const double>(kNice);
        for (double c : candidates) {
            if (c * mag >= rough * (1 - 1e-9)) {
                step = c * mag;
                break;
            }
        }
        if (format == ValueFormat::Log2Count)
            step = std::max(1.0, step); // whole powers of two only: 2^0.5 ranks is no count
    }
    t.step = step;
    double first = std::ceil(lo / step - 1e-9) * step;
    double last = std::floor(hi / step + 1e-9) * step;
    if (expand) {
        first = std::floor(lo / step + 1e-9) * step;
        last = std::ceil(hi / step - 1e-9) * step;
        t.min = first;
        t.max = last;
    } else {
        t.min = lo;
        t.max = hi;
    }
    for (double v = first; v <= last + step * 1e-6; v += step)
        t.values.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    return t;
}

int labelStride(double pitchPx, double minSpacingPx)
{
    if (!(pitchPx > 0))
        return 1;
    for (int mag = 1; mag <= 100000000; mag *= 10)
        for (int m : {1, 2, 5})
            if (pitchPx * m * mag >= minSpacingPx)
                return m * mag;
    return 1000000000;
}

namespace {

// 2^v or 10^v written for a reader: whole when it is, else three significant digits.
QString powerText(double power)
{
    if (std::abs(power - std::round(power)) < 1e-6 * std::max(1.0, power) && power < 1e15)
        return QString::number(static_cast<long long>(std::llround(power)));
    return QString::number(power, 'g', 3);
}

// 10^v with an SI suffix and at most three significant digits, no trailing zeros: "10k", "2.5M".
QString siPower(double power)
{
    static constexpr std::array<std::pair<double, char>, 4> kSuffix{
        std::pair{1e12, 'T'}, std::pair{1e9, 'G'}, std::pair{1e6, 'M'}, std::pair{1e3, 'k'}};
    for (auto [scale, suffix] : kSuffix)
        if (std::abs(power) >= scale * (1 - 1e-9))
            return QString::number(power / scale, 'g', 3) + QLatin1Char(suffix);
    return QString::number(power, 'g', 3);
}

} // namespace

QString formatTick(double value, double step, ValueFormat format, double axisExtent)
{
    switch (format) {
    case ValueFormat::Log2Count:
        return powerText(std::exp2(value));
    case ValueFormat::Log10Si:
        return siPower(std::pow(10.0, value));
    case ValueFormat::Plain:
        return number(value, decimalsFor(step));
    case ValueFormat::Percent:
        return number(value * 100, decimalsFor(step * 100)) + QLatin1Char('%');
    case ValueFormat::Seconds:
        // One style per axis: "N s" while the whole axis stays under a minute, m:ss beyond.
        if (axisExtent < 60 && std::abs(value) < 60)
            return number(value, decimalsFor(step)) + QStringLiteral(" s");
        return clock(value, step < 1 ? decimalsFor(step) : 0);
    case ValueFormat::Si: {
        // The suffix follows the step, not the value, so that every label of an axis has the same
        // one ("0.5k, 1.0k, 1.5k" rather than "500, 1.0k, 1.5k").
        if (std::abs(value) < step * 1e-9)
            return QStringLiteral("0");
        static constexpr std::array<std::pair<double, char>, 4> kSuffix{
            std::pair{1e12, 'T'}, std::pair{1e9, 'G'}, std::pair{1e6, 'M'}, std::pair{1e3, 'k'}};
        for (auto [scale, suffix] : kSuffix) {
            if (step >= scale / 2)
                return number(value / scale, decimalsFor(step / scale)) + QLatin1Char(suffix);
        }
        return number(value, decimalsFor(step));
    }
    }
    return number(value, 2);
}

QString formatValue(double value, ValueFormat format)
{
    if (!std::isfinite(value))
        return QStringLiteral("–");
    auto sig3 = [](double v) {
        const double a = std::abs(v);
        const int d = a >= 100 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : a == 0 ? 0 : std::min(9, 2 - static_cast<int>(std::floor(std::log10(a))));
        return number(v, d);
    };
    switch (format) {
    case ValueFormat::Log2Count:
        return powerText(std::exp2(value));
    case ValueFormat::Log10Si:
        return siPower(std::pow(10.0, value));
    case ValueFormat::Plain:
        return sig3(value);
    case ValueFormat::Percent: {
        // At most one decimal: "3.0%", "21.0%", "0.4%" (more digits than that are noise in a share).
        const double p = value * 100;
        return number(p, std::abs(p) >= 100 ? 0 : 1) + QLatin1Char('%');
    }
    case ValueFormat::Seconds:
        return std::abs(value) < 60 ? sig3(value) + QStringLiteral(" s") : clock(value, 1);
    case ValueFormat::Si: {
        const double a = std::abs(value);
        if (a >= 1e9)
            return sig3(value / 1e9) + QLatin1Char('G');
        if (a >= 1e6)
            return sig3(value / 1e6) + QLatin1Char('M');
        if (a >= 1e3)
            return sig3(value / 1e3) + QLatin1Char('k');
        return sig3(value);
    }
    }
    return sig3(value);
}

} // namespace cppl::charts
