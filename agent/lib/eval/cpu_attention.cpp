// SPDX-License-Identifier: MIT
// Causal attention on the agent's own GEMM: per (sequence, KV head) the keys and values are packed
// once, then each block of 64 queries of each query head computes its scores against keys up to the
// block's end only, a float32 softmax over keys 0..t, and the product with V. One task per (sequence,
// KV head): no element's arithmetic depends on the number of threads.
#include "cpu_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPPL_X86 1
#else
#define CPPL_X86 0
#endif

namespace cppl::agent::cpu {

namespace {

constexpr std::int64_t kQueryBlock = 64;

// p[j] = exp(scale * (s[j] - max)) for j < n; returns the sum (float, fixed order).
float softmaxNumeratorGeneric(float *s, std::int64_t n, float scale)
{
    float mx = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j)
        mx = std::max(mx, s[j]);
    float sum = 0;
    for (std::int64_t j = 0; j < n; ++j) {
        s[j] = std::exp(scale * (s[j] - mx));
        sum += s[j];
    }
    return sum;
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

__attribute__((target("avx512f"))) float softmaxNumeratorAvx512(float *s, std::int64_t n, float scale)
{
    __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    std::int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        vmax = max512(vmax, _mm512_loadu_ps(s + j));
    const auto tail = static_cast<__mmask16>((1U << (n - j)) - 1U);
    if (j < n)
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, s + j));
    const __m512 mx = _mm512_set1_ps(lanes(vmax, true));
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 sum = _mm512_setzero_ps();
    for (j = 0; j + 16 <= n; j += 16) {
        const __m512 e = exp512(_mm512_mul_ps(vs, _mm512_sub_ps(_mm512_loadu_ps(s + j), mx)));
        _mm512_storeu_ps(s + j, e);
        sum = _mm512_add_ps(sum, e);
    }
    if (j < n) {
        const __m512 e = _mm512_maskz_mov_ps(tail, exp512(_mm512_mul_ps(vs, _mm512_sub_ps(_mm512_maskz_loadu_ps(tail, s + j), mx))));
        _mm512_mask_storeu_ps(s + j, tail, e);
        sum = _mm512_add_ps(sum, e);
    }
    return lanes(sum, false);
}
#endif

using SoftmaxNumerator = float (*)(float *, std::int64_t, float);

SoftmaxNumerator softmaxFor(Isa isa)
{
#if CPPL_X86
    if (isa == Isa::Avx512)
        return softmaxNumeratorAvx512;
#endif
    (void)isa;
    return softmaxNumeratorGeneric;
}

struct Aligned
{
    void operator()(float *p) const { std::free(p); }
};

// Per-thread buffers, grown as needed and 64-byte aligned (packed panels are read with aligned loads).
float *threadBuffer(int which, std::int64_t floats)
{
    thread_local std::unique_ptr<float[], Aligned> buffers[3];
    thread_local std::int64_t sizes[3] = {0, 0, 0};
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
    const SoftmaxNumerator numerator = softmaxFor(detectIsa());
    parallel(s.batch * s.kvHeads, [&](std::int64_t begin, std::int64_t end) {
        float *kPack = threadBuffer(0, panelCount(T) * hd * kPanel);
        float *vPack = threadBuffer(1, panelCount(hd) * T * kPanel);
        float *scores = threadBuffer(2, kQueryBlock * T);
        for (std::int64_t task = begin; task < end; ++task) {
            const std::int64_t b = task / s.kvHeads, g = task % s.kvHeads;
            const std::int64_t row0 = b * T;
            // Keys as B = K^T (scores = Q K^T): panels over keys; values as B = V: panels over hd.
            packTransposed(k + row0 * s.ldk + g * hd, s.ldk, T, hd, kPack);
            packPlain(v + row0 * s.ldv + g * hd, s.ldv, T, hd, vPack, T * kPanel);
            for (std::int64_t r = 0; r < rep; ++r) {
                const std::int64_t h = g * rep + r;
                for (std::int64_t q0 = 0; q0 < T; q0 += kQueryBlock) {
                    const std::int64_t bq = std::min(kQueryBlock, T - q0), keys = q0 + bq;
                    gemmSerial(q + (row0 + q0) * s.ldq + h * hd, s.ldq, bq, PanelView{kPack, keys, hd, hd * kPanel}, scores, T, nullptr, false);
                    for (std::int64_t i = 0; i < bq; ++i) {
                        float *row = scores + i * T;
                        const std::int64_t n = q0 + i + 1;
                        const float inv = 1.0F / numerator(row, n, s.scale);
                        for (std::int64_t j = 0; j < n; ++j)
                            row[j] *= inv;
                        std::fill(row + n, row + keys, 0.0F);
                    }
                    gemmSerial(scores, T, bq, PanelView{vPack, hd, keys, T * kPanel}, out + (row0 + q0) * s.ldo + h * hd, s.ldo, nullptr, false);
                }
            }
        }
    });
}

void rmsNorm(const float *x, std::int64_t rows, std::int64_t n, const float *weight, double eps, float *out, const ParallelFor &parallel)
{
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const float *src = x + r * n;
            double ss = 0;
            for (std::int64_t j = 0; j < n; ++j)
                ss += static_cast<double>(src[j]) * src[j];
            const auto inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
            float *dst = out + r * n;
            for (std::int64_t j = 0; j < n; ++j)
                dst[j] = weight[j] * (src[j] * inv);
        }
    });
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
#if CPPL_X86
    auto *f = detectIsa() == Isa::Avx512 ? siluMulAvx512 : siluMulGeneric;
#else
    auto *f = siluMulGeneric;
#endif
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r)
            f(gu + r * 2 * n, n);
    });
}

} // namespace cppl::agent::cpu
