// SPDX-License-Identifier: MIT
#pragma once

#include "batch_runs.h"
#include "communicator.h"
#include "watchdog.h"

#include <algorithm>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace cppl::agent::dist {

class DistributedRun;
class RendezvousStore;

/// Tolerant dynamic runs: the reporting rank has written the result (the others may leave).
inline const std::string kReportedKey = "cppl/reported";

/**
 * @brief DynamicSchedule::recover() found the result written (kReportedKey) while it waited to
 * regroup: a rank lost inside the closing gather left the gather completed at the reporting rank
 * and failed at this one, and the reporter, with every rank's totals, wrote the result. Nothing is
 * left for this rank to do; the code that regroups after the last round catches it.
 */
class ResultWrittenError : public CollectiveError
{
public:
    using CollectiveError::CollectiveError;
};

/// `--schedule`: fixed batch-aligned shards planned before the run, or batches claimed as ranks go.
enum class Schedule { Static, Dynamic };

[[nodiscard]] const char *scheduleName(Schedule s) noexcept;

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
 * Rank r's first batch is queue position r, given to it before the run (no store round trip before
 * the first batch, when the process groups form on the same store); the counter hands out the
 * positions after the world size's.
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
 *
 * Losing a rank (DistributedRun::tolerant(); docs/communication.md, "Losing a rank"): the batches
 * are claimed from a queue (all batches in order at first); sync() regroups the survivors instead
 * of failing when a rank is lost (recover()), and carries on with the lost rank's uncommitted
 * batches queued first. Whatever it did, the totals sync() returns stay one rank's bits.
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
     * @param batchWindows windows of every batch (a lost rank's committed batches are matched on
     *        tokens and windows); empty: tokens only.
     */
    DynamicSchedule(DistributedRun &run, std::vector<std::int64_t> batchTokens, std::int64_t syncEveryTokens, std::string key = "cppl/sched/next",
                    std::optional<std::vector<std::int64_t>> order = std::nullopt, std::vector<std::int64_t> batchWindows = {});
    ~DynamicSchedule();
    DynamicSchedule(const DynamicSchedule &) = delete;
    DynamicSchedule &operator=(const DynamicSchedule &) = delete;

    /**
     * @brief What every rank knows is in the totals before any batch (the document's bytes and
     * words; a resumed run's committed words): it is part of the carry from the start, the same on
     * every rank, so it survives any rank's loss, rank 0's and several at once included. @p counted:
     * this rank's totals already hold it (rank 0's do, for telemetry and its own report); the
     * collectives then subtract it there. Call before the first sync().
     */
    void setConstant(std::span<const std::int64_t> words, bool counted);

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
    /**
     * @brief sync() in two halves, for a round whose collective runs elsewhere (RoundPipeline;
     * in a tolerant run the caller calls recover() when that collective throws RankLostError,
     * with this rank's totals as they are then, rounds computed meanwhile included): prepare() gives the round's payload (@p words, this rank's cumulative
     * totals, with the control words appended), complete() takes the summed payload, puts the
     * global totals into @p words and returns what sync() returns. A round prepared after the
     * previous one's complete() sizes itself with that round's speeds; with a round in flight,
     * beginRound() uses the speeds of the last completed one (one round older).
     */
    [[nodiscard]] std::vector<std::int64_t> prepare(std::span<const std::int64_t> words);
    bool complete(std::span<const std::int64_t> reduced, std::span<std::int64_t> words);
    /**
     * @brief A rank was lost (sync() calls this itself; call it when a collective outside sync(),
     * the closing gather, throws RankLostError): agree with the survivors on the last committed
     * round (through the store), regroup, keep the lost rank's committed part, queue the rest of
     * its batches again. @p words: this rank's cumulative totals in, every rank's totals out.
     */
    void recover(std::span<std::int64_t> words);
    /**
     * @brief Whether rank @p r has begun regrouping (said what it holds) for a loss this rank has
     * not regrouped around yet: after the last round, a rank whose closing gather completed joins
     * a reporter whose gather failed (a collective is not atomic: a rank lost inside it).
     */
    [[nodiscard]] bool regroups(int r);

    /// A rank lost during the run, as recover() settled it.
    struct LostRank
    {
        int rank = -1;
        std::string cause;
        int round = 0;                   ///< rounds committed with it (its work after them was redone)
        std::vector<BatchRun> committed; ///< its batches whose sums count
        std::int64_t tokens = 0;         ///< ... and their scored tokens and windows
        std::int64_t windows = 0;
    };
    [[nodiscard]] const std::vector<LostRank> &lostRanks() const noexcept { return m_lost; }
    /// @brief Batches queued again after a loss (claimed by a lost rank, not committed), in order.
    [[nodiscard]] const std::vector<BatchRun> &redone() const noexcept { return m_redone; }

    [[nodiscard]] int rounds() const noexcept { return m_rounds; }
    /// @brief The batches this rank evaluated, as merged runs in claim order.
    [[nodiscard]] const std::vector<BatchRun> &done() const noexcept { return m_done; }
    /// @brief The batches this rank evaluated in the current round (its ledger line, checkpoint.h).
    [[nodiscard]] const std::vector<BatchRun> &roundDone() const noexcept { return m_roundDone; }
    /// @brief Batches evaluated in the current round so far.
    [[nodiscard]] int roundBatches() const noexcept { return m_inRound; }
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
        [[nodiscard]] std::pair<std::int64_t, std::int64_t> claim(RendezvousStore &store, const std::string &key, std::int64_t batches) const;
    };
    /// What a claim sent ahead brings back: the counter after it, its size, and (round 0) how many
    /// ranks had said they started when it was sent (-1: not asked).
    struct Claimed
    {
        std::int64_t end = 0;
        std::int64_t k = 0;
        std::int64_t started = -1;
    };
    [[nodiscard]] Sizing sizing() const;
    /// @brief Takes a claim's answer: the counter after it (@p end) and its size @p k, counter values.
    void accept(std::int64_t end, std::int64_t k);
    bool claim();
    void prefetch();
    /// Whether round 0 waits for late starters here (the "/started" counter matters).
    [[nodiscard]] bool startersMatter() const;
    bool othersStillStarting();
    /// Queue positions the counter hands out (those after m_offset).
    [[nodiscard]] std::int64_t counterBatches() const { return std::max<std::int64_t>(0, m_batches - m_offset); }
    /// The batches at queue positions [from, to), as runs in queue order.
    [[nodiscard]] std::vector<BatchRun> queueSlice(std::int64_t from, std::int64_t to) const;
    // After a lost rank (batch_schedule_recovery.cpp).
    struct Regrouping;
    struct HeldState;
    struct LostShare;
    /// One attempt at regrouping for the latest loss; false when a newer loss arrived meanwhile.
    bool recoverOnce(std::span<std::int64_t> words);
    /// The latest of @p losses (all since the start) as this schedule regroups for it; throws
    /// CollectiveError when this rank is no longer a member.
    [[nodiscard]] Regrouping regroupingFor(std::vector<Watchdog::Loss> losses) const;
    /// Step 1: says in the store what this rank holds and reads what every survivor holds.
    [[nodiscard]] std::optional<std::vector<HeldState>> exchangeStates(const Regrouping &g);
    [[nodiscard]] HeldState parseState(int r, const std::string &text) const;
    /// Step 2: the counter as the lowest survivor read it.
    [[nodiscard]] std::optional<std::int64_t> agreeOnCounter(const Regrouping &g);
    /// Step 4: DistributedRun::regroup(); false when a newer loss restarts the regrouping.
    bool regroupRun(const Regrouping &g);
    /// Step 5: the lost rank's committed words and batches, from the round's total @p thenGlobal and
    /// @p both (the survivors' contributions then, and their totals since, all-reduced).
    [[nodiscard]] LostShare lostShare(const Regrouping &g, const std::vector<HeldState> &states, std::int64_t counter,
                                      const std::vector<std::int64_t> &thenGlobal, const std::vector<std::int64_t> &both) const;
    void matchCommitted(LostShare &share) const;
    /// Step 6: the lost rank's batches that are not committed first, then what the counter had not handed out.
    void requeue(const Regrouping &g, const LostShare &share);
    void recordLost(const Regrouping &g, const LostShare &share, int committedRound);
    /// The key's value; nullopt when a loss newer than @p epoch arrived first.
    [[nodiscard]] std::optional<std::string> waitKey(const std::string &key, int epoch, const std::string &what);

    DistributedRun &m_run;
    std::vector<std::int64_t> m_batchTokens;
    std::vector<std::int64_t> m_batchWindows; ///< windows of every batch (empty: unknown)
    std::int64_t m_batches = 0;                ///< positions in the queue
    std::int64_t m_offset = 0;                 ///< positions given out before the counter: rank r's first batch is position r (0 after a regrouping)
    std::vector<BatchRun> m_queue;             ///< what the counter hands out, in order: all batches, or after a loss the lost rank's first
    std::int64_t m_allBatches = 0;
    std::int64_t m_sync = 0;
    std::string m_key;
    double m_meanBatchTokens = 1;

    std::vector<BatchRun> m_pending; ///< claimed, not yet evaluated (front first)
    std::vector<BatchRun> m_done;
    std::vector<BatchRun> m_roundDone;
    bool m_exhausted = false; ///< the counter has passed the last batch
    std::int64_t m_claims = 0;
    double m_claimSeconds = 0;
    std::future<Claimed> m_inflight; ///< a claim sent ahead (prefetch)
    class ClaimThread;
    std::unique_ptr<ClaimThread> m_claimThread; ///< sends the claims ahead (after m_inflight: joined before it goes)
    std::int64_t m_started = -1;     ///< round 0: ranks started, from the last claim sent ahead taken since the last check (-1: none)

    int m_rounds = 0;            ///< rounds whose collective completed
    int m_begun = 0;             ///< beginRound() calls
    int m_round = 0;             ///< the index of the round being computed (rounds begun before it)
    bool m_announced = false;    ///< this rank has said on the store that its first batch is done
    int m_inRound = 0;           ///< batches evaluated in this round
    std::int64_t m_roundTokens = 0;
    double m_roundBudget = 0;    ///< this round's tokens for this rank (0: one batch; inf: until empty)
    std::int64_t m_myTokens = 0;
    double m_myCompute = 0;
    std::vector<double> m_rates; ///< from the last collective: every rank's tokens per second (0: not known yet)
    double m_rateSum = 0;        ///< their sum
    std::int64_t m_known = 0;    ///< ... over this many ranks (those that evaluated anything yet)
    std::vector<std::int64_t> m_local; ///< prepare(): this rank's part of the round's payload, for m_history

    // Losing a rank. Each rank contributes its totals since the last regrouping (m_base: its totals
    // then); the lowest member adds m_carry, everything committed before it (the same on all ranks).
    struct Committed
    {
        int round = -1;                  ///< the round whose collective completed
        std::vector<std::int64_t> local; ///< what this rank contributed (without the carry)
        std::vector<std::int64_t> global; ///< what the collective returned
    };
    std::vector<Committed> m_history;    ///< the last two rounds committed on this rank
    std::vector<std::int64_t> m_base;
    std::vector<std::int64_t> m_carry;
    std::vector<int> m_members;          ///< the membership the schedule last regrouped for
    std::vector<std::vector<BatchRun>> m_pendingAtRegroup; ///< per original rank: its pending batches at the last regrouping
    std::vector<std::vector<BatchRun>> m_doneAtRegroup;    ///< ... and its evaluated batches (all committed by it)
    std::vector<LostRank> m_lost;
    std::vector<BatchRun> m_redone;
};

} // namespace cppl::agent::dist
