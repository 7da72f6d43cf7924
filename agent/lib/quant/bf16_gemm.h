// SPDX-License-Identifier: MIT
// C = A W^T with bfloat16 weights and activations and float32 accumulation, on AVX512_BF16's
// vdpbf16ps where the CPU has it: twice the multiply-adds per instruction of float32 FMA. Same
// contract as cpu::gemm: C[m][n] = (accumulate ? C : 0) + bias + A W^T, split over row blocks and
// column panels only, so the bits never depend on the thread count.
//
// The numbers, exactly: activations are rounded to bfloat16 as vcvtneps2bf16 does (half.h,
// floatToBf16); acc = (accumulate ? C : 0), plus bias when given; then for each pair of k values
// (2j, 2j + 1) in order, as vdpbf16ps defines it: acc = acc + w[2j+1] a[2j+1], then
// acc = acc + w[2j] a[2j], each one float32 fused multiply-add rounded to nearest even, with
// bfloat16 and float32 subnormals read as zero and subnormal results flushed to zero. The portable
// kernel performs exactly these operations (checked against the instruction in tst_quant_kernels),
// so both paths give the same bits. Against float32 weights this changes the numbers by bfloat16's
// rounding (8 significant bits), deterministically.
#pragma once

#include "quant_isa.h"
#include "quantized_matrix.h" // FreeAligned, allocateAligned

#include "eval/cpu_gemm.h" // cpu::ParallelFor (a type only)

#include <cstdint>
#include <memory>

namespace cppl::agent::quant {

/// Weights W[n][k] as bfloat16, packed in panels of 32 columns: for every pair of k values 64
/// values, column c's pair at 2c (k padded to even with zeros).
class Bf16Matrix
{
public:
    Bf16Matrix() = default;
    Bf16Matrix(std::int64_t n, std::int64_t k);
    /// Rows [row0, row0 + rows) from float32 W (row stride ldw), rounded by floatToBf16.
    void packRows(std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows);
    /// The same from weights already stored as bfloat16 (a BF16 checkpoint): their bits as they are.
    void packRowsBf16(std::int64_t row0, const std::uint16_t *w, std::int64_t ldw, std::int64_t rows);

    [[nodiscard]] std::int64_t n() const { return m_n; }
    [[nodiscard]] std::int64_t k() const { return m_k; }
    [[nodiscard]] std::int64_t paddedK() const { return (m_k + 1) / 2 * 2; }
    [[nodiscard]] std::int64_t panels() const { return (m_n + kQPanel - 1) / kQPanel; }
    [[nodiscard]] bool empty() const { return !m_data; }
    [[nodiscard]] std::uint16_t at(std::int64_t row, std::int64_t p) const;
    [[nodiscard]] const std::uint16_t *panel(std::int64_t p) const { return m_data.get() + p * paddedK() * kQPanel; }
    [[nodiscard]] std::int64_t bytes() const { return empty() ? 0 : panels() * paddedK() * kQPanel * 2; }

private:
    std::uint16_t &slot(std::int64_t row, std::int64_t p);
    std::unique_ptr<std::uint16_t[], FreeAligned> m_data;
    std::int64_t m_n = 0, m_k = 0;
};

/// The product on the kernel cpuid chose (detectBf16Isa()).
void bf16Gemm(const float *a, std::int64_t lda, std::int64_t m, const Bf16Matrix &w, float *c, std::int64_t ldc, const float *bias,
              bool accumulate, const cpu::ParallelFor &parallel);
/// The same on a given path (ConfigError if this CPU cannot run it).
void bf16Gemm(Bf16Isa isa, const float *a, std::int64_t lda, std::int64_t m, const Bf16Matrix &w, float *c, std::int64_t ldc, const float *bias,
              bool accumulate, const cpu::ParallelFor &parallel);

/// One vdpbf16ps lane, portably (for tests): acc after the pair (w0, w1) x (a0, a1).
[[nodiscard]] float dpbf16Lane(float acc, std::uint16_t w0, std::uint16_t w1, std::uint16_t a0, std::uint16_t a1);
/// The instruction itself on 16 lanes (acc, pairs of w, pairs of a, out), for tests; false when
/// this CPU lacks AVX512_BF16.
bool dpbf16Hardware(const float *acc, const std::uint16_t *w, const std::uint16_t *a, float *out);
/// vcvtneps2bf16 on 16 floats, for tests; false without AVX512_BF16.
bool cvtBf16Hardware(const float *x, std::uint16_t *out);

} // namespace cppl::agent::quant
