// SPDX-License-Identifier: MIT
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cppl {

/**
 * @brief Order-independent, exactly associative sum of doubles.
 *
 * Every value is rounded once (to nearest, ties to even) onto a fixed grid of 2^-64 and added as
 * an integer spread over radix-2^32 digits held in int64 limbs. Integer addition is associative, so
 * the result is bit-identical for any order, any partition into shards and any merge tree.
 *
 * Range and resolution (see docs/ARCHITECTURE.md, "Exact accumulator"):
 *  - accepted values: finite, |v| < 2^64; anything else is not added but counted in rejected();
 *  - per-value rounding error <= 2^-65 absolute;
 *  - the running total is exact up to |sum| < 2^127 (e.g. 10^12 tokens of NLL <= 10^15 each).
 *
 * For collectives, limbs() gives kReduceWords int64 words that may be summed elementwise (an int64
 * SUM all-reduce) over up to 2^30 accumulators; fromReducedLimbs() then normalises the carries.
 */
class ExactSum
{
public:
    static constexpr int kDigits = 6; ///< radix-2^32 digits: 2 fractional, 4 integer
    static constexpr int kFractionBits = 64;
    static constexpr int kReduceWords = kDigits + 1; ///< digits + rejected count
    static constexpr std::size_t kSerializedSize = kReduceWords * 8;
    using Limbs = std::array<std::int64_t, kReduceWords>;

    /// @brief Adds v. Non-finite values and |v| >= 2^64 are counted in rejected() instead.
    void add(double v) noexcept;
    /// @brief Adds v*v as the exact pair (v*v, fma(v, v, -v*v)), so the square is not rounded
    /// before it reaches the grid. |v| >= 2^32 is rejected.
    void addSquare(double v) noexcept;
    /// @brief Adds another accumulator (same as having added its values here).
    void merge(const ExactSum &other) noexcept;
    ExactSum &operator+=(const ExactSum &other) noexcept
    {
        merge(other);
        return *this;
    }

    /// @brief The sum, correctly rounded to the nearest double (ties to even).
    [[nodiscard]] double toDouble() const noexcept;
    /// @brief Number of values that were not added (non-finite or out of range).
    [[nodiscard]] std::int64_t rejected() const noexcept { return m_rejected; }
    [[nodiscard]] bool isZero() const noexcept;

    /// @brief Normalised words for an elementwise int64 SUM reduction across ranks.
    [[nodiscard]] Limbs limbs() const noexcept;
    /// @brief Rebuilds an accumulator from the elementwise sum of limbs() of up to 2^30 accumulators.
    [[nodiscard]] static ExactSum fromReducedLimbs(const Limbs &sum) noexcept;

    /// @brief Fixed-size encoding: kReduceWords normalised int64 words, little-endian, least
    /// significant digit first, then the rejected count.
    [[nodiscard]] std::array<std::uint8_t, kSerializedSize> serialize() const noexcept;
    /// @brief Refuses (nullopt) encodings no accumulator produces: digits not normalised, a value
    /// with |sum| >= 2^127, a rejected count outside [0, 2^33); so 2^30 decoded sums merge safely.
    [[nodiscard]] static std::optional<ExactSum> deserialize(std::span<const std::uint8_t> bytes) noexcept;
    /// @brief Text form "xs1:" + 112 lower-case hex digits of serialize(); used in result JSON.
    [[nodiscard]] std::string toString() const;
    [[nodiscard]] static std::optional<ExactSum> fromString(std::string_view text) noexcept;

    /// @brief Equal when both the exact value and the rejected count are equal.
    friend bool operator==(const ExactSum &a, const ExactSum &b) noexcept;
    /// @brief Orders by exact value only.
    [[nodiscard]] std::strong_ordering compareValue(const ExactSum &other) const noexcept;

private:
    void addScaled(std::uint64_t low, std::uint64_t high, bool negative) noexcept; // magnitude in grid units
    void normalize() noexcept;
    [[nodiscard]] ExactSum normalized() const noexcept;

    // Digits may hold up to 2^30 unnormalised additions of < 2^32 each before they must be
    // normalised; m_pending counts them.
    static constexpr std::int64_t kNormalizeEvery = std::int64_t{1} << 30;
    std::array<std::int64_t, kDigits> m_digits{};
    std::int64_t m_rejected = 0;
    std::int64_t m_pending = 0;
};

} // namespace cppl
