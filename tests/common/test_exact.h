// SPDX-License-Identifier: MIT
// Bit equality for doubles that must be exact (perplexities, exact sums, merged NLL): QCOMPARE on
// doubles is qFuzzyCompare (12 significant digits) and would pass a wrong last bit.
#pragma once

#include <QByteArray>
#include <QTest>

#include <bit>
#include <cstdint>
#include <cstdio>

namespace cppl::test {

/// @brief Same bits: -0.0 differs from 0.0, a NaN equals the same NaN.
inline bool sameBits(double a, double b)
{
    return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// @brief Both values with 17 significant digits and their bits, for a failure message.
inline QByteArray describeBits(double actual, double expected)
{
    char text[160];
    std::snprintf(text, sizeof text, "actual %.17g (0x%016llx), expected %.17g (0x%016llx)", actual,
                  static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(actual)), expected,
                  static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(expected)));
    return text;
}

/// @brief Records a failure at @p file:@p line unless the bits are equal; false on failure.
inline bool compareBits(double actual, double expected, const char *actualExpr, const char *expectedExpr, const char *file, int line)
{
    if (sameBits(actual, expected))
        return true;
    const QByteArray message = QByteArray("not bit-identical: ") + actualExpr + " vs " + expectedExpr + "\n   " + describeBits(actual, expected);
    QTest::qFail(message.constData(), file, line);
    return false;
}

} // namespace cppl::test

/// QCOMPARE for doubles that must be bit-identical. Like QCOMPARE, returns from the test function.
#define CPPL_COMPARE_BITS(actual, expected)                                                                                                \
    do {                                                                                                                                   \
        if (!cppl::test::compareBits(static_cast<double>(actual), static_cast<double>(expected), #actual, #expected, __FILE__, __LINE__)) \
            return;                                                                                                                        \
    } while (false)
