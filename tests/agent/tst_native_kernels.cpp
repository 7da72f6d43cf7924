// SPDX-License-Identifier: MIT
// The agent's own CPU kernels (agent/lib/eval/cpu_gemm.h, cpu_log_softmax.h) against double-precision
// loops, and the property other parts build on: every output's bits are the same however the work is
// split over threads (1, 2, 3, 7 real threads), for the GEMM, attention and a whole model's logits.
// The vocabulary's log-softmax steps also on slices, as vocab-parallel ranks would run them.
#include "reference_fixture.h"

#include "eval/cpu_gemm.h"
#include "eval/cpu_log_softmax.h"
#include "eval/intra_op.h"
#include "eval/language_model.h"
#include "eval/tensor_parallel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <limits>
#include <mutex>
#include <numbers>
#include <random>
#include <set>
#include <thread>
#include <vector>

using namespace cppl::agent;
using namespace cppl::test;

namespace {

std::vector<float> randomVector(std::size_t n, unsigned seed)
{
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0F, 1.0F);
    std::vector<float> v(n);
    for (float &x : v)
        x = d(rng);
    return v;
}

// Splits [0, n) into `threads` contiguous chunks, each on its own std::thread.
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

// The agent's pool (intra_op.h: LibTorch's, chunks from a shared counter) at `threads` intra-op threads.
// (A plain at::parallel_for here would run on one thread: this file is not compiled with OpenMP.)
cpu::ParallelFor atenPool(int threads)
{
    return [threads](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)> &f) {
        const int before = at::get_num_threads();
        at::set_num_threads(threads);
        intraOp()(n, f);
        at::set_num_threads(before);
    };
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Ranks as threads of this process: each reduction publishes every rank's buffer, waits for all,
// and reduces them in rank order into a copy of its own, so every rank gets the same bits.
class ThreadGroup
{
public:
    explicit ThreadGroup(int size) : m_size(size), m_barrier(size), m_slots(static_cast<std::size_t>(size)) {}

    class Rank final : public TensorParallelGroup
    {
    public:
        Rank(ThreadGroup &g, int rank) : m_g(g), m_rank(rank) {}
        int rank() const override { return m_rank; }
        int size() const override { return m_g.m_size; }
        void allReduceSum(float *d, std::int64_t n) override { reduce(d, n, [](float a, float b) { return a + b; }); }
        void allReduceSum(double *d, std::int64_t n) override { reduce(d, n, [](double a, double b) { return a + b; }); }
        void allReduceMax(float *d, std::int64_t n) override { reduce(d, n, [](float a, float b) { return std::max(a, b); }); }
        void broadcastCommand(std::int64_t *d, std::int64_t n) override { reduce(d, n, [](std::int64_t a, std::int64_t) { return a; }); }
        double collectiveSeconds() const override { return 0; }

    private:
        template <typename T, typename Op> void reduce(T *d, std::int64_t n, Op op)
        {
            m_g.m_slots[static_cast<std::size_t>(m_rank)] = d;
            m_g.m_barrier.arrive_and_wait();
            std::vector<T> out(static_cast<const T *>(m_g.m_slots[0]), static_cast<const T *>(m_g.m_slots[0]) + n);
            for (int r = 1; r < m_g.m_size; ++r)
                for (std::int64_t i = 0; i < n; ++i)
                    out[static_cast<std::size_t>(i)] = op(out[static_cast<std::size_t>(i)], static_cast<const T *>(m_g.m_slots[static_cast<std::size_t>(r)])[i]);
            m_g.m_barrier.arrive_and_wait(); // everyone has read every buffer
            std::copy(out.begin(), out.end(), d);
        }
        ThreadGroup &m_g;
        int m_rank;
    };

private:
    int m_size;
    std::barrier<> m_barrier;
    std::vector<const void *> m_slots;
};

} // namespace

class TestNativeKernels : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void gemmMatchesDoubleLoops_data()
    {
        QTest::addColumn<int>("m");
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("k");
        QTest::addColumn<bool>("bias");
        QTest::addColumn<bool>("accumulate");
        QTest::addRow("one element") << 1 << 1 << 1 << false << false;
        QTest::addRow("partial tiles everywhere") << 13 << 45 << 7 << true << false;
        QTest::addRow("k past one block, accumulate") << 70 << 33 << 1100 << false << true;
        QTest::addRow("many row blocks, bias + accumulate") << 300 << 96 << 64 << true << true;
        QTest::addRow("k = 0: bias only") << 5 << 40 << 0 << true << false;
    }
    void gemmMatchesDoubleLoops()
    {
        QFETCH(int, m);
        QFETCH(int, n);
        QFETCH(int, k);
        QFETCH(bool, bias);
        QFETCH(bool, accumulate);
        const std::int64_t lda = k + 3, ldc = n + 5; // strides wider than the rows
        const auto a = randomVector(static_cast<std::size_t>(m * lda), 1);
        const auto w = randomVector(static_cast<std::size_t>(n * std::max(k, 1)), 2);
        const auto b = randomVector(static_cast<std::size_t>(n), 3);
        const auto c0 = randomVector(static_cast<std::size_t>(m * ldc), 4);
        cpu::PackedMatrix packed(n, k);
        if (k > 0)
            packed.packRows(0, w.data(), k, n);
        std::vector<float> first;
        for (int threads : {1, 2, 3, 7, -2, -3}) {
            std::vector<float> c = c0;
            cpu::gemm(a.data(), lda, m, packed.view(), c.data(), ldc, bias ? b.data() : nullptr, accumulate,
                      threads > 0 ? splitInto(threads) : atenPool(-threads));
            if (first.empty()) {
                first = c;
                for (int i = 0; i < m; ++i)
                    for (int j = 0; j < ldc; ++j) {
                        const float got = c[static_cast<std::size_t>(i * ldc + j)];
                        if (j >= n) { // past the columns: untouched
                            QCOMPARE(got, c0[static_cast<std::size_t>(i * ldc + j)]);
                            continue;
                        }
                        double ref = (accumulate ? c0[static_cast<std::size_t>(i * ldc + j)] : 0.0) + (bias ? b[static_cast<std::size_t>(j)] : 0.0);
                        double mag = std::fabs(ref);
                        for (int kk = 0; kk < k; ++kk) {
                            const double p = static_cast<double>(a[static_cast<std::size_t>(i * lda + kk)]) * w[static_cast<std::size_t>(j * k + kk)];
                            ref += p;
                            mag += std::fabs(p);
                        }
                        QVERIFY2(std::fabs(got - ref) <= 1e-6 * mag + 1e-30,
                                 qPrintable(QStringLiteral("C[%1][%2] = %3, double loops %4").arg(i).arg(j).arg(got).arg(ref)));
                    }
            } else {
                QVERIFY2(sameBits(c, first), qPrintable(QStringLiteral("%1 threads changed the bits").arg(threads)));
            }
        }
    }

    void attentionMatchesDoubleLoops_data()
    {
        QTest::addColumn<int>("batch");
        QTest::addColumn<int>("T");
        QTest::addColumn<int>("heads");
        QTest::addColumn<int>("kvHeads");
        QTest::addColumn<int>("hd");
        QTest::addColumn<int>("window");    // a sliding window: keys t - W + 1 .. t; 0 = none
        QTest::addColumn<double>("softcap"); // scaled scores s -> cap tanh(s / cap); 0 = none
        QTest::addRow("grouped-query, T past one query block") << 2 << 150 << 4 << 2 << 16 << 0 << 0.0;
        QTest::addRow("one head, odd sizes") << 3 << 17 << 1 << 1 << 10 << 0 << 0.0;
        QTest::addRow("head width 64, T 130") << 1 << 130 << 2 << 1 << 64 << 0 << 0.0;
        QTest::addRow("window 6, odd sizes") << 3 << 17 << 1 << 1 << 10 << 6 << 0.0;
        QTest::addRow("window 37, grouped-query, T 200") << 2 << 200 << 4 << 2 << 16 << 37 << 0.0;
        QTest::addRow("window 64, T 150") << 1 << 150 << 2 << 1 << 16 << 64 << 0.0;
        QTest::addRow("window 1 (itself only)") << 1 << 70 << 2 << 2 << 8 << 1 << 0.0;
        QTest::addRow("window past T") << 2 << 150 << 4 << 2 << 16 << 400 << 0.0;
        QTest::addRow("soft-cap 0.5, T 150") << 2 << 150 << 4 << 2 << 16 << 0 << 0.5;
        QTest::addRow("soft-cap 2, window 37") << 1 << 130 << 2 << 1 << 16 << 37 << 2.0;
    }
    void attentionMatchesDoubleLoops()
    {
        QFETCH(int, batch);
        QFETCH(int, T);
        QFETCH(int, heads);
        QFETCH(int, kvHeads);
        QFETCH(int, hd);
        QFETCH(int, window);
        QFETCH(double, softcap);
        const std::int64_t width = (heads + 2 * kvHeads) * hd, rows = std::int64_t{batch} * T;
        const auto qkv = randomVector(static_cast<std::size_t>(rows * width), 5);
        cpu::AttentionShape s{batch, T, heads, kvHeads, hd, width, width, width, heads * hd, static_cast<float>(1.0 / std::sqrt(hd)), window,
                              static_cast<float>(softcap)};
        const float *q = qkv.data(), *k = q + heads * hd, *v = k + kvHeads * hd;
        std::vector<float> first;
        for (int threads : {1, 2, 3, 7, -2, -3}) {
            std::vector<float> out(static_cast<std::size_t>(rows * heads * hd), -1.0F);
            cpu::causalAttention(q, k, v, out.data(), s, threads > 0 ? splitInto(threads) : atenPool(-threads));
            if (!first.empty()) {
                QVERIFY2(sameBits(out, first), qPrintable(QStringLiteral("%1 threads changed the bits").arg(threads)));
                continue;
            }
            first = out;
            const int rep = heads / kvHeads;
            for (int b = 0; b < batch; ++b)
                for (int h = 0; h < heads; ++h)
                    for (int t = 0; t < T; ++t) {
                        const std::int64_t r = std::int64_t{b} * T + t;
                        const int lo = window > 0 ? std::max(0, t - window + 1) : 0;
                        std::vector<double> p(static_cast<std::size_t>(t + 1), 0.0);
                        double mx = -1e300, sum = 0;
                        for (int j = lo; j <= t; ++j) {
                            double dot = 0;
                            for (int d = 0; d < hd; ++d)
                                dot += static_cast<double>(q[r * width + h * hd + d]) * k[(std::int64_t{b} * T + j) * width + (h / rep) * hd + d];
                            p[static_cast<std::size_t>(j)] = softcap > 0 ? softcap * std::tanh(dot * s.scale / softcap) : dot * s.scale;
                            mx = std::max(mx, p[static_cast<std::size_t>(j)]);
                        }
                        for (int j = lo; j <= t; ++j)
                            sum += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - mx));
                        for (int d = 0; d < hd; ++d) {
                            double o = 0;
                            for (int j = lo; j <= t; ++j)
                                o += p[static_cast<std::size_t>(j)] / sum * v[(std::int64_t{b} * T + j) * width + (h / rep) * hd + d];
                            const float got = out[static_cast<std::size_t>(r * heads * hd + h * hd + d)];
                            QVERIFY2(std::fabs(got - o) <= 2e-5, qPrintable(QStringLiteral("b %1 h %2 t %3 d %4: %5 vs %6").arg(b).arg(h).arg(t).arg(d).arg(got).arg(o)));
                        }
                    }
        }
    }

    void intraOpRunsOnEveryThread_data()
    {
        QTest::addColumn<int>("threads");
        QTest::addRow("2 threads") << 2;
        QTest::addRow("3 threads") << 3;
    }
    void intraOpRunsOnEveryThread()
    {
        // The native kernels' pool really runs on --threads threads. It ran on one whatever the
        // thread count, for as long as at::parallel_for (an OpenMP region with LibTorch's OpenMP
        // backend) was instantiated in a file compiled without OpenMP. Each task waits until it has
        // seen `threads` distinct threads (or 30 s pass), so a pool of one thread fails here, and
        // threads the OS starts late still join (no timing is measured).
        QFETCH(int, threads);
        const int before = at::get_num_threads();
        at::set_num_threads(threads);
        std::mutex m;
        std::condition_variable cv;
        std::set<std::thread::id> seen;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        std::atomic<std::int64_t> done{0};
        intraOp()(64, [&](std::int64_t b, std::int64_t e) {
            std::unique_lock lock(m);
            seen.insert(std::this_thread::get_id());
            cv.notify_all();
            cv.wait_until(lock, deadline, [&] { return static_cast<int>(seen.size()) >= threads; });
            done += e - b;
        });
        at::set_num_threads(before);
        QCOMPARE(done.load(), std::int64_t{64});
        QCOMPARE(static_cast<int>(seen.size()), threads);
    }

    void rowOperationsDoNotDependOnThreads()
    {
        const std::int64_t rows = 301, n = 200, hd = 40, T = 100;
        const auto x = randomVector(static_cast<std::size_t>(rows * n * 2), 6);
        const auto w = randomVector(static_cast<std::size_t>(n), 7);
        const auto cs = randomVector(static_cast<std::size_t>(T * hd * 2), 8);
        const auto bias = randomVector(static_cast<std::size_t>(n), 9);
        std::vector<float> norm0, rot0, silu0, layer0, gelu0, part0;
        const std::int64_t rotWidth = 16; // phi3's partial_rotary_factor: the first 16 of 40 features
        for (int threads : {1, 2, 3, 7, -2, -3}) {
            const cpu::ParallelFor par = threads > 0 ? splitInto(threads) : atenPool(-threads);
            std::vector<float> norm(static_cast<std::size_t>(rows * n)), rot = x, silu = x, layer(norm.size()), gelu = x;
            cpu::rmsNorm(x.data(), rows, n, w.data(), 1e-5, norm.data(), par);
            cpu::rotary(rot.data(), rows, 2 * n, 5, hd, T, cs.data(), cs.data() + T * hd, par);
            cpu::siluMul(silu.data(), rows, n, par);
            cpu::layerNorm(x.data(), rows, n, w.data(), bias.data(), 1e-5, layer.data(), par);
            cpu::geluTanh(gelu.data(), rows, 2 * n, par);
            std::vector<float> part = x;
            cpu::rotaryPartial(part.data(), rows, 2 * n, 5, hd, rotWidth, T, cs.data(), cs.data() + T * rotWidth, par);
            if (norm0.empty()) {
                norm0 = norm, rot0 = rot, silu0 = silu, layer0 = layer, gelu0 = gelu, part0 = part;
                for (const std::int64_t r : {std::int64_t{0}, std::int64_t{123}, rows - 1})
                    for (std::int64_t h = 0; h < 5; ++h) {
                        const std::size_t e = static_cast<std::size_t>(r * 2 * n + h * hd), t = static_cast<std::size_t>((r % T) * rotWidth);
                        QCOMPARE(part[e + 1], x[e + 1] * cs[t + 1] - x[e + 1 + rotWidth / 2] * cs[static_cast<std::size_t>(T * rotWidth) + t + 1]);
                        for (std::int64_t i = rotWidth; i < hd; ++i) // past the rotary width: as they were
                            QCOMPARE(part[e + static_cast<std::size_t>(i)], x[e + static_cast<std::size_t>(i)]);
                    }
                const float g = x[3], u = x[static_cast<std::size_t>(n + 3)];
                QVERIFY(std::fabs(silu[3] - g / (1 + std::exp(-g)) * u) <= 1e-6 * (1 + std::fabs(g * u)));
                continue;
            }
            QVERIFY2(sameBits(norm, norm0), qPrintable(QStringLiteral("rmsNorm, %1 threads").arg(threads)));
            QVERIFY2(sameBits(rot, rot0), qPrintable(QStringLiteral("rotary, %1 threads").arg(threads)));
            QVERIFY2(sameBits(part, part0), qPrintable(QStringLiteral("rotaryPartial, %1 threads").arg(threads)));
            QVERIFY2(sameBits(silu, silu0), qPrintable(QStringLiteral("siluMul, %1 threads").arg(threads)));
            QVERIFY2(sameBits(layer, layer0), qPrintable(QStringLiteral("layerNorm, %1 threads").arg(threads)));
            QVERIFY2(sameBits(gelu, gelu0), qPrintable(QStringLiteral("geluTanh, %1 threads").arg(threads)));
        }
    }

    void layerNormAndGeluMatchDoubleLoops_data()
    {
        QTest::addColumn<int>("n");
        QTest::addColumn<float>("scale");
        QTest::addRow("width 768, whole vectors") << 768 << 1.0F;
        QTest::addRow("width 37, a scalar tail") << 37 << 1.0F;
        QTest::addRow("width 200, large values (tanh saturates)") << 200 << 8.0F;
        QTest::addRow("width 64, tiny values") << 64 << 1e-4F;
    }
    void layerNormAndGeluMatchDoubleLoops()
    {
        // GPT-2's LayerNorm and gelu_new (in place, also in place for the norm) against the formulas in double.
        QFETCH(int, n);
        QFETCH(float, scale);
        const std::int64_t rows = 13;
        auto x = randomVector(static_cast<std::size_t>(rows * n), 10);
        for (float &v : x)
            v = v * scale + 0.5F * scale; // a non-zero mean
        const auto w = randomVector(static_cast<std::size_t>(n), 11), b = randomVector(static_cast<std::size_t>(n), 12);
        std::vector<float> layer = x, gelu = x;
        cpu::layerNorm(layer.data(), rows, n, w.data(), b.data(), 1e-5, layer.data(), splitInto(2));
        cpu::geluTanh(gelu.data(), rows, n, splitInto(3));
        for (std::int64_t r = 0; r < rows; ++r) {
            const float *row = x.data() + r * n;
            double mean = 0, var = 0;
            for (int j = 0; j < n; ++j)
                mean += row[j];
            mean /= n;
            for (int j = 0; j < n; ++j)
                var += (row[j] - mean) * (row[j] - mean);
            const double inv = 1 / std::sqrt(var / n + 1e-5);
            for (int j = 0; j < n; ++j) {
                const auto at = static_cast<std::size_t>(r * n + j);
                const double ln = (row[j] - mean) * inv * w[static_cast<std::size_t>(j)] + b[static_cast<std::size_t>(j)];
                QVERIFY2(std::fabs(layer[at] - ln) <= 2e-6 * (1 + std::fabs(ln)),
                         qPrintable(QStringLiteral("layerNorm row %1 col %2: %3 vs %4").arg(r).arg(j).arg(layer[at]).arg(ln, 0, 'g', 10)));
                const double v = row[j];
                const double g = 0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
                QVERIFY2(std::fabs(gelu[at] - g) <= 1e-6 * (std::fabs(v) + 1e-30) + 1e-12,
                         qPrintable(QStringLiteral("geluTanh(%1): %2 vs %3").arg(v).arg(gelu[at]).arg(g, 0, 'g', 10)));
            }
        }
    }

    void logSoftmaxAtMatchesDoubleLoops()
    {
        // Row widths around the 16-lane vector (tails), a wide vocabulary, and rows with a huge spread.
        for (const std::int64_t V : {1, 15, 16, 17, 97, 4096}) {
            const std::int64_t rows = 37, ld = V + 3;
            auto z = randomVector(static_cast<std::size_t>(rows * ld), 9);
            for (std::int64_t r = 0; r < rows; r += 5)
                z[static_cast<std::size_t>(r * ld)] = 80.0F; // exp of the others underflows towards 0
            std::vector<std::int64_t> targets(static_cast<std::size_t>(rows));
            for (std::int64_t r = 0; r < rows; ++r)
                targets[static_cast<std::size_t>(r)] = (r * 7) % V;
            std::vector<double> first;
            for (int threads : {1, 2, 3, 7, -2}) {
                std::vector<double> out(static_cast<std::size_t>(rows), 1.0);
                cpu::logSoftmaxAt(z.data(), rows, {0, V}, ld, targets.data(), out.data(), threads > 0 ? splitInto(threads) : atenPool(-threads));
                if (!first.empty()) {
                    QVERIFY2(std::memcmp(out.data(), first.data(), out.size() * sizeof(double)) == 0,
                             qPrintable(QStringLiteral("V %1: %2 threads changed the bits").arg(V).arg(threads)));
                    continue;
                }
                first = out;
                for (std::int64_t r = 0; r < rows; ++r) {
                    const float *row = z.data() + r * ld;
                    double mx = -1e300, sum = 0;
                    for (std::int64_t j = 0; j < V; ++j)
                        mx = std::max(mx, static_cast<double>(row[j]));
                    for (std::int64_t j = 0; j < V; ++j)
                        sum += std::exp(static_cast<double>(row[j]) - mx);
                    const double ref = static_cast<double>(row[targets[static_cast<std::size_t>(r)]]) - mx - std::log(sum);
                    const double got = out[static_cast<std::size_t>(r)];
                    QVERIFY2(std::fabs(got - ref) <= 1e-6 * (1 + std::fabs(ref)),
                             qPrintable(QStringLiteral("V %1 row %2: %3 vs double loops %4").arg(V).arg(r).arg(got, 0, 'g', 17).arg(ref, 0, 'g', 17)));
                }
            }
        }
    }

    void logSoftmaxStepsOnSlices()
    {
        // The head's log-softmax steps on slices of the vocabulary, as vocab-parallel ranks would
        // run them: the slices' maxima reduce to the whole row's maximum and their target logits to
        // the row's exactly; their sums of exponentials (each at the whole row's maximum) add up to
        // the row's within rounding; and the steps on the whole row are logSoftmaxAt's bits.
        const std::int64_t rows = 23, V = 1003, ld = V + 5;
        const std::vector<cpu::VocabSlice> slices{{0, 400}, {400, 17}, {417, 586}};
        auto z = randomVector(static_cast<std::size_t>(rows * ld), 21);
        z[static_cast<std::size_t>(3 * ld + 405)] = 60.0F; // a row whose maximum is in the small slice
        std::vector<std::int64_t> targets(static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r)
            targets[static_cast<std::size_t>(r)] = (r * 89 + 5) % V;
        targets[3] = 405;
        const cpu::ParallelFor par = splitInto(3);
        std::vector<float> max(static_cast<std::size_t>(rows)), sliceMax(max.size()), maxOfSlices(max.size(), -std::numeric_limits<float>::infinity());
        std::vector<double> sum(max.size()), sliceSum(max.size()), sumOfSlices(max.size(), 0.0);
        std::vector<double> logit(max.size()), sliceLogit(max.size()), logitOfSlices(max.size(), 0.0);
        cpu::rowMax(z.data(), rows, V, ld, max.data(), par);
        cpu::sumExp(z.data(), rows, V, ld, max.data(), sum.data(), par);
        cpu::targetLogit(z.data(), rows, {0, V}, ld, targets.data(), logit.data());
        for (const cpu::VocabSlice &s : slices) {
            const float *zs = z.data() + s.begin; // a rank's logits: its columns only
            cpu::rowMax(zs, rows, s.size, ld, sliceMax.data(), par);
            cpu::sumExp(zs, rows, s.size, ld, max.data(), sliceSum.data(), par);
            cpu::targetLogit(zs, rows, s, ld, targets.data(), sliceLogit.data());
            for (std::size_t r = 0; r < max.size(); ++r) {
                maxOfSlices[r] = std::max(maxOfSlices[r], sliceMax[r]);
                sumOfSlices[r] += sliceSum[r];
                logitOfSlices[r] += sliceLogit[r];
            }
        }
        QVERIFY(sameBits(maxOfSlices, max));
        QVERIFY(std::memcmp(logitOfSlices.data(), logit.data(), logit.size() * sizeof(double)) == 0);
        for (std::size_t r = 0; r < sum.size(); ++r)
            QVERIFY2(std::fabs(sumOfSlices[r] - sum[r]) <= 1e-12 * sum[r], qPrintable(QStringLiteral("row %1: %2 vs %3").arg(r).arg(sumOfSlices[r]).arg(sum[r])));
        std::vector<double> combined(max.size()), fused(max.size());
        cpu::combineLogSoftmax(logit.data(), max.data(), sum.data(), rows, combined.data());
        cpu::logSoftmaxAt(z.data(), rows, {0, V}, ld, targets.data(), fused.data(), par);
        QVERIFY(std::memcmp(combined.data(), fused.data(), fused.size() * sizeof(double)) == 0);
    }

    void vocabParallelLogSoftmaxOverAGroup()
    {
        // logSoftmaxAt as three vocab-parallel ranks (threads reducing through a TensorParallelGroup)
        // run it, each on its slice: every rank ends with the same bits, within rounding of one rank's.
        const std::int64_t rows = 41, V = 2500, ld = V;
        const std::vector<cpu::VocabSlice> slices{{0, 1000}, {1000, 900}, {1900, 600}};
        const auto z = randomVector(static_cast<std::size_t>(rows * ld), 22);
        std::vector<std::int64_t> targets(static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r)
            targets[static_cast<std::size_t>(r)] = (r * 613 + 11) % V;
        std::vector<double> one(static_cast<std::size_t>(rows));
        cpu::logSoftmaxAt(z.data(), rows, {0, V}, ld, targets.data(), one.data(), splitInto(1));
        ThreadGroup group(3);
        std::vector<std::vector<double>> out(3, std::vector<double>(static_cast<std::size_t>(rows)));
        std::vector<std::thread> ranks;
        for (int r = 0; r < 3; ++r)
            ranks.emplace_back([&, r] {
                ThreadGroup::Rank rank(group, r);
                const cpu::VocabSlice s = slices[static_cast<std::size_t>(r)];
                cpu::logSoftmaxAt(z.data() + s.begin, rows, s, ld, targets.data(), out[static_cast<std::size_t>(r)].data(), splitInto(1), &rank);
            });
        for (auto &t : ranks)
            t.join();
        for (int r = 1; r < 3; ++r)
            QVERIFY(std::memcmp(out[0].data(), out[static_cast<std::size_t>(r)].data(), out[0].size() * sizeof(double)) == 0);
        for (std::size_t i = 0; i < one.size(); ++i)
            QVERIFY2(std::fabs(out[0][i] - one[i]) <= 1e-12 * (1 + std::fabs(one[i])),
                     qPrintable(QStringLiteral("row %1: %2 vs one rank's %3").arg(i).arg(out[0][i], 0, 'g', 17).arg(one[i], 0, 'g', 17)));
    }

    void fusedHeadMatchesLogSoftmaxOfLogits_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("llama, grouped-query") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa")};
        QTest::addRow("llama, tied head") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--tied")};
        QTest::addRow("gpt2") << QStringList{QStringLiteral("--arch"), QStringLiteral("gpt2")};
        QTest::addRow("llama, vocabulary 20000: 64-row chunks")
            << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--vocab"), QStringLiteral("20000")};
    }
    void fusedHeadMatchesLogSoftmaxOfLogits()
    {
        // targetLogProbs (vocabulary projection + log-softmax in chunks, the evaluator's path) against
        // LibTorch's log_softmax of the full logits; and its bits at 1, 2 and 3 threads.
        QFETCH(QStringList, flags);
        QTemporaryDir dir;
        const QString model = dir.filePath(QStringLiteral("m"));
        const ProcessResult r = runReference(QStringLiteral("make_checkpoint.py"), QStringList{QStringLiteral("--out"), model} + flags);
        QVERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        LoadOptions options;
        options.gemm = GemmBackend::Native;
        const auto lm = loadNativeModel(model.toStdString(), options);
        const std::int64_t B = 3, T = 40, V = lm->info().vocab;
        lm->prepare(B, T);
        const at::Tensor ids = at::randint(0, V, {B, T}, at::TensorOptions().dtype(at::kLong));
        // Every position, last first, then a few again: 127 rows, two chunks and a partial one at V = 20000.
        std::vector<std::int64_t> positions;
        for (std::int64_t p = B * T - 1; p >= 0; --p)
            positions.push_back(p);
        for (std::int64_t p : {0, 1, 39, 40, 77, 119, 5})
            positions.push_back(p);
        const at::Tensor flat = at::tensor(positions, at::TensorOptions().dtype(at::kLong));
        const at::Tensor targets = at::randint(0, V, {flat.numel()}, at::TensorOptions().dtype(at::kLong));
        const at::Tensor ref = at::log_softmax(lm->logits(ids).reshape({B * T, V}).index_select(0, flat).to(at::kDouble), -1)
                                   .gather(1, targets.view({-1, 1}));
        const int before = at::get_num_threads();
        at::Tensor first;
        for (int threads : {1, 2, 3}) {
            at::set_num_threads(threads);
            const at::Tensor got = lm->targetLogProbs(ids, flat, targets);
            QVERIFY(got.defined());
            QCOMPARE(got.scalar_type(), at::kDouble);
            QCOMPARE(got.numel(), flat.numel());
            if (!first.defined()) {
                first = got.clone();
                const double diff = (got.view({-1, 1}) - ref).abs().max().item<double>();
                QVERIFY2(diff <= 1e-5, qPrintable(QStringLiteral("max |fused - log_softmax(logits)| = %1").arg(diff)));
            } else {
                QVERIFY2(std::memcmp(first.data_ptr<double>(), got.data_ptr<double>(), static_cast<std::size_t>(got.numel()) * 8) == 0,
                         qPrintable(QStringLiteral("%1 threads changed the bits").arg(threads)));
            }
        }
        at::set_num_threads(before);
        // Another shape after prepare(): the workspace follows it.
        const at::Tensor ids2 = at::randint(0, V, {1, 9}, at::TensorOptions().dtype(at::kLong));
        const at::Tensor flat2 = at::tensor(std::vector<std::int64_t>{8}, at::TensorOptions().dtype(at::kLong));
        const at::Tensor t2 = at::tensor(std::vector<std::int64_t>{3}, at::TensorOptions().dtype(at::kLong));
        const double want = at::log_softmax(lm->logits(ids2).reshape({9, V}).to(at::kDouble), -1)[8][3].item<double>();
        QVERIFY(std::fabs(lm->targetLogProbs(ids2, flat2, t2).item<double>() - want) <= 1e-5);
    }

    void modelLogitsDoNotDependOnThreads_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("llama, grouped-query") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa"),
                                                             QStringLiteral("--intermediate"), QStringLiteral("200")};
        // GPT-2 once ran LibTorch's LayerNorm and GELU, whose results at 3 threads differed from those
        // at 1 and 2 (nll_sum_exact, 8 windows of 512 at hidden 512); now the agent's own kernels.
        QTest::addRow("gpt2") << QStringList{QStringLiteral("--arch"), QStringLiteral("gpt2")};
        // Its per-head q/k norms are rows of their own (cpu::rmsNormHeads), one thread each.
        QTest::addRow("qwen3") << QStringList{QStringLiteral("--arch"), QStringLiteral("qwen3"), QStringLiteral("--intermediate"), QStringLiteral("200")};
    }
    void modelLogitsDoNotDependOnThreads()
    {
        // The whole native forward pass (and the vocabulary projection) at 1, 2, 3 and 4 intra-op threads.
        QFETCH(QStringList, flags);
        QTemporaryDir dir;
        const QString model = dir.filePath(QStringLiteral("m"));
        const ProcessResult r = runReference(QStringLiteral("make_checkpoint.py"),
                                             QStringList{QStringLiteral("--out"), model, QStringLiteral("--hidden"), QStringLiteral("128"),
                                                         QStringLiteral("--heads"), QStringLiteral("4"), QStringLiteral("--max-positions"),
                                                         QStringLiteral("256")}
                                                 + flags);
        QVERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        LoadOptions options;
        options.gemm = GemmBackend::Native;
        const auto lm = loadNativeModel(model.toStdString(), options);
        const at::Tensor ids = at::randint(0, 97, {3, 200}, at::TensorOptions().dtype(at::kLong));
        const int before = at::get_num_threads();
        at::Tensor first;
        for (int threads : {1, 2, 3, 4}) {
            at::set_num_threads(threads);
            const at::Tensor logits = lm->logits(ids).contiguous();
            if (!first.defined())
                first = logits;
            else
                QVERIFY2(std::memcmp(first.data_ptr<float>(), logits.data_ptr<float>(), static_cast<std::size_t>(first.numel()) * 4) == 0,
                         qPrintable(QStringLiteral("logits at %1 threads differ from 1 thread").arg(threads)));
        }
        at::set_num_threads(before);
    }
};

QTEST_GUILESS_MAIN(TestNativeKernels)
#include "tst_native_kernels.moc"
