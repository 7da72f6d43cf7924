// SPDX-License-Identifier: MIT
#pragma once

// What the live charts draw: per-rank and global figures over the run's time, sampled from the
// collector's snapshots. Memory is bounded by construction: every sample stands for the same
// number of snapshots (a bucket, mean of rates and shares, last of cumulative figures); past
// maxPoints samples, neighbours merge pairwise and buckets double. A 10-hour run costs what a
// 10-minute one does, the samples stay evenly spread over the whole run, and the newest (partly
// filled) bucket always holds the latest snapshot. Every series reserves maxPoints + 1 samples when
// its rank is first heard, so memory reaches its bound then and stays there (1024 ranks: 24 MiB).
//
// For views that derive something per sample (bands, heat map columns) and want to redo only what
// changed: between two compactions, samples are only appended and the newest one is updated in
// place; everything before it stays as it was.

#include "telemetry/collector_state.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cppl::core::run {

enum class RankMetric {
    TokensPerSecond,
    WaitShare,        ///< of the rank's own time, 0..1: waiting for stragglers
    TransferShare,    ///< 0..1: moving the sums
    DeviationRelative, ///< local running PPL / global running PPL - 1 (over the rank's own batches, or its shard)
    KldMean,          ///< --reference-model: the rank's running mean KL(P_ref || P_model), 0 without one
    SameTop           ///< --reference-model: the rank's running share of tokens whose top tokens agree, 0..1
};
inline constexpr int kRankMetricCount = 6;

/// Ppl and PplStderr are NaN until the first token is scored; KldMean and SameTop (the exact merge
/// of the ranks' running comparisons) until the first token is compared, and in a run without a
/// reference model.
enum class GlobalMetric { Ppl, PplStderr, TokensPerSecond, TokensScored, KldMean, SameTop };
inline constexpr int kGlobalMetricCount = 6;

class RunTimeline
{
public:
    struct Options
    {
        std::size_t maxPoints = 1024;  ///< samples kept per series before pairs are merged
        double minIntervalSeconds = 0.2; ///< snapshots closer than this to the last sample are skipped
    };

    void reset(Options options);
    void reset() { reset(Options{}); }
    /// Samples a snapshot taken @p seconds after the start. Returns false when skipped.
    bool append(double seconds, const telemetry::Snapshot &snapshot);

    [[nodiscard]] std::size_t size() const noexcept { return m_times.size(); }
    [[nodiscard]] int worldSize() const noexcept { return m_worldSize; }
    [[nodiscard]] std::span<const double> times() const noexcept { return m_times; }
    [[nodiscard]] std::span<const float> rank(RankMetric metric, int rank) const;
    [[nodiscard]] std::span<const double> global(GlobalMetric metric) const;
    /// The time of the first sample that holds a progress message of @p rank (+inf until one has):
    /// its rank metrics are 0 before, which means "no data yet", not a rate of 0. A sample at
    /// times()[i] >= this holds some of the rank's progress (merged samples keep their newest time).
    [[nodiscard]] double firstProgressSeconds(int rank) const noexcept;
    /// Bytes held (for the memory benchmark).
    [[nodiscard]] std::size_t bytes() const noexcept;
    /// Changes with every sample taken (appended or merged into the newest): views skip rebuilding
    /// when it is the one they last drew.
    [[nodiscard]] std::uint64_t revision() const noexcept { return m_revision; }
    /// How many times neighbours were merged: when it is unchanged, samples [0, size() - 1) are
    /// exactly those a view saw last time (only the newest can have changed, or been appended).
    [[nodiscard]] std::uint64_t compactions() const noexcept { return m_compactions; }

private:
    void compact();

    Options m_options;
    std::int64_t m_bucket = 1;   // snapshots per complete sample
    std::int64_t m_partial = 0;  // snapshots in the newest sample; 0: it is complete
    int m_worldSize = 0;
    std::uint64_t m_revision = 0;
    std::uint64_t m_compactions = 0;
    std::vector<double> m_times;
    // [metric][rank] -> samples, all as long as m_times
    std::vector<std::vector<std::vector<float>>> m_ranks;
    std::vector<std::vector<double>> m_global;
    std::vector<double> m_firstProgress; // per rank: firstProgressSeconds()
    std::array<std::vector<float>, kRankMetricCount> m_values; // one snapshot's, reused
};

} // namespace cppl::core::run
