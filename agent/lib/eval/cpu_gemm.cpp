// SPDX-License-Identifier: MIT
#include "cpu_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPPL_X86 1
#else
#define CPPL_X86 0
#endif

namespace cppl::agent::cpu {

namespace {

constexpr std::int64_t kMr = 8;    // rows of a micro-tile
constexpr std::int64_t kKc = 512;  // k block: an 8 x 512 A strip and a 512 x 32 B strip stay in L1/L2
constexpr std::int64_t kMb = 64;   // rows packed together (reused across every column panel)

// A micro-kernel computes one full 8 x 32 tile of C: acc = (loadC ? C : 0) + bias, then one FMA per
// k in order. ap is [kc][8] (packed A), bp is [kc][32] (a B panel from row k0), 64-byte aligned.
using Kernel = void (*)(std::int64_t kc, const float *ap, const float *bp, float *c, std::int64_t ldc, const float *bias, bool loadC);

void kernelGeneric(std::int64_t kc, const float *ap, const float *bp, float *c, std::int64_t ldc, const float *bias, bool loadC)
{
    float acc[kMr][kPanel];
    for (std::int64_t i = 0; i < kMr; ++i)
        for (std::int64_t j = 0; j < kPanel; ++j)
            acc[i][j] = (loadC ? c[i * ldc + j] : 0.0F) + (bias ? bias[j] : 0.0F);
    for (std::int64_t k = 0; k < kc; ++k) {
        const float *b = bp + k * kPanel;
        for (std::int64_t i = 0; i < kMr; ++i) {
            const float a = ap[k * kMr + i];
            for (std::int64_t j = 0; j < kPanel; ++j)
                acc[i][j] += a * b[j];
        }
    }
    for (std::int64_t i = 0; i < kMr; ++i)
        std::memcpy(c + i * ldc, acc[i], sizeof acc[i]);
}

#if CPPL_X86
// AVX2: the 8 x 32 tile as four 4 x 16 quarters (8 accumulators each; 16 ymm registers in all).
__attribute__((target("avx2,fma"))) void kernelAvx2(std::int64_t kc, const float *ap, const float *bp, float *c, std::int64_t ldc,
                                                    const float *bias, bool loadC)
{
    for (std::int64_t r0 = 0; r0 < kMr; r0 += 4) {
        for (std::int64_t c0 = 0; c0 < kPanel; c0 += 16) {
            __m256 acc[4][2];
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 2; ++j) {
                    acc[i][j] = loadC ? _mm256_loadu_ps(c + (r0 + i) * ldc + c0 + 8 * j) : _mm256_setzero_ps();
                    if (bias)
                        acc[i][j] = _mm256_add_ps(acc[i][j], _mm256_loadu_ps(bias + c0 + 8 * j));
                }
            for (std::int64_t k = 0; k < kc; ++k) {
                const __m256 b0 = _mm256_load_ps(bp + k * kPanel + c0);
                const __m256 b1 = _mm256_load_ps(bp + k * kPanel + c0 + 8);
#pragma GCC unroll 4
                for (int i = 0; i < 4; ++i) {
                    const __m256 a = _mm256_broadcast_ss(ap + k * kMr + r0 + i);
                    acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
                    acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
                }
            }
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 2; ++j)
                    _mm256_storeu_ps(c + (r0 + i) * ldc + c0 + 8 * j, acc[i][j]);
        }
    }
}

// AVX-512: 16 zmm accumulators, two B loads and eight broadcast-FMA pairs per k.
__attribute__((target("avx512f"))) void kernelAvx512(std::int64_t kc, const float *ap, const float *bp, float *c, std::int64_t ldc,
                                                      const float *bias, bool loadC)
{
    __m512 acc[kMr][2];
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
        acc[i][0] = loadC ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
        acc[i][1] = loadC ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
        if (bias) {
            acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_loadu_ps(bias));
            acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_loadu_ps(bias + 16));
        }
    }
#pragma GCC unroll 2
    for (std::int64_t k = 0; k < kc; ++k) {
        const __m512 b0 = _mm512_load_ps(bp + k * kPanel);
        const __m512 b1 = _mm512_load_ps(bp + k * kPanel + 16);
#pragma GCC unroll 8
        for (int i = 0; i < kMr; ++i) {
            const __m512 a = _mm512_set1_ps(ap[k * kMr + i]);
            acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kMr; ++i) {
        _mm512_storeu_ps(c + i * ldc, acc[i][0]);
        _mm512_storeu_ps(c + i * ldc + 16, acc[i][1]);
    }
}
#endif

Kernel kernelFor(Isa isa)
{
#if CPPL_X86
    if (isa == Isa::Avx512)
        return kernelAvx512;
    if (isa == Isa::Avx2)
        return kernelAvx2;
#endif
    (void)isa;
    return kernelGeneric;
}

const Kernel &activeKernel()
{
    static const Kernel k = kernelFor(detectIsa());
    return k;
}

// Rows [m0, m0 + mb), k block [k0, k0 + kc) of A as [mb / 8][kc][8], zero rows past mb.
void packA(const float *a, std::int64_t lda, std::int64_t m0, std::int64_t mb, std::int64_t k0, std::int64_t kc, float *out)
{
    for (std::int64_t t = 0; t * kMr < mb; ++t) {
        float *dst = out + t * kc * kMr;
        const std::int64_t rows = std::min(kMr, mb - t * kMr);
        for (std::int64_t i = 0; i < kMr; ++i) {
            if (i >= rows) {
                for (std::int64_t k = 0; k < kc; ++k)
                    dst[k * kMr + i] = 0.0F;
                continue;
            }
            const float *src = a + (m0 + t * kMr + i) * lda + k0;
            for (std::int64_t k = 0; k < kc; ++k)
                dst[k * kMr + i] = src[k];
        }
    }
}

std::vector<float> &scratch()
{
    thread_local std::vector<float> buffer;
    return buffer;
}

// Rows [m0, m1) x column panels [p0, p1) of C. Partial tiles go through a full 8 x 32 buffer, so every
// element of C runs the same kernel code whichever tile (and so whichever thread) it falls in.
void gemmBlock(const float *a, std::int64_t lda, std::int64_t m0, std::int64_t m1, const PanelView &b, std::int64_t p0, std::int64_t p1,
               float *c, std::int64_t ldc, const float *bias, bool accumulate)
{
    const Kernel kernel = activeKernel();
    std::vector<float> &buf = scratch();
    const std::int64_t need = kMb * kKc + kMr * kPanel + kPanel + 32;
    if (static_cast<std::int64_t>(buf.size()) < need)
        buf.resize(static_cast<std::size_t>(need));
    float *apack = buf.data();
    auto *tile = reinterpret_cast<float *>((reinterpret_cast<std::uintptr_t>(apack + kMb * kKc) + 63) & ~std::uintptr_t{63});
    float *biasPad = tile + kMr * kPanel;
    for (std::int64_t mStart = m0; mStart < m1; mStart += kMb) {
        const std::int64_t mb = std::min(kMb, m1 - mStart);
        for (std::int64_t k0 = 0; k0 < b.k || k0 == 0; k0 += kKc) {
            const std::int64_t kc = std::min(kKc, b.k - k0);
            packA(a, lda, mStart, mb, k0, kc, apack);
            const bool loadC = accumulate || k0 > 0;
            for (std::int64_t p = p0; p < p1; ++p) {
                const std::int64_t cols = std::min(kPanel, b.n - p * kPanel);
                const float *bp = b.data + p * b.panelStride + k0 * kPanel;
                const float *bb = k0 == 0 && bias ? bias + p * kPanel : nullptr;
                if (bb && cols < kPanel) {
                    std::fill(biasPad, biasPad + kPanel, 0.0F);
                    std::copy(bb, bb + cols, biasPad);
                    bb = biasPad;
                }
                for (std::int64_t t = 0; t * kMr < mb; ++t) {
                    const std::int64_t rows = std::min(kMr, mb - t * kMr);
                    float *ct = c + (mStart + t * kMr) * ldc + p * kPanel;
                    if (rows == kMr && cols == kPanel) {
                        kernel(kc, apack + t * kc * kMr, bp, ct, ldc, bb, loadC);
                        continue;
                    }
                    if (loadC)
                        for (std::int64_t i = 0; i < rows; ++i)
                            std::copy(ct + i * ldc, ct + i * ldc + cols, tile + i * kPanel);
                    kernel(kc, apack + t * kc * kMr, bp, tile, kPanel, bb, loadC);
                    for (std::int64_t i = 0; i < rows; ++i)
                        std::copy(tile + i * kPanel, tile + i * kPanel + cols, ct + i * ldc);
                }
            }
            if (b.k == 0)
                break;
        }
    }
}

} // namespace

Isa detectIsa()
{
    static const Isa isa = [] {
#if CPPL_X86
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f"))
            return Isa::Avx512;
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            return Isa::Avx2;
#endif
        return Isa::Generic;
    }();
    return isa;
}

const char *isaName(Isa isa)
{
    return isa == Isa::Avx512 ? "avx512" : isa == Isa::Avx2 ? "avx2" : "generic";
}

void packTransposed(const float *w, std::int64_t ldw, std::int64_t n, std::int64_t k, float *out)
{
    for (std::int64_t p = 0; p < panelCount(n); ++p) {
        float *dst = out + p * k * kPanel;
        for (std::int64_t j = 0; j < kPanel; ++j) {
            const std::int64_t col = p * kPanel + j;
            if (col >= n) {
                for (std::int64_t kk = 0; kk < k; ++kk)
                    dst[kk * kPanel + j] = 0.0F;
                continue;
            }
            const float *src = w + col * ldw;
            for (std::int64_t kk = 0; kk < k; ++kk)
                dst[kk * kPanel + j] = src[kk];
        }
    }
}

void packPlain(const float *b, std::int64_t ldb, std::int64_t k, std::int64_t n, float *out, std::int64_t panelStride)
{
    for (std::int64_t p = 0; p < panelCount(n); ++p) {
        const std::int64_t cols = std::min(kPanel, n - p * kPanel);
        float *dst = out + p * panelStride;
        for (std::int64_t kk = 0; kk < k; ++kk) {
            std::copy(b + kk * ldb + p * kPanel, b + kk * ldb + p * kPanel + cols, dst + kk * kPanel);
            std::fill(dst + kk * kPanel + cols, dst + (kk + 1) * kPanel, 0.0F);
        }
    }
}

void PackedMatrix::Free::operator()(float *p) const { std::free(p); }

PackedMatrix::PackedMatrix(std::int64_t n, std::int64_t k) : m_n(n), m_k(k)
{
    const auto floats = static_cast<std::size_t>(std::max<std::int64_t>(1, panelCount(n) * k * kPanel));
    const std::size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    auto *p = static_cast<float *>(std::aligned_alloc(64, bytes));
    if (!p)
        throw std::bad_alloc();
    std::memset(p, 0, bytes);
    m_data.reset(p);
}

void PackedMatrix::packRows(std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows)
{
    float *data = m_data.get();
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t col = row0 + r;
        float *dst = data + (col / kPanel) * m_k * kPanel + col % kPanel;
        const float *src = w + r * ldw;
        for (std::int64_t kk = 0; kk < m_k; ++kk)
            dst[kk * kPanel] = src[kk];
    }
}

void gemmSerial(const float *a, std::int64_t lda, std::int64_t m, const PanelView &b, float *c, std::int64_t ldc, const float *bias,
                bool accumulate)
{
    if (m > 0 && b.n > 0)
        gemmBlock(a, lda, 0, m, b, 0, panelCount(b.n), c, ldc, bias, accumulate);
}

void gemm(const float *a, std::int64_t lda, std::int64_t m, const PanelView &b, float *c, std::int64_t ldc, const float *bias, bool accumulate,
          const ParallelFor &parallel)
{
    if (m <= 0 || b.n <= 0)
        return;
    // Tasks are row blocks x column groups; how they fall on threads never changes an element's sum.
    const std::int64_t rowBlocks = (m + kMb - 1) / kMb;
    const std::int64_t panels = panelCount(b.n);
    const std::int64_t groups = std::min(panels, std::max<std::int64_t>(1, 16 / rowBlocks));
    const std::int64_t perGroup = (panels + groups - 1) / groups;
    parallel(rowBlocks * groups, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t task = begin; task < end; ++task) {
            const std::int64_t rb = task / groups, g = task % groups;
            const std::int64_t p0 = g * perGroup, p1 = std::min(panels, p0 + perGroup);
            if (p0 < p1)
                gemmBlock(a, lda, rb * kMb, std::min(m, (rb + 1) * kMb), b, p0, p1, c, ldc, bias, accumulate);
        }
    });
}

} // namespace cppl::agent::cpu
