// SPDX-License-Identifier: MIT
#include "cppl/statistics.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>

namespace cppl {

void NllStats::merge(const NllStats &other) noexcept
{
    nll.merge(other.nll);
    nllSquared.merge(other.nllSquared);
    tokens += other.tokens;
    windows += other.windows;
    bytes += other.bytes;
    words += other.words;
}

NllStats::Words NllStats::toWords() const noexcept
{
    Words w{};
    const auto a = nll.limbs();
    const auto b = nllSquared.limbs();
    std::size_t i = 0;
    for (auto x : a)
        w[i++] = x;
    for (auto x : b)
        w[i++] = x;
    w[i++] = tokens;
    w[i++] = windows;
    w[i++] = bytes;
    w[i++] = words;
    return w;
}

NllStats NllStats::fromReducedWords(const Words &sum) noexcept
{
    ExactSum::Limbs a{};
    ExactSum::Limbs b{};
    std::size_t i = 0;
    for (auto &x : a)
        x = sum[i++];
    for (auto &x : b)
        x = sum[i++];
    NllStats s;
    s.nll = ExactSum::fromReducedLimbs(a);
    s.nllSquared = ExactSum::fromReducedLimbs(b);
    s.tokens = sum[i++];
    s.windows = sum[i++];
    s.bytes = sum[i++];
    s.words = sum[i++];
    return s;
}

Perplexity computePerplexity(const NllStats &stats) noexcept
{
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    Perplexity p;
    const double sum = stats.nll.toDouble();
    const auto n = static_cast<double>(stats.tokens);
    if (stats.tokens <= 0 || stats.nll.rejected() > 0) {
        p.meanNll = p.ppl = p.pplStderr = kNaN;
    } else {
        p.meanNll = sum / n;
        p.ppl = std::exp(p.meanNll);
        if (stats.tokens >= 2) {
            const double meanSquare = stats.nllSquared.toDouble() / n;
            const double variance = std::max(0.0, meanSquare - p.meanNll * p.meanNll);
            p.pplStderr = p.ppl * std::sqrt(variance / (n - 1));
        } else {
            p.pplStderr = kNaN;
        }
    }
    const bool valid = stats.nll.rejected() == 0;
    p.bitsPerByte = valid && stats.bytes > 0 ? sum / (static_cast<double>(stats.bytes) * std::numbers::ln2) : kNaN;
    p.bytePpl = valid && stats.bytes > 0 ? std::exp(sum / static_cast<double>(stats.bytes)) : kNaN;
    p.wordPpl = valid && stats.words > 0 ? std::exp(sum / static_cast<double>(stats.words)) : kNaN;
    return p;
}

std::string formatFinalEstimate(const Perplexity &p)
{
    char buf[128];
    std::snprintf(buf, sizeof buf, "Final estimate: PPL = %.4f +/- %.5f", p.ppl, p.pplStderr);
    return buf;
}

namespace {

// Length of the Python `\s` whitespace character starting at p (0 if none), for UTF-8 text.
std::size_t whitespaceLength(std::string_view t, std::size_t p) noexcept
{
    const auto c = static_cast<unsigned char>(t[p]);
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f))
        return 1;
    auto at = [&](std::size_t i) -> unsigned { return i < t.size() ? static_cast<unsigned char>(t[i]) : 0U; };
    if (c == 0xc2 && (at(p + 1) == 0x85 || at(p + 1) == 0xa0))
        return 2; // U+0085, U+00A0
    if (c == 0xe1 && at(p + 1) == 0x9a && at(p + 2) == 0x80)
        return 3; // U+1680
    if (c == 0xe2 && at(p + 1) == 0x80) {
        const unsigned d = at(p + 2);
        if ((d >= 0x80 && d <= 0x8a) || d == 0xa8 || d == 0xa9 || d == 0xaf)
            return 3; // U+2000..U+200A, U+2028, U+2029, U+202F
    }
    if (c == 0xe2 && at(p + 1) == 0x81 && at(p + 2) == 0x9f)
        return 3; // U+205F
    if (c == 0xe3 && at(p + 1) == 0x80 && at(p + 2) == 0x80)
        return 3; // U+3000
    return 0;
}

} // namespace

std::int64_t countWords(std::string_view text) noexcept
{
    // len(re.split(r"\s+", doc)): one more piece than there are whitespace runs, including the
    // empty pieces a leading or trailing run produces.
    std::int64_t runs = 0;
    bool inRun = false;
    for (std::size_t p = 0; p < text.size();) {
        const std::size_t n = whitespaceLength(text, p);
        if (n > 0) {
            if (!inRun)
                ++runs;
            inRun = true;
            p += n;
        } else {
            inRun = false;
            ++p;
        }
    }
    return runs + 1;
}

} // namespace cppl
