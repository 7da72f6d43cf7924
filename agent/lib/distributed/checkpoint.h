// SPDX-License-Identifier: MIT
#pragma once

// Committed rounds and resuming a run (docs/communication.md, "Resuming a run"). Every rank
// announces the global batches it evaluated in a round on its stdout before the round's collective
// (a ledger line); rank 0 announces the round's exact global words after it (a checkpoint line);
// after a lost rank the reporting rank (rank 0 or the lowest survivor) says from which round the
// checkpoints are complete again and which of the lost ranks' batches count (a regroup line).
// The launcher (clusterppl-cli) owns the run directory and writes what is committed there,
// atomically; `run --resume` hands it back to every rank as --resume-state. The lines are those of
// the agent -> launcher protocol (cppl/agent_lines.h, docs/agent-lines.md), as is the reporting
// rank's word of a lost rank (a rank-lost line, with its words for humans on stderr). Torch-free.

#include "distributed/batch_runs.h"

#include "cppl/agent_lines.h"
#include "cppl/statistics.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/// @brief What a checkpoint must match to be resumed: sha256 of the model's weight files, sha256
/// of the token stream as the model sees it, and the plan's settings and sizes in words.
struct RunFingerprint
{
    std::string model;
    std::string data;
    std::string plan;
    friend bool operator==(const RunFingerprint &, const RunFingerprint &) = default;
};

/// @brief Empty when @p now matches @p saved, else which part differs and what to do.
[[nodiscard]] std::string fingerprintMismatch(const RunFingerprint &saved, const RunFingerprint &now);

/// @brief The committed state a run resumes from (the `--resume-state` JSON).
struct ResumeState
{
    int round = -1;                 ///< the last committed round (its index in the interrupted run)
    NllStats::Words words{};        ///< the exact global words after that round
    std::vector<BatchRun> ledger;   ///< global batches committed through that round
    std::string schedule;           ///< "static" or "dynamic"
    int worldSize = 0;
    std::int64_t syncEvery = 0;     ///< the agents' --sync-every-tokens (kSyncAtEnd for end)
    std::int64_t batchCount = 0;
    std::int64_t batch = 0;         ///< windows per forward pass the run used; 0: not recorded (older checkpoints)
    RunFingerprint fingerprint;
    [[nodiscard]] std::int64_t batchesDone() const;
};

/// @brief Parses `--resume-state` text; throws ConfigError naming the field that is wrong.
[[nodiscard]] ResumeState parseResumeState(const std::string &json);

/// @brief The ledger line (cppl::lines::Ledger): rank R's batches of round N; after a regrouping
/// (--on-rank-loss continue) also the epoch, the membership it was printed in.
[[nodiscard]] std::string ledgerLine(int rank, int round, std::span<const BatchRun> batches, int epoch = 0);
/// @brief The checkpoint line's event (cppl::lines::Checkpoint; encode() makes the line): round N's
/// exact global words, with what a resume must match and how the run was planned (its batch too,
/// which a resume of a `"batch": "auto"` run passes back as --batch); after a regrouping also the
/// epoch (the reporting rank's, whose regroup line came before it).
[[nodiscard]] cppl::lines::Checkpoint checkpointOf(int round, const NllStats::Words &words, const RunFingerprint &fingerprint, const std::string &schedule,
                                           int worldSize, std::int64_t syncEvery, std::int64_t batchCount, std::int64_t batch,
                                           int epoch = 0);

/// A rank lost so far, as a regroup line names it.
struct RegroupLost
{
    int rank = -1;
    int round = -1;                ///< the last round (checkpoint numbering) whose sums count with it; -1: none
    std::vector<BatchRun> batches; ///< its batches that count (in the totals from then on)
};

/**
 * @brief The regroup line (cppl::lines::Regroup): the survivors regrouped for epoch E
 * (docs/communication.md, "Resuming a run"). Checkpoints are
 * complete again from round F on (the survivors' ledger lines through F, without the lost ranks',
 * plus the lost ranks' @p lost batches, are exactly the words of round F); @p lost names every
 * rank lost so far, not only this epoch's, so the line stands alone when the reporting rank changed.
 */
[[nodiscard]] std::string regroupLine(int epoch, int firstRound, std::span<const RegroupLost> lost);

/// @brief Rank @p rank lost while the run goes on: after @p round rounds, @p windowsKept of its
/// windows count, @p batchesRequeued batches queued again so far, @p ranksLeft ranks go on.
[[nodiscard]] cppl::lines::RankLost rankLost(int rank, const std::string &host, const std::string &cause, int round,
                                             std::int64_t windowsKept, std::int64_t batchesRequeued, int ranksLeft);
/// @brief Rank @p rank lost after the last round (in the closing gather): all its windows count.
[[nodiscard]] cppl::lines::RankLost rankLostAfterLastRound(int rank, const std::string &host, const std::string &cause, int round,
                                                           std::int64_t windowsKept);
/// @brief The rank-lost line for the launcher (stdout, with --checkpoint-lines).
[[nodiscard]] std::string rankLostLine(const cppl::lines::RankLost &lost);
/// @brief The same for humans (stderr): "recovered: rank R (HOST) CAUSE; lost after round N, ...;
/// going on with K ranks". Nothing parses it.
[[nodiscard]] std::string recoveredText(const cppl::lines::RankLost &lost);

/// @brief The batches of [0, count) not in @p done, in order: what a resumed dynamic run claims.
[[nodiscard]] std::vector<std::int64_t> remainingBatches(std::int64_t count, std::span<const BatchRun> done);

/// @brief Inclusive-exclusive window ranges as batch runs ([first/batch, ceil(end/batch))), merged.
void addWindowsAsBatches(std::vector<BatchRun> &runs, std::int64_t firstWindow, std::int64_t endWindow, std::int64_t batch);

} // namespace cppl::agent::dist
