// SPDX-License-Identifier: MIT
// The int8 GEMM's driver (activation tiles, tasks over row blocks and column panels) and its
// portable kernels, which define the arithmetic every SIMD path reproduces (qgemm.h). Compiled with
// -ffp-contract=off (agent/CMakeLists.txt): the combination of the int32 dot products with the
// scales is a given sequence of float32 operations, which a compiler's contraction would change.
#include "qgemm.h"

#include "half.h"
#include "qgemm_kernels.h"
#include "quantize.h"
#include "tile_tasks.h"

#include "cppl/errors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace cppl::agent::quant {

namespace detail {

void quantizeActRowGeneric(const float *x, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums)
{
    const std::int64_t blocks = (k + kBlock - 1) / kBlock;
    for (std::int64_t b = 0; b < blocks; ++b) {
        const std::int64_t first = b * kBlock, n = std::min(kBlock, k - first);
        std::int8_t *q = codes + first;
        std::fill(q, q + kBlock, std::int8_t{0});
        // max |x| on the bit patterns: exact, and NaN or infinity compare above every finite value
        std::uint32_t amaxBits = 0;
        for (std::int64_t i = 0; i < n; ++i)
            amaxBits = std::max(amaxBits, std::bit_cast<std::uint32_t>(x[first + i]) & 0x7FFFFFFFU);
        sums[b] = 0;
        if (amaxBits >= 0x7F800000U) {
            scales[b] = std::numeric_limits<float>::quiet_NaN();
            continue;
        }
        const float sa = std::bit_cast<float>(amaxBits) / 127.0F;
        scales[b] = sa;
        if (amaxBits == 0)
            continue;
        std::int32_t sum = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const float r = std::clamp(roundHalfEven(x[first + i] / sa), -127.0F, 127.0F);
            q[i] = static_cast<std::int8_t>(r);
            sum += q[i];
        }
        sums[b] = sum;
    }
}

namespace {

constexpr int kGenericRows = 4;

template <int Bits>
int panelCode(const std::uint8_t *codes, std::int64_t col, std::int64_t p)
{
    if constexpr (Bits == 8) {
        return codes[(p / 4) * 128 + col * 4 + p % 4];
    } else {
        const std::uint8_t byte = codes[(p / 8) * 128 + col * 4 + p % 4];
        return p % 8 < 4 ? (byte & 0x0F) : (byte >> 4);
    }
}

template <int Bits, bool Zeros>
void tileGeneric(const TileArgs &t)
{
    constexpr int R = kGenericRows;
    float acc[R][kQPanel];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < kQPanel; ++j) {
            acc[i][j] = t.loadC ? t.c[i * t.ldc + j] : 0.0F;
            if (t.bias)
                acc[i][j] += t.bias[j];
        }
    for (std::int64_t b = 0; b < t.blocks; ++b) {
        const std::int64_t g = b / t.blocksPerGroup;
        for (int j = 0; j < kQPanel; ++j) {
            const float sw = halfToFloat(t.scales[g * kQPanel + j]);
            const int z = Zeros ? t.zeros[g * kQPanel + j] : 0;
            for (int i = 0; i < R; ++i) {
                std::int32_t d = t.a.corr[b * R + i] + (Zeros ? z * t.a.negSum[b * R + i] : 0);
                for (std::int64_t p = b * kBlock; p < (b + 1) * kBlock; ++p)
                    d += panelCode<Bits>(t.codes, j, p) * t.a.codes[(p / 4) * R * 4 + i * 4 + p % 4];
                acc[i][j] = std::fma(static_cast<float>(d), t.a.scales[b * R + i] * sw, acc[i][j]);
            }
        }
    }
    for (int i = 0; i < R; ++i)
        std::memcpy(t.c + i * t.ldc, acc[i], sizeof acc[i]);
}

} // namespace

IntKernels genericKernels()
{
    IntKernels k;
    k.rows = kGenericRows;
    k.actRow = quantizeActRowGeneric;
    k.tile[0][0] = tileGeneric<8, false>;
    k.tile[0][1] = tileGeneric<8, true>;
    k.tile[1][0] = tileGeneric<4, false>;
    k.tile[1][1] = tileGeneric<4, true>;
    return k;
}

} // namespace detail

namespace {

using detail::ActTile;
using detail::IntKernels;
using detail::TileArgs;

IntKernels kernelsFor(IntIsa isa)
{
    if (!supported(isa))
        throw ConfigError(std::string("this CPU cannot run the ") + isaName(isa) + " int8 kernels (it has: " + cpuFlagsSeen() + ")");
#if defined(__x86_64__) || defined(__i386__)
    if (isa == IntIsa::Avx512Vnni)
        return detail::avx512VnniKernels();
    if (isa == IntIsa::AvxVnni)
        return detail::avxVnniKernels();
    if (isa == IntIsa::Avx2)
        return detail::avx2Kernels();
#endif
    return detail::genericKernels();
}

// Grow-only scratch of the calling thread: the activation tiles of one product.
struct Scratch
{
    std::unique_ptr<unsigned char[], FreeAligned> data;
    std::int64_t size = 0;
    unsigned char *get(std::int64_t bytes)
    {
        if (bytes > size) {
            data.reset(static_cast<unsigned char *>(allocateAligned(bytes)));
            size = bytes;
        }
        return data.get();
    }
};

// The activations of all rows as tiles of R rows (qgemm_kernels.h, ActTile).
class ActTiles
{
public:
    ActTiles(std::int64_t m, std::int64_t rows, std::int64_t blocks, bool negSum) : m_rows(rows), m_blocks(blocks), m_tiles((m + rows - 1) / rows)
    {
        thread_local Scratch scratch;
        const std::int64_t codes = m_tiles * tileCodes(), perBlock = m_tiles * blocks * rows;
        unsigned char *p = scratch.get(codes + perBlock * 4 * (negSum ? 3 : 2) + 256);
        m_codes = reinterpret_cast<std::int8_t *>(p);
        m_scales = reinterpret_cast<float *>(p + (codes + 63) / 64 * 64);
        m_corr = reinterpret_cast<std::int32_t *>(m_scales + perBlock);
        m_negSum = negSum ? m_corr + perBlock : nullptr;
    }
    [[nodiscard]] std::int64_t tiles() const { return m_tiles; }
    [[nodiscard]] std::int64_t tileCodes() const { return m_blocks * kBlock * m_rows; }
    [[nodiscard]] ActTile tile(std::int64_t t) const
    {
        const std::int64_t per = m_blocks * m_rows;
        return {m_codes + t * tileCodes(), m_scales + t * per, m_corr + t * per, m_negSum ? m_negSum + t * per : nullptr};
    }
    // Quantizes rows [t * R, t * R + R) of A (zeros past m) into tile t.
    void fill(std::int64_t t, const float *a, std::int64_t lda, std::int64_t m, std::int64_t k, const std::vector<std::int32_t> &order,
              const IntKernels &kern, std::int32_t corrFactor) const
    {
        thread_local std::vector<float> gathered;
        thread_local std::vector<std::int8_t> codes;
        thread_local std::vector<float> scales;
        thread_local std::vector<std::int32_t> sums;
        codes.resize(static_cast<std::size_t>(m_blocks * kBlock));
        scales.resize(static_cast<std::size_t>(m_blocks));
        sums.resize(static_cast<std::size_t>(m_blocks));
        std::int8_t *dst = m_codes + t * tileCodes();
        const std::int64_t per = m_blocks * m_rows;
        float *tileScales = m_scales + t * per;
        std::int32_t *corr = m_corr + t * per, *negSum = m_negSum ? m_negSum + t * per : nullptr;
        for (std::int64_t i = 0; i < m_rows; ++i) {
            const std::int64_t row = t * m_rows + i;
            if (row >= m) {
                std::fill(codes.begin(), codes.end(), std::int8_t{0});
                std::fill(scales.begin(), scales.end(), 0.0F);
                std::fill(sums.begin(), sums.end(), 0);
            } else {
                const float *x = a + row * lda;
                if (!order.empty()) { // act-order GPTQ: the codes hold the input features in this order
                    gathered.resize(static_cast<std::size_t>(k));
                    for (std::int64_t p = 0; p < k; ++p)
                        gathered[static_cast<std::size_t>(p)] = x[order[static_cast<std::size_t>(p)]];
                    x = gathered.data();
                }
                kern.actRow(x, k, codes.data(), scales.data(), sums.data());
            }
            for (std::int64_t q = 0; q < m_blocks * kBlock / 4; ++q)
                std::memcpy(dst + (q * m_rows + i) * 4, codes.data() + q * 4, 4);
            for (std::int64_t b = 0; b < m_blocks; ++b) {
                tileScales[b * m_rows + i] = scales[static_cast<std::size_t>(b)];
                corr[b * m_rows + i] = corrFactor * sums[static_cast<std::size_t>(b)];
                if (negSum)
                    negSum[b * m_rows + i] = -sums[static_cast<std::size_t>(b)];
            }
        }
    }

private:
    std::int64_t m_rows, m_blocks, m_tiles;
    std::int8_t *m_codes = nullptr;
    float *m_scales = nullptr;
    std::int32_t *m_corr = nullptr, *m_negSum = nullptr;
};

} // namespace

void qgemm(IntIsa isa, const float *a, std::int64_t lda, std::int64_t m, const QuantizedMatrix &w, float *c, std::int64_t ldc, const float *bias,
           bool accumulate, const cpu::ParallelFor &parallel)
{
    if (m <= 0 || w.empty())
        return;
    const IntKernels kern = kernelsFor(isa);
    const QuantFormat &f = w.format();
    const detail::TileKernel kernel = kern.tile[f.bits == 4 ? 1 : 0][f.perGroupZeros ? 1 : 0];
    const std::int64_t R = kern.rows;
    CPPL_ENFORCE(R <= 16 && kernel, "qgemm: kernel table incomplete");
    const auto corrFactor = static_cast<std::int32_t>(kern.corrPerOffset * f.zeroOffset + kern.corrConst[f.bits == 4 ? 1 : 0]);
    const ActTiles act(m, R, w.blocks(), f.perGroupZeros);
    parallel(act.tiles(), [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t)
            act.fill(t, a, lda, m, w.k(), w.inputOrder(), kern, corrFactor);
    });
    detail::forEachTile(m, w.n(), R, c, ldc, bias, accumulate, parallel, [&](std::int64_t t, std::int64_t p, const detail::TileOut &out) {
        kernel(TileArgs{act.tile(t), w.panelCodes(p), w.panelScales(p), w.panelZeros(p), w.blocks(), w.blocksPerGroup(), out.c, out.ldc,
                        out.bias, out.loadC});
    });
}

void qgemm(const float *a, std::int64_t lda, std::int64_t m, const QuantizedMatrix &w, float *c, std::int64_t ldc, const float *bias,
           bool accumulate, const cpu::ParallelFor &parallel)
{
    qgemm(detectIntIsa(), a, lda, m, w, c, ldc, bias, accumulate, parallel);
}

void quantizeActivationRow(const float *a, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums)
{
    detail::quantizeActRowGeneric(a, k, codes, scales, sums);
}

void quantizeActivationRow(IntIsa isa, const float *a, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums)
{
    kernelsFor(isa).actRow(a, k, codes, scales, sums);
}

} // namespace cppl::agent::quant
