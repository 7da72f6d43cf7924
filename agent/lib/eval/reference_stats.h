// SPDX-License-Identifier: MIT
// A reference model's comparison with the model evaluated (--reference-model), token by token, in
// sums that merge exactly: the exact accumulator for every sum, int64 counts, a histogram of fixed
// bins for the KL divergence's percentiles, and its maximum. Carried in the same rounds as the
// model's NllStats (round_loop.h), so the global figures are the same bits for any number of ranks,
// grouping, schedule and recovery. Torch-free.
#pragma once

#include "cppl/exact_sum.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace cppl::agent {

/**
 * The KL divergence's bins, read from the double's bits (the same bin on every machine, no libm):
 * below 2^-34 (zero and the rounding noise of identical distributions included) one bin; then 32
 * bins per power of two up to 2^8, each [2^e (1 + s/32), 2^e (1 + (s+1)/32)), so a percentile read
 * as its bin's middle is within 1/64 (1.6%) of the value; 2^8 and above (and non-finite values) one bin.
 */
struct KldBins
{
    static constexpr int kMinExponent = -34;
    static constexpr int kMaxExponent = 8;
    static constexpr int kSubBits = 5;
    static constexpr int kCount = 2 + ((kMaxExponent - kMinExponent) << kSubBits);
    [[nodiscard]] static int of(double kl) noexcept;
    /// The bin's bounds [lower, upper); the first bin's lower bound is 0, the last bin's upper is infinity.
    [[nodiscard]] static double lower(int bin) noexcept;
    [[nodiscard]] static double upper(int bin) noexcept;
};

/// One scored token of the comparison (reference_compare.h).
struct TokenComparison
{
    double nllModel = 0; ///< -ln p_model(target): the model's own NLL, as its NllStats has it
    double nllRef = 0;   ///< -ln p_ref(target)
    double kld = 0;      ///< KL(P_ref || P_model) over the whole vocabulary
    bool sameTop = false; ///< the two distributions' most likely tokens are the same
};

/**
 * The comparison's sums over the tokens a rank scored (or, reduced, every rank's). d = NLL(model) -
 * NLL(reference) is the token's ln PPL ratio; Δp = p_model(target) - p_ref(target).
 */
struct ReferenceStats
{
    ExactSum refNll, refNllSquared; ///< the reference's own NLL (its perplexity)
    ExactSum diff, diffSquared;     ///< Σ d, Σ d²: the PPL ratio and its error, the pairs' correlation counted
    ExactSum kld, kldSquared;
    ExactSum dp, dpSquared;
    std::int64_t tokens = 0;
    std::int64_t sameTop = 0;
    std::vector<std::int64_t> histogram = std::vector<std::int64_t>(KldBins::kCount, 0);
    double kldMax = 0; ///< the largest KL divergence (0 before any token)

    void add(const TokenComparison &t) noexcept;
    /// Non-finite values the sums refused (a model that overflowed).
    [[nodiscard]] std::int64_t rejected() const noexcept;

    /// Words per round: the sums' limbs, the counts, the bins, and one slot per rank for its maximum
    /// (its bits: non-negative doubles order as their bit patterns), so that an elementwise SUM
    /// all-reduce, which carries every rank's slot, gives the exact maximum too.
    [[nodiscard]] static std::size_t wordCount(int worldSize) noexcept;
    void appendWords(std::vector<std::int64_t> &words, int rank, int worldSize) const;
    /// Every rank's totals from the reduced words (appendWords' layout).
    [[nodiscard]] static ReferenceStats fromReducedWords(std::span<const std::int64_t> words, int worldSize);

    friend bool operator==(const ReferenceStats &, const ReferenceStats &) = default;
};

/// The figures of docs/result-json.md's "reference", computed once from the sums.
struct ReferenceFigures
{
    std::int64_t tokens = 0;
    double refPpl = 0;                                   ///< exp(Σ NLL_ref / N)
    double lnPplRatio = 0, lnPplRatioStderr = 0;         ///< mean d and its standard error
    double pplRatio = 0, pplRatioStderr = 0;             ///< exp(mean d) and exp(mean d) x that error
    double kldMean = 0, kldStderr = 0;
    double kldMedian = 0, kldP90 = 0, kldP99 = 0, kldP999 = 0, kldMax = 0; ///< percentiles: their bin's middle
    double sameTop = 0, sameTopStderr = 0;               ///< the fraction of tokens, and sqrt(p (1 - p) / (N - 1))
    double dpMean = 0, dpRms = 0;
};

[[nodiscard]] ReferenceFigures referenceFigures(const ReferenceStats &s);
/// The q-quantile (0 < q <= 1) from the histogram: the middle of the bin holding the ceil(q N)-th
/// smallest value (0 in the first bin), at most the maximum.
[[nodiscard]] double kldQuantile(const ReferenceStats &s, double q);
/// The figures as a JSON object (the result's "reference" and each of its "ranks"), with "rank"
/// when rank >= 0.
[[nodiscard]] std::string figuresJson(const ReferenceFigures &f, int rank = -1);
/// "KLD 0.001234  same top 95.21%  PPL ratio 1.0123": the round lines' tail.
[[nodiscard]] std::string figuresLine(const ReferenceFigures &f);

} // namespace cppl::agent
