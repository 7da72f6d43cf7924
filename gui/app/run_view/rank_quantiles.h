// SPDX-License-Identifier: MIT
#pragma once

// Quantiles across ranks at every sample of a RunTimeline (the band of the tok/s and deviation
// charts beyond 32 ranks, the heat map's colour scale), kept up to date incrementally: between two
// compactions of the timeline only its newest sample changes or new ones are appended, so only
// those are recomputed (a few thousand values instead of ranks x samples per update). After a
// compaction the means of each merged pair stand in until the exact values have been recomputed,
// at most `budget` samples per update, oldest first.

#include "run/run_timeline.h"

#include <cstdint>
#include <vector>

namespace cppl::app {

class RankQuantiles
{
public:
    /// @p quantiles in [0, 1], e.g. {0.05, 0.5, 0.95}.
    RankQuantiles(cppl::core::run::RankMetric metric, std::vector<double> quantiles);

    void clear();
    /// Brings the values up to date with @p timeline. The first call (and one after a reset of
    /// the timeline) computes every sample exactly, whatever the budget.
    void update(const cppl::core::run::RunTimeline &timeline, int budget = 48);

    /// Quantile @p q (index into the constructor's list) at every sample, as long as the timeline:
    /// over the ranks that had sent progress by then (RunTimeline::firstProgressSeconds; before
    /// it a rank's 0 is no data, not a rate), NaN while none had.
    [[nodiscard]] const std::vector<double> &values(int q) const { return m_values[static_cast<size_t>(q)]; }
    [[nodiscard]] size_t size() const noexcept { return m_size; }
    /// True when every value is exact (no merged stand-ins are left).
    [[nodiscard]] bool exact() const noexcept { return m_exactUpTo >= m_size; }
    /// Samples computed by the last update() (for tests and the benchmark).
    [[nodiscard]] int lastComputed() const noexcept { return m_lastComputed; }

    /// The quantile of @p values as the band charts define it: the order statistic nearest to
    /// q x (n - 1). Reorders @p values.
    static double quantileOf(std::vector<float> &values, double q);

private:
    void computeSample(size_t sample);

    cppl::core::run::RankMetric m_metric;
    std::vector<double> m_quantiles;
    std::vector<std::vector<double>> m_values; // [quantile][sample]
    std::vector<double> m_times;               // the timeline's times at the last update
    std::vector<const float *> m_series;       // per rank, during update()
    std::vector<double> m_firstProgress;       // per rank, during update()
    size_t m_size = 0;
    size_t m_exactUpTo = 0; // samples [0, m_exactUpTo) are exact
    int m_worldSize = 0;
    std::uint64_t m_compactions = ~std::uint64_t{0};
    int m_lastComputed = 0;
    std::vector<float> m_column; // one sample across ranks (scratch, reused)
};

} // namespace cppl::app
