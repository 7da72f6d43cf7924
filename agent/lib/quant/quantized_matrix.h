// SPDX-License-Identifier: MIT
// Integer weights (4 or 8 bits) in groups along the input dimension, packed for the int8 kernels
// (qgemm.h): the storage every source of quantized weights ends in, the agent's own quantizers
// (quantize.h) and the GPTQ / AWQ readers (gptq_awq.h) alike.
//
// A weight is w = scale[g] * (code - zero[g]): code an unsigned integer of `bits` bits, scale a
// float16 per (output row, group), zero = zeroOffset + (per-group zero point, when the format has
// them). float16 scales because 16 bits per group is what keeps int4 at 4.5 bits per weight at group
// 32 (float32 scales would make it 5); their 11-bit significand is far finer than the codes' own
// step (1/7 to 1/127 of the range), and GPTQ and AWQ checkpoints store float16 scales themselves,
// so they load without rounding. Every dequantized weight is exactly representable in float32 (an
// 11-bit significand times an integer of at most 9 bits).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace cppl::agent::quant {

/// k values per block: activations are quantized in blocks of 32 along k, each with its own scale,
/// and a weight group holds whole blocks (or is the whole row).
inline constexpr std::int64_t kBlock = 32;
/// Output columns per packed panel (two 16-lane vectors of the AVX-512 kernels).
inline constexpr std::int64_t kQPanel = 32;

/// How codes map to weights (see the file comment).
struct QuantFormat
{
    int bits = 8;              ///< 4 or 8
    std::int64_t group = 32;   ///< k values per scale: a multiple of 32, or >= k (one group per row)
    bool perGroupZeros = false; ///< a zero point per (row, group) (asymmetric formats, GPTQ sym=false, AWQ)
    int zeroOffset = 128;      ///< added to every zero point: 128 (int8) or 8 (int4) for symmetric
                               ///< formats, 0 for asymmetric ones, 1 for GPTQ's v1 checkpoints
};

/// Frees what QuantizedMatrix allocates (aligned storage).
struct FreeAligned
{
    void operator()(void *p) const;
};

/**
 * Packed layout, per panel of 32 output rows ("columns" of C = A W^T), k padded to whole blocks:
 * - codes: 8 bits: for every 4 k values (a quad) 128 bytes, column c's 4 codes at c * 4;
 *   4 bits: for every 8 k values (an octet) 128 bytes, byte c * 4 + j holding k = 8o + j in its low
 *   nibble and 8o + 4 + j in its high one. So one 64-byte load is 16 columns x 4 k values, the
 *   operand of vpdpbusd, for both widths (int4 after masking the nibbles).
 * - scales: float16 bits, [group][32 columns] per panel; zero points likewise, one byte each.
 * Padding (columns past n, k past the row) holds code 0 and scale 0.
 */
class QuantizedMatrix
{
public:
    QuantizedMatrix() = default;
    /// Throws ConfigError when the format is not one the kernels run (bits, group, zero points).
    QuantizedMatrix(std::int64_t n, std::int64_t k, const QuantFormat &format);

    /// Sets output row `row`: k codes (each < 2^bits), groups() float16 scales and, with per-group
    /// zeros, groups() zero points (each < 2^bits, before zeroOffset is added).
    void setRow(std::int64_t row, const std::uint8_t *codes, const std::uint16_t *scales, const std::uint8_t *zeros);
    /// Input features in the order the codes hold them (GPTQ act-order checkpoints whose groups
    /// are contiguous after sorting by g_idx): code position p belongs to input feature order[p].
    /// The kernels gather the activations in this order. Empty: the identity.
    void setInputOrder(std::vector<std::int32_t> order);

    [[nodiscard]] std::int64_t n() const { return m_n; }
    [[nodiscard]] std::int64_t k() const { return m_k; }
    [[nodiscard]] const QuantFormat &format() const { return m_format; }
    [[nodiscard]] int bits() const { return m_format.bits; }
    [[nodiscard]] std::int64_t groups() const { return m_groups; }
    [[nodiscard]] std::int64_t blocks() const { return m_blocks; }
    /// Blocks of 32 k values per scale group (the last group may have fewer).
    [[nodiscard]] std::int64_t blocksPerGroup() const { return m_blocksPerGroup; }
    [[nodiscard]] std::int64_t paddedK() const { return m_blocks * kBlock; }
    [[nodiscard]] std::int64_t panels() const { return (m_n + kQPanel - 1) / kQPanel; }
    [[nodiscard]] bool empty() const { return !m_codes; }
    [[nodiscard]] const std::vector<std::int32_t> &inputOrder() const { return m_order; }

    /// The code at (row, code position p) and its group's scale bits and whole zero point.
    [[nodiscard]] int code(std::int64_t row, std::int64_t p) const;
    [[nodiscard]] std::uint16_t scaleBits(std::int64_t row, std::int64_t group) const;
    [[nodiscard]] int zero(std::int64_t row, std::int64_t group) const;
    /// scale * (code - zero) at code position p (exact in float32).
    [[nodiscard]] float dequantized(std::int64_t row, std::int64_t p) const;
    /// Row `row` as float32 in input-feature order (inputOrder undone): k values.
    void dequantizeRow(std::int64_t row, float *out) const;

    /// Resident bytes: codes, scales, zero points and the input order, padding included.
    [[nodiscard]] std::int64_t bytes() const;
    /// bytes() * 8 / (n * k).
    [[nodiscard]] double bitsPerWeight() const;

    // For the kernels.
    [[nodiscard]] std::int64_t panelCodeBytes() const { return paddedK() * kQPanel * m_format.bits / 8; }
    [[nodiscard]] const std::uint8_t *panelCodes(std::int64_t p) const { return m_codes.get() + p * panelCodeBytes(); }
    [[nodiscard]] const std::uint16_t *panelScales(std::int64_t p) const { return m_scales.get() + p * m_groups * kQPanel; }
    [[nodiscard]] const std::uint8_t *panelZeros(std::int64_t p) const
    {
        return m_zeros ? m_zeros.get() + p * m_groups * kQPanel : nullptr;
    }

private:
    [[nodiscard]] std::int64_t codeOffset(std::int64_t row, std::int64_t p) const;

    std::unique_ptr<std::uint8_t[], FreeAligned> m_codes;
    std::unique_ptr<std::uint16_t[], FreeAligned> m_scales;
    std::unique_ptr<std::uint8_t[], FreeAligned> m_zeros;
    std::vector<std::int32_t> m_order;
    QuantFormat m_format;
    std::int64_t m_n = 0, m_k = 0, m_groups = 0, m_blocks = 0, m_blocksPerGroup = 0;
};

/// `bytes` zeroed bytes, 64-byte aligned; from 2 MiB on 2 MiB-aligned and advised for transparent
/// huge pages (as the float32 kernels' buffers: fewer faults and TLB misses while streaming weights).
[[nodiscard]] void *allocateAligned(std::int64_t bytes);

} // namespace cppl::agent::quant
