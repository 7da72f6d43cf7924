// SPDX-License-Identifier: MIT
#include "run/run_timeline.h"

#include "cppl/errors.h"

#include <algorithm>

namespace cppl::core::run {

void RunTimeline::reset(Options options)
{
    CPPL_ENFORCE(options.maxPoints >= 4, "a timeline needs room for at least 4 samples");
    m_options = options;
    m_worldSize = 0;
    m_times.clear();
    m_ranks.assign(kRankMetricCount, {});
    m_global.assign(kGlobalMetricCount, {});
}

bool RunTimeline::append(double seconds, const telemetry::Snapshot &snapshot)
{
    if (m_ranks.empty())
        reset(m_options);
    if (!m_times.empty() && seconds - m_times.back() < m_options.minIntervalSeconds)
        return false;
    const int world = static_cast<int>(std::max<std::size_t>(snapshot.ranks.size(), static_cast<std::size_t>(std::max<std::int64_t>(snapshot.worldSize, 0))));
    if (world > m_worldSize) {
        // Ranks first heard later start with zeros at the samples before.
        for (auto &metric : m_ranks)
            metric.resize(static_cast<std::size_t>(world), std::vector<float>(m_times.size(), 0.0F));
        m_worldSize = world;
    }
    m_times.push_back(seconds);
    for (auto &metric : m_ranks)
        for (auto &series : metric)
            series.push_back(0.0F);
    for (const auto &r : snapshot.ranks) {
        if (r.rank < 0 || r.rank >= m_worldSize)
            continue;
        const auto i = static_cast<std::size_t>(r.rank);
        m_ranks[static_cast<int>(RankMetric::TokensPerSecond)][i].back() = static_cast<float>(r.tokensPerSecond);
        m_ranks[static_cast<int>(RankMetric::WaitShare)][i].back() = static_cast<float>(r.waitShare);
        m_ranks[static_cast<int>(RankMetric::TransferShare)][i].back() = static_cast<float>(r.transferShare);
        m_ranks[static_cast<int>(RankMetric::DeviationRelative)][i].back() =
            r.stats.tokens > 0 && snapshot.global.tokens > 0 ? static_cast<float>(r.deviationRelative) : 0.0F;
    }
    m_global[static_cast<int>(GlobalMetric::Ppl)].push_back(snapshot.global.tokens > 0 ? snapshot.globalPpl.ppl : 0.0);
    m_global[static_cast<int>(GlobalMetric::PplStderr)].push_back(snapshot.global.tokens > 0 ? snapshot.globalPpl.pplStderr : 0.0);
    m_global[static_cast<int>(GlobalMetric::TokensPerSecond)].push_back(snapshot.tokensPerSecond);
    m_global[static_cast<int>(GlobalMetric::TokensScored)].push_back(static_cast<double>(snapshot.global.tokens));
    if (m_times.size() > m_options.maxPoints)
        compact();
    return true;
}

void RunTimeline::compact()
{
    // Pairs merge into their mean (rates and shares average; the time is the pair's later one, so
    // the last sample stays the latest). An odd last sample is kept as it is.
    auto halve = [](auto &v) {
        const std::size_t n = v.size();
        std::size_t out = 0;
        for (std::size_t i = 0; i + 1 < n; i += 2)
            v[out++] = (v[i] + v[i + 1]) / 2;
        if (n % 2)
            v[out++] = v[n - 1];
        v.resize(out);
    };
    const std::size_t n = m_times.size();
    std::size_t out = 0;
    for (std::size_t i = 0; i + 1 < n; i += 2)
        m_times[out++] = m_times[i + 1];
    if (n % 2)
        m_times[out++] = m_times[n - 1];
    m_times.resize(out);
    for (auto &metric : m_ranks)
        for (auto &series : metric)
            halve(series);
    // Global PPL and tokens are cumulative figures: keep the later sample, not a mean.
    for (int g = 0; g < kGlobalMetricCount; ++g) {
        auto &v = m_global[static_cast<std::size_t>(g)];
        if (g == static_cast<int>(GlobalMetric::TokensPerSecond)) {
            halve(v);
            continue;
        }
        std::size_t o = 0;
        for (std::size_t i = 0; i + 1 < n; i += 2)
            v[o++] = v[i + 1];
        if (n % 2)
            v[o++] = v[n - 1];
        v.resize(o);
    }
}

std::span<const float> RunTimeline::rank(RankMetric metric, int rank) const
{
    const auto m = static_cast<std::size_t>(metric);
    if (m >= m_ranks.size() || rank < 0 || rank >= m_worldSize)
        return {};
    return m_ranks[m][static_cast<std::size_t>(rank)];
}

std::span<const double> RunTimeline::global(GlobalMetric metric) const
{
    const auto m = static_cast<std::size_t>(metric);
    return m < m_global.size() ? std::span<const double>(m_global[m]) : std::span<const double>();
}

std::size_t RunTimeline::bytes() const noexcept
{
    std::size_t b = m_times.capacity() * sizeof(double);
    for (const auto &metric : m_ranks)
        for (const auto &series : metric)
            b += series.capacity() * sizeof(float);
    for (const auto &g : m_global)
        b += g.capacity() * sizeof(double);
    return b;
}

} // namespace cppl::core::run
