// SPDX-License-Identifier: MIT
// The exact accumulator: bit-identical under any order, partition and merge tree, and equal to an
// independent 128-bit reference of the grid-rounded values.
#include "cppl/exact_sum.h"

#include "test_exact.h"

#include <QTest>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

using cppl::ExactSum;
__extension__ typedef __int128 i128;
Q_DECLARE_METATYPE(std::vector<double>)

namespace {

// Independent grid rounding: ldexp is exact, nearbyint rounds half to even in the default mode.
i128 referenceGrid(double v)
{
    return static_cast<i128>(std::nearbyint(std::ldexp(v, 64)));
}

i128 referenceSum(const std::vector<double> &values)
{
    i128 s = 0;
    for (double v : values)
        s += referenceGrid(v);
    return s;
}

// The exact value held by an accumulator, in grid units (valid while it fits in 127 bits).
i128 exactValue(const ExactSum &s)
{
    const auto limbs = s.limbs();
    i128 v = 0;
    for (int i = ExactSum::kDigits - 1; i >= 0; --i)
        v = v * (i128{1} << 32) + limbs[i];
    return v;
}

ExactSum sumOf(const std::vector<double> &values)
{
    ExactSum s;
    for (double v : values)
        s.add(v);
    return s;
}

std::vector<double> randomValues(std::mt19937_64 &rng, std::size_t n)
{
    std::vector<double> v(n);
    std::uniform_int_distribution<int> kind(0, 9);
    std::uniform_real_distribution<double> nll(0.0, 1000.0);
    for (auto &x : v) {
        switch (kind(rng)) {
        case 0:
            x = 0.0;
            break;
        case 1:
            x = std::numeric_limits<double>::denorm_min() * static_cast<double>(rng() % 1000);
            break;
        case 2:
            x = std::nextafter(1000.0, 0.0) - nll(rng) * 1e-9;
            break;
        case 3:
            x = std::ldexp(nll(rng), -static_cast<int>(rng() % 80)); // around and below the grid
            break;
        case 4:
            x = -nll(rng); // negative values must cancel exactly too
            break;
        default:
            x = nll(rng);
        }
    }
    return v;
}

// Sums values split into `shards` random contiguous pieces, merged by a random binary tree.
ExactSum treeSum(std::mt19937_64 &rng, std::vector<double> values, std::size_t shards)
{
    std::shuffle(values.begin(), values.end(), rng);
    std::vector<std::size_t> cuts{0, values.size()};
    for (std::size_t i = 1; i < shards; ++i)
        cuts.push_back(rng() % (values.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<ExactSum> parts;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
        ExactSum s;
        for (std::size_t k = cuts[i]; k < cuts[i + 1]; ++k)
            s.add(values[k]);
        parts.push_back(s);
    }
    while (parts.size() > 1) {
        const std::size_t a = rng() % parts.size();
        std::size_t b = rng() % (parts.size() - 1);
        if (b >= a)
            ++b;
        parts[a].merge(parts[b]);
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(b));
    }
    return parts.front();
}

} // namespace

class TestExactSum : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void matchesReference_data()
    {
        QTest::addColumn<std::vector<double>>("values");
        QTest::addRow("empty") << std::vector<double>{};
        QTest::addRow("zeros and negative zero") << std::vector<double>{0.0, -0.0, 0.0};
        QTest::addRow("denormals round to zero") << std::vector<double>{std::numeric_limits<double>::denorm_min(), 1e-310, -1e-320};
        QTest::addRow("half grid step ties to even") << std::vector<double>{0x1p-65, 0x1p-65, 0x3p-65, 0x1p-64};
        QTest::addRow("near 1000") << std::vector<double>{1000.0, std::nextafter(1000.0, 0.0), 999.9999999999, 0.5};
        QTest::addRow("cancellation") << std::vector<double>{1e15, 0.1, -1e15, 0.2, -0.1, -0.2};
        QTest::addRow("largest accepted") << std::vector<double>{std::nextafter(0x1p64, 0.0), -std::nextafter(0x1p64, 0.0), 3.0};
        QTest::addRow("non-representable thirds") << std::vector<double>{1.0 / 3, 2.0 / 3, -1.0 / 3, 1.0 / 7, 0x1p-60 / 3};
    }
    void matchesReference()
    {
        QFETCH(std::vector<double>, values);
        const ExactSum s = sumOf(values);
        QVERIFY(exactValue(s) == referenceSum(values));
        QCOMPARE(s.rejected(), 0);
    }

    void perValueRoundingWithinBound()
    {
        std::mt19937_64 rng(7);
        for (double v : randomValues(rng, 20000)) {
            const double scaled = std::ldexp(v, 64);
            const double err = std::fabs(std::nearbyint(scaled) - scaled); // grid units, exact here
            QVERIFY2(err <= 0.5, qPrintable(QString::number(v, 'g', 17))); // 0.5 grid = 2^-65 <= 2^-60
            ExactSum s;
            s.add(v);
            QVERIFY(exactValue(s) == referenceGrid(v));
        }
    }

    void bitIdenticalUnderShardingAndMergeTrees_data()
    {
        QTest::addColumn<int>("shards");
        for (int shards : {1, 2, 3, 7, 16, 64, 255, 1024})
            QTest::addRow("%d shards", shards) << shards;
    }
    void bitIdenticalUnderShardingAndMergeTrees()
    {
        QFETCH(int, shards);
        std::mt19937_64 rng(1000 + static_cast<unsigned>(shards));
        const auto values = randomValues(rng, 5000);
        const ExactSum reference = sumOf(values);
        QVERIFY(exactValue(reference) == referenceSum(values));
        for (int trial = 0; trial < 5; ++trial) {
            const ExactSum s = treeSum(rng, values, static_cast<std::size_t>(shards));
            QVERIFY(s == reference);
            QCOMPARE(s.serialize(), reference.serialize());
            CPPL_COMPARE_BITS(s.toDouble(), reference.toDouble());
        }
    }

    void limbAllReduceEqualsMerge()
    {
        // An int64 SUM all-reduce of limbs() across ranks, then fromReducedLimbs(): same bits as merging.
        std::mt19937_64 rng(3);
        const auto values = randomValues(rng, 4000);
        ExactSum merged;
        ExactSum::Limbs summed{};
        for (int rank = 0; rank < 37; ++rank) {
            ExactSum part;
            for (std::size_t i = static_cast<std::size_t>(rank); i < values.size(); i += 37)
                part.add(values[i]);
            merged.merge(part);
            const auto l = part.limbs();
            for (int w = 0; w < ExactSum::kReduceWords; ++w)
                summed[w] += l[w];
        }
        QVERIFY(ExactSum::fromReducedLimbs(summed) == merged);
        QVERIFY(merged == sumOf(values));
    }

    void limbsSurviveTwoToTheTwentyRanks()
    {
        // Worst case per rank: every fractional/integer digit at its maximum. 2^20 ranks of it must
        // not overflow an int64 limb sum and must equal 2^20 doublings by merge.
        ExactSum worst;
        worst.add(std::nextafter(0x1p64, 0.0));
        worst.add(std::nextafter(1.0, 0.0));
        ExactSum::Limbs summed = worst.limbs();
        for (auto &w : summed)
            w *= std::int64_t{1} << 20; // what an elementwise SUM over 2^20 identical ranks yields
        ExactSum doubled = worst;
        for (int i = 0; i < 20; ++i)
            doubled.merge(ExactSum(doubled));
        QVERIFY(ExactSum::fromReducedLimbs(summed) == doubled);
        CPPL_COMPARE_BITS(doubled.toDouble(), std::ldexp(worst.toDouble(), 20));
    }

    void exactForTrillionsOfTokens()
    {
        // 2^40 (> 10^12) tokens, each with NLL just below 1000, built by doubling: exact, no overflow.
        const double v = std::nextafter(1000.0, 0.0);
        ExactSum s;
        s.add(v);
        ExactSum sq;
        sq.addSquare(v);
        for (int i = 0; i < 40; ++i) {
            s.merge(ExactSum(s));
            sq.merge(ExactSum(sq));
        }
        QVERIFY(exactValue(s) == referenceGrid(v) * (i128{1} << 40));
        CPPL_COMPARE_BITS(s.toDouble(), std::ldexp(v, 40)); // v * 2^40 is exactly representable
        CPPL_COMPARE_BITS(sq.toDouble(), std::ldexp(v * v, 40) + std::ldexp(std::fma(v, v, -v * v), 40));
    }

    void toDoubleIsCorrectlyRounded()
    {
        std::mt19937_64 rng(11);
        for (int trial = 0; trial < 20000; ++trial) {
            // Random exact values up to ~2^100 grid units, built from several additions.
            ExactSum s;
            const int terms = 1 + static_cast<int>(rng() % 4);
            for (int t = 0; t < terms; ++t) {
                const double mag = std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 90) - 100);
                s.add((rng() & 1) ? mag : -mag);
            }
            const i128 exact = exactValue(s); // in units of 2^-64
            const double d = s.toDouble();
            // Compare with both neighbours, exactly, in grid units (d * 2^64 is an integer whenever
            // |d| >= 2^-11; smaller results are exact conversions of < 2^53 units).
            const auto units = [](double x) { return static_cast<i128>(std::ldexp(x, 64)); };
            const i128 here = units(d);
            QVERIFY2(std::ldexp(d, 64) == std::trunc(std::ldexp(d, 64)), "result not on the grid");
            const i128 errHere = exact > here ? exact - here : here - exact;
            for (double n : {std::nextafter(d, -INFINITY), std::nextafter(d, INFINITY)}) {
                const i128 there = units(n);
                const i128 errThere = exact > there ? exact - there : there - exact;
                QVERIFY(errHere <= errThere);
                if (errHere == errThere) { // tie: the even mantissa wins
                    int e = 0;
                    const double m = std::frexp(d, &e);
                    QVERIFY(static_cast<std::int64_t>(std::ldexp(m, 53)) % 2 == 0);
                }
            }
        }
    }

    void toDoubleRoundsTiesAndStickyBitsAtEveryScale()
    {
        // Beyond the random values above (and beyond the 128-bit reference, up to 2^125): a value
        // exactly halfway between two doubles goes to the even one, and one grid unit (2^-64, in
        // the lowest digit) above or below the halfway point decides, with the mantissa in every
        // position across the digits. A single add takes |v| < 2^64, so larger sums are doubled
        // by merging, which scales every bit exactly.
        for (int e = -10; e <= 125; ++e)
            for (std::int64_t k : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, (std::int64_t{1} << 52) - 1}) {
                const int e0 = std::min(e, 40), doublings = e - e0;
                const double lower = std::ldexp(1.0 + std::ldexp(static_cast<double>(k), -52), e0);
                const double upper = std::nextafter(lower, INFINITY);
                const double even = k % 2 == 0 ? lower : upper;
                for (double sign : {1.0, -1.0}) {
                    auto scaled = [&](double grid) {
                        ExactSum s;
                        s.add(sign * lower);
                        s.add(sign * std::ldexp(1.0, e0 - 53));
                        if (grid != 0)
                            s.add(sign * grid);
                        for (int i = 0; i < doublings; ++i)
                            s.merge(ExactSum(s));
                        return s.toDouble();
                    };
                    CPPL_COMPARE_BITS(scaled(0), sign * std::ldexp(even, doublings));
                    CPPL_COMPARE_BITS(scaled(0x1p-64), sign * std::ldexp(upper, doublings));
                    CPPL_COMPARE_BITS(scaled(-0x1p-64), sign * std::ldexp(lower, doublings));
                }
            }
    }

    void rejectsNonFiniteAndOutOfRange()
    {
        ExactSum s;
        s.add(1.5);
        s.add(std::numeric_limits<double>::quiet_NaN());
        s.add(INFINITY);
        s.add(-INFINITY);
        s.add(0x1p64);
        s.addSquare(0x1p32);
        QCOMPARE(s.rejected(), 5);
        CPPL_COMPARE_BITS(s.toDouble(), 1.5);
        ExactSum clean;
        clean.add(1.5);
        QVERIFY(!(s == clean)); // a rejected value never compares equal to a clean sum
        QVERIFY(s.compareValue(clean) == 0);
    }

    void serialisationRoundTrips()
    {
        std::mt19937_64 rng(5);
        const ExactSum s = sumOf(randomValues(rng, 1000));
        const auto text = s.toString();
        QCOMPARE(text.size(), std::size_t{4 + 2 * ExactSum::kSerializedSize});
        const auto back = ExactSum::fromString(text);
        QVERIFY(back.has_value());
        QVERIFY(*back == s);
        const auto bytes = s.serialize();
        QVERIFY(*ExactSum::deserialize(bytes) == s);
        // Endianness is fixed: the first byte is the lowest byte of the lowest digit.
        QCOMPARE(bytes[0], static_cast<std::uint8_t>(s.limbs()[0] & 0xff));
    }

    void rejectsMalformedEncodings_data()
    {
        QTest::addColumn<QString>("text");
        const std::string good = ExactSum().toString();
        QTest::addRow("empty") << QString();
        QTest::addRow("wrong prefix") << QString::fromStdString("xs2:" + good.substr(4));
        QTest::addRow("too short") << QString::fromStdString(good.substr(0, good.size() - 2));
        QTest::addRow("upper-case hex") << QString::fromStdString("xs1:" + std::string(112, 'F'));
        QTest::addRow("non-normalised digit") << QString::fromStdString("xs1:" + std::string(8, '0') + "01000000" + std::string(96, '0'));
        QTest::addRow("negative rejected count") << QString::fromStdString("xs1:" + std::string(96, '0') + "ffffffffffffffff");
        // Beyond what any accumulator reaches: decoding them would let a merge overflow an int64.
        const std::string low(80, '0');
        QTest::addRow("sum of 2^127") << QString::fromStdString("xs1:" + low + "0000008000000000" + std::string(16, '0'));
        QTest::addRow("sum below -2^127") << QString::fromStdString("xs1:" + low + "ffffff7fffffffff" + std::string(16, '0'));
        QTest::addRow("top digit INT64_MAX") << QString::fromStdString("xs1:" + low + "ffffffffffffff7f" + std::string(16, '0'));
        QTest::addRow("rejected count 2^33") << QString::fromStdString("xs1:" + std::string(96, '0') + "0000000002000000");
    }
    void decodesTheLargestSumsAndMergesThem()
    {
        const std::string low(80, '0');
        const auto top = ExactSum::fromString("xs1:" + low + "ffffff7f00000000" + "ffffffff01000000"); // 2^127 - 2^96, 2^33 - 1
        const auto bottom = ExactSum::fromString("xs1:" + low + "00000080ffffffff" + std::string(16, '0')); // -2^127
        QVERIFY(top.has_value());
        QVERIFY(bottom.has_value());
        QCOMPARE(top->rejected(), (std::int64_t{1} << 33) - 1);
        QCOMPARE(top->toDouble(), std::ldexp(1.0, 127) - std::ldexp(1.0, 96));
        QCOMPARE(bottom->toDouble(), -std::ldexp(1.0, 127));
        ExactSum sum = *top;
        sum.merge(*bottom); // (2^127 - 2^96) + (-2^127)
        QCOMPARE(sum.toDouble(), -std::ldexp(1.0, 96));
        QCOMPARE(sum.rejected(), (std::int64_t{1} << 33) - 1);
    }
    void rejectsMalformedEncodings()
    {
        QFETCH(QString, text);
        QVERIFY(!ExactSum::fromString(text.toStdString()).has_value());
    }

    void orderingFollowsValue()
    {
        ExactSum a;
        a.add(-2.5);
        ExactSum b;
        b.add(1e-12);
        ExactSum c;
        c.add(3.0);
        QVERIFY(a.compareValue(b) < 0);
        QVERIFY(c.compareValue(b) > 0);
        CPPL_COMPARE_BITS(a.toDouble(), -2.5);
        ExactSum zero;
        zero.add(4.0);
        zero.add(-4.0);
        QVERIFY(zero.isZero());
        CPPL_COMPARE_BITS(zero.toDouble(), 0.0);
    }
};

QTEST_APPLESS_MAIN(TestExactSum)
#include "tst_exact_sum.moc"
