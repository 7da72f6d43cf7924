// SPDX-License-Identifier: MIT
#include "rank_quantiles.h"

#include <algorithm>
#include <limits>

using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;

namespace cppl::app {

RankQuantiles::RankQuantiles(RankMetric metric, std::vector<double> quantiles)
    : m_metric(metric)
    , m_quantiles(std::move(quantiles))
    , m_values(m_quantiles.size())
{
}

void RankQuantiles::clear()
{
    for (auto &v : m_values)
        v.clear();
    m_times.clear();
    m_size = 0;
    m_exactUpTo = 0;
    m_worldSize = 0;
    m_compactions = ~std::uint64_t{0};
    m_lastComputed = 0;
}

double RankQuantiles::quantileOf(std::vector<float> &values, double q)
{
    if (values.empty())
        return 0;
    const size_t k = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size() - 1) + 0.5));
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
    return static_cast<double>(values[k]);
}

void RankQuantiles::computeSample(size_t sample)
{
    m_column.clear();
    const double t = m_times[sample];
    for (size_t r = 0; r < m_series.size(); ++r)
        if (t >= m_firstProgress[r]) // a rank's value counts from its first progress on
            m_column.push_back(m_series[r][sample]);
    for (size_t q = 0; q < m_quantiles.size(); ++q)
        m_values[q][sample] = m_column.empty() ? std::numeric_limits<double>::quiet_NaN() : quantileOf(m_column, m_quantiles[q]);
    ++m_lastComputed;
}

void RankQuantiles::update(const RunTimeline &tl, int budget)
{
    m_lastComputed = 0;
    const size_t n = tl.size();
    const auto times = tl.times();
    const int world = tl.worldSize();
    // What of the last update still holds: the samples before `keep` have a value (exact before
    // m_exactUpTo, a merged stand-in after it); the rest is computed now.
    size_t keep = 0;
    if (m_size > 0 && world == m_worldSize && tl.compactions() == m_compactions) {
        // Same epoch: everything but our newest sample is as it was (the times say it is the same run).
        const size_t stable = m_size - 1;
        if (n >= m_size && std::equal(m_times.begin(), m_times.begin() + static_cast<std::ptrdiff_t>(stable), times.begin())) {
            keep = stable;
            m_exactUpTo = std::min(m_exactUpTo, stable);
        }
    } else if (m_size > 1 && world == m_worldSize && tl.compactions() == m_compactions + 1) {
        // One compaction: sample i is the merge of our 2i and 2i+1 (both complete buckets, equal
        // weights) and carries the time of 2i+1. Their mean stands in until it is recomputed.
        const size_t pairs = std::min(n, (m_size - 1) / 2);
        bool same = true;
        for (size_t i = 0; i < pairs && same; ++i)
            same = times[i] == m_times[2 * i + 1];
        if (same) {
            for (auto &v : m_values)
                for (size_t i = 0; i < pairs; ++i)
                    v[i] = 0.5 * (v[2 * i] + v[2 * i + 1]);
            keep = pairs;
            m_exactUpTo = 0;
        }
    }
    if (keep == 0)
        m_exactUpTo = 0;
    m_worldSize = world;
    m_compactions = tl.compactions();
    m_size = n;
    m_times.assign(times.begin(), times.end());
    for (auto &v : m_values)
        v.resize(n);
    m_series.resize(static_cast<size_t>(std::max(world, 0)));
    m_firstProgress.resize(m_series.size());
    for (int r = 0; r < world; ++r) {
        m_series[static_cast<size_t>(r)] = tl.rank(m_metric, r).data();
        // It changes only from +inf to the newest sample's time, which is always recomputed.
        m_firstProgress[static_cast<size_t>(r)] = tl.firstProgressSeconds(r);
    }
    if (world <= 0)
        return;
    // Stand-ins oldest first, within the budget; then every sample that has no value at all.
    const size_t staleEnd = std::min(keep, m_exactUpTo + static_cast<size_t>(std::max(budget, 0)));
    for (size_t s = m_exactUpTo; s < staleEnd; ++s)
        computeSample(s);
    m_exactUpTo = staleEnd;
    for (size_t s = keep; s < n; ++s)
        computeSample(s);
    if (m_exactUpTo >= keep)
        m_exactUpTo = n;
}

} // namespace cppl::app
