// SPDX-License-Identifier: MIT
#pragma once

#include <QString>

#include <optional>
#include <vector>

namespace cppl::charts {

/// How tick labels and tooltip values are written.
enum class ValueFormat {
    Plain,   // 12.5, 0.003
    Si,      // 950, 12.5k, 3.2M, 1.1G (tok/s)
    Percent, // value is a fraction: 0.25 -> 25%
    Seconds, // 45 s, 2:30, 1:02:00 (elapsed time)
    // Logarithmic axes: the values plotted are logarithms, the labels the quantities.
    Log2Count, // value is log2 of a count (ranks): ticks at whole powers of two, "1, 2, 4 … 1024"
    Log10Si,   // value is log10 of a quantity (tok/s): ticks at 1, 2, 5 x 10^n or at decades, "10k, 20k, 50k, 100k"
};

/// One axis: title (with unit, e.g. "tok/s", "PPL"), label format and an optional fixed range.
struct AxisSpec
{
    QString title;
    ValueFormat format = ValueFormat::Plain;
    std::optional<double> min; // unset = from the data
    std::optional<double> max;
    bool includeZero = false; // bars and rates read wrongly when their axis does not start at 0
};

struct Ticks
{
    std::vector<double> values;
    double step = 1;
    double min = 0; // axis range, widened to whole steps
    double max = 1;
};

/**
 * "Nice" ticks over [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten (Percent: 1, 2 or 5; for Seconds: 1, 2, 5,
 * 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1 h...; Log2Count: whole steps of 1, 2, 5...; Log10Si: log10 of 1, 2 and
 * 5 x 10^n while they fit, else of every decade or every few), at most maxCount of them. With expand the range
 * is widened to whole steps (y axes); otherwise it stays [lo, hi] (time axes). A degenerate range
 * (lo == hi, NaN) is widened around its value so that a constant series still gets an axis.
 */
Ticks niceTicks(double lo, double hi, int maxCount, ValueFormat format = ValueFormat::Plain, bool expand = true);

/// The smallest stride of 1, 2, 5, 10, 20, 50... items such that stride * pitchPx >= minSpacingPx:
/// label every stride-th row or bar and labels never overlap (1024 ranks in 600 px: every 50th).
int labelStride(double pitchPx, double minSpacingPx);

/// A tick label: as many decimals as the step needs, no more ("2.5k", "25%", "1:30"). axisExtent
/// (the largest |value| on the axis) keeps one style per Seconds axis: "45 s" or "0:45".
QString formatTick(double value, double step, ValueFormat format, double axisExtent = 0);

/// A value for tooltips and labels, three significant digits ("12.3k", "7.25", "1:02.5"); shares with one decimal ("12.5%").
QString formatValue(double value, ValueFormat format);

} // namespace cppl::charts
