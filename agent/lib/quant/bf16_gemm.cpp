// SPDX-License-Identifier: MIT
// Compiled with -ffp-contract=off (agent/CMakeLists.txt): the portable kernel is vdpbf16ps's
// definition as a sequence of separately rounded operations.
#include "bf16_gemm.h"

#include "half.h"
#include "tile_tasks.h"

#include "cppl/errors.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 intrinsics start some builtins from `__m512i __Y = __Y;` (undefined on purpose),
// which -Wmaybe-uninitialized reports once inlined.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define CPPL_BF16_X86 1
#define CPPL_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma")))
#else
#define CPPL_BF16_X86 0
#endif

namespace cppl::agent::quant {

Bf16Matrix::Bf16Matrix(std::int64_t n, std::int64_t k) : m_n(n), m_k(k)
{
    if (n <= 0 || k <= 0)
        throw ConfigError("a bfloat16 matrix needs at least one row and one column, got " + std::to_string(n) + " x " + std::to_string(k));
    m_data.reset(static_cast<std::uint16_t *>(allocateAligned(panels() * paddedK() * kQPanel * 2)));
}

std::uint16_t &Bf16Matrix::slot(std::int64_t row, std::int64_t p)
{
    return m_data[static_cast<std::size_t>((row / kQPanel) * paddedK() * kQPanel + (p / 2) * 2 * kQPanel + (row % kQPanel) * 2 + p % 2)];
}

std::uint16_t Bf16Matrix::at(std::int64_t row, std::int64_t p) const { return const_cast<Bf16Matrix *>(this)->slot(row, p); }

void Bf16Matrix::packRows(std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows)
{
    CPPL_ENFORCE(row0 >= 0 && row0 + rows <= m_n, "Bf16Matrix::packRows: rows out of range");
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t p = 0; p < m_k; ++p)
            slot(row0 + r, p) = floatToBf16(w[r * ldw + p]);
}

void Bf16Matrix::packRowsBf16(std::int64_t row0, const std::uint16_t *w, std::int64_t ldw, std::int64_t rows)
{
    CPPL_ENFORCE(row0 >= 0 && row0 + rows <= m_n, "Bf16Matrix::packRowsBf16: rows out of range");
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t p = 0; p < m_k; ++p)
            slot(row0 + r, p) = w[r * ldw + p];
}

namespace {

// vdpbf16ps reads subnormal inputs as zero and flushes subnormal results to zero (of their sign).
float flushSubnormal(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0F, x) : x; }

} // namespace

float dpbf16Lane(float acc, std::uint16_t w0, std::uint16_t w1, std::uint16_t a0, std::uint16_t a1)
{
    acc = flushSubnormal(acc);
    acc = flushSubnormal(std::fma(flushSubnormal(bf16ToFloat(w1)), flushSubnormal(bf16ToFloat(a1)), acc));
    return flushSubnormal(std::fma(flushSubnormal(bf16ToFloat(w0)), flushSubnormal(bf16ToFloat(a0)), acc));
}

namespace {

// Activations as tiles of R rows: per pair of k values, R x 2 bfloat16 (one 32-bit word per row).
using RowToBf16 = void (*)(const float *x, std::int64_t k, std::uint16_t *out);

void rowToBf16Generic(const float *x, std::int64_t k, std::uint16_t *out)
{
    for (std::int64_t p = 0; p < k; ++p)
        out[p] = floatToBf16(x[p]);
}

struct Bf16Kernels
{
    int rows = 4;
    RowToBf16 convert = rowToBf16Generic;
    // A full R x 32 tile over all of k: a = the tile's activations, w = the panel, kp = padded k.
    void (*tile)(const std::uint32_t *a, const std::uint16_t *w, std::int64_t kp, const detail::TileOut &out) = nullptr;
};

constexpr int kGenericRows = 4;

void tileGeneric(const std::uint32_t *a, const std::uint16_t *w, std::int64_t kp, const detail::TileOut &out)
{
    constexpr int R = kGenericRows;
    float acc[R][kQPanel];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < kQPanel; ++j) {
            acc[i][j] = out.loadC ? out.c[i * out.ldc + j] : 0.0F;
            if (out.bias)
                acc[i][j] += out.bias[j];
        }
    for (std::int64_t pair = 0; pair < kp / 2; ++pair)
        for (int i = 0; i < R; ++i) {
            const std::uint32_t ai = a[pair * R + i];
            const auto a0 = static_cast<std::uint16_t>(ai & 0xFFFFU), a1 = static_cast<std::uint16_t>(ai >> 16);
            for (int j = 0; j < kQPanel; ++j)
                acc[i][j] = dpbf16Lane(acc[i][j], w[pair * 64 + 2 * j], w[pair * 64 + 2 * j + 1], a0, a1);
        }
    for (int i = 0; i < R; ++i)
        std::memcpy(out.c + i * out.ldc, acc[i], sizeof acc[i]);
}

#if CPPL_BF16_X86
constexpr int kBf16Rows = 12; // 12 x 32 tile: 24 zmm accumulators, two weight vectors per pair of k

CPPL_AVX512_BF16 void rowToBf16Avx512(const float *x, std::int64_t k, std::uint16_t *out)
{
    std::int64_t p = 0;
    for (; p + 16 <= k; p += 16) {
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + p));
        std::memcpy(out + p, &h, 32);
    }
    for (; p < k; ++p)
        out[p] = floatToBf16(x[p]);
}

template <int R>
CPPL_AVX512_BF16 void tileAvx512(const std::uint32_t *a, const std::uint16_t *w, std::int64_t kp, const detail::TileOut &out)
{
    __m512 f[R][2];
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < 2; ++j) {
            f[i][j] = out.loadC ? _mm512_loadu_ps(out.c + i * out.ldc + 16 * j) : _mm512_setzero_ps();
            if (out.bias)
                f[i][j] = _mm512_add_ps(f[i][j], _mm512_loadu_ps(out.bias + 16 * j));
        }
    for (std::int64_t pair = 0; pair < kp / 2; ++pair, w += 64, a += R) {
        // (a vector reinterpretation: GCC allows it only as a C-style cast)
        const auto w0 = (__m512bh)_mm512_loadu_si512(w), w1 = (__m512bh)_mm512_loadu_si512(w + 32);
#pragma GCC unroll 16
        for (int i = 0; i < R; ++i) {
            const auto ai = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
            f[i][0] = _mm512_dpbf16_ps(f[i][0], w0, ai);
            f[i][1] = _mm512_dpbf16_ps(f[i][1], w1, ai);
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
        _mm512_storeu_ps(out.c + i * out.ldc, f[i][0]);
        _mm512_storeu_ps(out.c + i * out.ldc + 16, f[i][1]);
    }
}
#endif

Bf16Kernels kernelsFor(Bf16Isa isa)
{
    if (!supported(isa))
        throw ConfigError(std::string("this CPU cannot run the ") + isaName(isa) + " bfloat16 kernels (it has: " + cpuFlagsSeen() + ")");
    Bf16Kernels k;
    k.rows = kGenericRows;
    k.tile = tileGeneric;
#if CPPL_BF16_X86
    if (isa == Bf16Isa::Avx512Bf16) {
        k.rows = kBf16Rows;
        k.convert = rowToBf16Avx512;
        k.tile = tileAvx512<kBf16Rows>;
    }
#endif
    return k;
}

// The activations of all rows as tiles (grow-only buffer of the calling thread).
std::uint32_t *packActivations(const float *a, std::int64_t lda, std::int64_t m, std::int64_t k, std::int64_t kp, const Bf16Kernels &kern,
                               const cpu::ParallelFor &parallel)
{
    thread_local std::unique_ptr<std::uint32_t[], FreeAligned> buffer;
    thread_local std::int64_t capacity = 0;
    const std::int64_t R = kern.rows, tiles = (m + R - 1) / R, words = tiles * R * kp / 2;
    if (words > capacity) {
        buffer.reset(static_cast<std::uint32_t *>(allocateAligned(words * 4)));
        capacity = words;
    }
    std::uint32_t *out = buffer.get();
    parallel(tiles, [&](std::int64_t t0, std::int64_t t1) {
        thread_local std::vector<std::uint16_t> row;
        row.assign(static_cast<std::size_t>(kp), 0);
        for (std::int64_t t = t0; t < t1; ++t)
            for (std::int64_t i = 0; i < R; ++i) {
                const std::int64_t r = t * R + i;
                if (r < m)
                    kern.convert(a + r * lda, k, row.data());
                else
                    std::fill(row.begin(), row.end(), std::uint16_t{0});
                std::uint32_t *dst = out + t * R * kp / 2 + i;
                for (std::int64_t pair = 0; pair < kp / 2; ++pair)
                    dst[pair * R] = std::uint32_t{row[static_cast<std::size_t>(2 * pair)]} | (std::uint32_t{row[static_cast<std::size_t>(2 * pair + 1)]} << 16);
            }
    });
    return out;
}

} // namespace

void bf16Gemm(Bf16Isa isa, const float *a, std::int64_t lda, std::int64_t m, const Bf16Matrix &w, float *c, std::int64_t ldc, const float *bias,
              bool accumulate, const cpu::ParallelFor &parallel)
{
    if (m <= 0 || w.empty())
        return;
    const Bf16Kernels kern = kernelsFor(isa);
    const std::int64_t R = kern.rows, kp = w.paddedK();
    const std::uint32_t *act = packActivations(a, lda, m, w.k(), kp, kern, parallel);
    detail::forEachTile(m, w.n(), R, c, ldc, bias, accumulate, parallel, [&](std::int64_t t, std::int64_t p, const detail::TileOut &out) {
        kern.tile(act + t * R * kp / 2, w.panel(p), kp, out);
    });
}

void bf16Gemm(const float *a, std::int64_t lda, std::int64_t m, const Bf16Matrix &w, float *c, std::int64_t ldc, const float *bias,
              bool accumulate, const cpu::ParallelFor &parallel)
{
    bf16Gemm(detectBf16Isa(), a, lda, m, w, c, ldc, bias, accumulate, parallel);
}

#if CPPL_BF16_X86
namespace {
CPPL_AVX512_BF16 void dpbf16Avx512(const float *acc, const std::uint16_t *w, const std::uint16_t *a, float *out)
{
    const __m512 r = _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(w), (__m512bh)_mm512_loadu_si512(a));
    _mm512_storeu_ps(out, r);
}
CPPL_AVX512_BF16 void cvtAvx512(const float *x, std::uint16_t *out)
{
    const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x));
    std::memcpy(out, &h, 32);
}
} // namespace
#endif

bool dpbf16Hardware(const float *acc, const std::uint16_t *w, const std::uint16_t *a, float *out)
{
#if CPPL_BF16_X86
    if (supported(Bf16Isa::Avx512Bf16)) {
        dpbf16Avx512(acc, w, a, out);
        return true;
    }
#endif
    (void)acc, (void)w, (void)a, (void)out;
    return false;
}

bool cvtBf16Hardware(const float *x, std::uint16_t *out)
{
#if CPPL_BF16_X86
    if (supported(Bf16Isa::Avx512Bf16)) {
        cvtAvx512(x, out);
        return true;
    }
#endif
    (void)x, (void)out;
    return false;
}

} // namespace cppl::agent::quant
