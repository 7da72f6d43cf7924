// SPDX-License-Identifier: MIT
// C = A W^T with W quantized (quantized_matrix.h): the int8 / int4 counterpart of cpu::gemm, under
// the same contract: C[m][n] = (accumulate ? C : 0) + bias + A W^T, the work split over row blocks
// and column panels only, so the bits never depend on the thread count.
//
// The numbers, exactly (they change the results slightly against float32 weights and
// activations, and deterministically):
// 1. Each row of A is quantized on the fly in blocks of 32 along k (as llama.cpp's Q8_0 x Q8_0):
//    amax = max |a| over the block, sa = amax / 127 in float32, a_q = clamp(roundHalfEven(a / sa),
//    -127, 127) with the division in float32; a block of zeros gets sa = 0, one with a non-finite
//    value sa = NaN (so the output is NaN, and the evaluator refuses it).
// 2. Per output element and block b, the exact integer D_b = sum over the block of
//    (code - zero) * a_q (|D_b| < 2^24, so float(D_b) is exact).
// 3. acc = (accumulate ? C : 0), plus bias when given; then for b = 0, 1, ... in order
//    acc = fma(float(D_b), sa_b * sw_g, acc), sa_b * sw_g one float32 product (sw_g the group's
//    float16 scale).
// Every kernel path (AVX-512 VNNI, AVX-VNNI, AVX2, portable) computes exactly these operations, so
// they all give the same bits: unlike float32, the choice of kernel by cpuid does not change results.
#pragma once

#include "quant_isa.h"
#include "quantized_matrix.h"

#include "eval/cpu_gemm.h" // cpu::ParallelFor (a type only: this library does not link the float32 kernels)

#include <cstdint>

namespace cppl::agent::quant {

/// The product on the kernels cpuid chose (detectIntIsa()).
void qgemm(const float *a, std::int64_t lda, std::int64_t m, const QuantizedMatrix &w, float *c, std::int64_t ldc, const float *bias,
           bool accumulate, const cpu::ParallelFor &parallel);
/// The same on a given path (tests and benchmarks run each one the CPU supports; ConfigError if not).
void qgemm(IntIsa isa, const float *a, std::int64_t lda, std::int64_t m, const QuantizedMatrix &w, float *c, std::int64_t ldc, const float *bias,
           bool accumulate, const cpu::ParallelFor &parallel);

/// Step 1 alone, for tests: row `a` of k floats -> ceil(k / 32) blocks of codes (32 each, zero past
/// k), scales and code sums, on the portable path or on a given one.
void quantizeActivationRow(const float *a, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums);
void quantizeActivationRow(IntIsa isa, const float *a, std::int64_t k, std::int8_t *codes, float *scales, std::int32_t *sums);

} // namespace cppl::agent::quant
