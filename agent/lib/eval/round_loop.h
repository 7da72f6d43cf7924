// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 6 (eval_session.h): the rounds. What the loop takes (the plan),
// what it gives (the outcome) and the loop itself. Torch-free: the model reaches it as a
// WindowScorer (evaluator.h).
#pragma once

#include "eval_data.h"
#include "eval_options.h"
#include "reference_stats.h"
#include "distributed/batch_schedule.h"
#include "distributed/checkpoint.h"
#include "distributed/distributed_run.h"
#include "distributed/round_pipeline.h"

#include "cppl/sharding.h"
#include "cppl/statistics.h"
#include "cppl/window_plan.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace cppl::agent {

class CheckpointFingerprint;
class TensorParallelLeader;
class WindowScorer;
struct EvalProgress;
struct FaultHooks;
namespace telemetry {
class Publisher;
}

/// H:MM:SS for the log lines; "--:--" when unknown.
std::string clock(double seconds);

/// Step 5's result: the token stream as the model sees it, the windows over it, every rank's share.
struct EvalPlan
{
    /// The token stream the windows index. Shared: the fingerprint's hashing thread reads it too,
    /// and may outlive the plan (a short run, a failure).
    std::shared_ptr<const std::vector<std::uint32_t>> flat;
    WindowPlan windows;
    std::vector<Shard> shards;
};

/// Step 6's result: the totals of every rank (exact), and how long it took.
struct EvalOutcome
{
    NllStats stats;
    int rounds = 0;
    double seconds = 0;
    std::vector<dist::RankReport> reports;
    std::vector<std::string> batchRuns; ///< dynamic schedule, the reporting rank: each rank's batches ("0-3,8")
    NllStats resumedBase;               ///< a resumed run: the committed global totals it started from
    std::vector<dist::DynamicSchedule::LostRank> lostRanks; ///< --on-rank-loss continue: who was lost, and when
    std::string batchesRedone;          ///< ... and the batches evaluated again for them
    double warmupSeconds = 0;           ///< GPU: the warm-up batch before the clock (Evaluator::warmUp)
    double firstTokenSeconds = 0;       ///< the model's load started -> the first batch's scores on the host
    bool overlapRan = false; ///< the rounds' collectives ran behind the next round's compute (the result's overlap_sync)
    std::optional<ReferenceStats> reference; ///< --reference-model: every rank's comparison, exactly
    std::vector<std::string> referenceRanks; ///< ... each rank's own figures (figuresJson), "" where unknown (a lost rank)
};

/// Where the loop speaks, and who it runs with.
struct RoundLoopIo
{
    std::ostream &out;                 ///< the launcher's lines: ledger, checkpoint, regroup (checkpoint.h)
    std::ostream &err;                 ///< progress, round lines, notes
    dist::DistributedRun *run;         ///< set when this is one rank of several
    telemetry::Publisher *telemetry;   ///< set with --telemetry
    CheckpointFingerprint &fingerprint; ///< what checkpoint lines carry (with --checkpoint-lines)
    TensorParallelLeader *tpLeader = nullptr; ///< --tensor-parallel: this rank leads its group (the scorer); the closing gather asks it for its followers' rows
};

/**
 * Step 6: evaluate, in rounds every rank enters alike (the same collectives on every rank, however
 * uneven the work); the totals of every rank, exactly. Static: the shards and rounds planned before
 * the run. Dynamic: batches claimed from the store as ranks go (batch_schedule.h), surviving a lost
 * rank where asked. Progress lines, telemetry, the ledger and checkpoint lines, and every rank's
 * report gathered for the result.
 *
 * run() is the algorithm, one named step per line; a round is computeRound() (the windows through
 * evaluateRange()), then syncRound() (the ledger line, this rank's words summed over the ranks),
 * then roundComplete() (the global totals, the checkpoint, the round line). A later feature is one
 * more step in one of these places, e.g.:
 * - a reference model scored on the same windows (built so): the scorer compares the two in the
 *   same pass (WindowScorer::comparesReference()) into this rank's ReferenceStats beside its
 *   NllStats in evaluateRange(); its words are appended in roundWords() and read back in
 *   takeGlobal() (so every collective, the dynamic schedule's carry after a lost rank included,
 *   carries them), each rank's own figures go through the store before the closing gather
 *   (publishReference(), collectReferenceRows()), and outcome() has both;
 * - a tensor-parallel group contributing its sums once (built so): only the group's leader runs
 *   this loop (its followers score what it sends them: tensor_parallel_driver.h); the closing
 *   gather carries its followers' rows beside its own (followerRows()).
 */
class RoundLoop
{
public:
    RoundLoop(const EvalOptions &options, const RoundLoopIo &io, WindowScorer &scorer, const EvalInput &input, const EvalPlan &plan);
    RoundLoop(const RoundLoop &) = delete;
    RoundLoop &operator=(const RoundLoop &) = delete;

    /// Runs every round, then (distributed) gathers every rank's report; throws ExitError when the
    /// totals are not a complete, finite result.
    EvalOutcome run();

private:
    using Clock = std::chrono::steady_clock;
    /// The communication times when a collective began: a round's share is the difference.
    struct CommMark
    {
        double wait = 0;
        double transfer = 0;
    };
    /// What became of the round in flight once the next one was computed.
    enum class Flight { None, RunComplete, Regrouped };

    // Before the first round.
    void planRounds();
    void startClock();
    void openPipeline();

    // The rounds.
    void runRounds();
    void computeRound(int r);
    double evaluateRange(std::int64_t first, std::int64_t end);
    void afterBatch(const EvalProgress &p, const NllStats &s, Clock::time_point rangeStart);
    void printProgress(const EvalProgress &p, const NllStats &s);
    void publishProgress(bool final, double inRound);
    [[nodiscard]] std::vector<std::int64_t> roundWords() const;
    /// The global totals from a round's reduced words (roundWords()' layout).
    void takeGlobal(std::span<const std::int64_t> words);
    [[nodiscard]] std::string referenceTail() const;
    Flight settleFlight(int r);
    bool syncRound(int r);
    bool completeFlight();
    void regroupBehind(int r);
    bool roundComplete(int r, int committed, std::span<const std::int64_t> words, bool allDone, CommMark mark);
    [[nodiscard]] int roundsLeftEstimate() const;
    void reportRound(int r, int total, CommMark mark);
    [[nodiscard]] std::string roundLine(int r, int total, bool last, Clock::time_point now) const;
    void ledger(int r);
    void checkpoint(int r);
    void reportLosses();
    void announceRegroup();
    [[nodiscard]] CommMark commMark() const;
    [[nodiscard]] bool silent() const;

    // After the last round (distributed).
    void gatherReports();
    [[nodiscard]] dist::RankReport myReport() const;
    [[nodiscard]] std::vector<dist::RankReport> followerRows() const;
    void publishBatches();
    void publishReference();
    void collectReferenceRows();
    void awaitReport();
    bool regroupAfterTheLastRound();
    void holdResultForTests();
    void collectRankRows();
    void markLostAfterTheEnd();
    void addLostRankRows();
    void checkEveryBatchCounted() const;

    // The result.
    void checkFinite() const;
    EvalOutcome outcome();

    const EvalOptions &m_o;
    std::ostream &m_out;
    std::ostream &m_err;
    dist::DistributedRun *m_run;
    telemetry::Publisher *m_tel;
    CheckpointFingerprint &m_fingerprint;
    TensorParallelLeader *m_tpLeader;
    WindowScorer &m_scorer;
    const EvalInput &m_input;
    const WindowPlan &m_plan;
    const std::vector<Shard> &m_shards;
    const FaultHooks &m_hooks;

    const bool m_distributed;
    const bool m_dynamic;
    const std::int64_t m_batch;
    const std::int64_t m_nWindows;
    const std::int64_t m_batchCount;      ///< global batches (what checkpoints and a resume count)
    const dist::ResumeState *m_resume;    ///< a resumed run: the committed state it starts from
    const NllStats m_base;                ///< ... its committed global totals (rank 0's constant contribution)
    const int m_firstRound;               ///< checkpoint rounds continue the interrupted run's numbering
    const std::int64_t m_windowsExpected; ///< telemetry's windows_total
    const bool m_slow;                    ///< CLUSTERPPL_TEST_SLOW_RANK names this rank
    const bool m_checkpoints;             ///< --checkpoint-lines in a distributed run
    const bool m_tolerantReport; ///< the others wait for the reporting rank's result (a tolerant dynamic run)

    NllStats m_stats;  ///< this rank's own tokens, cumulative
    NllStats m_global; ///< after each round: every rank's, exactly
    std::optional<ReferenceStats> m_ref;       ///< --reference-model: this rank's comparison, cumulative
    std::optional<ReferenceStats> m_refGlobal; ///< ... and every rank's after each round
    std::vector<std::string> m_refRanks;       ///< the reporter: each rank's own figures
    std::optional<RoundPlan> m_rounds;                ///< static
    std::optional<dist::DynamicSchedule> m_schedule;  ///< dynamic
    std::optional<dist::RoundPipeline> m_pipe;        ///< distributed, except tolerant runs without overlap
    bool m_tolerantPipe = false;
    bool m_overlapRan = false;
    Clock::time_point m_evalStart;
    Clock::time_point m_lastPrint;
    double m_computeSeconds = 0;
    double m_seconds = 0; ///< the evaluation's wall time, for the report and the result
    int m_roundsRun = 0;
    int m_flightRound = 0;     ///< the round whose collective is in flight ...
    int m_flightCommitted = 0; ///< ... and the checkpoint round it commits
    /// Batches computed while a round a loss ended was in flight (regroupBehind()): they go in the
    /// next ledger line, which is the only one of its (epoch, round) (the launcher's
    /// CheckpointWriter takes a rank's round as complete at its first line of it).
    std::vector<dist::BatchRun> m_carriedLedger;
    int m_checkpointsFrom = 0; ///< after a regrouping, the first round whose checkpoint is complete (its regroup line says so)
    std::size_t m_lostSeen = 0; ///< the schedule's lost ranks reported so far

    std::vector<dist::RankReport> m_reports;
    std::vector<std::string> m_batchRuns; ///< dynamic: which batches each rank evaluated
    std::vector<dist::DynamicSchedule::LostRank> m_lostAfterTheEnd; ///< the reporter: ranks lost after its closing gather completed
    bool m_reportedElsewhere = false; ///< the reporter wrote the result while this rank regrouped: nothing left to do
};

} // namespace cppl::agent
