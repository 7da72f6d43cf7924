// SPDX-License-Identifier: MIT
// The quantized kernels (agent/lib/quant) against the agent's float32 GEMM (cpu::gemm), side by side
// in one run, on the products of issue 41's 95M Llama (hidden 1024, intermediate 2816, 16 query / 8
// K/V heads of 64, vocabulary 512, 8 layers) for a batch of 8 x 512 tokens: q/k/v and gate/up fused
// as the native model runs them, the head on the scored half of the positions (llama.cpp's
// protocol). Each product is timed best of --reps after a warm-up, at each thread count, through
// the agent's own pool (LibTorch's intra-op threads). Prints GFLOP/s (2 m n k per second; "effective"
// for the integer kernels, which do that many multiply-adds on int8), the ratio to float32, the
// kernel paths that ran and the CPU flags; and checks every format's first rows bit for bit against
// its portable kernel (column "same bits").
//
//   bench_qgemm [--threads 1,2] [--reps 5] [--rows 4096]
#include "eval/cpu_gemm.h"
#include "eval/intra_op.h"
#include "eval/runtime_info.h"
#include "quant/bf16_gemm.h"
#include "quant/qgemm.h"
#include "quant/quantize.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace cppl::agent;

namespace {

struct Shape
{
    const char *name;
    std::int64_t n, k;
    std::int64_t rowsDivisor; ///< the head sees half of the rows (the scored positions)
    int perModel;             ///< how many times one batch of the model runs it
};

// The 95M Llama: 8 decoder layers and the head.
const Shape kShapes[] = {
    {"q/k/v", 1024 + 2 * 8 * 64, 1024, 1, 8},
    {"o", 1024, 1024, 1, 8},
    {"gate/up", 2 * 2816, 1024, 1, 8},
    {"down", 1024, 2816, 1, 8},
    {"head", 512, 1024, 2, 1},
};

const char *kFormats[] = {"float32", "int8", "int4-sym", "int4-asym", "bf16"};
constexpr int kFormatCount = 5;

struct Weights
{
    cpu::PackedMatrix f32;
    quant::QuantizedMatrix q[3];
    quant::Bf16Matrix bf16;
};

Weights makeWeights(const Shape &s, std::mt19937 &rng)
{
    std::normal_distribution<float> d(0.0F, 1.0F / std::sqrt(static_cast<float>(s.k))); // std fan_in^-1/2, as the model
    std::vector<float> w(static_cast<std::size_t>(s.n * s.k));
    for (float &x : w)
        x = d(rng);
    Weights out;
    out.f32 = cpu::PackedMatrix(s.n, s.k);
    out.f32.packRows(0, w.data(), s.k, s.n);
    const quant::QuantScheme schemes[] = {quant::QuantScheme::Int8, quant::QuantScheme::Int4Sym, quant::QuantScheme::Int4Asym};
    for (int i = 0; i < 3; ++i)
        out.q[i] = quant::quantizeMatrix(schemes[i], 32, w.data(), s.k, s.n, s.k);
    out.bf16 = quant::Bf16Matrix(s.n, s.k);
    out.bf16.packRows(0, w.data(), s.k, s.n);
    return out;
}

void runFormat(int f, const Weights &w, const float *a, std::int64_t m, std::int64_t k, float *c, std::int64_t n, const cpu::ParallelFor &pool)
{
    if (f == 0)
        cpu::gemm(a, k, m, w.f32.view(), c, n, nullptr, false, pool);
    else if (f == 4)
        quant::bf16Gemm(a, k, m, w.bf16, c, n, nullptr, false, pool);
    else
        quant::qgemm(a, k, m, w.q[f - 1], c, n, nullptr, false, pool);
}

// The first 8 rows of the fast path against the portable kernel: the same bits, or the run is wrong.
bool sameBitsAsPortable(int f, const Weights &w, const float *a, std::int64_t k, std::int64_t n, const cpu::ParallelFor &pool)
{
    if (f == 0)
        return true;
    std::vector<float> fast(static_cast<std::size_t>(8 * n)), portable(fast.size());
    runFormat(f, w, a, 8, k, fast.data(), n, pool);
    if (f == 4)
        quant::bf16Gemm(quant::Bf16Isa::Generic, a, k, 8, w.bf16, portable.data(), n, nullptr, false, pool);
    else
        quant::qgemm(quant::IntIsa::Generic, a, k, 8, w.q[f - 1], portable.data(), n, nullptr, false, pool);
    return std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(float)) == 0;
}

double bestSeconds(const std::function<void()> &run, int reps)
{
    run(); // warm-up: scratch buffers, page faults, caches
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

std::string cpuModel()
{
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("model name", 0) == 0)
            return line.substr(line.find(':') + 2);
    return "unknown CPU";
}

std::vector<int> parseList(const char *text)
{
    std::vector<int> out;
    std::stringstream s(text);
    for (std::string item; std::getline(s, item, ',');)
        out.push_back(std::atoi(item.c_str()));
    return out;
}

// One table: every product in every format at `threads` threads; false when a format's bits differ
// from its portable kernel's.
bool runAt(int threads, const std::vector<Weights> &weights, const std::vector<float> &a, std::int64_t rows, int reps)
{
    const cpu::ParallelFor &pool = intraOp();
    std::vector<float> c(static_cast<std::size_t>(rows * 5632));
    setThreads(threads, 1);
    std::printf("\n%d thread%s   GFLOP/s per product (ratio to float32)\n%-9s %6s %6s", threads, threads == 1 ? "" : "s", "product", "n", "k");
    for (const char *f : kFormats)
        std::printf(" %16s", f);
    std::printf("\n");
    double modelSeconds[kFormatCount] = {}, modelFlops = 0;
    bool allSame = true;
    for (std::size_t si = 0; si < std::size(kShapes); ++si) {
        const Shape &s = kShapes[si];
        const std::int64_t m = rows / s.rowsDivisor;
        const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(s.n) * static_cast<double>(s.k);
        modelFlops += flops * s.perModel;
        std::printf("%-9s %6lld %6lld", s.name, static_cast<long long>(s.n), static_cast<long long>(s.k));
        double f32 = 0;
        for (int f = 0; f < kFormatCount; ++f) {
            const double sec = bestSeconds([&] { runFormat(f, weights[si], a.data(), m, s.k, c.data(), s.n, pool); }, reps);
            modelSeconds[f] += sec * s.perModel;
            const double g = flops / sec / 1e9;
            if (f == 0)
                f32 = g;
            std::printf(f == 0 ? " %16.1f" : " %9.1f (%4.2fx)", g, g / f32);
            allSame = allSame && sameBitsAsPortable(f, weights[si], a.data(), s.k, s.n, pool);
        }
        std::printf("\n");
    }
    std::printf("%-23s", "model (one batch)");
    for (int f = 0; f < kFormatCount; ++f)
        std::printf(f == 0 ? " %16.1f" : " %9.1f (%4.2fx)", modelFlops / modelSeconds[f] / 1e9, modelSeconds[0] / modelSeconds[f]);
    std::printf("\n%-23s", "  ms per batch");
    for (int f = 0; f < kFormatCount; ++f)
        std::printf(" %16.1f", modelSeconds[f] * 1e3);
    std::printf("\nsame bits as the portable kernels (first 8 rows of each product): %s\n", allSame ? "yes" : "NO");
    return allSame;
}

} // namespace

int main(int argc, char **argv)
{
    std::vector<int> threadCounts{1, 2};
    int reps = 5;
    std::int64_t rows = 8 * 512;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--threads")
            threadCounts = parseList(argv[i + 1]);
        else if (flag == "--reps")
            reps = std::atoi(argv[i + 1]);
        else if (flag == "--rows")
            rows = std::atoll(argv[i + 1]);
    }
    std::printf("bench_qgemm: %lld rows (8 x 512 tokens); issue 41's 95M Llama: hidden 1024, intermediate 2816, 16/8 heads of 64, vocab 512, 8 layers\n",
                static_cast<long long>(rows));
    std::printf("cpu: %s; flags: %s\nkernels: float32 %s, int8/int4 %s, bf16 %s; group 32 (float16 scales)\n", cpuModel().c_str(), quant::cpuFlagsSeen(),
                cpu::isaName(cpu::detectIsa()), quant::isaName(quant::detectIntIsa()), quant::isaName(quant::detectBf16Isa()));
    std::mt19937 rng(41);
    std::vector<Weights> weights;
    for (const Shape &s : kShapes)
        weights.push_back(makeWeights(s, rng));
    std::printf("bits per weight (the gate/up weight): int8 %.3f, int4-sym %.3f, int4-asym %.3f, bf16 16\n", weights[2].q[0].bitsPerWeight(),
                weights[2].q[1].bitsPerWeight(), weights[2].q[2].bitsPerWeight());
    std::normal_distribution<float> d(0.0F, 1.0F);
    std::vector<float> a(static_cast<std::size_t>(rows * 2816));
    for (float &x : a)
        x = d(rng);
    for (int threads : threadCounts)
        if (!runAt(threads, weights, a, rows, reps))
            return 1;
    return 0;
}
