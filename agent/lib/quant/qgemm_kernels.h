// SPDX-License-Identifier: MIT
// Inside the int8 GEMM (qgemm.cpp drives, qgemm_x86.cpp and qgemm.cpp hold the kernels): the
// activation tiles the kernels read and the per-ISA kernel tables.
#pragma once

#include "quant_isa.h"

#include <cstdint>

namespace cppl::agent::quant::detail {

/// One tile of R rows of quantized activations, interleaved for the kernels' broadcasts:
/// codes [paddedK / 4][R][4] (a row's 4 codes of one quad side by side), and per block [blocks][R]
/// scales, corrections and (for per-group zero points) negated code sums. Rows past m are zeros.
struct ActTile
{
    const std::int8_t *codes = nullptr;
    const float *scales = nullptr;
    const std::int32_t *corr = nullptr;   ///< corrFactor * (sum of the block's codes)
    const std::int32_t *negSum = nullptr; ///< -(sum of the block's codes), only with per-group zero points
};

/// What a tile kernel computes: a full R x 32 tile of C over every block of k (qgemm.h, steps 2-3).
/// Its int32 dot product per block starts from `corr` (and, with per-group zero points, adds
/// zero * negSum), so each path's own offset convention lands on the same D_b.
struct TileArgs
{
    ActTile a;
    const std::uint8_t *codes = nullptr;  ///< the panel's codes (quantized_matrix.h layout)
    const std::uint16_t *scales = nullptr; ///< the panel's float16 scales [groups][32]
    const std::uint8_t *zeros = nullptr;  ///< the panel's zero points [groups][32], or null
    std::int64_t blocks = 0, blocksPerGroup = 0;
    float *c = nullptr;
    std::int64_t ldc = 0;
    const float *bias = nullptr; ///< 32 values (padded) or null
    bool loadC = false;
};
using TileKernel = void (*)(const TileArgs &);
/// Quantizes one row of k floats into blocks (qgemm.h, step 1); every path gives the same bytes.
using ActRowFn = void (*)(const float *x, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums);

struct IntKernels
{
    int rows = 4;                ///< R, rows per tile
    ActRowFn actRow = nullptr;
    TileKernel tile[2][2] = {};  ///< [bits == 4][per-group zeros]
    /// corr = (corrPerOffset * zeroOffset + corrConst[bits == 4]) * code sum: the offset this path
    /// removes from its dot product (vpdpbusd of unsigned codes: -zeroOffset; AVX2's signed int8
    /// path, which computes with code - 128: 128 - zeroOffset).
    int corrPerOffset = -1;
    int corrConst[2] = {0, 0};
};

[[nodiscard]] IntKernels genericKernels();
#if defined(__x86_64__) || defined(__i386__)
[[nodiscard]] IntKernels avx512VnniKernels();
[[nodiscard]] IntKernels avxVnniKernels();
[[nodiscard]] IntKernels avx2Kernels();
#endif

/// The portable activation quantizer (the definition the SIMD ones match).
void quantizeActRowGeneric(const float *x, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums);

} // namespace cppl::agent::quant::detail
