// SPDX-License-Identifier: MIT
// How the integer and bfloat16 GEMMs cut C into tasks and tiles (as cpu::gemm does): tasks are row
// blocks x groups of column panels, handed to the pool; a task runs its panels' tiles of R x 32.
// Each element of C is computed by one kernel call over all of k, so neither the split nor the
// thread that runs a task changes a bit.
#pragma once

#include "quantized_matrix.h" // kQPanel

#include "eval/cpu_gemm.h" // cpu::ParallelFor

#include <algorithm>
#include <cstdint>

namespace cppl::agent::quant::detail {

/// Where one kernel call writes: a full R x 32 tile (a buffer when the tile sticks out of C).
struct TileOut
{
    float *c;
    std::int64_t ldc;
    const float *bias; ///< 32 values or null
    bool loadC;
};

/// Calls kernel(t, p, out) for row tile t (rows t R .. t R + R - 1) and column panel p of C[m][n],
/// over the pool. Partial tiles go through a full R x 32 buffer (R <= 16), so every element runs the
/// same kernel code whichever tile and thread it falls in.
template <typename Kernel>
void forEachTile(std::int64_t m, std::int64_t n, std::int64_t R, float *c, std::int64_t ldc, const float *bias, bool accumulate,
                 const cpu::ParallelFor &parallel, const Kernel &kernel)
{
    constexpr std::int64_t kRowsPerBlock = 64; // rows whose activation tiles a task keeps in cache across its panels
    const std::int64_t tiles = (m + R - 1) / R;
    const std::int64_t tilesPerBlock = std::max<std::int64_t>(1, kRowsPerBlock / R);
    const std::int64_t rowBlocks = (tiles + tilesPerBlock - 1) / tilesPerBlock;
    const std::int64_t panels = (n + kQPanel - 1) / kQPanel;
    const std::int64_t groups = std::min(panels, std::max<std::int64_t>(1, 16 / rowBlocks));
    const std::int64_t perGroup = (panels + groups - 1) / groups;
    parallel(rowBlocks * groups, [&](std::int64_t begin, std::int64_t end) {
        float biasPad[kQPanel];
        alignas(64) float buffer[16 * kQPanel];
        for (std::int64_t task = begin; task < end; ++task) {
            const std::int64_t rb = task / groups, g = task % groups;
            for (std::int64_t p = g * perGroup; p < std::min(panels, (g + 1) * perGroup); ++p) {
                const std::int64_t cols = std::min(kQPanel, n - p * kQPanel);
                const float *pb = bias ? bias + p * kQPanel : nullptr;
                if (pb && cols < kQPanel) {
                    std::fill(biasPad, biasPad + kQPanel, 0.0F);
                    std::copy(pb, pb + cols, biasPad);
                    pb = biasPad;
                }
                for (std::int64_t t = rb * tilesPerBlock; t < std::min(tiles, (rb + 1) * tilesPerBlock); ++t) {
                    float *ct = c + t * R * ldc + p * kQPanel;
                    const std::int64_t rows = std::min(R, m - t * R);
                    if (rows == R && cols == kQPanel) {
                        kernel(t, p, TileOut{ct, ldc, pb, accumulate});
                        continue;
                    }
                    if (accumulate)
                        for (std::int64_t i = 0; i < rows; ++i)
                            std::copy(ct + i * ldc, ct + i * ldc + cols, buffer + i * kQPanel);
                    kernel(t, p, TileOut{buffer, kQPanel, pb, accumulate});
                    for (std::int64_t i = 0; i < rows; ++i)
                        std::copy(buffer + i * kQPanel, buffer + i * kQPanel + cols, ct + i * ldc);
                }
            }
        }
    });
}

} // namespace cppl::agent::quant::detail
