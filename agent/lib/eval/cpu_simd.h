// SPDX-License-Identifier: MIT
// For the kernels' sources only (cpu_gemm.cpp, cpu_attention.cpp, cpu_rows.cpp, cpu_log_softmax.cpp):
// x86 intrinsics where the target has them, the choice between a function's AVX-512 version and its
// portable one, and the AVX-512 helpers several kernels share.
#pragma once

#include "cpu_gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPPL_X86 1
#else
#define CPPL_X86 0
#endif

#include <algorithm>

// The AVX-512 version of a function where this CPU has it, else the portable one (the only one
// compiled off x86).
#if CPPL_X86
#define CPPL_BY_ISA(avx512, generic) (::cppl::agent::cpu::detectIsa() == ::cppl::agent::cpu::Isa::Avx512 ? (avx512) : (generic))
#else
#define CPPL_BY_ISA(avx512, generic) (generic)
#endif

namespace cppl::agent::cpu {

/// f(r) for every row r, the rows split over `parallel`.
template <typename F> void eachRow(std::int64_t rows, const ParallelFor &parallel, const F &f)
{
    parallel(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r)
            f(r);
    });
}

#if CPPL_X86
namespace simd {

// GCC 12's plain _mm512_max/roundscale/scalef/reduce expand _mm512_undefined_ps(), which -Wuninitialized
// flags under -Werror; the all-ones-mask forms compute the same without it.
constexpr __mmask16 kAll = 0xFFFF;

__attribute__((target("avx512f"))) inline __m512 max512(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, kAll, a, b); }

/// The 16 lanes reduced in lane order: their maximum, or their float sum.
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

/// The 8 double lanes summed in lane order.
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

} // namespace simd
#endif

} // namespace cppl::agent::cpu
