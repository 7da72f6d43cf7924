// SPDX-License-Identifier: MIT
#include "cppl/sharding.h"

#include "cppl/errors.h"

#include <algorithm>
#include <string>

namespace cppl {

namespace {

using Prefix = std::vector<std::int64_t>;
__extension__ typedef __int128 i128;

// First index k with S[k] >= value (S non-decreasing).
std::int64_t firstAtLeast(const Prefix &S, std::int64_t value)
{
    return std::lower_bound(S.begin(), S.end(), value) - S.begin();
}
// Last index k with S[k] <= value, or -1.
std::int64_t lastAtMost(const Prefix &S, std::int64_t value)
{
    return (std::upper_bound(S.begin(), S.end(), value) - S.begin()) - 1;
}

// Can the windows be cut into R contiguous shards, each with a total in [L, L + w]?
// Because no window exceeds w (the interval's width), the prefix indices reachable after r shards
// form one contiguous range [lo[r], hi[r]]; we only track its ends. hiOut[r] keeps the range of
// indices that can still start a shard (enough tokens left), used to rebuild the cuts.
bool feasible(const Prefix &S, int R, std::int64_t L, std::int64_t w, std::vector<std::int64_t> &lo,
              std::vector<std::int64_t> &hi)
{
    const auto n = static_cast<std::int64_t>(S.size()) - 1;
    const std::int64_t total = S[n];
    lo.assign(R + 1, 0);
    hi.assign(R + 1, 0);
    for (int r = 1; r <= R; ++r) {
        // Start indices that leave room for a shard of at least L.
        const std::int64_t startHi = std::min(hi[r - 1], lastAtMost(S, total - L));
        if (lo[r - 1] > startHi)
            return false;
        hi[r - 1] = startHi;
        lo[r] = std::max(lo[r - 1], firstAtLeast(S, S[lo[r - 1]] + L));
        hi[r] = lastAtMost(S, S[startHi] + L + w);
        if (lo[r] > hi[r])
            return false;
    }
    return lo[R] <= n && n <= hi[R];
}

} // namespace

std::vector<Shard> shardWindows(std::span<const std::int64_t> scored, int ranks)
{
    if (ranks < 1)
        throw ConfigError("the number of ranks must be at least 1 (got " + std::to_string(ranks) + ")");
    const auto n = static_cast<std::int64_t>(scored.size());
    Prefix S(n + 1, 0);
    std::int64_t w = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        CPPL_ENFORCE(scored[i] >= 0, "negative scored-token count");
        S[i + 1] = S[i] + scored[i];
        w = std::max(w, scored[i]);
    }
    const std::int64_t total = S[n];
    const int R = ranks;

    // Search the largest minimum shard L (shards then lie in [L, L + w]). The ideal share T/R lies in
    // [L, L + w], so L is within w below floor(T/R). A partition with max - min <= w always exists
    // for these windows; the loop finds the most balanced one.
    std::vector<std::int64_t> lo;
    std::vector<std::int64_t> hi;
    std::int64_t L = total / R;
    const std::int64_t lowest = std::max<std::int64_t>(0, L - w);
    bool found = false;
    for (; L >= lowest; --L)
        if (feasible(S, R, L, w, lo, hi)) {
            found = true;
            break;
        }
    std::vector<std::int64_t> cut(R + 1, 0);
    cut[R] = n;
    if (!found) {
        // Not observed in exhaustive and randomised searches; kept so a pathological input still
        // gets a valid partition: cuts nearest to r*T/R, each shard within w of the ideal share.
        for (int r = 1; r < R; ++r) {
            const auto ideal = static_cast<std::int64_t>((static_cast<i128>(total) * r) / R);
            std::int64_t k = firstAtLeast(S, ideal);
            if (k > 0 && ideal - S[k - 1] < S[k] - ideal)
                --k;
            cut[r] = std::max(cut[r - 1], k);
        }
    }
    // Rebuild cuts from the last shard backwards, each as close to the ideal r*T/R as allowed.
    for (int r = R - 1; found && r >= 1; --r) {
        const std::int64_t next = S[cut[r + 1]];
        std::int64_t a = std::max(lo[r], firstAtLeast(S, next - L - w));
        std::int64_t b = std::min({hi[r], lastAtMost(S, next - L), cut[r + 1]});
        CPPL_ENFORCE(a <= b, "shard reconstruction failed");
        const std::int64_t ideal = static_cast<std::int64_t>((static_cast<i128>(total) * r) / R);
        std::int64_t k = std::clamp(firstAtLeast(S, ideal), a, b);
        if (k > a && ideal - S[k - 1] < S[k] - ideal)
            --k;
        cut[r] = k;
    }
    std::vector<Shard> shards(R);
    for (int r = 0; r < R; ++r)
        shards[r] = {cut[r], cut[r + 1], S[cut[r + 1]] - S[cut[r]]};
    return shards;
}

std::vector<Shard> shardPlan(const WindowPlan &plan, int ranks)
{
    std::vector<std::int64_t> scored;
    scored.reserve(plan.windows.size());
    for (const Window &w : plan.windows)
        scored.push_back(w.scored());
    return shardWindows(scored, ranks);
}

std::vector<Shard> shardPlanByBatch(const WindowPlan &plan, int ranks, std::int64_t batch)
{
    if (batch < 1)
        throw ConfigError("batch must be at least 1 window (got " + std::to_string(batch) + ")");
    const auto n = static_cast<std::int64_t>(plan.windows.size());
    std::vector<std::int64_t> units;
    for (std::int64_t b = 0; b < n; b += batch) {
        std::int64_t sum = 0;
        for (std::int64_t w = b; w < std::min(n, b + batch); ++w)
            sum += plan.windows[static_cast<std::size_t>(w)].scored();
        units.push_back(sum);
    }
    std::vector<Shard> shards = shardWindows(units, ranks);
    for (Shard &s : shards) {
        s.firstWindow = std::min(n, s.firstWindow * batch);
        s.endWindow = std::min(n, s.endWindow * batch);
    }
    return shards;
}

std::vector<std::int64_t> batchTokens(const WindowPlan &plan, std::int64_t batch)
{
    if (batch < 1)
        throw ConfigError("batch must be at least 1 window (got " + std::to_string(batch) + ")");
    std::vector<std::int64_t> out;
    const auto n = static_cast<std::int64_t>(plan.windows.size());
    for (std::int64_t b = 0; b < n; b += batch) {
        std::int64_t t = 0;
        for (std::int64_t w = b; w < std::min(n, b + batch); ++w)
            t += plan.windows[static_cast<std::size_t>(w)].scored();
        out.push_back(t);
    }
    return out;
}

RoundPlan::RoundPlan(const WindowPlan &plan, std::span<const Shard> shards, std::int64_t syncEveryTokens,
                     std::int64_t batch)
{
    if (batch < 1)
        throw ConfigError("batch must be at least 1 window (got " + std::to_string(batch) + ")");
    if (syncEveryTokens < 0)
        throw ConfigError("sync threshold must be >= 0 tokens (0 = after every batch), got " + std::to_string(syncEveryTokens));
    std::int64_t rounds = 1;
    for (const Shard &s : shards) {
        if (syncEveryTokens == 0)
            rounds = std::max(rounds, (s.windows() + batch - 1) / batch);
        else if (syncEveryTokens != kSyncAtEnd)
            rounds = std::max(rounds, (s.scoredTokens + syncEveryTokens - 1) / syncEveryTokens);
    }
    CPPL_ENFORCE(rounds < (std::int64_t{1} << 31), "too many sync rounds");
    m_rounds = static_cast<int>(rounds);

    m_bounds.resize(shards.size());
    m_tokens.resize(shards.size());
    for (std::size_t r = 0; r < shards.size(); ++r) {
        const Shard &s = shards[r];
        auto &bounds = m_bounds[r];
        auto &tokens = m_tokens[r];
        bounds.assign(m_rounds + 1, s.endWindow);
        tokens.assign(m_rounds + 1, 0);
        bounds[0] = s.firstWindow;
        // Cumulative scored tokens inside the shard.
        std::vector<std::int64_t> cum(s.windows() + 1, 0);
        for (std::int64_t i = 0; i < s.windows(); ++i)
            cum[i + 1] = cum[i] + plan.windows[s.firstWindow + i].scored();
        for (int j = 1; j < m_rounds; ++j) {
            std::int64_t local = 0;
            if (syncEveryTokens == 0) {
                local = static_cast<std::int64_t>(j) * batch;
            } else {
                // First window index whose cumulative share reaches j / rounds of this shard.
                const auto need = static_cast<i128>(s.scoredTokens) * j;
                local = std::partition_point(cum.begin(), cum.end(),
                                             [&](std::int64_t c) { return static_cast<i128>(c) * m_rounds < need; })
                        - cum.begin();
                local = (local + batch - 1) / batch * batch; // whole batches only
            }
            local = std::min(local, s.windows());
            bounds[j] = std::max(bounds[j - 1], s.firstWindow + local);
        }
        for (int j = 0; j <= m_rounds; ++j)
            tokens[j] = cum[bounds[j] - s.firstWindow];
    }
}

Shard RoundPlan::roundOf(int rank, int round) const
{
    CPPL_ENFORCE(rank >= 0 && static_cast<std::size_t>(rank) < m_bounds.size(), "rank out of range");
    CPPL_ENFORCE(round >= 0 && round < m_rounds, "round out of range");
    const auto &b = m_bounds[rank];
    const auto &t = m_tokens[rank];
    return {b[round], b[round + 1], t[round + 1] - t[round]};
}

} // namespace cppl
