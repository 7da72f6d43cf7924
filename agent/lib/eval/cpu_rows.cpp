// SPDX-License-Identifier: MIT
// The row-wise steps of the native forward pass: norms, rotary embedding, activations. Each row is
// computed by one thread in a fixed order, so no bit depends on how rows fall on threads.
#include "cpu_gemm.h"
#include "cpu_simd.h"

#include <cmath>
#include <cstdint>

namespace cppl::agent::cpu {

#if CPPL_X86
using namespace simd; // the AVX-512 helpers the kernels share (cpu_simd.h)
#endif

namespace {

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

void rmsNormHeads(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads, std::int64_t n, const float *weight, double eps,
                  const ParallelFor &parallel)
{
    auto *row = CPPL_BY_ISA(rmsRowAvx512, rmsRowGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) {
        for (std::int64_t h = 0; h < heads; ++h)
            row(x + r * ld + h * n, n, weight, eps, x + r * ld + h * n);
    });
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
    rotaryPartial(x, rows, ld, heads, hd, hd, T, cos, sin, parallel);
}

void rotaryPartial(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads, std::int64_t hd, std::int64_t rot, std::int64_t T, const float *cos,
                   const float *sin, const ParallelFor &parallel)
{
    const std::int64_t half = rot / 2;
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const float *c = cos + (r % T) * rot;
            const float *sn = sin + (r % T) * rot;
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

void softcapGeneric(float *x, std::int64_t n, float inScale, float cap)
{
    const float k = inScale / cap;
    for (std::int64_t j = 0; j < n; ++j)
        x[j] = cap * std::tanh(x[j] * k);
}

void geluMulGeneric(float *g, std::int64_t n)
{
    geluRowGeneric(g, n);
    const float *u = g + n;
    for (std::int64_t j = 0; j < n; ++j)
        g[j] *= u[j];
}

#if CPPL_X86
// cap tanh(u), u = x inScale / cap: tanh(u) = sign(u) (1 - e) / (1 + e) with e = e^-2|u|, as geluRowAvx512.
__attribute__((target("avx512f"))) void softcapAvx512(float *x, std::int64_t n, float inScale, float cap)
{
    const __m512 one = _mm512_set1_ps(1.0F), k = _mm512_set1_ps(inScale / cap), vcap = _mm512_set1_ps(cap);
    for (std::int64_t j = 0; j < n; j += 16) {
        const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xFFFFU : (1U << (n - j)) - 1U);
        const __m512 u = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), k);
        const __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.0F), _mm512_abs_ps(u)));
        __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
        t = _mm512_mask_sub_ps(t, _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_setzero_ps(), t);
        _mm512_mask_storeu_ps(x + j, m, _mm512_mul_ps(vcap, t));
    }
}

__attribute__((target("avx512f"))) void geluMulAvx512(float *g, std::int64_t n)
{
    geluRowAvx512(g, n);
    const float *u = g + n;
    for (std::int64_t j = 0; j < n; j += 16) {
        const auto m = static_cast<__mmask16>(n - j >= 16 ? 0xFFFFU : (1U << (n - j)) - 1U);
        _mm512_mask_storeu_ps(g + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, g + j), _mm512_maskz_loadu_ps(m, u + j)));
    }
}
#endif

} // namespace

void softcap(float *x, std::int64_t n, float inScale, float cap)
{
    auto *f = CPPL_BY_ISA(softcapAvx512, softcapGeneric);
    f(x, n, inScale, cap);
}

void softcapRows(float *x, std::int64_t rows, std::int64_t n, float cap, const ParallelFor &parallel)
{
    auto *f = CPPL_BY_ISA(softcapAvx512, softcapGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { f(x + r * n, n, 1.0F, cap); });
}

void geluTanhMul(float *gu, std::int64_t rows, std::int64_t n, const ParallelFor &parallel)
{
    auto *f = CPPL_BY_ISA(geluMulAvx512, geluMulGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { f(gu + r * 2 * n, n); });
}

void addRows(float *x, const float *y, std::int64_t rows, std::int64_t n, const ParallelFor &parallel)
{
    eachRow(rows, parallel, [&](std::int64_t r) {
        float *a = x + r * n;
        const float *b = y + r * n;
        for (std::int64_t j = 0; j < n; ++j)
            a[j] += b[j];
    });
}

} // namespace cppl::agent::cpu
