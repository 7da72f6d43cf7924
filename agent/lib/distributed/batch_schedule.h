// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <future>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cppl::agent::dist {

class DistributedRun;
class Store;

/// `--schedule`: fixed batch-aligned shards planned before the run, or batches claimed as ranks go.
enum class Schedule { Static, Dynamic };

[[nodiscard]] const char *scheduleName(Schedule s) noexcept;

/// @brief Global batches [first, end) (batch indices, not windows).
struct BatchRun
{
    std::int64_t first = 0;
    std::int64_t end = 0;
    friend bool operator==(const BatchRun &, const BatchRun &) noexcept = default;
};

/// @brief "0-3,8,10-11" (inclusive ranges), the form the store and logs carry; and back (empty on bad text).
[[nodiscard]] std::string formatBatchRuns(std::span<const BatchRun> runs);
[[nodiscard]] std::optional<std::vector<BatchRun>> parseBatchRuns(const std::string &text);

/**
 * @brief One rank's share of a dynamic schedule (docs/communication.md, "Dynamic batches").
 *
 * The global batches are fixed before the run (batch b = windows [b·batch, (b+1)·batch), the same
 * rows as in a one-rank run); which rank evaluates one is decided as the run goes: a rank claims
 * runs of batches from one counter on the rendezvous store (TCPStore add), large while much is
 * left and single batches near the end (guided self-scheduling), so nobody waits for a slow rank
 * except for at most one batch at the end. The exact sums make the result the same bits whoever
 * evaluated what.
 *
 * Rounds no longer assume equal work. Round 0 is one batch per rank (it measures the speed); after
 * it a round lasts the time in which the ranks, at their mean speed (all-reduced with every round),
 * score `--sync-every-tokens` tokens each: each rank's budget is that time at its own speed, and it
 * stops at the batch boundary nearest to it, so ranks of any speed arrive together within a batch. Threshold 0 keeps one batch per rank per round; `end` one round.
 * A rank whose queue is empty contributes its unchanged totals until every rank says so in the
 * same collective; then all leave together after the same number of rounds.
 *
 * Usage: beginRound(); while (auto b = next()) { evaluate b; evaluated(*b, tokens, seconds); }
 * then sync(words) (the round's collective); stop when it returns true.
 */
class DynamicSchedule
{
public:
    /**
     * @param batchTokens scored tokens of every global batch, in order (their count is the number of batches).
     * @param syncEveryTokens as RoundPlan: 0 every batch, kSyncAtEnd once, else tokens per rank per round.
     * @param key the store's counter key (a fresh one per run).
     * @param order the global batches left to evaluate, in order (a resumed run: those not in its
     *        ledger); nullopt: every batch. The counter then hands out positions in this list.
     */
    DynamicSchedule(DistributedRun &run, std::vector<std::int64_t> batchTokens, std::int64_t syncEveryTokens, std::string key = "cppl/sched/next",
                    std::optional<std::vector<std::int64_t>> order = std::nullopt);

    void beginRound();
    /// @brief The next batch this rank evaluates in this round, or nullopt: end the round now.
    [[nodiscard]] std::optional<std::int64_t> next();
    /// @brief Batch @p b is evaluated (its sums are in this rank's totals): it took @p seconds.
    void evaluated(std::int64_t b, double seconds);
    /**
     * @brief The round's collective: @p words (this rank's cumulative exact totals) are summed over
     * all ranks through DistributedRun::allReduce, with control words appended: whether this rank's
     * queue is empty, and one slot per rank for its speed in milli-tokens per second (0: not known
     * yet), each rank writing its own. Returns true when every rank's queue is empty: the run is complete.
     */
    bool sync(std::span<std::int64_t> words);

    [[nodiscard]] int rounds() const noexcept { return m_rounds; }
    /// @brief The batches this rank evaluated, as merged runs in claim order.
    [[nodiscard]] const std::vector<BatchRun> &done() const noexcept { return m_done; }
    /// @brief The batches this rank evaluated in the current round (its ledger line, checkpoint.h).
    [[nodiscard]] const std::vector<BatchRun> &roundDone() const noexcept { return m_roundDone; }
    [[nodiscard]] std::int64_t claims() const noexcept { return m_claims; }
    [[nodiscard]] double claimSeconds() const noexcept { return m_claimSeconds; }
    /// @brief Control words appended to every round's payload: 1 + world size.
    [[nodiscard]] static std::size_t controlWords(int worldSize) noexcept { return 1 + static_cast<std::size_t>(worldSize); }

private:
    /// How large this rank's next claim is (computed on the main thread, used in the claim's thread).
    struct Sizing
    {
        double share = 1;            ///< this rank's part of all ranks' speed
        std::int64_t cap = INT64_MAX; ///< batches per claim at most
        [[nodiscard]] std::int64_t of(std::int64_t left) const;
        /// @brief Claims on @p store; returns (the counter after the claim, the claim's size).
        [[nodiscard]] std::pair<std::int64_t, std::int64_t> claim(Store &store, const std::string &key, std::int64_t batches) const;
    };
    [[nodiscard]] Sizing sizing() const;
    void accept(std::int64_t end, std::int64_t k);
    bool claim();
    void prefetch();
    bool othersStillStarting();

    DistributedRun &m_run;
    std::vector<std::int64_t> m_batchTokens;
    std::int64_t m_batches = 0;
    std::int64_t m_sync = 0;
    std::string m_key;
    double m_meanBatchTokens = 1;

    std::vector<BatchRun> m_pending; ///< claimed, not yet evaluated (front first)
    std::vector<BatchRun> m_done;
    std::vector<BatchRun> m_roundDone;
    std::optional<std::vector<std::int64_t>> m_order; ///< counter position -> global batch; nullopt: the identity
    bool m_exhausted = false; ///< the counter has passed the last batch
    std::int64_t m_claims = 0;
    double m_claimSeconds = 0;
    std::future<std::pair<std::int64_t, std::int64_t>> m_inflight; ///< a claim sent ahead (prefetch)

    int m_rounds = 0;
    bool m_announced = false;    ///< this rank has said on the store that its first batch is done
    int m_inRound = 0;           ///< batches evaluated in this round
    std::int64_t m_roundTokens = 0;
    double m_roundBudget = 0;    ///< this round's tokens for this rank (0: one batch; inf: until empty)
    std::int64_t m_myTokens = 0;
    double m_myCompute = 0;
    std::vector<double> m_rates; ///< from the last collective: every rank's tokens per second (0: not known yet)
    double m_rateSum = 0;        ///< their sum
    std::int64_t m_known = 0;    ///< ... over this many ranks (those that evaluated anything yet)
    std::vector<std::int64_t> m_buffer;
};

} // namespace cppl::agent::dist
