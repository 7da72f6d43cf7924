// SPDX-License-Identifier: MIT
#include "reference_stats.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>

namespace cppl::agent {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kSums = 8; // refNll, refNllSquared, diff, diffSquared, kld, kldSquared, dp, dpSquared

std::array<ExactSum *, kSums> sums(ReferenceStats &s)
{
    return {&s.refNll, &s.refNllSquared, &s.diff, &s.diffSquared, &s.kld, &s.kldSquared, &s.dp, &s.dpSquared};
}

std::array<const ExactSum *, kSums> sums(const ReferenceStats &s)
{
    return {&s.refNll, &s.refNllSquared, &s.diff, &s.diffSquared, &s.kld, &s.kldSquared, &s.dp, &s.dpSquared};
}

/// The mean of N values from their sum and sum of squares, and its standard error (llama.cpp's:
/// sqrt((Σv²/N - μ²) / (N - 1))); NaN where N is too small.
std::pair<double, double> meanAndError(const ExactSum &sum, const ExactSum &squares, std::int64_t tokens)
{
    if (tokens <= 0 || sum.rejected() > 0)
        return {kNaN, kNaN};
    const auto n = static_cast<double>(tokens);
    const double mean = sum.toDouble() / n;
    if (tokens < 2)
        return {mean, kNaN};
    const double variance = std::max(0.0, squares.toDouble() / n - mean * mean);
    return {mean, std::sqrt(variance / (n - 1))};
}

/// A double as JSON: null where it is not finite (JSON has no NaN).
nlohmann::ordered_json number(double v)
{
    return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

} // namespace

int KldBins::of(double kl) noexcept
{
    if (!(kl >= std::ldexp(1.0, kMinExponent))) // below the range, negative rounding noise, NaN
        return std::isnan(kl) ? kCount - 1 : 0;
    if (kl >= std::ldexp(1.0, kMaxExponent))
        return kCount - 1;
    const auto bits = std::bit_cast<std::uint64_t>(kl);
    const int exponent = static_cast<int>((bits >> 52) & 0x7FFU) - 1023;
    const auto sub = static_cast<int>((bits >> (52 - kSubBits)) & ((1U << kSubBits) - 1U));
    return 1 + ((exponent - kMinExponent) << kSubBits) + sub;
}

double KldBins::lower(int bin) noexcept
{
    if (bin <= 0)
        return 0;
    if (bin >= kCount - 1)
        return std::ldexp(1.0, kMaxExponent);
    const int i = bin - 1;
    return std::ldexp(1.0 + static_cast<double>(i & ((1 << kSubBits) - 1)) / (1 << kSubBits), kMinExponent + (i >> kSubBits));
}

double KldBins::upper(int bin) noexcept
{
    return bin >= kCount - 1 ? std::numeric_limits<double>::infinity() : lower(bin + 1);
}

void ReferenceStats::add(const TokenComparison &t) noexcept
{
    refNll.add(t.nllRef);
    refNllSquared.addSquare(t.nllRef);
    const double d = t.nllModel - t.nllRef;
    diff.add(d);
    diffSquared.addSquare(d);
    kld.add(t.kld);
    kldSquared.addSquare(t.kld);
    const double delta = std::exp(-t.nllModel) - std::exp(-t.nllRef);
    dp.add(delta);
    dpSquared.addSquare(delta);
    ++tokens;
    sameTop += t.sameTop ? 1 : 0;
    ++histogram[static_cast<std::size_t>(KldBins::of(t.kld))];
    if (t.kld > kldMax) // NaN never is
        kldMax = t.kld;
}

std::int64_t ReferenceStats::rejected() const noexcept
{
    std::int64_t n = 0;
    for (const ExactSum *s : sums(*this))
        n += s->rejected();
    return n;
}

std::size_t ReferenceStats::wordCount(int worldSize) noexcept
{
    return kSums * ExactSum::kReduceWords + 2 + KldBins::kCount + static_cast<std::size_t>(worldSize);
}

void ReferenceStats::appendWords(std::vector<std::int64_t> &words, int rank, int worldSize) const
{
    CPPL_ENFORCE(rank >= 0 && rank < worldSize, "a rank's maximum goes into its own slot");
    for (const ExactSum *s : sums(*this)) {
        const ExactSum::Limbs limbs = s->limbs();
        words.insert(words.end(), limbs.begin(), limbs.end());
    }
    words.push_back(tokens);
    words.push_back(sameTop);
    words.insert(words.end(), histogram.begin(), histogram.end());
    for (int r = 0; r < worldSize; ++r)
        words.push_back(r == rank ? std::bit_cast<std::int64_t>(kldMax) : 0);
}

ReferenceStats ReferenceStats::fromReducedWords(std::span<const std::int64_t> words, int worldSize)
{
    CPPL_ENFORCE(words.size() == wordCount(worldSize), "a reference's words of the size appendWords gives");
    ReferenceStats s;
    std::size_t i = 0;
    for (ExactSum *sum : sums(s)) {
        ExactSum::Limbs limbs{};
        std::copy_n(words.begin() + static_cast<std::ptrdiff_t>(i), limbs.size(), limbs.begin());
        *sum = ExactSum::fromReducedLimbs(limbs);
        i += limbs.size();
    }
    s.tokens = words[i++];
    s.sameTop = words[i++];
    std::copy_n(words.begin() + static_cast<std::ptrdiff_t>(i), KldBins::kCount, s.histogram.begin());
    i += KldBins::kCount;
    for (int r = 0; r < worldSize; ++r, ++i) // every slot holds one rank's maximum (0: none), non-negative
        s.kldMax = std::max(s.kldMax, std::bit_cast<double>(words[i]));
    return s;
}

double kldQuantile(const ReferenceStats &s, double q)
{
    if (s.tokens <= 0)
        return kNaN;
    const auto rank = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(q * static_cast<double>(s.tokens))));
    std::int64_t seen = 0;
    for (int b = 0; b < KldBins::kCount; ++b) {
        seen += s.histogram[static_cast<std::size_t>(b)];
        if (seen < rank)
            continue;
        if (b == 0)
            return 0;
        if (b == KldBins::kCount - 1)
            return s.kldMax;
        return std::min(s.kldMax, 0.5 * (KldBins::lower(b) + KldBins::upper(b)));
    }
    return s.kldMax;
}

ReferenceFigures referenceFigures(const ReferenceStats &s)
{
    ReferenceFigures f;
    f.tokens = s.tokens;
    const auto n = static_cast<double>(s.tokens);
    f.refPpl = s.tokens > 0 && s.refNll.rejected() == 0 ? std::exp(s.refNll.toDouble() / n) : kNaN;
    std::tie(f.lnPplRatio, f.lnPplRatioStderr) = meanAndError(s.diff, s.diffSquared, s.tokens);
    f.pplRatio = std::exp(f.lnPplRatio);
    f.pplRatioStderr = f.pplRatio * f.lnPplRatioStderr;
    std::tie(f.kldMean, f.kldStderr) = meanAndError(s.kld, s.kldSquared, s.tokens);
    f.kldMedian = kldQuantile(s, 0.5);
    f.kldP90 = kldQuantile(s, 0.9);
    f.kldP99 = kldQuantile(s, 0.99);
    f.kldP999 = kldQuantile(s, 0.999);
    f.kldMax = s.tokens > 0 ? s.kldMax : kNaN;
    f.sameTop = s.tokens > 0 ? static_cast<double>(s.sameTop) / n : kNaN;
    f.sameTopStderr = s.tokens > 1 ? std::sqrt(f.sameTop * (1 - f.sameTop) / (n - 1)) : kNaN;
    f.dpMean = s.tokens > 0 && s.dp.rejected() == 0 ? s.dp.toDouble() / n : kNaN;
    f.dpRms = s.tokens > 0 && s.dpSquared.rejected() == 0 ? std::sqrt(s.dpSquared.toDouble() / n) : kNaN;
    return f;
}

std::string figuresJson(const ReferenceFigures &f, int rank)
{
    nlohmann::ordered_json j;
    if (rank >= 0)
        j["rank"] = rank;
    j["tokens"] = f.tokens;
    j["reference_ppl"] = number(f.refPpl);
    j["ppl_ratio"] = number(f.pplRatio);
    j["ppl_ratio_stderr"] = number(f.pplRatioStderr);
    j["ln_ppl_ratio"] = number(f.lnPplRatio);
    j["ln_ppl_ratio_stderr"] = number(f.lnPplRatioStderr);
    j["kld_mean"] = number(f.kldMean);
    j["kld_stderr"] = number(f.kldStderr);
    j["kld_median"] = number(f.kldMedian);
    j["kld_p90"] = number(f.kldP90);
    j["kld_p99"] = number(f.kldP99);
    j["kld_p999"] = number(f.kldP999);
    j["kld_max"] = number(f.kldMax);
    j["same_top"] = number(f.sameTop);
    j["same_top_stderr"] = number(f.sameTopStderr);
    j["dp_mean"] = number(f.dpMean);
    j["dp_rms"] = number(f.dpRms);
    return j.dump();
}

std::string figuresLine(const ReferenceFigures &f)
{
    char line[128];
    std::snprintf(line, sizeof line, "KLD %.6f  same top %.2f%%  PPL ratio %.4f", f.kldMean, 100.0 * f.sameTop, f.pplRatio);
    return line;
}

} // namespace cppl::agent
