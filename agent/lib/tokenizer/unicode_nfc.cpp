// SPDX-License-Identifier: MIT
#include "unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <vector>

namespace cppl::agent {

namespace {

struct CombiningRange
{
    char32_t first, last;
    std::uint8_t ccc;
};

struct Decomposition
{
    char32_t cp, first, second; ///< second 0: a singleton
    std::uint8_t composes;      ///< a primary composite: first + second compose to cp
};

#include "unicode_nfc_table.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;
/// Where a byte that is not UTF-8 is kept: past the code space, a starter that composes with nothing.
constexpr char32_t kRawByte = 0x110000;

std::uint8_t combiningClass(char32_t cp)
{
    if (cp < 0x300 || cp >= kRawByte)
        return 0;
    const auto *it = std::upper_bound(std::begin(kCombiningClasses), std::end(kCombiningClasses), cp,
                                      [](char32_t c, const CombiningRange &r) { return c < r.first; });
    if (it == std::begin(kCombiningClasses))
        return 0;
    --it;
    return cp <= it->last ? it->ccc : 0;
}

const Decomposition *decomposition(char32_t cp)
{
    const auto *it = std::lower_bound(std::begin(kDecompositions), std::end(kDecompositions), cp,
                                      [](const Decomposition &d, char32_t c) { return d.cp < c; });
    return it != std::end(kDecompositions) && it->cp == cp ? it : nullptr;
}

/// The primary composites by their pair (first << 21 | second), built once.
const std::unordered_map<std::uint64_t, char32_t> &compositions()
{
    static const auto table = [] {
        std::unordered_map<std::uint64_t, char32_t> m;
        for (const Decomposition &d : kDecompositions)
            if (d.composes)
                m.emplace(std::uint64_t{d.first} << 21 | d.second, d.cp);
        return m;
    }();
    return table;
}

void decompose(char32_t cp, std::vector<char32_t> &out)
{
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const char32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount != 0)
            out.push_back(kTBase + s % kTCount);
        return;
    }
    if (const Decomposition *d = cp >= 0xC0 && cp < kRawByte ? decomposition(cp) : nullptr) {
        decompose(d->first, out);
        if (d->second != 0)
            decompose(d->second, out);
        return;
    }
    out.push_back(cp);
}

/// The code points of UTF-8 text, each byte of an invalid sequence as kRawByte + byte.
std::vector<char32_t> decodeDecomposed(std::string_view s)
{
    std::vector<char32_t> out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t n = b < 0x80 ? 1 : b >= 0xC2 && b < 0xE0 ? 2 : b >= 0xE0 && b < 0xF0 ? 3 : b >= 0xF0 && b < 0xF5 ? 4 : 0;
        char32_t cp = n == 1 ? b : n == 2 ? b & 0x1F : n == 3 ? b & 0x0F : b & 0x07;
        bool ok = n != 0 && i + n <= s.size();
        for (std::size_t k = 1; ok && k < n; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            ok = (c & 0xC0) == 0x80;
            cp = cp << 6 | (c & 0x3F);
        }
        ok = ok && !(n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp < 0xE000))) && !(n == 4 && (cp < 0x10000 || cp > 0x10FFFF));
        if (!ok) {
            out.push_back(kRawByte + b);
            ++i;
            continue;
        }
        decompose(cp, out);
        i += n;
    }
    return out;
}

/// Canonical ordering: each run of non-starters stably sorted by combining class.
void reorder(std::vector<char32_t> &cps)
{
    for (std::size_t i = 0; i < cps.size();) {
        std::size_t j = i;
        while (j < cps.size() && combiningClass(cps[j]) != 0)
            ++j;
        if (j - i > 1)
            std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i), cps.begin() + static_cast<std::ptrdiff_t>(j),
                             [](char32_t a, char32_t b) { return combiningClass(a) < combiningClass(b); });
        i = j > i ? j : i + 1;
    }
}

/// The composite of starter L and C, or 0.
char32_t compose(char32_t L, char32_t C)
{
    if (L >= kLBase && L < kLBase + kLCount && C >= kVBase && C < kVBase + kVCount)
        return kSBase + ((L - kLBase) * kVCount + (C - kVBase)) * kTCount;
    if (L >= kSBase && L < kSBase + kSCount && (L - kSBase) % kTCount == 0 && C > kTBase && C < kTBase + kTCount)
        return L + (C - kTBase);
    const auto &m = compositions();
    const auto it = m.find(std::uint64_t{L} << 21 | C);
    return it == m.end() ? 0 : it->second;
}

/// Canonical composition: each character joins the last starter unless a character between them blocks it.
std::vector<char32_t> composeAll(const std::vector<char32_t> &cps)
{
    std::vector<char32_t> out;
    out.reserve(cps.size());
    std::ptrdiff_t starter = -1;
    std::uint8_t last = 0;
    for (const char32_t cp : cps) {
        const std::uint8_t c = combiningClass(cp);
        const bool adjacent = starter >= 0 && static_cast<std::size_t>(starter) + 1 == out.size();
        if (starter >= 0 && (last < c || (last == 0 && adjacent))) {
            if (const char32_t composite = compose(out[static_cast<std::size_t>(starter)], cp)) {
                out[static_cast<std::size_t>(starter)] = composite;
                continue;
            }
        }
        if (c == 0)
            starter = static_cast<std::ptrdiff_t>(out.size());
        last = c;
        out.push_back(cp);
    }
    return out;
}

void encode(char32_t cp, std::string &out)
{
    if (cp >= kRawByte) {
        out += static_cast<char>(cp - kRawByte);
    } else if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | cp >> 6);
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | cp >> 12);
        out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | cp >> 18);
        out += static_cast<char>(0x80 | (cp >> 12 & 0x3F));
        out += static_cast<char>(0x80 | (cp >> 6 & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

} // namespace

std::string unicodeNfc(std::string_view utf8)
{
    // Below U+00C0 nothing decomposes, and no composition's second character is there.
    if (std::all_of(utf8.begin(), utf8.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; }))
        return std::string(utf8);
    std::vector<char32_t> cps = decodeDecomposed(utf8);
    reorder(cps);
    std::string out;
    out.reserve(utf8.size());
    for (const char32_t cp : composeAll(cps))
        encode(cp, out);
    return out;
}

const char *unicodeNfcVersion() { return kUnicodeVersion; }

} // namespace cppl::agent
