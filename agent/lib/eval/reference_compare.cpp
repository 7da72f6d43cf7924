// SPDX-License-Identifier: MIT
#include "reference_compare.h"

#include "cpu_simd.h"
#include "intra_op.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sum.h>

#include <cmath>
#include <limits>

namespace cppl::agent {

namespace {

#if CPPL_X86
using namespace cpu::simd;
#endif

/// One row's sums (see compareChunk): S_ref, S_model, S.
struct RowSums
{
    double ref = 0, model = 0, cross = 0;
};

float rowMaxOf(const float *z, std::int64_t n)
{
    float m = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < n; ++j)
        m = std::max(m, z[j]);
    return m;
}

std::int64_t firstIndexOf(const float *z, std::int64_t n, float value)
{
    for (std::int64_t j = 0; j < n; ++j)
        if (z[j] == value)
            return j;
    return 0; // a row of NaN: its sums are NaN too, and the run is refused
}

// Sequential sums in double, as cpu_log_softmax.cpp's sumExpGeneric adds S_ref.
RowSums rowSumsGeneric(const float *a, const float *b, std::int64_t n, float ma, float mb)
{
    RowSums s;
    for (std::int64_t j = 0; j < n; ++j) {
        const float da = a[j] - ma, db = b[j] - mb;
        const float ea = std::exp(da);
        s.ref += static_cast<double>(ea);
        s.model += static_cast<double>(std::exp(db));
        s.cross += static_cast<double>(ea * (da - db));
    }
    return s;
}

#if CPPL_X86
// 16 lanes at a time into two accumulators of 8 doubles per sum (the lower and upper eight lanes),
// the tail masked: S_ref is added exactly as cpu_log_softmax.cpp's sumExpAvx512 adds it.
__attribute__((target("avx512f"))) RowSums rowSumsAvx512(const float *a, const float *b, std::int64_t n, float ma, float mb)
{
    const __m512 vma = _mm512_set1_ps(ma), vmb = _mm512_set1_ps(mb);
    __m512d ref0 = _mm512_setzero_pd(), ref1 = _mm512_setzero_pd(), model0 = _mm512_setzero_pd(), model1 = _mm512_setzero_pd();
    __m512d cross0 = _mm512_setzero_pd(), cross1 = _mm512_setzero_pd();
    for (std::int64_t j = 0; j < n; j += 16) {
        const auto mask = static_cast<__mmask16>(n - j >= 16 ? 0xFFFFU : (1U << (n - j)) - 1U);
        const __m512 da = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, a + j), vma);
        const __m512 db = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, b + j), vmb);
        const __m512 ea = _mm512_maskz_mov_ps(mask, exp512(da));
        const __m512 eb = _mm512_maskz_mov_ps(mask, exp512(db));
        const __m512 cross = _mm512_maskz_mov_ps(mask, _mm512_mul_ps(ea, _mm512_sub_ps(da, db)));
        ref0 = _mm512_add_pd(ref0, cvt8(lowerHalf(ea)));
        ref1 = _mm512_add_pd(ref1, cvt8(upperHalf(ea)));
        model0 = _mm512_add_pd(model0, cvt8(lowerHalf(eb)));
        model1 = _mm512_add_pd(model1, cvt8(upperHalf(eb)));
        cross0 = _mm512_add_pd(cross0, cvt8(lowerHalf(cross)));
        cross1 = _mm512_add_pd(cross1, cvt8(upperHalf(cross)));
    }
    return {lanesSum(_mm512_add_pd(ref0, ref1)), lanesSum(_mm512_add_pd(model0, model1)), lanesSum(_mm512_add_pd(cross0, cross1))};
}

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
#endif

/// Float32 rows [m, V] on the CPU, in parallel over rows.
void compareRowsNative(const float *ref, const float *model, std::int64_t m, std::int64_t v, const std::int64_t *targets, double *out)
{
    auto *sumsOf = CPPL_BY_ISA(rowSumsAvx512, rowSumsGeneric);
    auto *maxOf = CPPL_BY_ISA(rowMaxAvx512, rowMaxOf);
    cpu::eachRow(m, intraOp(), [&](std::int64_t r) {
        const float *a = ref + r * v, *b = model + r * v;
        const float ma = maxOf(a, v), mb = maxOf(b, v);
        const RowSums s = sumsOf(a, b, v, ma, mb);
        const double lnRef = std::log(s.ref);
        double *o = out + r * kComparedColumns;
        o[kRefLogProb] = (static_cast<double>(a[targets[r]]) - static_cast<double>(ma)) - lnRef;
        o[kKld] = s.cross / s.ref - lnRef + std::log(s.model);
        o[kSameTop] = firstIndexOf(a, v, ma) == firstIndexOf(b, v, mb) ? 1.0 : 0.0;
    });
}

void compareRowsTorch(const at::Tensor &ref, const at::Tensor &model, const at::Tensor &targets, at::Tensor out)
{
    const at::Tensor la = at::log_softmax(ref.to(at::kFloat), -1);
    const at::Tensor lb = at::log_softmax(model.to(at::kFloat), -1);
    const at::Tensor kl = at::sum(la.exp().mul(la.sub(lb)), {-1}, false, at::kDouble);
    const at::Tensor lp = la.gather(1, targets.view({-1, 1}).to(la.device())).view({-1}).to(at::kDouble);
    const at::Tensor same = at::eq(la.argmax(-1), lb.argmax(-1)).to(at::kDouble);
    out.copy_(at::stack({lp, kl, same}, 1));
}

} // namespace

void compareChunk(const at::Tensor &ref, const at::Tensor &model, const at::Tensor &targets, at::Tensor out)
{
    CPPL_ENFORCE(ref.dim() == 2 && ref.sizes() == model.sizes() && targets.numel() == ref.size(0), "two [m, V] chunks and m targets");
    const auto plainCpu = [](const at::Tensor &t) { return t.is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous(); };
    if (plainCpu(ref) && plainCpu(model) && out.is_cpu() && out.is_contiguous()) {
        const at::Tensor t = targets.to(at::kCPU).to(at::kLong).contiguous();
        compareRowsNative(ref.data_ptr<float>(), model.data_ptr<float>(), ref.size(0), ref.size(1), t.data_ptr<std::int64_t>(), out.data_ptr<double>());
        return;
    }
    compareRowsTorch(ref, model, targets, std::move(out));
}

} // namespace cppl::agent
