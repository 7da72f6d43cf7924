// SPDX-License-Identifier: MIT
#include "run/run_timeline.h"

#include "cppl/errors.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

namespace cppl::core::run {

void RunTimeline::reset(Options options)
{
    CPPL_ENFORCE(options.maxPoints >= 4, "a timeline needs room for at least 4 samples");
    m_options = options;
    m_worldSize = 0;
    m_bucket = 1;
    m_partial = 0;
    ++m_revision;
    ++m_compactions; // a view's per-sample cache is void after a reset too
    m_times.clear();
    m_times.reserve(m_options.maxPoints + 1);
    m_ranks.assign(kRankMetricCount, {});
    m_global.assign(kGlobalMetricCount, {});
    m_firstProgress.clear();
}

namespace {

// Cumulative figures (PPL so far, tokens so far) take the newest value; rates and shares the mean.
bool isCumulative(int globalMetric)
{
    return globalMetric != static_cast<int>(GlobalMetric::TokensPerSecond);
}

} // namespace

bool RunTimeline::append(double seconds, const telemetry::Snapshot &snapshot)
{
    if (m_ranks.empty())
        reset(m_options);
    if (!m_times.empty() && seconds - m_times.back() < m_options.minIntervalSeconds)
        return false;
    const int world = static_cast<int>(std::max<std::size_t>(snapshot.ranks.size(), static_cast<std::size_t>(std::max<std::int64_t>(snapshot.worldSize, 0))));
    if (world > m_worldSize) {
        // Ranks first heard later start with zeros at the samples before. The whole bound is
        // reserved now: no reallocation (and no doubling of capacity) while the run goes on.
        for (auto &metric : m_ranks) {
            metric.resize(static_cast<std::size_t>(world));
            for (auto &series : metric)
                if (series.capacity() < m_options.maxPoints + 1) {
                    series.reserve(m_options.maxPoints + 1);
                    series.resize(m_times.size(), 0.0F);
                }
        }
        for (auto &g : m_global)
            g.reserve(m_options.maxPoints + 1);
        m_firstProgress.resize(static_cast<std::size_t>(world), std::numeric_limits<double>::infinity());
        m_worldSize = world;
    }
    ++m_revision;
    auto &values = m_values; // reused: no allocation per snapshot
    for (auto &v : values)
        v.assign(static_cast<std::size_t>(m_worldSize), 0.0F);
    for (const auto &r : snapshot.ranks) {
        if (r.rank < 0 || r.rank >= m_worldSize)
            continue;
        const auto i = static_cast<std::size_t>(r.rank);
        if (r.hasProgress && !std::isfinite(m_firstProgress[i]))
            m_firstProgress[i] = seconds; // this sample (new, or the newest merged into) holds it
        values[static_cast<int>(RankMetric::TokensPerSecond)][i] = static_cast<float>(r.tokensPerSecond);
        values[static_cast<int>(RankMetric::WaitShare)][i] = static_cast<float>(r.waitShare);
        values[static_cast<int>(RankMetric::TransferShare)][i] = static_cast<float>(r.transferShare);
        values[static_cast<int>(RankMetric::DeviationRelative)][i] =
            r.stats.tokens > 0 && snapshot.global.tokens > 0 ? static_cast<float>(r.deviationRelative) : 0.0F;
        const bool compared = r.reference && r.reference->tokens > 0;
        values[static_cast<int>(RankMetric::KldMean)][i] = compared ? static_cast<float>(r.reference->kldMean()) : 0.0F;
        values[static_cast<int>(RankMetric::SameTop)][i] = compared ? static_cast<float>(r.reference->sameTopShare()) : 0.0F;
    }
    const bool any = snapshot.global.tokens > 0;
    // No PPL before the first scored token: NaN, which the charts draw as a gap (not a drop to 0).
    constexpr double none = std::numeric_limits<double>::quiet_NaN();
    const bool compared = snapshot.reference && snapshot.reference->tokens > 0;
    const std::array<double, kGlobalMetricCount> globals{any ? snapshot.globalPpl.ppl : none,
                                                         any ? snapshot.globalPpl.pplStderr : none,
                                                         snapshot.tokensPerSecond,
                                                         static_cast<double>(snapshot.global.tokens),
                                                         compared ? snapshot.reference->kldMean() : none,
                                                         compared ? snapshot.reference->sameTopShare() : none};
    if (m_partial == 0) {
        m_times.push_back(seconds);
        for (int m = 0; m < kRankMetricCount; ++m)
            for (int r = 0; r < m_worldSize; ++r)
                m_ranks[static_cast<std::size_t>(m)][static_cast<std::size_t>(r)].push_back(values[static_cast<std::size_t>(m)][static_cast<std::size_t>(r)]);
        for (int g = 0; g < kGlobalMetricCount; ++g)
            m_global[static_cast<std::size_t>(g)].push_back(globals[static_cast<std::size_t>(g)]);
    } else {
        // Into the newest bucket: a running mean, the time and cumulative figures of the newest.
        const auto n = static_cast<double>(m_partial);
        m_times.back() = seconds;
        for (int m = 0; m < kRankMetricCount; ++m)
            for (int r = 0; r < m_worldSize; ++r) {
                float &v = m_ranks[static_cast<std::size_t>(m)][static_cast<std::size_t>(r)].back();
                v += static_cast<float>((values[static_cast<std::size_t>(m)][static_cast<std::size_t>(r)] - v) / (n + 1));
            }
        for (int g = 0; g < kGlobalMetricCount; ++g) {
            double &v = m_global[static_cast<std::size_t>(g)].back();
            v = isCumulative(g) ? globals[static_cast<std::size_t>(g)] : v + (globals[static_cast<std::size_t>(g)] - v) / (n + 1);
        }
    }
    if (++m_partial == m_bucket)
        m_partial = 0;
    if (m_times.size() > m_options.maxPoints)
        compact();
    return true;
}

void RunTimeline::compact()
{
    // Neighbours merge pairwise, weighted by how many snapshots each holds (only the newest can
    // hold fewer than a bucket), and buckets double.
    const std::size_t n = m_times.size();
    auto weight = [&](std::size_t i) {
        return static_cast<double>(i + 1 == n && m_partial != 0 ? m_partial : m_bucket);
    };
    const double lastWeight = weight(n - 1);
    auto merge = [&](auto &v, bool cumulative) {
        std::size_t out = 0;
        for (std::size_t i = 0; i + 1 < n; i += 2) {
            const double wa = weight(i), wb = weight(i + 1);
            using T = std::decay_t<decltype(v[0])>;
            v[out++] = cumulative ? v[i + 1] : static_cast<T>((static_cast<double>(v[i]) * wa + static_cast<double>(v[i + 1]) * wb) / (wa + wb));
        }
        if (n % 2)
            v[out++] = v[n - 1];
        v.resize(out);
    };
    merge(m_times, true);
    for (auto &metric : m_ranks)
        for (auto &series : metric)
            merge(series, false);
    for (int g = 0; g < kGlobalMetricCount; ++g)
        merge(m_global[static_cast<std::size_t>(g)], isCumulative(g));
    // The newest sample now holds: its pair (even n) or itself (odd n).
    const auto held = static_cast<std::int64_t>(n % 2 ? lastWeight : static_cast<double>(m_bucket) + lastWeight);
    m_bucket *= 2;
    m_partial = held == m_bucket ? 0 : held;
    ++m_compactions;
}

std::span<const float> RunTimeline::rank(RankMetric metric, int rank) const
{
    const auto m = static_cast<std::size_t>(metric);
    if (m >= m_ranks.size() || rank < 0 || rank >= m_worldSize)
        return {};
    return m_ranks[m][static_cast<std::size_t>(rank)];
}

double RunTimeline::firstProgressSeconds(int rank) const noexcept
{
    return rank >= 0 && static_cast<std::size_t>(rank) < m_firstProgress.size() ? m_firstProgress[static_cast<std::size_t>(rank)]
                                                                                 : std::numeric_limits<double>::infinity();
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
