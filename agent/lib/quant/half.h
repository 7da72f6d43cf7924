// SPDX-License-Identifier: MIT
// float16 and bfloat16 conversions, defined bit for bit in portable C++ so that every machine (and
// every kernel path) rounds the same way: the quantizers' scales, GPTQ/AWQ scales and the bfloat16
// GEMM's operands all go through these.
#pragma once

#include <bit>
#include <cstdint>

namespace cppl::agent::quant {

/// IEEE binary16 -> float (exact: every half is a float).
[[nodiscard]] inline float halfToFloat(std::uint16_t h) noexcept
{
    const std::uint32_t sign = std::uint32_t{h & 0x8000U} << 16;
    const std::uint32_t exp = (h >> 10) & 0x1FU;
    std::uint32_t mant = h & 0x3FFU;
    if (exp == 0x1F) // inf or NaN (payload kept)
        return std::bit_cast<float>(sign | 0x7F800000U | (mant << 13));
    if (exp != 0)
        return std::bit_cast<float>(sign | ((exp + 112U) << 23) | (mant << 13));
    if (mant == 0)
        return std::bit_cast<float>(sign);
    // Subnormal half: mant * 2^-24, normalised into a float.
    std::uint32_t e = 113;
    while ((mant & 0x400U) == 0) {
        mant <<= 1;
        --e;
    }
    return std::bit_cast<float>(sign | (e << 23) | ((mant & 0x3FFU) << 13));
}

/// float -> IEEE binary16, round to nearest, ties to even (as F16C's vcvtps2ph with imm 0);
/// beyond 65504 (from 65520 on) to infinity; subnormal halves where the value needs them; NaN stays
/// a (quiet) NaN.
[[nodiscard]] inline std::uint16_t floatToHalf(float f) noexcept
{
    const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000U);
    const std::uint32_t ax = x & 0x7FFFFFFFU;
    if (ax > 0x7F800000U) // NaN: quiet, top payload bits kept
        return static_cast<std::uint16_t>(sign | 0x7E00U | ((ax >> 13) & 0x1FFU));
    if (ax >= 0x477FF000U) // >= 65520 (and infinity): rounds to infinity
        return static_cast<std::uint16_t>(sign | 0x7C00U);
    if (ax >= 0x38800000U) { // a normal half: rebias the exponent, round the mantissa's low 13 bits
        std::uint32_t t = ax - (112U << 23);
        t += 0xFFFU + ((t >> 13) & 1U);
        return static_cast<std::uint16_t>(sign | (t >> 13));
    }
    const std::uint32_t e = ax >> 23;
    if (e < 102) // below 2^-25: rounds to zero
        return sign;
    // Subnormal half: round (mantissa with its implicit bit) * 2^(e - 126) to an integer.
    const std::uint32_t mant = (ax & 0x7FFFFFU) | 0x800000U;
    const std::uint32_t shift = 126 - e; // 14..24
    std::uint32_t m = mant >> shift;
    const std::uint32_t rem = mant & ((1U << shift) - 1U), half = 1U << (shift - 1U);
    if (rem > half || (rem == half && (m & 1U)))
        ++m;
    return static_cast<std::uint16_t>(sign | m);
}

[[nodiscard]] inline float bf16ToFloat(std::uint16_t h) noexcept { return std::bit_cast<float>(std::uint32_t{h} << 16); }

/// float -> bfloat16 exactly as AVX512_BF16's vcvtneps2bf16 does it (checked against the
/// instruction in tst_quant_kernels): round to nearest even; subnormal inputs become a zero of their
/// sign (the instruction treats denormals as zero); NaN becomes a quiet NaN.
[[nodiscard]] inline std::uint16_t floatToBf16(float f) noexcept
{
    std::uint32_t x = std::bit_cast<std::uint32_t>(f);
    if ((x & 0x7F800000U) == 0) // zero or subnormal
        return static_cast<std::uint16_t>((x >> 16) & 0x8000U);
    if ((x & 0x7FFFFFFFU) > 0x7F800000U)
        return static_cast<std::uint16_t>((x >> 16) | 0x40U);
    x += 0x7FFFU + ((x >> 16) & 1U);
    return static_cast<std::uint16_t>(x >> 16);
}

} // namespace cppl::agent::quant
