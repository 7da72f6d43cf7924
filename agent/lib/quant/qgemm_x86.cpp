// SPDX-License-Identifier: MIT
// The int8 GEMM's x86 kernels: AVX-512 VNNI, AVX-VNNI and AVX2, each reproducing the portable
// kernel's arithmetic (qgemm.h) bit for bit. Compiled with -ffp-contract=off (agent/CMakeLists.txt).
//
// Operands: vpdpbusd multiplies unsigned by signed bytes, so the weights' codes (0..255 or nibbles
// 0..15) are the unsigned side and the activations (-127..127) the signed one; the zero point comes
// off afterwards as an integer (zero * code sum of the block, prepared with the activation tile).
// AVX2's vpmaddubsw sums pairs into saturating int16, which 255 * 127 * 2 would overflow, so its
// int8 path computes with code - 128 through the sign trick (|w| unsigned, sign moved onto a):
// 128 * 127 * 2 fits. Int4 codes are unpacked into this int8 path in registers (mask, shift).
#if defined(__x86_64__) || defined(__i386__)

#include "qgemm_kernels.h"
#include "quantized_matrix.h"

// GCC 12's AVX-512 intrinsics start their masked builtins from `__m512i __Y = __Y;` (an undefined
// vector on purpose), which -Wmaybe-uninitialized reports in every caller once inlined.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#define CPPL_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))
#define CPPL_AVX_VNNI __attribute__((target("avx2,fma,f16c,avxvnni")))
#define CPPL_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace cppl::agent::quant::detail {

namespace {

constexpr int kVnniRows = 6; // 6 x 32 tile: 12 int32 and 12 float accumulators in 32 zmm registers

inline std::int32_t load4(const std::int8_t *p)
{
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// A block's 32 floats, zero past n.
inline const float *blockOf(const float *x, std::int64_t n, float *pad)
{
    if (n == kBlock)
        return x;
    std::fill(pad, pad + kBlock, 0.0F);
    std::copy(x, x + n, pad);
    return pad;
}

// ---- activation quantization (qgemm.h, step 1) ----

CPPL_AVX512_VNNI void actRowAvx512(const float *x, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums)
{
    const __m512i absMask = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    float pad[kBlock];
    for (std::int64_t b = 0, first = 0; first < k; ++b, first += kBlock) {
        const float *v = blockOf(x + first, std::min(kBlock, k - first), pad);
        const __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
        const __m512i m = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v0), absMask), _mm512_and_si512(_mm512_castps_si512(v1), absMask));
        const auto amaxBits = static_cast<std::uint32_t>(_mm512_reduce_max_epu32(m));
        std::memset(codes + first, 0, kBlock);
        sums[b] = 0;
        if (amaxBits >= 0x7F800000U) {
            scales[b] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const float sa = std::bit_cast<float>(amaxBits) / 127.0F;
        scales[b] = sa;
        if (amaxBits == 0)
            continue;
        const __m512 s = _mm512_set1_ps(sa);
        constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
        __m512i q0 = _mm512_cvt_roundps_epi32(_mm512_div_ps(v0, s), kRound);
        __m512i q1 = _mm512_cvt_roundps_epi32(_mm512_div_ps(v1, s), kRound);
        q0 = _mm512_max_epi32(_mm512_min_epi32(q0, hi), lo);
        q1 = _mm512_max_epi32(_mm512_min_epi32(q1, hi), lo);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + first), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i *>(codes + first + 16), _mm512_cvtepi32_epi8(q1));
        sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
}

CPPL_AVX2 std::uint32_t hmaxEpu32(__m256i v)
{
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(m));
}

CPPL_AVX2 std::int32_t hsumEpi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

CPPL_AVX2 void actRowAvx2(const float *x, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums)
{
    const __m256i absMask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    float pad[kBlock];
    for (std::int64_t b = 0, first = 0; first < k; ++b, first += kBlock) {
        const float *v = blockOf(x + first, std::min(kBlock, k - first), pad);
        __m256 vs[4];
        __m256i m = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            vs[j] = _mm256_loadu_ps(v + 8 * j);
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(vs[j]), absMask));
        }
        const std::uint32_t amaxBits = hmaxEpu32(m);
        std::memset(codes + first, 0, kBlock);
        sums[b] = 0;
        if (amaxBits >= 0x7F800000U) {
            scales[b] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const float sa = std::bit_cast<float>(amaxBits) / 127.0F;
        scales[b] = sa;
        if (amaxBits == 0)
            continue;
        const __m256 s = _mm256_set1_ps(sa);
        __m256i q[4];
        for (int j = 0; j < 4; ++j) {
            const __m256 r = _mm256_round_ps(_mm256_div_ps(vs[j], s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q[j] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvttps_epi32(r), hi), lo);
        }
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(codes + first), _mm256_permutevar8x32_epi32(packed, order));
        sums[b] = hsumEpi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    }
}

// ---- AVX-512 VNNI tile kernel: R x 32, two zmm columns ----

template <int R>
CPPL_AVX512_VNNI inline void dotStep(__m512i (&acc)[R][2], __m512i w0, __m512i w1, const std::int8_t *ap)
{
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
        const __m512i av = _mm512_set1_epi32(load4(ap + i * 4));
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], w0, av);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], w1, av);
    }
}

template <int R, int Bits, bool Zeros>
CPPL_AVX512_VNNI void tileVnni512(const TileArgs &t)
{
    __m512 f[R][2];
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < 2; ++j) {
            f[i][j] = t.loadC ? _mm512_loadu_ps(t.c + i * t.ldc + 16 * j) : _mm512_setzero_ps();
            if (t.bias)
                f[i][j] = _mm512_add_ps(f[i][j], _mm512_loadu_ps(t.bias + 16 * j));
        }
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const std::int8_t *ap = t.a.codes;
    const std::uint8_t *wp = t.codes;
    for (std::int64_t b = 0, g = 0, inGroup = 0; b < t.blocks; ++b) {
        __m512i acc[R][2];
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i)
            acc[i][0] = acc[i][1] = _mm512_set1_epi32(t.a.corr[b * R + i]);
        if constexpr (Zeros) {
            const __m512i z0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(t.zeros + g * kQPanel)));
            const __m512i z1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i *>(t.zeros + g * kQPanel + 16)));
#pragma GCC unroll 8
            for (int i = 0; i < R; ++i) {
                const __m512i ns = _mm512_set1_epi32(t.a.negSum[b * R + i]);
                acc[i][0] = _mm512_add_epi32(acc[i][0], _mm512_mullo_epi32(z0, ns));
                acc[i][1] = _mm512_add_epi32(acc[i][1], _mm512_mullo_epi32(z1, ns));
            }
        }
        if constexpr (Bits == 8) {
#pragma GCC unroll 8
            for (int s = 0; s < 8; ++s, wp += 128, ap += R * 4)
                dotStep<R>(acc, _mm512_loadu_si512(wp), _mm512_loadu_si512(wp + 64), ap);
        } else {
#pragma GCC unroll 4
            for (int o = 0; o < 4; ++o, wp += 128, ap += 2 * R * 4) {
                const __m512i v0 = _mm512_loadu_si512(wp), v1 = _mm512_loadu_si512(wp + 64);
                dotStep<R>(acc, _mm512_and_si512(v0, low4), _mm512_and_si512(v1, low4), ap);
                dotStep<R>(acc, _mm512_and_si512(_mm512_srli_epi16(v0, 4), low4), _mm512_and_si512(_mm512_srli_epi16(v1, 4), low4), ap + R * 4);
            }
        }
        const __m512 s0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(t.scales + g * kQPanel)));
        const __m512 s1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(t.scales + g * kQPanel + 16)));
#pragma GCC unroll 8
        for (int i = 0; i < R; ++i) {
            const __m512 sa = _mm512_set1_ps(t.a.scales[b * R + i]);
            f[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][0]), _mm512_mul_ps(sa, s0), f[i][0]);
            f[i][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][1]), _mm512_mul_ps(sa, s1), f[i][1]);
        }
        if (++inGroup == t.blocksPerGroup) {
            inGroup = 0;
            ++g;
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
        _mm512_storeu_ps(t.c + i * t.ldc, f[i][0]);
        _mm512_storeu_ps(t.c + i * t.ldc + 16, f[i][1]);
    }
}

} // namespace

} // namespace cppl::agent::quant::detail

// ---- AVX-VNNI and AVX2 tile kernels: one source (qgemm_ymm.inc) compiled twice, each copy under its
// own target, so the AVX2 copy can hold no AVX-VNNI instruction ----
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avxvnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avxvnni")
#endif
namespace cppl::agent::quant::detail::ymm_vnni {
constexpr bool kVnni = true;
#include "qgemm_ymm.inc"
} // namespace cppl::agent::quant::detail::ymm_vnni
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace cppl::agent::quant::detail::ymm_avx2 {
constexpr bool kVnni = false;
#include "qgemm_ymm.inc"
} // namespace cppl::agent::quant::detail::ymm_avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace cppl::agent::quant::detail {

IntKernels avx512VnniKernels()
{
    IntKernels k;
    k.rows = kVnniRows;
    k.actRow = actRowAvx512;
    k.tile[0][0] = tileVnni512<kVnniRows, 8, false>;
    k.tile[0][1] = tileVnni512<kVnniRows, 8, true>;
    k.tile[1][0] = tileVnni512<kVnniRows, 4, false>;
    k.tile[1][1] = tileVnni512<kVnniRows, 4, true>;
    return k;
}

IntKernels avxVnniKernels()
{
    IntKernels k;
    k.rows = ymm_vnni::kRows;
    k.actRow = actRowAvx2;
    k.tile[0][0] = ymm_vnni::tile<8, false>;
    k.tile[0][1] = ymm_vnni::tile<8, true>;
    k.tile[1][0] = ymm_vnni::tile<4, false>;
    k.tile[1][1] = ymm_vnni::tile<4, true>;
    return k;
}

IntKernels avx2Kernels()
{
    IntKernels k = avxVnniKernels();
    k.rows = ymm_avx2::kRows;
    k.tile[0][0] = ymm_avx2::tile<8, false>;
    k.tile[0][1] = ymm_avx2::tile<8, true>;
    k.tile[1][0] = ymm_avx2::tile<4, false>;
    k.tile[1][1] = ymm_avx2::tile<4, true>;
    k.corrConst[0] = 128; // its int8 dot products are of code - 128 (the sign trick)
    return k;
}

} // namespace cppl::agent::quant::detail

#endif
