// SPDX-License-Identifier: MIT
#include "cpu_log_softmax.h"

#include "cpu_simd.h"
#include "tensor_parallel.h"

#include <cmath>
#include <limits>
#include <vector>

namespace cppl::agent::cpu {

#if CPPL_X86
using namespace simd; // the AVX-512 helpers the kernels share (cpu_simd.h)
#endif

namespace {

float rowMaxGeneric(const float *z, std::int64_t n)
{
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j)
        m = std::max(m, z[j]);
    return m;
}

double sumExpGeneric(const float *z, std::int64_t n, float m)
{
    double sum = 0;
    for (std::int64_t j = 0; j < n; ++j)
        sum += static_cast<double>(std::exp(z[j] - m));
    return sum;
}

#if CPPL_X86
__attribute__((target("avx512f"))) float rowMaxAvx512(const float *z, std::int64_t n)
{
    __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    std::int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        vmax = max512(vmax, _mm512_loadu_ps(z + j));
    const auto tail = static_cast<__mmask16>((1U << (n - j)) - 1U);
    if (j < n)
        vmax = _mm512_mask_max_ps(vmax, tail, vmax, _mm512_maskz_loadu_ps(tail, z + j));
    return lanes(vmax, true);
}

// 16 exponentials to a vector, widened into two accumulators of 8 doubles; the tail masked.
__attribute__((target("avx512f"))) double sumExpAvx512(const float *z, std::int64_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    std::int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(z + j), vm));
        s0 = _mm512_add_pd(s0, cvt8(lowerHalf(e)));
        s1 = _mm512_add_pd(s1, cvt8(upperHalf(e)));
    }
    if (j < n) {
        const auto tail = static_cast<__mmask16>((1U << (n - j)) - 1U);
        const __m512 e = _mm512_maskz_mov_ps(tail, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, z + j), vm)));
        s0 = _mm512_add_pd(s0, cvt8(lowerHalf(e)));
        s1 = _mm512_add_pd(s1, cvt8(upperHalf(e)));
    }
    return lanesSum(_mm512_add_pd(s0, s1));
}
#endif

} // namespace

void rowMax(const float *logits, std::int64_t rows, std::int64_t n, std::int64_t ld, float *max, const ParallelFor &parallel)
{
    auto *f = CPPL_BY_ISA(rowMaxAvx512, rowMaxGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { max[r] = f(logits + r * ld, n); });
}

void sumExp(const float *logits, std::int64_t rows, std::int64_t n, std::int64_t ld, const float *max, double *sum, const ParallelFor &parallel)
{
    auto *f = CPPL_BY_ISA(sumExpAvx512, sumExpGeneric);
    eachRow(rows, parallel, [&](std::int64_t r) { sum[r] = f(logits + r * ld, n, max[r]); });
}

void targetLogit(const float *logits, std::int64_t rows, VocabSlice slice, std::int64_t ld, const std::int64_t *targets, double *logit)
{
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t j = targets[r] - slice.begin;
        logit[r] = j >= 0 && j < slice.size ? static_cast<double>(logits[r * ld + j]) : 0.0;
    }
}

void combineLogSoftmax(const double *logit, const float *max, const double *sum, std::int64_t rows, double *out)
{
    for (std::int64_t r = 0; r < rows; ++r)
        out[r] = (logit[r] - static_cast<double>(max[r])) - std::log(sum[r]);
}

void logSoftmaxAt(const float *logits, std::int64_t rows, VocabSlice slice, std::int64_t ld, const std::int64_t *targets, double *out,
                  const ParallelFor &parallel, TensorParallelGroup *group)
{
    std::vector<float> max(static_cast<std::size_t>(rows));
    std::vector<double> sum(static_cast<std::size_t>(rows)), logit(static_cast<std::size_t>(rows));
    rowMax(logits, rows, slice.size, ld, max.data(), parallel);
    reduceMax(group, max.data(), rows); // every rank shifts by the whole row's maximum
    sumExp(logits, rows, slice.size, ld, max.data(), sum.data(), parallel);
    targetLogit(logits, rows, slice, ld, targets, logit.data());
    reduceSum(group, sum.data(), rows);
    reduceSum(group, logit.data(), rows); // one rank holds each target, the others add 0
    combineLogSoftmax(logit.data(), max.data(), sum.data(), rows, out);
}

} // namespace cppl::agent::cpu
