// SPDX-License-Identifier: MIT
// Quantized weights' storage and quantizers (agent/lib/quant): float16 / bfloat16 rounding against
// the hardware and against its definition, each quantizer against a float64 transcription of its
// definition (scales, rounding, codes, dequantized values), edge cases (all-zero groups, outliers,
// a last partial group, one group per row), refusals, packing round trips and bits per weight.
#include "quant/half.h"
#include "quant/quantize.h"
#include "quant/quantized_matrix.h"

#include "cppl/errors.h"

#include <QTest>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPPL_TEST_X86 1
#else
#define CPPL_TEST_X86 0
#endif

using namespace cppl::agent::quant;

namespace {

#if CPPL_TEST_X86
// F16C's conversions, the hardware the portable ones must agree with.
__attribute__((target("f16c"))) float hardwareHalfToFloat(std::uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) std::uint16_t hardwareFloatToHalf(float f) { return static_cast<std::uint16_t>(_cvtss_sh(f, 0)); }
#endif

// The float16 nearest to x (ties to even), found in double: an implementation independent of half.h.
double nearestHalf(double x)
{
    const double a = std::fabs(x);
    if (a >= 65520.0)
        return std::copysign(INFINITY, x);
    const int e = a < std::ldexp(1.0, -14) ? -14 : std::ilogb(a);
    const double ulp = std::ldexp(1.0, e - 10);
    const double n = a / ulp; // exact: a has at most 24 significant bits
    return std::copysign(std::nearbyint(n) * ulp, x);
}

// The definition's float32 quotient, through double (innocuous double rounding: 53 >= 2 * 24 + 2).
float div32(double a, double b) { return static_cast<float>(a / b); }

struct Reference
{
    std::vector<int> codes, zeros;
    std::vector<double> scales;
};

// quantize.h's definitions, transcribed in double.
Reference referenceRow(QuantScheme scheme, std::int64_t group, const std::vector<float> &w)
{
    Reference r;
    const auto k = static_cast<std::int64_t>(w.size());
    for (std::int64_t first = 0; first < k; first += group) {
        const std::int64_t n = std::min(group, k - first);
        double lo = 0, hi = 0, amax = 0, extreme = 0;
        for (std::int64_t i = first; i < first + n; ++i) {
            const double v = w[static_cast<std::size_t>(i)];
            lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
            if (std::fabs(v) > std::fabs(extreme))
                extreme = v;
        }
        // (hi - lo is a float32 subtraction in the definition)
        const double s = scheme == QuantScheme::Int8      ? nearestHalf(div32(amax, 127))
                         : scheme == QuantScheme::Int4Sym ? nearestHalf(div32(extreme, -8))
                                                          : nearestHalf(div32(static_cast<float>(hi - lo), 15));
        const int minCode = scheme == QuantScheme::Int8 ? -127 : scheme == QuantScheme::Int4Sym ? -8 : 0;
        const int maxCode = scheme == QuantScheme::Int8 ? 127 : scheme == QuantScheme::Int4Sym ? 7 : 15;
        const int offset = scheme == QuantScheme::Int8 ? 128 : scheme == QuantScheme::Int4Sym ? 8 : 0;
        int z = 0;
        if (s != 0 && scheme == QuantScheme::Int4Asym)
            z = static_cast<int>(std::clamp(std::nearbyint(static_cast<double>(div32(-lo, s))), 0.0, 15.0));
        r.scales.push_back(s == 0 ? 0.0 : s);
        r.zeros.push_back(z);
        for (std::int64_t i = first; i < first + n; ++i) {
            if (s == 0) {
                r.codes.push_back(offset);
                continue;
            }
            const double q = std::nearbyint(static_cast<double>(div32(w[static_cast<std::size_t>(i)], s)));
            r.codes.push_back(static_cast<int>(std::clamp(q + z, static_cast<double>(minCode), static_cast<double>(maxCode))) + offset);
        }
    }
    return r;
}

std::vector<float> pattern(const QString &kind, std::int64_t k, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0F, 0.05F);
    std::vector<float> w(static_cast<std::size_t>(k));
    for (float &x : w)
        x = d(rng);
    if (kind == QStringLiteral("zeros"))
        std::fill(w.begin(), w.begin() + std::min<std::int64_t>(k, 40), 0.0F); // the first group(s) all zero
    if (kind == QStringLiteral("outlier"))
        w[static_cast<std::size_t>(k / 3)] = 40.0F;
    if (kind == QStringLiteral("negative outlier"))
        w[static_cast<std::size_t>(k / 2)] = -7.5F;
    if (kind == QStringLiteral("tie"))
        w[0] = 0.5F, w[1] = -0.5F; // int4-sym: the first of equal magnitudes sets the sign
    if (kind == QStringLiteral("constant"))
        std::fill(w.begin(), w.end(), 0.25F);
    if (kind == QStringLiteral("tiny"))
        for (float &x : w)
            x *= 1e-6F; // scales in float16's subnormal range
    return w;
}

} // namespace

class TestQuantFormats : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void halfToFloatIsExact()
    {
        for (std::uint32_t h = 0; h < 65536; ++h) {
            const float f = halfToFloat(static_cast<std::uint16_t>(h));
            const int e = static_cast<int>((h >> 10) & 0x1F), m = static_cast<int>(h & 0x3FF);
            const double sign = (h & 0x8000) ? -1.0 : 1.0;
            if (e == 31) {
                QVERIFY(m == 0 ? std::isinf(f) && std::signbit(f) == (sign < 0) : std::isnan(f));
                continue;
            }
            const double want = sign * (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
            QVERIFY2(static_cast<double>(f) == want && std::signbit(f) == (sign < 0), qPrintable(QString::number(h, 16)));
#if CPPL_TEST_X86
            if (__builtin_cpu_supports("f16c"))
                QCOMPARE(std::bit_cast<std::uint32_t>(f), std::bit_cast<std::uint32_t>(hardwareHalfToFloat(static_cast<std::uint16_t>(h))));
#endif
        }
    }

    void floatToHalfRoundsToNearestEven()
    {
        // Every midpoint between neighbouring halves (exact in float32) goes to the even one, the floats
        // just beside it to the nearer one; the halves themselves come back unchanged.
        for (std::uint32_t h = 0; h < 0x7C00; ++h) {
            const double lo = halfToFloat(static_cast<std::uint16_t>(h)), hi = h + 1 == 0x7C00 ? 65536.0 : halfToFloat(static_cast<std::uint16_t>(h + 1));
            QCOMPARE(floatToHalf(static_cast<float>(lo)), static_cast<std::uint16_t>(h));
            QCOMPARE(floatToHalf(static_cast<float>(-lo)), static_cast<std::uint16_t>(h | 0x8000));
            const auto mid = static_cast<float>((lo + hi) / 2);
            const std::uint32_t even = (h & 1) ? h + 1 : h;
            QCOMPARE(floatToHalf(mid), static_cast<std::uint16_t>(even == 0x7C00 ? 0x7C00 : even));
            QCOMPARE(floatToHalf(std::nextafter(mid, 0.0F)), static_cast<std::uint16_t>(h));
            QCOMPARE(floatToHalf(std::nextafter(mid, INFINITY)), static_cast<std::uint16_t>(h + 1));
        }
        QCOMPARE(floatToHalf(65519.99F), std::uint16_t{0x7BFF});
        QCOMPARE(floatToHalf(65520.0F), std::uint16_t{0x7C00});
        QCOMPARE(floatToHalf(-INFINITY), std::uint16_t{0xFC00});
        QVERIFY((floatToHalf(NAN) & 0x7FFF) > 0x7C00);
        QCOMPARE(floatToHalf(1e-30F), std::uint16_t{0});
        QCOMPARE(floatToHalf(-1e-30F), std::uint16_t{0x8000});
#if CPPL_TEST_X86
        if (__builtin_cpu_supports("f16c")) { // F16C's vcvtps2ph agrees on random bit patterns too
            std::mt19937 rng(7);
            for (int i = 0; i < 2000000; ++i) {
                const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
                if (std::isnan(f))
                    continue;
                QCOMPARE(floatToHalf(f), hardwareFloatToHalf(f));
            }
        }
#endif
    }

    void floatToBf16RoundsToNearestEven()
    {
        for (std::uint32_t b = 0; b < 0x7F80; ++b) {
            const float lo = bf16ToFloat(static_cast<std::uint16_t>(b)), hi = bf16ToFloat(static_cast<std::uint16_t>(b + 1));
            const float mid = std::bit_cast<float>((b << 16) | 0x8000U); // halfway, exactly
            if ((b & 0x7F80) == 0) { // subnormal bfloat16s and their midpoints: read as zero
                QCOMPARE(floatToBf16(mid), std::uint16_t{0});
                QCOMPARE(floatToBf16(-mid), std::uint16_t{0x8000});
                continue;
            }
            QCOMPARE(floatToBf16(lo), static_cast<std::uint16_t>(b));
            QCOMPARE(floatToBf16(mid), static_cast<std::uint16_t>((b & 1) ? b + 1 : b));
            QCOMPARE(floatToBf16(std::nextafter(mid, 0.0F)), static_cast<std::uint16_t>(b));
            QCOMPARE(floatToBf16(std::nextafter(mid, hi)), static_cast<std::uint16_t>(b + 1));
        }
        QCOMPARE(floatToBf16(FLT_MAX), std::uint16_t{0x7F80}); // rounds up to infinity
        QVERIFY((floatToBf16(NAN) & 0x7FFF) > 0x7F80);
    }

    void quantizerMatchesFloat64Definition_data()
    {
        QTest::addColumn<QString>("scheme");
        QTest::addColumn<qint64>("k");
        QTest::addColumn<qint64>("group");
        QTest::addColumn<QString>("kind");
        for (const char *s : {"int8", "int4-sym", "int4-asym"}) {
            const QString scheme = QString::fromLatin1(s);
            QTest::addRow("%s, group 32, normal weights", s) << scheme << qint64(256) << qint64(32) << QStringLiteral("normal");
            QTest::addRow("%s, last group partial (70 of 32)", s) << scheme << qint64(70) << qint64(32) << QStringLiteral("normal");
            QTest::addRow("%s, all-zero groups", s) << scheme << qint64(96) << qint64(32) << QStringLiteral("zeros");
            QTest::addRow("%s, an outlier", s) << scheme << qint64(128) << qint64(64) << QStringLiteral("outlier");
            QTest::addRow("%s, a negative outlier", s) << scheme << qint64(128) << qint64(32) << QStringLiteral("negative outlier");
            QTest::addRow("%s, one group per row", s) << scheme << qint64(150) << qint64(1000) << QStringLiteral("normal");
            QTest::addRow("%s, equal magnitudes", s) << scheme << qint64(32) << qint64(32) << QStringLiteral("tie");
            QTest::addRow("%s, a constant row", s) << scheme << qint64(40) << qint64(32) << QStringLiteral("constant");
            QTest::addRow("%s, tiny weights", s) << scheme << qint64(64) << qint64(32) << QStringLiteral("tiny");
            QTest::addRow("%s, one weight", s) << scheme << qint64(1) << qint64(32) << QStringLiteral("normal");
        }
    }
    void quantizerMatchesFloat64Definition()
    {
        QFETCH(QString, scheme);
        QFETCH(qint64, k);
        QFETCH(qint64, group);
        QFETCH(QString, kind);
        const QuantScheme s = parseScheme(scheme.toStdString());
        const std::vector<float> w = pattern(kind, k, 3);
        const std::int64_t g = std::min(group, k), groups = (k + g - 1) / g;
        std::vector<std::uint8_t> codes(static_cast<std::size_t>(k)), zeros(static_cast<std::size_t>(groups));
        std::vector<std::uint16_t> scales(static_cast<std::size_t>(groups));
        quantizeRow(s, g, w.data(), k, codes.data(), scales.data(), zeros.data());
        const Reference ref = referenceRow(s, g, w);
        const int offset = s == QuantScheme::Int8 ? 128 : s == QuantScheme::Int4Sym ? 8 : 0;
        for (std::int64_t gi = 0; gi < groups; ++gi) {
            const double scale = halfToFloat(scales[static_cast<std::size_t>(gi)]);
            QVERIFY2(scale == ref.scales[static_cast<std::size_t>(gi)],
                     qPrintable(QStringLiteral("group %1: scale %2, float64 definition %3").arg(gi).arg(scale, 0, 'g', 17).arg(ref.scales[static_cast<std::size_t>(gi)], 0, 'g', 17)));
            if (s == QuantScheme::Int4Asym)
                QCOMPARE(static_cast<int>(zeros[static_cast<std::size_t>(gi)]), ref.zeros[static_cast<std::size_t>(gi)]);
        }
        for (std::int64_t i = 0; i < k; ++i) {
            const auto at = static_cast<std::size_t>(i);
            QVERIFY2(codes[at] == ref.codes[at], qPrintable(QStringLiteral("weight %1 = %2: code %3, float64 definition %4").arg(i).arg(w[at]).arg(codes[at]).arg(ref.codes[at])));
            // The dequantized value is within half a step, or the code is at its limit (clamped).
            const std::int64_t gi = i / g;
            const double scale = halfToFloat(scales[static_cast<std::size_t>(gi)]);
            const int z = s == QuantScheme::Int4Asym ? zeros[static_cast<std::size_t>(gi)] : offset;
            const double deq = scale * (codes[at] - z);
            const bool atLimit = codes[at] == 0 || codes[at] == (s == QuantScheme::Int8 ? 255 : 15) || (s == QuantScheme::Int8 && codes[at] == 1);
            QVERIFY2(std::fabs(deq - w[at]) <= std::fabs(scale) * 0.5000001 + 1e-30 || atLimit || scale == 0,
                     qPrintable(QStringLiteral("weight %1 = %2 dequantizes to %3 (scale %4)").arg(i).arg(w[at]).arg(deq).arg(scale)));
            if (scale == 0)
                QCOMPARE(deq, 0.0);
        }
        if (kind == QStringLiteral("outlier")) // the outlier's own group keeps it within half a step of its scale
            QVERIFY(std::fabs(halfToFloat(scales[static_cast<std::size_t>(k / 3 / g)])) >= 40.0 / (s == QuantScheme::Int8 ? 127.5 : 15.5));
    }

    void quantizerRefusals()
    {
        auto refusal = [](std::vector<float> w, QuantScheme s) -> QString {
            std::vector<std::uint8_t> codes(w.size()), zeros(w.size());
            std::vector<std::uint16_t> scales(w.size());
            try {
                quantizeRow(s, 32, w.data(), static_cast<std::int64_t>(w.size()), codes.data(), scales.data(), zeros.data());
            } catch (const cppl::ConfigError &e) {
                return QString::fromStdString(e.what());
            }
            return {};
        };
        QVERIFY(refusal({1.0F, NAN, 2.0F}, QuantScheme::Int8).contains(QStringLiteral("weight 1 of the row is nan: not a finite number")));
        QVERIFY(refusal({1.0F, 2.0F, -INFINITY}, QuantScheme::Int4Sym).contains(QStringLiteral("weight 2 of the row is -inf")));
        QVERIFY(refusal({1e7F}, QuantScheme::Int8).contains(QStringLiteral("too large for a float16 quantization scale")));
        QVERIFY(refusal({1e6F}, QuantScheme::Int8).isEmpty()); // 1e6 / 127 fits
        QVERIFY(refusal({1e6F}, QuantScheme::Int4Asym).contains(QStringLiteral("too large")));
        // A whole matrix names the row.
        std::vector<float> m(64 * 2, 0.5F);
        m[64 + 3] = NAN;
        QString what;
        try {
            (void)quantizeMatrix(QuantScheme::Int8, 32, m.data(), 64, 2, 64);
        } catch (const cppl::ConfigError &e) {
            what = QString::fromStdString(e.what());
        }
        QVERIFY2(what.startsWith(QStringLiteral("row 1: weight 3 of the row is nan")), qPrintable(what));
        // Formats the kernels cannot run.
        auto formatRefusal = [](std::int64_t n, std::int64_t k, QuantFormat f) -> QString {
            try {
                QuantizedMatrix q(n, k, f);
            } catch (const cppl::ConfigError &e) {
                return QString::fromStdString(e.what());
            }
            return {};
        };
        QVERIFY(formatRefusal(4, 100, {8, 48, false, 128}).contains(QStringLiteral("group size 48 does not fit")));
        QVERIFY(formatRefusal(4, 40, {8, 48, false, 128}).isEmpty()); // one group covers the row
        QVERIFY(formatRefusal(4, 64, {3, 32, false, 4}).contains(QStringLiteral("3 bits are not supported")));
        QVERIFY(formatRefusal(4, 64, {4, 32, true, 2}).contains(QStringLiteral("zero offset 2")));
        QVERIFY(parseSchemeRefusal().contains(QStringLiteral("unknown quantization \"int3\" (int8, int4 = int4-sym, int4-asym)")));
    }

    void packedMatrixRoundTrip_data()
    {
        QTest::addColumn<int>("bits");
        QTest::addColumn<bool>("zeros");
        QTest::addColumn<qint64>("n");
        QTest::addColumn<qint64>("k");
        QTest::addColumn<qint64>("group");
        QTest::addColumn<bool>("order");
        QTest::addRow("int8, partial panel and block") << 8 << false << qint64(45) << qint64(70) << qint64(32) << false;
        QTest::addRow("int4 with zero points, group 64") << 4 << true << qint64(33) << qint64(200) << qint64(64) << false;
        QTest::addRow("int4, input order") << 4 << false << qint64(32) << qint64(96) << qint64(32) << true;
        QTest::addRow("int8 with zero points, one group") << 8 << true << qint64(7) << qint64(50) << qint64(50) << true;
    }
    void packedMatrixRoundTrip()
    {
        QFETCH(int, bits);
        QFETCH(bool, zeros);
        QFETCH(qint64, n);
        QFETCH(qint64, k);
        QFETCH(qint64, group);
        QFETCH(bool, order);
        QuantizedMatrix m(n, k, {bits, group, zeros, zeros ? 1 : 1 << (bits - 1)});
        std::mt19937 rng(5);
        const std::int64_t groups = m.groups();
        std::vector<std::vector<std::uint8_t>> codes(static_cast<std::size_t>(n)), zs(static_cast<std::size_t>(n));
        std::vector<std::vector<std::uint16_t>> scales(static_cast<std::size_t>(n));
        for (std::int64_t r = 0; r < n; ++r) {
            auto &c = codes[static_cast<std::size_t>(r)];
            auto &z = zs[static_cast<std::size_t>(r)];
            auto &s = scales[static_cast<std::size_t>(r)];
            for (std::int64_t p = 0; p < k; ++p)
                c.push_back(static_cast<std::uint8_t>(rng() % (1U << bits)));
            for (std::int64_t g = 0; g < groups; ++g) {
                z.push_back(static_cast<std::uint8_t>(rng() % (1U << bits)));
                s.push_back(floatToHalf(std::ldexp(static_cast<float>(rng() % 2000) - 1000.0F, -16)));
            }
            m.setRow(r, c.data(), s.data(), zeros ? z.data() : nullptr);
        }
        std::vector<std::int32_t> perm(static_cast<std::size_t>(k));
        for (std::int64_t p = 0; p < k; ++p)
            perm[static_cast<std::size_t>(p)] = static_cast<std::int32_t>((p * 37 + 11) % k); // a permutation: gcd(37, k) = 1
        if (order)
            m.setInputOrder(perm);
        std::vector<float> row(static_cast<std::size_t>(k));
        for (std::int64_t r = 0; r < n; ++r) {
            m.dequantizeRow(r, row.data());
            for (std::int64_t p = 0; p < k; ++p) {
                const std::int64_t g = p / group;
                QCOMPARE(m.code(r, p), static_cast<int>(codes[static_cast<std::size_t>(r)][static_cast<std::size_t>(p)]));
                QCOMPARE(m.scaleBits(r, g), scales[static_cast<std::size_t>(r)][static_cast<std::size_t>(g)]);
                const int z = zeros ? zs[static_cast<std::size_t>(r)][static_cast<std::size_t>(g)] + 1 : 1 << (bits - 1);
                QCOMPARE(m.zero(r, g), z);
                const double want = static_cast<double>(halfToFloat(scales[static_cast<std::size_t>(r)][static_cast<std::size_t>(g)]))
                                    * (codes[static_cast<std::size_t>(r)][static_cast<std::size_t>(p)] - z);
                QCOMPARE(static_cast<double>(row[static_cast<std::size_t>(order ? perm[static_cast<std::size_t>(p)] : p)]), want);
            }
        }
    }

    void bitsPerWeight()
    {
        // The shapes (multiples of 32): int4 at 4.5 bits per weight with its float16 scales.
        const std::vector<float> w(static_cast<std::size_t>(64 * 1024), 0.01F);
        QCOMPARE(quantizeMatrix(QuantScheme::Int8, 32, w.data(), 1024, 64, 1024).bitsPerWeight(), 8.5);
        QCOMPARE(quantizeMatrix(QuantScheme::Int4Sym, 32, w.data(), 1024, 64, 1024).bitsPerWeight(), 4.5);
        QCOMPARE(quantizeMatrix(QuantScheme::Int4Asym, 32, w.data(), 1024, 64, 1024).bitsPerWeight(), 4.75);
        QCOMPARE(quantizeMatrix(QuantScheme::Int4Sym, 128, w.data(), 1024, 64, 1024).bitsPerWeight(), 4.125);
        QCOMPARE(quantizeMatrix(QuantScheme::Int4Sym, 32, w.data(), 1024, 64, 1024).bytes(), std::int64_t{64 * 1024 / 2 + 64 * 32 * 2});
    }

private:
    static QString parseSchemeRefusal()
    {
        try {
            (void)parseScheme("int3");
        } catch (const cppl::ConfigError &e) {
            return QString::fromStdString(e.what());
        }
        return {};
    }
};

QTEST_GUILESS_MAIN(TestQuantFormats)
#include "tst_quant_formats.moc"
