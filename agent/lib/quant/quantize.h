// SPDX-License-Identifier: MIT
// Round-to-nearest weight quantization in groups along the input dimension (issue 41's
// `--quantize int8|int4`), defined to the bit so that every machine, at any thread count, gives the
// same codes and scales:
//
// - every scale is computed in float32 (division, IEEE round to nearest even) and then rounded to
//   float16 (half.h); the codes are computed against that rounded scale, so the stored scale is the
//   one the codes were chosen for;
// - code = clamp(roundHalfEven(w / scale)) with the division in float32 (the translation unit is
//   compiled with -ffp-contract=off, so no compiler may fuse or reorder these operations);
// - a group whose scale rounds to zero (all-zero weights, or weights below float16's range) gets
//   scale 0 and the code of w = 0.
//
// int8: symmetric, scale = max|w| / 127, codes -127..127 (stored + 128).
// int4 symmetric: as llama.cpp's Q4_0, the weight of largest magnitude (the first one on a tie)
//   maps to -8: scale = that weight / -8 (so the scale may be negative), codes -8..7 (stored + 8).
// int4 asymmetric: range [min(w, 0), max(w, 0)], scale = (max - min) / 15, zero point
//   z = clamp(roundHalfEven(-min / scale), 0, 15), code = clamp(roundHalfEven(w / scale) + z, 0, 15).
//
// Non-finite weights, and weights too large for a float16 scale (|w| >= 65520 * 127 for int8), are
// refused with ConfigError naming the row: the caller adds the tensor's name.
#pragma once

#include "quantized_matrix.h"

#include <cstdint>
#include <string>

namespace cppl::agent::quant {

enum class QuantScheme { Int8, Int4Sym, Int4Asym };

[[nodiscard]] const char *schemeName(QuantScheme s);
/// "int8", "int4" (= int4-sym), "int4-sym", "int4-asym"; ConfigError naming the choices otherwise.
[[nodiscard]] QuantScheme parseScheme(const std::string &name);
/// The storage format of `scheme` at `group` (kernels' rules: a multiple of 32, or >= k).
[[nodiscard]] QuantFormat formatOf(QuantScheme scheme, std::int64_t group);

/// Quantizes one row of k weights: codes (k), scales (one float16 per group) and, for Int4Asym,
/// zero points (one per group). Groups are `group` consecutive weights (the last may be shorter).
void quantizeRow(QuantScheme scheme, std::int64_t group, const float *w, std::int64_t k, std::uint8_t *codes, std::uint16_t *scales,
                 std::uint8_t *zeros);

/// Quantizes W[rows][k] (row stride ldw) into rows [row0, row0 + rows) of `out`, whose format must
/// be formatOf(scheme, its group). Several weights with the same k stack along n (fused q/k/v).
void quantizeRows(QuantScheme scheme, QuantizedMatrix &out, std::int64_t row0, const float *w, std::int64_t ldw, std::int64_t rows);

/// A new matrix holding W[n][k] quantized.
[[nodiscard]] QuantizedMatrix quantizeMatrix(QuantScheme scheme, std::int64_t group, const float *w, std::int64_t ldw, std::int64_t n,
                                             std::int64_t k);

/// Round half to even of a float32 value, whatever the floating-point environment's rounding mode.
[[nodiscard]] float roundHalfEven(float x);

} // namespace cppl::agent::quant
