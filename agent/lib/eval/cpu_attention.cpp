// SPDX-License-Identifier: MIT
// Causal attention on the agent's own GEMM, and the row-wise steps of the native forward pass. Per
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

namespace {

constexpr std::int64_t kQueryBlock = 64;

// Scores arrive transposed, st[j * kQueryBlock + i] = k_j . q_(q0 + i), for keys j < `keys` and the
// block's bq queries. Per query i (a column): p_j = exp(scale * (s_j - max)) over keys j <= q0 + i, 0
// for the later keys, in place, and inv[i] = 1 / sum p_j (the output row is scaled by it after P V).
// Columns i >= bq are zeroed (the P V product reads them as the dropped rows of its last tile).
void softmaxColumnsGeneric(float *st, std::int64_t keys, std::int64_t q0, std::int64_t bq, float scale, float *inv)
{
    for (std::int64_t i = 0; i < kQueryBlock; ++i) {
        if (i >= bq) {
            for (std::int64_t j = 0; j < keys; ++j)
                st[j * kQueryBlock + i] = 0.0F;
            inv[i] = 0.0F;
            continue;
        }
        const std::int64_t n = q0 + i + 1;
        float mx = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = 0; j < n; ++j)
            mx = std::max(mx, st[j * kQueryBlock + i]);
        float sum = 0;
        for (std::int64_t j = 0; j < n; ++j) {
            float &x = st[j * kQueryBlock + i];
            x = std::exp(scale * (x - mx));
            sum += x;
        }
        for (std::int64_t j = n; j < keys; ++j)
            st[j * kQueryBlock + i] = 0.0F;
        inv[i] = 1.0F / sum;
    }
}

#if CPPL_X86
// GCC 12's plain _mm512_max/roundscale/scalef/reduce expand _mm512_undefined_ps(), which -Wuninitialized
// flags under -Werror; the all-ones-mask forms compute the same without it.
constexpr __mmask16 kAll = 0xFFFF;

__attribute__((target("avx512f"))) inline __m512 max512(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, kAll, a, b); }

__attribute__((target("avx512f"))) inline float lanes(__m512 v, bool max)
{
    alignas(64) float f[16];
    _mm512_store_ps(f, v);
    float r = f[0];
    for (int i = 1; i < 16; ++i)
        r = max ? std::max(r, f[i]) : r + f[i];
    return r;
}

// exp on [-87, 0]: x = n ln2 + r, |r| <= ln2 / 2, a degree-7 polynomial for e^r (relative error below
// 1e-8, under float32's rounding), scaled by 2^n. Inputs below -87 give ~1e-38, not 0: harmless here.
__attribute__((target("avx512f"))) inline __m512 exp512(__m512 x)
{
    x = max512(x, _mm512_set1_ps(-87.0F));
    const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341F));
    const __m512 n = _mm512_mask_roundscale_ps(t, kAll, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125F), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06F), r);
    __m512 p = _mm512_set1_ps(1.0F / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0F / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0F / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0F / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0F / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5F));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0F));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0F));
    return _mm512_mask_scalef_ps(p, kAll, p, n);
}

// The same, 16 queries to a vector: no horizontal reductions, the causal mask as lane masks.
__attribute__((target("avx512f"))) void softmaxColumnsAvx512(float *st, std::int64_t keys, std::int64_t q0, std::int64_t bq, float scale,
                                                              float *inv)
{
    static_assert(kQueryBlock % 16 == 0);
    const __m512 vs = _mm512_set1_ps(scale);
    for (std::int64_t c0 = 0; c0 < kQueryBlock; c0 += 16) {
        const std::int64_t live = std::clamp<std::int64_t>(bq - c0, 0, 16);
        const auto lanes16 = static_cast<__mmask16>((1U << live) - 1U);
        // Key j is visible to lane l (query q0 + c0 + l) when j <= q0 + c0 + l.
        const auto visible = [&](std::int64_t j) {
            const std::int64_t d = j - q0 - c0;
            return d <= 0 ? lanes16 : d >= 16 ? static_cast<__mmask16>(0) : static_cast<__mmask16>(lanes16 & ~((1U << d) - 1U));
        };
        const std::int64_t last = std::min(keys, q0 + c0 + 16); // keys past it are visible to no lane
        __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
        for (std::int64_t j = 0; j < last; ++j)
            vmax = _mm512_mask_max_ps(vmax, visible(j), vmax, _mm512_loadu_ps(st + j * kQueryBlock + c0));
        __m512 sum = _mm512_setzero_ps();
        for (std::int64_t j = 0; j < last; ++j) {
            float *x = st + j * kQueryBlock + c0;
            const __m512 e = _mm512_maskz_mov_ps(visible(j), exp512(_mm512_mul_ps(vs, _mm512_sub_ps(_mm512_loadu_ps(x), vmax))));
            _mm512_storeu_ps(x, e);
            sum = _mm512_add_ps(sum, e);
        }
        for (std::int64_t j = last; j < keys; ++j)
            _mm512_storeu_ps(st + j * kQueryBlock + c0, _mm512_setzero_ps());
        _mm512_storeu_ps(inv + c0, _mm512_maskz_div_ps(lanes16, _mm512_set1_ps(1.0F), sum));
    }
}
#endif

using SoftmaxColumns = void (*)(float *, std::int64_t, std::int64_t, std::int64_t, float, float *);

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
                    // Scores transposed (keys x queries): their columns, the queries, are then already
                    // the A operand of P V in the kernel's order (8 queries side by side per key).
                    packTransposed(q + (row0 + q0) * s.ldq + h * hd, s.ldq, bq, hd, qPack);
                    gemmPackedSerial(APacked{kTiles, 8, hd * 8}, keys, PanelView{qPack, bq, hd, hd * kPanel}, st, kQueryBlock);
                    softmax(st, keys, q0, bq, s.scale, inv);
                    float *o = out + (row0 + q0) * s.ldo + h * hd;
                    gemmPackedSerial(APacked{st, kQueryBlock, 8}, bq, PanelView{vPack, hd, keys, T * kPanel}, o, s.ldo);
                    for (std::int64_t i = 0; i < bq; ++i)
                        for (std::int64_t d = 0; d < hd; ++d)
                            o[i * s.ldo + d] *= inv[i];
                }
            }
        }
    });
}

namespace {

// f(r) for every row r, the rows split over `parallel`.
template <typename F> void eachRow(std::int64_t rows, const ParallelFor &parallel, const F &f)
{
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r)
            f(r);
    });
}

// One row of RMSNorm: the sum of squares in double (order fixed by the code path), then
// dst[j] = weight[j] * (src[j] * inv). src may equal dst.
void rmsRowGeneric(const float *src, std::int64_t n, const float *weight, double eps, float *dst)
{
    double ss = 0;
    for (std::int64_t j = 0; j < n; ++j)
        ss += static_cast<double>(src[j]) * src[j];
    const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (std::int64_t j = 0; j < n; ++j)
        dst[j] = weight[j] * (src[j] * inv);
}

#if CPPL_X86
__attribute__((target("avx512f"))) inline double lanesSum(__m512d v)
{
    alignas(64) double d[8];
    _mm512_store_pd(d, v);
    double r = d[0];
    for (int i = 1; i < 8; ++i)
        r += d[i];
    return r;
}

// The lower and upper eight floats of a zmm (AVX512F has no 32x8 extract; the 64x4 one moves the same
// bits; GCC 12's _mm512_castps512_ps256 is the unmasked extract, hence the mask forms, as above).
__attribute__((target("avx512f"))) inline __m256 lowerHalf(__m512 v)
{
    return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0));
}

__attribute__((target("avx512f"))) inline __m256 upperHalf(__m512 v)
{
    return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1));
}

// Eight floats widened to double (the all-lanes mask form, for the reason max512 gives).
__attribute__((target("avx512f"))) inline __m512d cvt8(__m256 v) { return _mm512_maskz_cvtps_pd(0xFF, v); }

// rmsRowGeneric with 16 double lanes (two accumulators of 8); the tail past the last full 16 is scalar.
__attribute__((target("avx512f"))) void rmsRowAvx512(const float *src, std::int64_t n, const float *weight, double eps, float *dst)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    std::int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(src + j);
        const __m512d lo = cvt8(lowerHalf(v)), hi = cvt8(upperHalf(v));
        a0 = _mm512_fmadd_pd(lo, lo, a0);
        a1 = _mm512_fmadd_pd(hi, hi, a1);
    }
    double ss = lanesSum(_mm512_add_pd(a0, a1));
    for (std::int64_t t = j; t < n; ++t)
        ss += static_cast<double>(src[t]) * src[t];
    const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    const __m512 vinv = _mm512_set1_ps(inv);
    for (j = 0; j + 16 <= n; j += 16)
        _mm512_storeu_ps(dst + j, _mm512_mul_ps(_mm512_loadu_ps(weight + j), _mm512_mul_ps(_mm512_loadu_ps(src + j), vinv)));
    for (; j < n; ++j)
        dst[j] = weight[j] * (src[j] * inv);
}
#endif

} // namespace

void rmsNorm(const float *x, std::int64_t rows, std::int64_t n, const float *weight, double eps, float *out, const ParallelFor &parallel)
{
    auto *row = CPPL_BY_ISA(rmsRowAvx512, rmsRowGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { row(x + r * n, n, weight, eps, out + r * n); });
}

namespace {

// One row of LayerNorm: the mean, then the variance about it, both summed in double (order fixed by the
// code path); then dst[j] = (src[j] - mean) * rstd * weight[j] + bias[j] in float. src may equal dst.
void layerRowGeneric(const float *src, std::int64_t n, const float *weight, const float *bias, double eps, float *dst)
{
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j)
        sum += static_cast<double>(src[j]);
    const double mean = sum / static_cast<double>(n);
    double ss = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        const double d = static_cast<double>(src[j]) - mean;
        ss += d * d;
    }
    const auto m = static_cast<float>(mean);
    const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (std::int64_t j = 0; j < n; ++j)
        dst[j] = (src[j] - m) * inv * weight[j] + bias[j];
}

// The GELU of one value with the tanh approximation (transformers' gelu_new / NewGELUActivation).
constexpr float kGeluC = 0.7978845608028654F; // sqrt(2 / pi)
constexpr float kGeluA = 0.044715F;

void geluRowGeneric(float *x, std::int64_t n)
{
    for (std::int64_t j = 0; j < n; ++j) {
        const float v = x[j];
        x[j] = 0.5F * v * (1.0F + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
    }
}

#if CPPL_X86
// layerRowGeneric with 16 double lanes (two accumulators of 8) per pass; tails past the last full 16 scalar.
__attribute__((target("avx512f"))) void layerRowAvx512(const float *src, std::int64_t n, const float *weight, const float *bias, double eps,
                                                        float *dst)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    std::int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(src + j);
        a0 = _mm512_add_pd(a0, cvt8(lowerHalf(v)));
        a1 = _mm512_add_pd(a1, cvt8(upperHalf(v)));
    }
    double sum = lanesSum(_mm512_add_pd(a0, a1));
    for (std::int64_t t = j; t < n; ++t)
        sum += static_cast<double>(src[t]);
    const double mean = sum / static_cast<double>(n);
    const __m512d vmean = _mm512_set1_pd(mean);
    a0 = _mm512_setzero_pd();
    a1 = _mm512_setzero_pd();
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512 v = _mm512_loadu_ps(src + j);
        const __m512d lo = _mm512_sub_pd(cvt8(lowerHalf(v)), vmean), hi = _mm512_sub_pd(cvt8(upperHalf(v)), vmean);
        a0 = _mm512_fmadd_pd(lo, lo, a0);
        a1 = _mm512_fmadd_pd(hi, hi, a1);
    }
    double ss = lanesSum(_mm512_add_pd(a0, a1));
    for (std::int64_t t = j; t < n; ++t) {
        const double d = static_cast<double>(src[t]) - mean;
        ss += d * d;
    }
    const auto m = static_cast<float>(mean);
    const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    const __m512 vm = _mm512_set1_ps(m), vinv = _mm512_set1_ps(inv);
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512 y = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(src + j), vm), vinv), _mm512_loadu_ps(weight + j));
        _mm512_storeu_ps(dst + j, _mm512_add_ps(y, _mm512_loadu_ps(bias + j)));
    }
    for (; j < n; ++j)
        dst[j] = (src[j] - m) * inv * weight[j] + bias[j];
}

// tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^-2|u| through exp512 on [-87, 0].
__attribute__((target("avx512f"))) void geluRowAvx512(float *x, std::int64_t n)
{
    const __m512 one = _mm512_set1_ps(1.0F), half = _mm512_set1_ps(0.5F), c = _mm512_set1_ps(kGeluC), a = _mm512_set1_ps(kGeluA);
    for (std::int64_t j = 0; j < n; j += 16) {
        const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xFFFFU : (1U << (n - j)) - 1U);
        const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
        const __m512 u = _mm512_mul_ps(c, _mm512_add_ps(v, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(a, v), v), v)));
        const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0F), _mm512_abs_ps(u)));
        __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
        t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps(), t);
        _mm512_mask_storeu_ps(x + j, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, t)));
    }
}
#endif

} // namespace

void layerNorm(const float *x, std::int64_t rows, std::int64_t n, const float *weight, const float *bias, double eps, float *out,
               const ParallelFor &parallel)
{
    auto *row = CPPL_BY_ISA(layerRowAvx512, layerRowGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { row(x + r * n, n, weight, bias, eps, out + r * n); });
}

void geluTanh(float *x, std::int64_t rows, std::int64_t n, const ParallelFor &parallel)
{
    auto *f = CPPL_BY_ISA(geluRowAvx512, geluRowGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { f(x + r * n, n); });
}

void rotary(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads, std::int64_t hd, std::int64_t T, const float *cos, const float *sin,
            const ParallelFor &parallel)
{
    const std::int64_t half = hd / 2;
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const float *c = cos + (r % T) * hd;
            const float *sn = sin + (r % T) * hd;
            for (std::int64_t h = 0; h < heads; ++h) {
                float *e = x + r * ld + h * hd;
                for (std::int64_t i = 0; i < half; ++i) {
                    const float a = e[i], b = e[i + half];
                    e[i] = a * c[i] - b * sn[i];
                    e[i + half] = b * c[i + half] + a * sn[i + half];
                }
            }
        }
    });
}

namespace {

void siluMulGeneric(float *g, std::int64_t n)
{
    const float *u = g + n;
    for (std::int64_t j = 0; j < n; ++j)
        g[j] = g[j] / (1.0F + std::exp(-g[j])) * u[j];
}

#if CPPL_X86
// silu(g) = g / (1 + e^-g); e^-g through exp512 on [-87, 0] only (for g < 0, e^-g = 1 / e^g).
__attribute__((target("avx512f"))) void siluMulAvx512(float *g, std::int64_t n)
{
    const float *u = g + n;
    const __m512 one = _mm512_set1_ps(1.0F);
    std::int64_t j = 0;
    for (; j < n; j += 16) {
        const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xFFFFU : (1U << (n - j)) - 1U);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + j);
        const __m512 e = exp512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(x))); // e^-|x|
        // x >= 0: x / (1 + e^-x); x < 0: x e^x / (1 + e^x) = x e / (1 + e)
        const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
        const __m512 num = _mm512_mask_mul_ps(x, neg, x, e);
        const __m512 s = _mm512_div_ps(num, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(g + j, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + j)));
    }
}
#endif

} // namespace

void siluMul(float *gu, std::int64_t rows, std::int64_t n, const ParallelFor &parallel)
{
    auto *f = CPPL_BY_ISA(siluMulAvx512, siluMulGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { f(gu + r * 2 * n, n); });
}

namespace {

// Returns sum_j exp(z[j] - max) (exps in float32, summed in double) and the row's max in *mx.
double sumExpGeneric(const float *z, std::int64_t n, float *mx)
{
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j)
        m = std::max(m, z[j]);
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j)
        sum += static_cast<double>(std::exp(z[j] - m));
    *mx = m;
    return sum;
}

#if CPPL_X86
__attribute__((target("avx512f"))) double sumExpAvx512(const float *z, std::int64_t n, float *mx)
{
    __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    std::int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        vmax = max512(vmax, _mm512_loadu_ps(z + j));
    const auto tail = static_cast<__mmask16>((1U << (n - j)) - 1U);
    if (j < n)
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, z + j));
    const float m = lanes(vmax, true);
    const __m512 vm = _mm512_set1_ps(m);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(z + j), vm));
        s0 = _mm512_add_pd(s0, cvt8(lowerHalf(e)));
        s1 = _mm512_add_pd(s1, cvt8(upperHalf(e)));
    }
    if (j < n) {
        const __m512 e = _mm512_maskz_mov_ps(tail, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, z + j), vm)));
        s0 = _mm512_add_pd(s0, cvt8(lowerHalf(e)));
        s1 = _mm512_add_pd(s1, cvt8(upperHalf(e)));
    }
    *mx = m;
    return lanesSum(_mm512_add_pd(s0, s1));
}
#endif

} // namespace

void logSoftmaxAt(const float *logits, std::int64_t rows, std::int64_t V, std::int64_t ld, const std::int64_t *targets, double *out,
                  const ParallelFor &parallel)
{
    auto *sumExp = CPPL_BY_ISA(sumExpAvx512, sumExpGeneric);
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const float *z = logits + r * ld;
            float mx = 0;
            const double sum = sumExp(z, V, &mx);
            out[r] = (static_cast<double>(z[targets[r]]) - static_cast<double>(mx)) - std::log(sum);
        }
    });
}

} // namespace cppl::agent::cpu
