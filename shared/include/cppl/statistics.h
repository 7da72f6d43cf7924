// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/exact_sum.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace cppl {

/**
 * @brief Everything a perplexity needs, kept so that merging shards is exact: the per-token NLL
 * sum and sum of squares in ExactSum, every count in int64.
 */
struct NllStats
{
    ExactSum nll;        ///< Σ v, v = -log p(target) in nats
    ExactSum nllSquared; ///< Σ v², for the ± standard error
    std::int64_t tokens = 0;  ///< scored target tokens
    std::int64_t windows = 0; ///< evaluated windows
    std::int64_t bytes = 0;   ///< UTF-8 bytes of the scored documents (0 when unknown)
    std::int64_t words = 0;   ///< whitespace-separated words of the scored documents (0 when unknown)

    /// @brief Records one scored token.
    void addToken(double nllValue) noexcept
    {
        nll.add(nllValue);
        nllSquared.addSquare(nllValue);
        ++tokens;
    }
    void merge(const NllStats &other) noexcept;

    static constexpr int kReduceWords = 2 * ExactSum::kReduceWords + 4;
    using Words = std::array<std::int64_t, kReduceWords>;
    /// @brief All fields as int64 words for one elementwise SUM all-reduce.
    [[nodiscard]] Words toWords() const noexcept;
    [[nodiscard]] static NllStats fromReducedWords(const Words &sum) noexcept;

    friend bool operator==(const NllStats &, const NllStats &) noexcept = default;
};

/// @brief Figures derived from NllStats. exp() is taken once, here, from the exact sums.
struct Perplexity
{
    double meanNll = 0;     ///< Σv / N
    double ppl = 0;         ///< exp(Σv / N)
    double pplStderr = 0;   ///< llama.cpp: PPL · sqrt((Σv²/N − μ²) / (N − 1)); NaN when N < 2
    double bitsPerByte = 0; ///< lm-eval: Σv / (bytes · ln 2); NaN without byte counts
    double bytePpl = 0;     ///< lm-eval: exp(Σv / bytes)
    double wordPpl = 0;     ///< lm-eval: exp(Σv / words)
};

/// @brief Computes the figures; NaN for anything whose denominator is zero.
[[nodiscard]] Perplexity computePerplexity(const NllStats &stats) noexcept;

/// @brief llama.cpp's closing line: "Final estimate: PPL = 12.3456 +/- 0.08123".
[[nodiscard]] std::string formatFinalEstimate(const Perplexity &p);

/// @brief lm-evaluation-harness word count, len(re.split(r"\s+", doc)): the pieces after splitting
/// UTF-8 text on runs of (Unicode) whitespace, empty leading/trailing pieces included.
[[nodiscard]] std::int64_t countWords(std::string_view text) noexcept;

} // namespace cppl
