// SPDX-License-Identifier: MIT
#include "cppl/exact_sum.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace cppl {

namespace {

constexpr int kDigitBits = 32;
constexpr std::int64_t kDigitMask = (std::int64_t{1} << kDigitBits) - 1;
constexpr std::int64_t kMaxTopDigit = std::int64_t{1} << 31; // |sum| < 2^127 with the top digit's weight 2^96
constexpr std::int64_t kMaxRejected = std::int64_t{1} << 33; // 2^30 of them still fit an int64
__extension__ typedef unsigned __int128 u128;

// |v| * 2^64 rounded to the nearest integer, ties to even. Precondition: finite, |v| < 2^64.
// Works on the IEEE-754 fields directly: frexp/ldexp would cost more than the whole addition.
u128 scaleToGrid(double magnitude) noexcept
{
    const auto bits = std::bit_cast<std::uint64_t>(magnitude);
    const auto biased = static_cast<int>(bits >> 52);
    if (biased == 0)
        return 0; // subnormal: below 2^-1022, far below half a grid step
    const std::uint64_t mantissa = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
    const int shift = biased - 1075 + ExactSum::kFractionBits; // magnitude * 2^64 = mantissa * 2^shift
    if (shift >= 0)
        return u128{mantissa} << shift; // magnitude < 2^64, so the result < 2^128
    if (shift < -53)
        return 0; // below half a grid step
    const int drop = -shift; // 1..53
    std::uint64_t q = mantissa >> drop;
    const std::uint64_t rest = mantissa & ((std::uint64_t{1} << drop) - 1);
    const std::uint64_t half = std::uint64_t{1} << (drop - 1);
    if (rest > half || (rest == half && (q & 1U)))
        ++q;
    return q;
}

} // namespace

void ExactSum::addScaled(std::uint64_t low, std::uint64_t high, bool negative) noexcept
{
    const std::array<std::int64_t, 4> digits{static_cast<std::int64_t>(low & kDigitMask), static_cast<std::int64_t>(low >> 32),
                                             static_cast<std::int64_t>(high & kDigitMask), static_cast<std::int64_t>(high >> 32)};
    for (int i = 0; i < 4; ++i)
        m_digits[i] += negative ? -digits[i] : digits[i];
    if (++m_pending >= kNormalizeEvery)
        normalize();
}

void ExactSum::add(double v) noexcept
{
    if (!std::isfinite(v) || std::fabs(v) >= 0x1p64) {
        ++m_rejected;
        return;
    }
    if (v == 0.0)
        return;
    const u128 scaled = scaleToGrid(std::fabs(v));
    if (scaled != 0)
        addScaled(static_cast<std::uint64_t>(scaled), static_cast<std::uint64_t>(scaled >> 64), v < 0);
}

void ExactSum::addSquare(double v) noexcept
{
    if (!std::isfinite(v) || std::fabs(v) >= 0x1p32) {
        ++m_rejected;
        return;
    }
    const double hi = v * v;
    const double lo = std::fma(v, v, -hi); // v*v == hi + lo exactly
    add(hi);
    add(lo);
}

void ExactSum::normalize() noexcept
{
    for (int i = 0; i + 1 < kDigits; ++i) {
        const std::int64_t carry = m_digits[i] >> kDigitBits; // arithmetic shift: floor division
        m_digits[i] &= kDigitMask;
        m_digits[i + 1] += carry;
    }
    m_pending = 0;
}

ExactSum ExactSum::normalized() const noexcept
{
    ExactSum copy = *this;
    copy.normalize();
    return copy;
}

void ExactSum::merge(const ExactSum &other) noexcept
{
    normalize();
    const ExactSum o = other.normalized();
    for (int i = 0; i < kDigits; ++i)
        m_digits[i] += o.m_digits[i];
    m_rejected += o.m_rejected;
    normalize();
}

bool ExactSum::isZero() const noexcept
{
    const ExactSum n = normalized();
    for (auto d : n.m_digits)
        if (d != 0)
            return false;
    return true;
}

double ExactSum::toDouble() const noexcept
{
    ExactSum n = normalized();
    const bool negative = n.m_digits[kDigits - 1] < 0;
    if (negative) {
        for (auto &d : n.m_digits)
            d = -d;
        n.normalize();
    }
    // Magnitude as 32-bit digits; the top limb may hold up to 63 bits, so split it in two.
    std::array<std::uint32_t, kDigits + 1> mag{};
    for (int i = 0; i < kDigits - 1; ++i)
        mag[i] = static_cast<std::uint32_t>(n.m_digits[i]);
    const auto topLimb = static_cast<std::uint64_t>(n.m_digits[kDigits - 1]);
    mag[kDigits - 1] = static_cast<std::uint32_t>(topLimb);
    mag[kDigits] = static_cast<std::uint32_t>(topLimb >> 32);

    int top = kDigits; // the highest non-zero digit
    while (top >= 0 && mag[top] == 0)
        --top;
    if (top < 0)
        return 0.0;
    const int highest = top * 32 + 31 - std::countl_zero(mag[top]); // index of the highest set bit
    // Three digits from the top one down hold the 53 mantissa bits and the rounding bit below
    // them (the highest bit is at least 64 above the window's bit 0); digits under the window
    // only make the sticky bit. Positions below 0 read as zeros.
    const auto digit = [&](int i) -> u128 { return i >= 0 ? mag[i] : 0U; };
    const u128 window = (digit(top) << 64) | (digit(top - 1) << 32) | digit(top - 2);
    const int base = (top - 2) * 32;  // the bit position of the window's bit 0
    const int low = highest - 52;     // the mantissa's lowest bit (below 0: the value is exact)
    const int below = low - 1 - base; // the rounding bit's place in the window, 11 or more
    std::uint64_t mantissa = static_cast<std::uint64_t>(window >> (below + 1));
    const bool roundBit = ((window >> below) & 1U) != 0;
    bool sticky = (window & ((u128{1} << below) - 1)) != 0;
    for (int i = top - 3; i >= 0 && !sticky; --i)
        sticky = mag[i] != 0;
    if (roundBit && (sticky || (mantissa & 1U)))
        ++mantissa; // may become 2^53, which ldexp represents exactly
    const int exponent = low - kFractionBits;
    const double magnitude = std::ldexp(static_cast<double>(mantissa), exponent);
    return negative ? -magnitude : magnitude;
}

ExactSum::Limbs ExactSum::limbs() const noexcept
{
    const ExactSum n = normalized();
    Limbs out{};
    for (int i = 0; i < kDigits; ++i)
        out[i] = n.m_digits[i];
    out[kDigits] = n.m_rejected;
    return out;
}

ExactSum ExactSum::fromReducedLimbs(const Limbs &sum) noexcept
{
    ExactSum s;
    for (int i = 0; i < kDigits; ++i)
        s.m_digits[i] = sum[i];
    s.m_rejected = sum[kDigits];
    s.normalize();
    return s;
}

std::array<std::uint8_t, ExactSum::kSerializedSize> ExactSum::serialize() const noexcept
{
    const Limbs words = limbs();
    std::array<std::uint8_t, kSerializedSize> out{};
    for (int w = 0; w < kReduceWords; ++w) {
        const auto u = static_cast<std::uint64_t>(words[w]);
        for (int b = 0; b < 8; ++b)
            out[w * 8 + b] = static_cast<std::uint8_t>(u >> (8 * b));
    }
    return out;
}

std::optional<ExactSum> ExactSum::deserialize(std::span<const std::uint8_t> bytes) noexcept
{
    if (bytes.size() != kSerializedSize)
        return std::nullopt;
    Limbs words{};
    for (int w = 0; w < kReduceWords; ++w) {
        std::uint64_t u = 0;
        for (int b = 0; b < 8; ++b)
            u |= std::uint64_t{bytes[w * 8 + b]} << (8 * b);
        words[w] = static_cast<std::int64_t>(u);
    }
    // Only normalised encodings are valid: digits in [0, 2^32), rejected count >= 0.
    for (int i = 0; i + 1 < kDigits; ++i)
        if (words[i] < 0 || words[i] > kDigitMask)
            return std::nullopt;
    if (words[kDigits] < 0)
        return std::nullopt;
    // Encodings come from files and peers: refuse what no accumulator reaches (|sum| < 2^127, so
    // the top digit lies in [-2^31, 2^31)) and rejected counts of 2^33 or more, so that merging up
    // to 2^30 decoded sums, as limbs() promises, cannot overflow an int64 word (tests/fuzz/fuzz_result_json).
    if (words[kDigits - 1] < -kMaxTopDigit || words[kDigits - 1] >= kMaxTopDigit || words[kDigits] >= kMaxRejected)
        return std::nullopt;
    return fromReducedLimbs(words);
}

std::string ExactSum::toString() const
{
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "xs1:";
    for (auto b : serialize()) {
        out += kHex[b >> 4];
        out += kHex[b & 15];
    }
    return out;
}

std::optional<ExactSum> ExactSum::fromString(std::string_view text) noexcept
{
    if (!text.starts_with("xs1:") || text.size() != 4 + 2 * kSerializedSize)
        return std::nullopt;
    std::array<std::uint8_t, kSerializedSize> bytes{};
    auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9')
            return c - '0';
        if (c >= 'a' && c <= 'f')
            return c - 'a' + 10;
        return -1;
    };
    for (std::size_t i = 0; i < kSerializedSize; ++i) {
        const int hi = nibble(text[4 + 2 * i]);
        const int lo = nibble(text[5 + 2 * i]);
        if (hi < 0 || lo < 0)
            return std::nullopt;
        bytes[i] = static_cast<std::uint8_t>(hi * 16 + lo);
    }
    return deserialize(bytes);
}

bool operator==(const ExactSum &a, const ExactSum &b) noexcept
{
    return a.limbs() == b.limbs();
}

std::strong_ordering ExactSum::compareValue(const ExactSum &other) const noexcept
{
    const Limbs a = limbs();
    const Limbs b = other.limbs();
    for (int i = kDigits - 1; i >= 0; --i)
        if (a[i] != b[i])
            return a[i] <=> b[i]; // top digit signed, lower digits in [0, 2^32): plain compare works
    return std::strong_ordering::equal;
}

} // namespace cppl
