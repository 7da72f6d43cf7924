// SPDX-License-Identifier: MIT
#include "cpu_gemm.h"
#include "cpu_simd.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#endif

namespace cppl::agent::cpu {

namespace {

constexpr std::int64_t kMr = 8;    // rows of a micro-tile
constexpr std::int64_t kKc = 512;  // k block: an 8 x 512 A strip and a 512 x 32 B strip stay in L1/L2
constexpr std::int64_t kMb = 64;   // rows packed together (reused across every column panel)

// A micro-kernel computes one full 8 x 32 tile of C: acc = (loadC ? C : 0) + bias, then one FMA per
// k in order. ap holds the tile's 8 A values of step k at ap + k * as (as = 8: packed A), bp is
// [kc][32] (a B panel from row k0, 64-byte aligned).
using Kernel = void (*)(std::int64_t kc, const float *ap, std::int64_t as, const float *bp, float *c, std::int64_t ldc, const float *bias,
                        bool loadC);

void kernelGeneric(std::int64_t kc, const float *ap, std::int64_t as, const float *bp, float *c, std::int64_t ldc, const float *bias, bool loadC)
{
    float acc[kMr][kPanel];
    for (std::int64_t i = 0; i < kMr; ++i)
        for (std::int64_t j = 0; j < kPanel; ++j)
            acc[i][j] = (loadC ? c[i * ldc + j] : 0.0F) + (bias ? bias[j] : 0.0F);
    for (std::int64_t k = 0; k < kc; ++k) {
        const float *b = bp + k * kPanel;
        for (std::int64_t i = 0; i < kMr; ++i) {
            const float a = ap[k * as + i];
            for (std::int64_t j = 0; j < kPanel; ++j)
                acc[i][j] += a * b[j];
        }
    }
    for (std::int64_t i = 0; i < kMr; ++i)
        std::memcpy(c + i * ldc, acc[i], sizeof acc[i]);
}

#if CPPL_X86
// AVX2: the 8 x 32 tile as four 4 x 16 quarters (8 accumulators each; 16 ymm registers in all).
__attribute__((target("avx2,fma"))) void kernelAvx2(std::int64_t kc, const float *ap, std::int64_t as, const float *bp, float *c,
                                                    std::int64_t ldc, const float *bias, bool loadC)
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
                    const __m256 a = _mm256_broadcast_ss(ap + k * as + r0 + i);
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
__attribute__((target("avx512f"))) void kernelAvx512(std::int64_t kc, const float *ap, std::int64_t as, const float *bp, float *c,
                                                      std::int64_t ldc, const float *bias, bool loadC)
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
            const __m512 a = _mm512_set1_ps(ap[k * as + i]);
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
// dst[c * ldd + r] = src[r * lds + c] for 8 rows r and k columns c: the transposition every packing
// does (A into tiles, weights and queries into panels). Pure data movement, so the bits are the same
// on every path.
void transpose8Generic(const float *src, std::int64_t lds, std::int64_t k, float *dst, std::int64_t ldd)
{
    for (std::int64_t r = 0; r < 8; ++r)
        for (std::int64_t c = 0; c < k; ++c)
            dst[c * ldd + r] = src[r * lds + c];
}

#if CPPL_X86
// 8 x 8 blocks in ymm registers (unpack, shuffle, 128-bit lane swap); the last k % 8 columns scalar.
__attribute__((target("avx2"))) void transpose8Avx2(const float *src, std::int64_t lds, std::int64_t k, float *dst, std::int64_t ldd)
{
    std::int64_t c = 0;
    for (; c + 8 <= k; c += 8) {
        __m256 r[8], t[8], u[8];
        for (int i = 0; i < 8; ++i)
            r[i] = _mm256_loadu_ps(src + i * lds + c);
        for (int i = 0; i < 8; i += 2) {
            t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 8; i += 4) {
            u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
            u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
            u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
            u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int i = 0; i < 4; ++i) {
            _mm256_storeu_ps(dst + (c + i) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
            _mm256_storeu_ps(dst + (c + i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
        }
    }
    for (; c < k; ++c)
        for (std::int64_t r = 0; r < 8; ++r)
            dst[c * ldd + r] = src[r * lds + c];
}
#endif

using Transpose8 = void (*)(const float *, std::int64_t, std::int64_t, float *, std::int64_t);

Transpose8 transpose8()
{
#if CPPL_X86
    static const Transpose8 f = detectIsa() == Isa::Generic ? transpose8Generic : transpose8Avx2;
    return f;
#else
    return transpose8Generic;
#endif
}

// Rows [m0, m0 + mb), k block [k0, k0 + kc) of A as [mb / 8][kc][8], zero rows past mb.
void packA(const float *a, std::int64_t lda, std::int64_t m0, std::int64_t mb, std::int64_t k0, std::int64_t kc, float *out)
{
    const Transpose8 tr = transpose8();
    for (std::int64_t t = 0; t * kMr < mb; ++t) {
        float *dst = out + t * kc * kMr;
        const std::int64_t rows = std::min(kMr, mb - t * kMr);
        if (rows == kMr) {
            tr(a + (m0 + t * kMr) * lda + k0, lda, kc, dst, kMr);
            continue;
        }
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

// Rows [0, m) of C (8-row tiles of a) x column panels [p0, p1), k block [k0, k0 + kc) of B, which is
// step aK0 onwards of a (0 when a holds just this block). Partial tiles
// go through a full 8 x 32 buffer, so every element of C runs the same kernel code whichever tile (and
// so whichever thread) it falls in.
void tileBlock(const APacked &a, std::int64_t aK0, std::int64_t m, const PanelView &b, std::int64_t p0, std::int64_t p1, std::int64_t k0,
               std::int64_t kc, float *c, std::int64_t ldc, const float *bias, bool loadC, float *tile, float *biasPad)
{
    const Kernel kernel = activeKernel();
    for (std::int64_t p = p0; p < p1; ++p) {
        const std::int64_t cols = std::min(kPanel, b.n - p * kPanel);
        const float *bp = b.data + p * b.panelStride + k0 * kPanel;
        const float *bb = k0 == 0 && bias ? bias + p * kPanel : nullptr;
        if (bb && cols < kPanel) {
            std::fill(biasPad, biasPad + kPanel, 0.0F);
            std::copy(bb, bb + cols, biasPad);
            bb = biasPad;
        }
        for (std::int64_t t = 0; t * kMr < m; ++t) {
            const std::int64_t rows = std::min(kMr, m - t * kMr);
            const float *ap = a.data + t * a.tileStride + aK0 * a.kStride;
            float *ct = c + t * kMr * ldc + p * kPanel;
            if (rows == kMr && cols == kPanel) {
                kernel(kc, ap, a.kStride, bp, ct, ldc, bb, loadC);
                continue;
            }
            if (loadC)
                for (std::int64_t i = 0; i < rows; ++i)
                    std::copy(ct + i * ldc, ct + i * ldc + cols, tile + i * kPanel);
            kernel(kc, ap, a.kStride, bp, tile, kPanel, bb, loadC);
            for (std::int64_t i = 0; i < rows; ++i)
                std::copy(tile + i * kPanel, tile + i * kPanel + cols, ct + i * ldc);
        }
    }
}

struct Scratch
{
    float *apack, *tile, *biasPad;
};

Scratch scratch()
{
    thread_local std::vector<float> buffer;
    const std::int64_t need = kMb * kKc + kMr * kPanel + kPanel + 32;
    if (static_cast<std::int64_t>(buffer.size()) < need)
        buffer.resize(static_cast<std::size_t>(need));
    float *apack = buffer.data();
    auto *tile = reinterpret_cast<float *>((reinterpret_cast<std::uintptr_t>(apack + kMb * kKc) + 63) & ~std::uintptr_t{63});
    return {apack, tile, tile + kMr * kPanel};
}

// Rows [m0, m1) x column panels [p0, p1) of C, A packed here by blocks of kMb rows x kKc.
void gemmBlock(const float *a, std::int64_t lda, std::int64_t m0, std::int64_t m1, const PanelView &b, std::int64_t p0, std::int64_t p1,
               float *c, std::int64_t ldc, const float *bias, bool accumulate)
{
    const Scratch s = scratch();
    for (std::int64_t mStart = m0; mStart < m1; mStart += kMb) {
        const std::int64_t mb = std::min(kMb, m1 - mStart);
        for (std::int64_t k0 = 0; k0 < b.k || k0 == 0; k0 += kKc) {
            const std::int64_t kc = std::min(kKc, b.k - k0);
            packA(a, lda, mStart, mb, k0, kc, s.apack);
            // The packed block holds steps k0..k0 + kc only, its tiles kc * 8 apart.
            tileBlock(APacked{s.apack, kMr, kc * kMr}, 0, mb, b, p0, p1, k0, kc, c + mStart * ldc, ldc, bias, accumulate || k0 > 0, s.tile, s.biasPad);
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
    const Transpose8 tr = transpose8();
    for (std::int64_t p = 0; p < panelCount(n); ++p) {
        float *dst = out + p * k * kPanel;
        for (std::int64_t j = 0; j < kPanel;) {
            const std::int64_t col = p * kPanel + j;
            if (col + 8 <= n) { // eight whole columns: one transposition
                tr(w + col * ldw, ldw, k, dst + j, kPanel);
                j += 8;
                continue;
            }
            if (col >= n) {
                for (std::int64_t kk = 0; kk < k; ++kk)
                    dst[kk * kPanel + j] = 0.0F;
            } else {
                const float *src = w + col * ldw;
                for (std::int64_t kk = 0; kk < k; ++kk)
                    dst[kk * kPanel + j] = src[kk];
            }
            ++j;
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

void FreeFloats::operator()(float *p) const { std::free(p); }

FloatBuffer allocateFloats(std::int64_t floats)
{
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    const std::size_t bytes = (static_cast<std::size_t>(std::max<std::int64_t>(1, floats)) * sizeof(float) + 63) / 64 * 64;
    const std::size_t align = bytes >= kHuge ? kHuge : 64;
    auto *p = static_cast<float *>(std::aligned_alloc(align, (bytes + align - 1) / align * align));
    if (!p)
        throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align == kHuge)
        (void)madvise(p, (bytes + align - 1) / align * align, MADV_HUGEPAGE); // advice only: without THP, 4 KiB pages as before
#endif
    std::memset(p, 0, bytes);
    return FloatBuffer(p);
}

PackedMatrix::PackedMatrix(std::int64_t n, std::int64_t k) : m_data(allocateFloats(panelCount(n) * k * kPanel)), m_n(n), m_k(k) {}

void PackedMatrix::unpackRow(std::int64_t row, float *out) const
{
    const float *src = m_data.get() + (row / kPanel) * m_k * kPanel + row % kPanel;
    for (std::int64_t kk = 0; kk < m_k; ++kk)
        out[kk] = src[kk * kPanel];
}

void PackedMatrix::packRows(std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows)
{
    const Transpose8 tr = transpose8();
    float *data = m_data.get();
    for (std::int64_t r = 0; r < rows;) {
        const std::int64_t col = row0 + r;
        float *dst = data + (col / kPanel) * m_k * kPanel + col % kPanel;
        const float *src = w + r * ldw;
        if (col % 8 == 0 && r + 8 <= rows) { // eight rows into one panel: one transposition
            tr(src, ldw, m_k, dst, kPanel);
            r += 8;
            continue;
        }
        for (std::int64_t kk = 0; kk < m_k; ++kk)
            dst[kk * kPanel] = src[kk];
        ++r;
    }
}

void packTiles(const float *a, std::int64_t lda, std::int64_t m, std::int64_t k, float *out)
{
    if (m > 0)
        packA(a, lda, 0, m, 0, k, out);
}

void gemmPackedSerial(const APacked &a, std::int64_t m, const PanelView &b, float *c, std::int64_t ldc)
{
    if (m <= 0 || b.n <= 0)
        return;
    const Scratch s = scratch();
    for (std::int64_t k0 = 0; k0 < b.k || k0 == 0; k0 += kKc) {
        tileBlock(a, k0, m, b, 0, panelCount(b.n), k0, std::min(kKc, b.k - k0), c, ldc, nullptr, k0 > 0, s.tile, s.biasPad);
        if (b.k == 0)
            break;
    }
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
