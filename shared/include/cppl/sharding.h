// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/window_plan.h"

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace cppl {

/// @brief A contiguous run of windows [firstWindow, endWindow) of a plan, evaluated by one rank.
struct Shard
{
    std::int64_t firstWindow = 0;
    std::int64_t endWindow = 0;
    std::int64_t scoredTokens = 0;

    [[nodiscard]] std::int64_t windows() const noexcept { return endWindow - firstWindow; }
    friend bool operator==(const Shard &, const Shard &) noexcept = default;
};

/**
 * @brief Splits windows into `ranks` contiguous shards balanced by scored tokens.
 *
 * Every window lands in exactly one shard, in order (no padding, no duplicates, no drops), and the
 * scored-token totals of any two shards differ by at most the largest window's scored count. The
 * result depends only on the scored counts and `ranks`, so every rank computes every rank's shard.
 * With more ranks than windows some shards are empty. Throws ConfigError for ranks < 1.
 */
[[nodiscard]] std::vector<Shard> shardWindows(std::span<const std::int64_t> scoredPerWindow, int ranks);
[[nodiscard]] std::vector<Shard> shardPlan(const WindowPlan &plan, int ranks);

/**
 * @brief Shards whose boundaries fall on multiples of `batch` windows, so every window is evaluated
 * in the same batch, at the same row, whatever the number of ranks. BLAS results can depend on a
 * row's position in a batch; with batch-aligned shards the per-window numbers are the same bits as
 * in a one-rank run, and so is the exact sum. Balanced by scored tokens to within one batch.
 */
[[nodiscard]] std::vector<Shard> shardPlanByBatch(const WindowPlan &plan, int ranks, std::int64_t batch);

/// @brief Scored tokens of each global batch b = windows [b·batch, (b+1)·batch) (the last may be short).
[[nodiscard]] std::vector<std::int64_t> batchTokens(const WindowPlan &plan, std::int64_t batch);

/// @brief Only at the end: one round.
inline constexpr std::int64_t kSyncAtEnd = std::numeric_limits<std::int64_t>::max();
/// @brief The default sync threshold, scored tokens per rank per round (docs/communication.md).
inline constexpr std::int64_t kDefaultSyncEveryTokens = 65536;

/**
 * @brief When every rank synchronises. Every rank runs the same number of rounds (rounds()), so
 * every rank enters the same collectives even when shards are uneven or empty: a rank with no work
 * left in a round contributes zeros.
 */
class RoundPlan
{
public:
    /**
     * @param syncEveryTokens 0: after every batch; kSyncAtEnd: once; T: about every T scored tokens
     *        per rank, splitting each shard at the same fractions so all ranks progress together.
     * @param batch windows per forward pass; round boundaries fall on whole batches.
     */
    RoundPlan(const WindowPlan &plan, std::span<const Shard> shards, std::int64_t syncEveryTokens, std::int64_t batch);

    [[nodiscard]] int rounds() const noexcept { return m_rounds; }
    /// @brief Window range of `rank` in round `round` (absolute plan indices); may be empty.
    [[nodiscard]] Shard roundOf(int rank, int round) const;

private:
    int m_rounds = 1;
    std::vector<std::vector<std::int64_t>> m_bounds; // per rank: rounds+1 window indices
    std::vector<std::vector<std::int64_t>> m_tokens; // per rank: rounds+1 cumulative scored counts
};

} // namespace cppl
