// SPDX-License-Identifier: MIT
// The int8 / int4 and bfloat16 GEMMs (agent/lib/quant/qgemm.h, bf16_gemm.h) on every path this CPU
// runs: against a scalar transcription of their documented arithmetic (bit for bit: the int32 dot
// products are exact and the float32 steps are given), against float64 loops over the dequantized
// weights and quantized activations (within float32 rounding), and their bits at 1, 2, 3 and 7
// threads and on every kernel path (the same bits everywhere). The bfloat16 lane arithmetic and
// rounding are checked against the AVX512_BF16 instructions themselves where the CPU has them.
#include "quant/bf16_gemm.h"
#include "quant/half.h"
#include "quant/qgemm.h"
#include "quant/quantize.h"

#include "cppl/errors.h"

#include <QTest>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

using namespace cppl::agent;
using namespace cppl::agent::quant;

namespace {

std::vector<float> randomVector(std::size_t n, unsigned seed, float stddev = 1.0F)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0F, stddev);
    std::vector<float> v(n);
    for (float &x : v)
        x = d(rng);
    return v;
}

// [0, n) in `threads` contiguous chunks, each on its own std::thread (as tst_native_kernels).
cpu::ParallelFor splitInto(int threads)
{
    return [threads](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)> &f) {
        std::vector<std::thread> pool;
        const std::int64_t chunk = (n + threads - 1) / threads;
        for (std::int64_t b = 0; b < n; b += chunk)
            pool.emplace_back([&f, b, e = std::min(n, b + chunk)] { f(b, e); });
        for (auto &t : pool)
            t.join();
    };
}

const std::vector<int> kThreads = {1, 2, 3, 7};

std::vector<IntIsa> intPaths()
{
    std::vector<IntIsa> out;
    for (IntIsa isa : {IntIsa::Generic, IntIsa::Avx2, IntIsa::AvxVnni, IntIsa::Avx512Vnni})
        if (supported(isa))
            out.push_back(isa);
    return out;
}

std::vector<Bf16Isa> bf16Paths()
{
    std::vector<Bf16Isa> out{Bf16Isa::Generic};
    if (supported(Bf16Isa::Avx512Bf16))
        out.push_back(Bf16Isa::Avx512Bf16);
    return out;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

QString firstDifference(const std::vector<float> &got, const std::vector<float> &want, std::int64_t ld)
{
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]))
            return QStringLiteral("C[%1][%2] = %3, definition %4").arg(static_cast<qint64>(i) / ld).arg(static_cast<qint64>(i) % ld).arg(got[i], 0, 'g', 9).arg(want[i], 0, 'g', 9);
    return QStringLiteral("sizes differ");
}

struct QuantActs
{
    std::vector<std::int8_t> codes;
    std::vector<float> scales;
    std::vector<std::int32_t> sums;
};

// Row r of A in the matrix's code order, quantized (the portable definition, checked separately).
QuantActs quantizedRow(const float *row, const QuantizedMatrix &w)
{
    const std::int64_t k = w.k();
    std::vector<float> x(row, row + k);
    if (!w.inputOrder().empty())
        for (std::int64_t p = 0; p < k; ++p)
            x[static_cast<std::size_t>(p)] = row[w.inputOrder()[static_cast<std::size_t>(p)]];
    QuantActs q{std::vector<std::int8_t>(static_cast<std::size_t>(w.paddedK())), std::vector<float>(static_cast<std::size_t>(w.blocks())),
                std::vector<std::int32_t>(static_cast<std::size_t>(w.blocks()))};
    quantizeActivationRow(x.data(), k, q.codes.data(), q.scales.data(), q.sums.data());
    return q;
}

// qgemm.h's steps 2 and 3, transcribed; also the same sum in float64 (`wide`) and its magnitude.
std::vector<float> referenceQgemm(const std::vector<float> &a, std::int64_t lda, std::int64_t m, const QuantizedMatrix &w, const std::vector<float> &c0,
                                  std::int64_t ldc, const float *bias, bool accumulate, std::vector<double> &wide, std::vector<double> &magnitude)
{
    std::vector<float> out = c0; // columns past n stay as they were
    wide.assign(c0.begin(), c0.end());
    magnitude.assign(c0.size(), 0.0);
    for (std::int64_t i = 0; i < m; ++i) {
        const QuantActs q = quantizedRow(a.data() + i * lda, w);
        for (std::int64_t j = 0; j < w.n(); ++j) {
            const auto at = static_cast<std::size_t>(i * ldc + j);
            float acc = accumulate ? c0[at] : 0.0F;
            if (bias)
                acc += bias[j];
            double acc64 = acc, mag = std::fabs(acc);
            for (std::int64_t b = 0; b < w.blocks(); ++b) {
                const std::int64_t g = b / w.blocksPerGroup();
                std::int64_t d = 0;
                for (std::int64_t p = b * kBlock; p < std::min(w.k(), (b + 1) * kBlock); ++p)
                    d += (w.code(j, p) - w.zero(j, g)) * std::int64_t{q.codes[static_cast<std::size_t>(p)]};
                const float sw = halfToFloat(w.scaleBits(j, g)), sa = q.scales[static_cast<std::size_t>(b)];
                acc = std::fma(static_cast<float>(d), sa * sw, acc);
                acc64 += static_cast<double>(d) * sa * sw;
                mag += std::fabs(static_cast<double>(d) * sa * sw);
            }
            out[at] = acc;
            wide[at] = acc64;
            magnitude[at] = mag;
        }
    }
    return out;
}

std::vector<float> referenceBf16(const std::vector<float> &a, std::int64_t lda, std::int64_t m, const Bf16Matrix &w, const std::vector<float> &c0,
                                 std::int64_t ldc, const float *bias, bool accumulate)
{
    std::vector<float> out = c0;
    const std::int64_t k = w.k();
    for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < w.n(); ++j) {
            const auto at = static_cast<std::size_t>(i * ldc + j);
            float acc = accumulate ? c0[at] : 0.0F;
            if (bias)
                acc += bias[j];
            for (std::int64_t p = 0; p < k; p += 2) {
                const std::uint16_t a0 = floatToBf16(a[static_cast<std::size_t>(i * lda + p)]);
                const std::uint16_t a1 = p + 1 < k ? floatToBf16(a[static_cast<std::size_t>(i * lda + p + 1)]) : std::uint16_t{0};
                acc = dpbf16Lane(acc, w.at(j, p), p + 1 < k ? w.at(j, p + 1) : std::uint16_t{0}, a0, a1);
            }
            out[at] = acc;
        }
    return out;
}

} // namespace

class TestQuantKernels : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        qInfo("CPU: %s; int8 paths here:", cpuFlagsSeen());
        for (IntIsa isa : intPaths())
            qInfo("  %s", isaName(isa));
        qInfo("bfloat16: %s", isaName(detectBf16Isa()));
    }

    void activationsMatchDefinition_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<qint64>("k");
        QTest::addRow("normal, 3 blocks") << QStringLiteral("normal") << qint64(96);
        QTest::addRow("a partial last block") << QStringLiteral("normal") << qint64(45);
        QTest::addRow("one value") << QStringLiteral("normal") << qint64(1);
        QTest::addRow("a block of zeros") << QStringLiteral("zeros") << qint64(64);
        QTest::addRow("NaN and infinity") << QStringLiteral("nonfinite") << qint64(96);
        QTest::addRow("subnormal values") << QStringLiteral("tiny") << qint64(64);
        QTest::addRow("halfway values") << QStringLiteral("halves") << qint64(64);
    }
    void activationsMatchDefinition()
    {
        QFETCH(QString, kind);
        QFETCH(qint64, k);
        std::vector<float> x = randomVector(static_cast<std::size_t>(k), 11, 3.0F);
        if (kind == QStringLiteral("zeros"))
            std::fill(x.begin(), x.begin() + 32, 0.0F);
        if (kind == QStringLiteral("nonfinite"))
            x[5] = NAN, x[40] = -INFINITY;
        if (kind == QStringLiteral("tiny"))
            for (float &v : x)
                v *= 1e-40F;
        if (kind == QStringLiteral("halves")) // a / (127 / 127) lands on .5: ties go to even
            for (std::int64_t i = 0; i < k; ++i)
                x[static_cast<std::size_t>(i)] = i % 32 == 0 ? 127.0F : static_cast<float>(i % 7) - 2.5F;
        const std::int64_t blocks = (k + 31) / 32;
        for (IntIsa isa : intPaths()) {
            std::vector<std::int8_t> codes(static_cast<std::size_t>(blocks * 32), 99);
            std::vector<float> scales(static_cast<std::size_t>(blocks));
            std::vector<std::int32_t> sums(static_cast<std::size_t>(blocks));
            quantizeActivationRow(isa, x.data(), k, codes.data(), scales.data(), sums.data());
            for (std::int64_t b = 0; b < blocks; ++b) {
                double amax = 0;
                bool finite = true;
                for (std::int64_t i = b * 32; i < std::min<std::int64_t>(k, b * 32 + 32); ++i) {
                    finite = finite && std::isfinite(x[static_cast<std::size_t>(i)]);
                    amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<std::size_t>(i)])));
                }
                const float sa = scales[static_cast<std::size_t>(b)];
                if (!finite) {
                    QVERIFY2(std::isnan(sa), isaName(isa));
                    continue;
                }
                const auto want = static_cast<float>(amax / 127.0); // float32 division, through double (innocuous)
                QVERIFY2(sa == want, qPrintable(QStringLiteral("%1 block %2: scale %3, definition %4").arg(QString::fromLatin1(isaName(isa))).arg(b).arg(sa).arg(want)));
                std::int32_t sum = 0;
                for (std::int64_t i = b * 32; i < b * 32 + 32; ++i) {
                    const auto at = static_cast<std::size_t>(i);
                    const double q = i >= k || want == 0 ? 0.0 : std::clamp(std::nearbyint(static_cast<double>(static_cast<float>(x[at] / static_cast<double>(want)))), -127.0, 127.0);
                    QVERIFY2(codes[at] == static_cast<int>(q), qPrintable(QStringLiteral("%1 value %2 = %3: code %4, definition %5").arg(QString::fromLatin1(isaName(isa))).arg(i).arg(i < k ? x[at] : 0.0F).arg(codes[at]).arg(q)));
                    sum += codes[at];
                }
                QCOMPARE(sums[static_cast<std::size_t>(b)], sum);
            }
        }
    }

    void qgemmMatchesDefinition_data()
    {
        QTest::addColumn<QString>("scheme");
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("k");
        QTest::addColumn<int>("group");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("accumulate");
        for (const char *s : {"int8", "int4-sym", "int4-asym"}) {
            const QString scheme = QString::fromLatin1(s);
            QTest::addRow("%s, one element", s) << scheme << 1 << 1 << 1 << 32 << false << false;
            QTest::addRow("%s, partial tiles everywhere", s) << scheme << 13 << 45 << 70 << 32 << true << false;
            QTest::addRow("%s, many row blocks, bias + accumulate", s) << scheme << 150 << 96 << 128 << 32 << true << true;
            QTest::addRow("%s, group 64, accumulate", s) << scheme << 37 << 64 << 200 << 64 << false << true;
            QTest::addRow("%s, one group per row", s) << scheme << 20 << 33 << 100 << 1000 << true << false;
        }
    }
    void qgemmMatchesDefinition()
    {
        QFETCH(QString, scheme);
        QFETCH(int, m);
        QFETCH(int, n);
        QFETCH(int, k);
        QFETCH(int, group);
        QFETCH(bool, bias);
        QFETCH(bool, accumulate);
        const std::int64_t lda = k + 3, ldc = n + 5; // strides wider than the rows
        std::vector<float> a = randomVector(static_cast<std::size_t>(m * lda), 1);
        if (m > 3)
            std::fill(a.begin() + 2 * lda, a.begin() + 3 * lda, 0.0F); // a row of zeros
        const auto w = randomVector(static_cast<std::size_t>(n * k), 2, 0.05F);
        const auto b = randomVector(static_cast<std::size_t>(n), 3);
        const auto c0 = randomVector(static_cast<std::size_t>(m * ldc), 4);
        const QuantizedMatrix q = quantizeMatrix(parseScheme(scheme.toStdString()), group, w.data(), k, n, k);
        std::vector<double> wide, magnitude;
        const std::vector<float> want = referenceQgemm(a, lda, m, q, c0, ldc, bias ? b.data() : nullptr, accumulate, wide, magnitude);
        for (std::size_t i = 0; i < want.size(); ++i) // the float32 steps stay within their rounding of the float64 sum
            QVERIFY2(std::fabs(want[i] - wide[i]) <= 1e-6 * magnitude[i] + 1e-30, qPrintable(QStringLiteral("element %1: %2 vs float64 %3").arg(i).arg(want[i]).arg(wide[i])));
        for (IntIsa isa : intPaths())
            for (int threads : kThreads) {
                std::vector<float> c = c0;
                qgemm(isa, a.data(), lda, m, q, c.data(), ldc, bias ? b.data() : nullptr, accumulate, splitInto(threads));
                QVERIFY2(sameBits(c, want), qPrintable(QStringLiteral("%1, %2 threads: %3").arg(QString::fromLatin1(isaName(isa))).arg(threads).arg(firstDifference(c, want, ldc))));
            }
        // And the whole approximates the float32 product (a smoke check of the quantization itself).
        double err = 0, norm = 0;
        for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
                double exact = (accumulate ? c0[static_cast<std::size_t>(i * ldc + j)] : 0.0) + (bias ? b[static_cast<std::size_t>(j)] : 0.0);
                for (int p = 0; p < k; ++p)
                    exact += static_cast<double>(a[static_cast<std::size_t>(i * lda + p)]) * w[static_cast<std::size_t>(j * k + p)];
                err += std::pow(want[static_cast<std::size_t>(i * ldc + j)] - exact, 2);
                norm += exact * exact;
            }
        const double bound = scheme == QStringLiteral("int8") ? 0.02 : 0.3;
        QVERIFY2(std::sqrt(err / std::max(norm, 1e-30)) <= bound, qPrintable(QStringLiteral("relative error %1").arg(std::sqrt(err / norm))));
    }

    void inputOrderIsGathered()
    {
        // An act-order layout: the codes hold the input features permuted; the kernels gather A to match.
        const std::int64_t m = 19, n = 40, k = 96;
        const auto a = randomVector(static_cast<std::size_t>(m * k), 21);
        const auto w = randomVector(static_cast<std::size_t>(n * k), 22, 0.05F);
        std::vector<std::int32_t> order(static_cast<std::size_t>(k));
        for (std::int64_t p = 0; p < k; ++p)
            order[static_cast<std::size_t>(p)] = static_cast<std::int32_t>((p * 37 + 5) % k);
        std::vector<float> permuted(w.size()); // W's columns in code order
        for (std::int64_t j = 0; j < n; ++j)
            for (std::int64_t p = 0; p < k; ++p)
                permuted[static_cast<std::size_t>(j * k + p)] = w[static_cast<std::size_t>(j * k + order[static_cast<std::size_t>(p)])];
        QuantizedMatrix q = quantizeMatrix(QuantScheme::Int4Asym, 32, permuted.data(), k, n, k);
        q.setInputOrder(order);
        const std::vector<float> c0(static_cast<std::size_t>(m * n), 0.0F);
        std::vector<double> wide, magnitude;
        const auto want = referenceQgemm(a, k, m, q, c0, n, nullptr, false, wide, magnitude);
        for (IntIsa isa : intPaths()) {
            std::vector<float> c = c0;
            qgemm(isa, a.data(), k, m, q, c.data(), n, nullptr, false, splitInto(3));
            QVERIFY2(sameBits(c, want), isaName(isa));
        }
        std::vector<float> row(static_cast<std::size_t>(k));
        q.dequantizeRow(7, row.data()); // back in input-feature order: close to W's own row
        for (std::int64_t p = 0; p < k; ++p)
            QVERIFY(std::fabs(row[static_cast<std::size_t>(p)] - w[static_cast<std::size_t>(7 * k + p)]) <= 0.05);
    }

    void nonFiniteActivationsGiveNan()
    {
        const std::int64_t m = 9, n = 32, k = 64;
        auto a = randomVector(static_cast<std::size_t>(m * k), 31);
        a[static_cast<std::size_t>(4 * k + 10)] = INFINITY;
        const auto w = randomVector(static_cast<std::size_t>(n * k), 32, 0.05F);
        const QuantizedMatrix q = quantizeMatrix(QuantScheme::Int8, 32, w.data(), k, n, k);
        for (IntIsa isa : intPaths()) {
            std::vector<float> c(static_cast<std::size_t>(m * n));
            qgemm(isa, a.data(), k, m, q, c.data(), n, nullptr, false, splitInto(2));
            for (std::int64_t i = 0; i < m; ++i)
                for (std::int64_t j = 0; j < n; ++j)
                    QVERIFY2(std::isnan(c[static_cast<std::size_t>(i * n + j)]) == (i == 4), isaName(isa));
        }
    }

    void bf16LaneMatchesInstruction()
    {
        // dpbf16Lane (the portable kernel's step) against vdpbf16ps itself: random bit patterns, values
        // near 1, subnormal operands and accumulators.
        std::mt19937 rng(41);
        int compared = 0;
        for (int round = 0; round < 60000; ++round) {
            std::uint16_t w[32], a[32];
            float acc[16], hw[16];
            for (int i = 0; i < 32; ++i) {
                w[i] = static_cast<std::uint16_t>(rng() >> 16), a[i] = static_cast<std::uint16_t>(rng() >> 16);
                if (round % 3 == 0) // near 1: long carries, ties
                    w[i] = static_cast<std::uint16_t>((w[i] & 0x807F) | 0x3F00 | ((rng() % 4) << 7)), a[i] = static_cast<std::uint16_t>((a[i] & 0x807F) | 0x3F00);
                if (round % 5 == 0 && i % 3 == 0)
                    w[i] &= 0x807F; // subnormal bfloat16
            }
            for (float &x : acc) {
                std::uint32_t bits = static_cast<std::uint32_t>(rng());
                if (round % 3 == 0)
                    bits = (bits & 0x807FFFFFU) | 0x3F800000U;
                if (round % 7 == 0)
                    bits &= 0x807FFFFFU; // subnormal accumulator
                x = std::bit_cast<float>(bits);
            }
            if (!dpbf16Hardware(acc, w, a, hw)) { // not a skip: the portable lane is the definition, checked by the GEMM test
                qInfo("no AVX512_BF16 on this CPU: nothing to compare the portable lane with");
                return;
            }
            for (int l = 0; l < 16; ++l) {
                const float mine = dpbf16Lane(acc[l], w[2 * l], w[2 * l + 1], a[2 * l], a[2 * l + 1]);
                if (std::isnan(mine) && std::isnan(hw[l]))
                    continue;
                ++compared;
                QVERIFY2(std::bit_cast<std::uint32_t>(mine) == std::bit_cast<std::uint32_t>(hw[l]),
                         qPrintable(QStringLiteral("acc %1 w %2 %3 a %4 %5: portable %6, vdpbf16ps %7").arg(acc[l], 0, 'a').arg(w[2 * l], 0, 16).arg(w[2 * l + 1], 0, 16).arg(a[2 * l], 0, 16).arg(a[2 * l + 1], 0, 16).arg(mine, 0, 'a').arg(hw[l], 0, 'a')));
            }
        }
        qInfo("%d lanes compared with vdpbf16ps", compared);
    }

    void bf16RoundingMatchesInstruction()
    {
        std::mt19937 rng(43);
        for (int round = 0; round < 100000; ++round) {
            float x[16];
            std::uint16_t hw[16];
            for (float &v : x) {
                std::uint32_t bits = static_cast<std::uint32_t>(rng());
                if (round % 4 == 0)
                    bits &= 0x807FFFFFU; // subnormal
                if (round % 4 == 1)
                    bits = (bits & 0xFFFF0000U) | 0x8000U; // a tie
                v = std::bit_cast<float>(bits);
            }
            if (!cvtBf16Hardware(x, hw)) {
                qInfo("no AVX512_BF16 on this CPU: floatToBf16 is checked against its definition in tst_quant_formats");
                return;
            }
            for (int l = 0; l < 16; ++l)
                if (!std::isnan(x[l]))
                    QVERIFY2(floatToBf16(x[l]) == hw[l], qPrintable(QStringLiteral("%1: portable %2, vcvtneps2bf16 %3").arg(x[l], 0, 'a').arg(floatToBf16(x[l]), 0, 16).arg(hw[l], 0, 16)));
        }
    }

    void bf16GemmMatchesDefinition_data()
    {
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("k");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("accumulate");
        QTest::addRow("one element") << 1 << 1 << 1 << false << false;
        QTest::addRow("partial tiles, odd k") << 13 << 45 << 71 << true << false;
        QTest::addRow("many row blocks, bias + accumulate") << 150 << 96 << 128 << true << true;
        QTest::addRow("k past 512") << 25 << 40 << 700 << false << true;
    }
    void bf16GemmMatchesDefinition()
    {
        QFETCH(int, m);
        QFETCH(int, n);
        QFETCH(int, k);
        QFETCH(bool, bias);
        QFETCH(bool, accumulate);
        const std::int64_t lda = k + 3, ldc = n + 5;
        const auto a = randomVector(static_cast<std::size_t>(m * lda), 51);
        const auto w = randomVector(static_cast<std::size_t>(n * k), 52, 0.05F);
        const auto b = randomVector(static_cast<std::size_t>(n), 53);
        const auto c0 = randomVector(static_cast<std::size_t>(m * ldc), 54);
        Bf16Matrix bw(n, k);
        bw.packRows(0, w.data(), k, n);
        const std::vector<float> want = referenceBf16(a, lda, m, bw, c0, ldc, bias ? b.data() : nullptr, accumulate);
        for (int i = 0; i < m; ++i) // within float32 accumulation error of the float64 sum of the bfloat16 operands
            for (int j = 0; j < n; ++j) {
                const auto at = static_cast<std::size_t>(i * ldc + j);
                double exact = (accumulate ? c0[at] : 0.0) + (bias ? b[static_cast<std::size_t>(j)] : 0.0), mag = std::fabs(exact);
                for (int p = 0; p < k; ++p) {
                    const double t = static_cast<double>(bf16ToFloat(floatToBf16(a[static_cast<std::size_t>(i * lda + p)]))) * bf16ToFloat(bw.at(j, p));
                    exact += t;
                    mag += std::fabs(t);
                }
                QVERIFY2(std::fabs(want[at] - exact) <= 1e-6 * k * mag / 64 + 1e-6 * mag, qPrintable(QStringLiteral("C[%1][%2] = %3, float64 %4").arg(i).arg(j).arg(want[at]).arg(exact)));
            }
        for (Bf16Isa isa : bf16Paths())
            for (int threads : kThreads) {
                std::vector<float> c = c0;
                bf16Gemm(isa, a.data(), lda, m, bw, c.data(), ldc, bias ? b.data() : nullptr, accumulate, splitInto(threads));
                QVERIFY2(sameBits(c, want), qPrintable(QStringLiteral("%1, %2 threads: %3").arg(QString::fromLatin1(isaName(isa))).arg(threads).arg(firstDifference(c, want, ldc))));
            }
    }

    void unsupportedPathIsRefused()
    {
        for (IntIsa isa : {IntIsa::Avx2, IntIsa::AvxVnni, IntIsa::Avx512Vnni}) {
            if (supported(isa))
                continue;
            const std::vector<float> w(32, 1.0F), a(32, 1.0F);
            std::vector<float> c(1);
            const QuantizedMatrix q = quantizeMatrix(QuantScheme::Int8, 32, w.data(), 32, 1, 32);
            bool refused = false;
            try {
                qgemm(isa, a.data(), 32, 1, q, c.data(), 1, nullptr, false, splitInto(1));
            } catch (const cppl::ConfigError &e) {
                refused = QString::fromStdString(e.what()).contains(QStringLiteral("this CPU cannot run"));
            }
            QVERIFY2(refused, isaName(isa));
        }
    }
};

QTEST_GUILESS_MAIN(TestQuantKernels)
#include "tst_quant_kernels.moc"
