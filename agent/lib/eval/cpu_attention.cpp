// SPDX-License-Identifier: MIT
// Causal attention on the agent's own GEMM (the row-wise steps are in cpu_rows.cpp). Per
// (sequence, KV head) the keys and values are packed once; each block of 64 queries of each query head
// then computes its scores transposed (keys x queries) against keys up to the block's end only, a
// float32 softmax down each column (16 queries to a vector), the product with V straight from those
// columns (they are the kernel's A operand as they stand: no repacking), and divides each output row
// by its sum. One task per (sequence, KV head): no element's arithmetic depends on the threads.
#include "cpu_gemm.h"
#include "cpu_simd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

namespace cppl::agent::cpu {

#if CPPL_X86
using namespace simd; // the AVX-512 helpers the kernels share (cpu_simd.h)
#endif

namespace {

constexpr std::int64_t kQueryBlock = 64;

// Scores arrive transposed, st[(j - j0) * kQueryBlock + i] = k_j . q_(q0 + i), for keys j0 <= j < `keys`
// and the block's bq queries. Query q sees the keys max(0, q - window + 1) .. q (window 0: 0 .. q), the
// keys transformers' sliding-window mask keeps. Per query i (a column): p_j = exp(scale * (s_j - max))
// over its keys, 0 for the others, in place, and inv[i] = 1 / sum p_j (the output row is scaled by it
// after P V). Columns i >= bq are zeroed (the P V product reads them as the dropped rows of its last tile).
struct ScoreBlock
{
    float *st = nullptr;
    std::int64_t j0 = 0, keys = 0, q0 = 0, bq = 0, window = 0;
    float scale = 1;
    float *inv = nullptr;
    /// The first key query q sees.
    [[nodiscard]] std::int64_t first(std::int64_t q) const { return window > 0 ? std::max<std::int64_t>(0, q - window + 1) : 0; }
};

void softmaxColumnsGeneric(const ScoreBlock &b)
{
    for (std::int64_t i = 0; i < kQueryBlock; ++i) {
        float *col = b.st + i; // col[(j - j0) * kQueryBlock] is key j's score
        const std::int64_t lo = i < b.bq ? b.first(b.q0 + i) : b.keys, n = i < b.bq ? b.q0 + i + 1 : b.keys;
        float mx = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = lo; j < n; ++j)
            mx = std::max(mx, col[(j - b.j0) * kQueryBlock]);
        float sum = 0;
        for (std::int64_t j = lo; j < n; ++j) {
            float &x = col[(j - b.j0) * kQueryBlock];
            x = std::exp(b.scale * (x - mx));
            sum += x;
        }
        for (std::int64_t j = b.j0; j < b.keys; ++j)
            if (j < lo || j >= n)
                col[(j - b.j0) * kQueryBlock] = 0.0F;
        b.inv[i] = i < b.bq ? 1.0F / sum : 0.0F;
    }
}

#if CPPL_X86
// The same, 16 queries to a vector: no horizontal reductions, the causal mask and the window as lane masks.
__attribute__((target("avx512f"))) void softmaxColumnsAvx512(const ScoreBlock &b)
{
    static_assert(kQueryBlock % 16 == 0);
    const __m512 vs = _mm512_set1_ps(b.scale);
    for (std::int64_t c0 = 0; c0 < kQueryBlock; c0 += 16) {
        const std::int64_t live = std::clamp<std::int64_t>(b.bq - c0, 0, 16);
        const auto lanes16 = static_cast<__mmask16>((1U << live) - 1U);
        // Key j is visible to lane l (query q = q0 + c0 + l) when j <= q and, with a window W, j > q - W.
        const auto visible = [&](std::int64_t j) {
            const std::int64_t d = j - b.q0 - c0;
            auto m = d <= 0 ? lanes16 : d >= 16 ? static_cast<__mmask16>(0) : static_cast<__mmask16>(lanes16 & ~((1U << d) - 1U));
            if (b.window > 0) {
                const std::int64_t below = d + b.window; // lanes l < d + W see key j
                m = below <= 0 ? static_cast<__mmask16>(0) : below >= 16 ? m : static_cast<__mmask16>(m & ((1U << below) - 1U));
            }
            return m;
        };
        const std::int64_t last = std::min(b.keys, b.q0 + c0 + 16); // keys past it are visible to no lane
        float *st = b.st + c0; // st[(j - j0) * kQueryBlock]: key j's 16 lanes
        __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        for (std::int64_t j = b.j0; j < last; ++j)
            vmax = _mm512_mask_max_ps(vmax, visible(j), vmax, _mm512_loadu_ps(st + (j - b.j0) * kQueryBlock));
        __m512 sum = _mm512_setzero_ps();
        for (std::int64_t j = b.j0; j < last; ++j) {
            float *x = st + (j - b.j0) * kQueryBlock;
            const __m512 e = _mm512_maskz_mov_ps(visible(j), exp512(_mm512_mul_ps(vs, _mm512_sub_ps(_mm512_loadu_ps(x), vmax))));
            _mm512_storeu_ps(x, e);
            sum = _mm512_add_ps(sum, e);
        }
        for (std::int64_t j = std::max(last, b.j0); j < b.keys; ++j)
            _mm512_storeu_ps(st + (j - b.j0) * kQueryBlock, _mm512_setzero_ps());
        _mm512_storeu_ps(b.inv + c0, _mm512_maskz_div_ps(lanes16, _mm512_set1_ps(1.0F), sum));
    }
}
#endif

using SoftmaxColumns = void (*)(const ScoreBlock &);

SoftmaxColumns softmaxFor(Isa isa)
{
#if CPPL_X86
    if (isa == Isa::Avx512)
        return softmaxColumnsAvx512;
#endif
    (void)isa;
    return softmaxColumnsGeneric;
}

struct Aligned
{
    void operator()(float *p) const { std::free(p); }
};

// Per-thread buffers, grown as needed and 64-byte aligned (packed panels are read with aligned loads).
float *threadBuffer(int which, std::int64_t floats)
{
    thread_local std::unique_ptr<float[], Aligned> buffers[4];
    thread_local std::int64_t sizes[4] = {0, 0, 0, 0};
    if (sizes[which] < floats) {
        const std::size_t bytes = (static_cast<std::size_t>(floats) * sizeof(float) + 63) / 64 * 64;
        buffers[which].reset(static_cast<float *>(std::aligned_alloc(64, bytes)));
        if (!buffers[which])
            throw std::bad_alloc();
        sizes[which] = floats;
    }
    return buffers[which].get();
}

} // namespace

void causalAttention(const float *q, const float *k, const float *v, float *out, const AttentionShape &s, const ParallelFor &parallel)
{
    const std::int64_t T = s.T, hd = s.hd, rep = s.heads / s.kvHeads;
    const SoftmaxColumns softmax = softmaxFor(detectIsa());
    parallel(s.batch * s.kvHeads, [&](std::int64_t begin, std::int64_t end) {
        float *kTiles = threadBuffer(0, tileCount(T) * 8 * hd);
        float *vPack = threadBuffer(1, panelCount(hd) * T * kPanel);
        float *qPack = threadBuffer(2, panelCount(kQueryBlock) * hd * kPanel + kQueryBlock);
        float *st = threadBuffer(3, T * kQueryBlock);
        float *inv = qPack + panelCount(kQueryBlock) * hd * kPanel;
        for (std::int64_t task = begin; task < end; ++task) {
            const std::int64_t b = task / s.kvHeads, g = task % s.kvHeads;
            const std::int64_t row0 = b * T;
            // Keys as the A operand of S^T = K Q^T (tiles of 8 keys), values as B panels of P V.
            packTiles(k + row0 * s.ldk + g * hd, s.ldk, T, hd, kTiles);
            packPlain(v + row0 * s.ldv + g * hd, s.ldv, T, hd, vPack, T * kPanel);
            for (std::int64_t r = 0; r < rep; ++r) {
                const std::int64_t h = g * rep + r;
                for (std::int64_t q0 = 0; q0 < T; q0 += kQueryBlock) {
                    const std::int64_t bq = std::min(kQueryBlock, T - q0), keys = q0 + bq;
                    // A window: the block's first query sees keys from q0 - W + 1 on; from the tile of 8
                    // keys holding it (the products start at a tile, a panel row: every offset aligned).
                    const std::int64_t j0 = s.window > 0 ? std::max<std::int64_t>(0, q0 - s.window + 1) / 8 * 8 : 0;
                    // Scores transposed (keys x queries): their columns, the queries, are then already
                    // the A operand of P V in the kernel's order (8 queries side by side per key).
                    packTransposed(q + (row0 + q0) * s.ldq + h * hd, s.ldq, bq, hd, qPack);
                    gemmPackedSerial(APacked{kTiles + j0 * hd, 8, hd * 8}, keys - j0, PanelView{qPack, bq, hd, hd * kPanel}, st, kQueryBlock);
                    float scale = s.scale;
                    if (s.softcap > 0) { // cap tanh(scale s / cap), then the softmax of those as they are
                        softcap(st, (keys - j0) * kQueryBlock, scale, s.softcap);
                        scale = 1.0F;
                    }
                    softmax(ScoreBlock{st, j0, keys, q0, bq, s.window, scale, inv});
                    float *o = out + (row0 + q0) * s.ldo + h * hd;
                    gemmPackedSerial(APacked{st, kQueryBlock, 8}, bq, PanelView{vPack + j0 * kPanel, hd, keys - j0, T * kPanel}, o, s.ldo);
                    for (std::int64_t i = 0; i < bq; ++i)
                        for (std::int64_t d = 0; d < hd; ++d)
                            o[i * s.ldo + d] *= inv[i];
                }
            }
        }
    });
}

} // namespace cppl::agent::cpu
