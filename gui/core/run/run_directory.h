// SPDX-License-Identifier: MIT
#pragma once

// The run directory ($XDG_STATE_HOME/clusterppl/runs/RUN-ID, or --log-dir): per-rank logs, and
// what `clusterppl-cli run --resume` needs (docs/communication.md, "Resuming a run"):
//   run.json         the run id, the profile as run, the profile's path (relative data paths)
//   checkpoint.json  the last committed round: exact global words + the batch ledger (atomic)
//   result.json      rank 0's result, once the run finished (a finished run is not resumed)

#include "cppl/agent_lines.h"
#include "cppl/cluster_profile.h"

#include <QByteArray>
#include <QJsonObject>
#include <QString>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace cppl::core::run {

/// Global batches [first, end), as the agents' ledger lines name them ("0-3,8": inclusive).
using BatchRanges = cppl::lines::BatchRanges;
[[nodiscard]] std::optional<BatchRanges> parseBatchRanges(const QString &text);
[[nodiscard]] QString formatBatchRanges(const BatchRanges &ranges);
/// Adds @p more to @p into, keeping it sorted and merged.
void mergeBatchRanges(BatchRanges &into, const BatchRanges &more);

inline constexpr auto kRunInfoFile = "run.json";
inline constexpr auto kCheckpointFile = "checkpoint.json";
inline constexpr auto kResultFile = "result.json";

/**
 * Turns the agents' ledger and checkpoint lines (docs/agent-lines.md) into checkpoint.json. Every rank prints the batches
 * of a round before the round's collective; rank 0 prints the round's global words after it. Lines
 * of different ranks arrive in any order, so round r is written once rank 0's words for r and every
 * rank's ledger lines through r are here; the file is replaced atomically (temporary file, fsync,
 * rename), so an interrupted launcher leaves the last complete round.
 *
 * After a lost rank (--on-rank-loss continue) the reporting rank (rank 0, or the lowest survivor)
 * prints a regroup line: the epoch E, the first round F whose checkpoint is complete again, and
 * every lost rank's batches that count. From then on a checkpoint of epoch E (round >= F) comes
 * from that rank and is written once every survivor's ledger lines through it (of epoch E) are
 * here; the lost ranks' ledgers are replaced by their batches of the regroup line. Checkpoint
 * lines of an older epoch still waiting are dropped (their rounds are before F).
 */
class CheckpointWriter
{
public:
    /// @param committed the ledger a resumed run starts from (empty for a new run).
    CheckpointWriter(QString directory, QString runId, int worldSize, BatchRanges committed = {}, QJsonObject resumedFrom = {});

    /// True when @p line, a stdout line of @p rank as cppl::lines::decode() read it, was a ledger,
    /// checkpoint or regroup line (consumed: not shown as output). A malformed one, or one of a
    /// newer version (shown: not consumed), stops the checkpoints with the reason (error()).
    bool take(int rank, const cppl::lines::Decoded &line);
    /// --tensor-parallel N: only each group's leader (rank % N == 0) prints ledger lines, for its
    /// group (its followers none), so a round is committed once every leader's are here.
    void setTensorParallel(int n) { m_tensorParallel = std::max(1, n); }
    /// The last round written (-1: none), and the first write error (empty: none).
    [[nodiscard]] int writtenRound() const noexcept { return m_written; }
    [[nodiscard]] QString error() const { return m_error; }
    /// The newest regroup line's epoch (0: none) and first complete round (-1: none).
    [[nodiscard]] int regroupEpoch() const noexcept { return m_regroupEpoch; }
    [[nodiscard]] int regroupFirstRound() const noexcept { return m_regroupFirst; }

private:
    void takeLedger(int rank, const cppl::lines::Ledger &l);
    void takeRegroup(int rank, const cppl::lines::Regroup &g);
    void takeCheckpoint(int rank, const cppl::lines::Checkpoint &c);
    void tryCommit();
    [[nodiscard]] bool isLost(int rank) const { return m_lost.count(rank) != 0; }
    /// A follower of a tensor-parallel group prints no ledger lines (setTensorParallel).
    [[nodiscard]] bool printsNoLedger(int rank) const { return rank % m_tensorParallel != 0; }
    void fail(const QString &why);

    struct Line
    {
        int rank = 0;
        int round = 0;
        BatchRanges batches;
    };
    struct Pending
    {
        int epoch = 0;
        int round = 0;
        QJsonObject doc;
    };

    QString m_dir, m_runId;
    int m_worldSize = 0;
    int m_tensorParallel = 1; ///< ranks per tensor-parallel group (setTensorParallel)
    BatchRanges m_committed;                       ///< the resumed run's ledger (constant)
    QJsonObject m_resumedFrom;
    std::map<int, std::pair<int, int>> m_latest;   ///< rank -> (epoch, round) of its newest ledger line
    std::map<int, BatchRanges> m_rankCommitted;    ///< rank -> its batches of rounds already written
    std::vector<Line> m_pendingLedger;             ///< ledger lines of rounds not yet written
    std::map<int, BatchRanges> m_lost;             ///< the newest regroup line's lost ranks -> their batches that count
    int m_regroupEpoch = 0;
    int m_regroupFirst = -1;
    std::optional<Pending> m_pending;              ///< the reporting rank's newest checkpoint line
    int m_written = -1;
    QString m_error;
};

/// Writes run.json (the profile as run); empty on success, else why not.
[[nodiscard]] QString writeRunInfo(const QString &directory, const QString &runId, const ClusterProfile &profile, const QString &profilePath,
                                   const QJsonObject &resumedFrom);
/// Writes result.json atomically; empty on success, else why not.
[[nodiscard]] QString writeResultFile(const QString &directory, const QByteArray &resultJson);

/// The default run directory of @p runId ($XDG_STATE_HOME or ~/.local/state, /clusterppl/runs/ID).
[[nodiscard]] QString defaultRunDirectory(const QString &runId);

/// What `run --resume RUN` found in a run directory.
struct ResumeSource
{
    QString directory;
    QString runId;
    ClusterProfile profile;
    QString profilePath;
    QByteArray checkpoint; ///< checkpoint.json, compact: the agents' --resume-state
    int round = -1;
    QString ledger;
    std::int64_t batchesDone = 0;
    std::int64_t batchCount = 0;
    int worldSize = 0;
    QString schedule;
    std::int64_t batch = 0; ///< the checkpoint's "batch": windows per forward pass the run used (0: not recorded)
};

/// Finds and reads the run directory named by @p run (a directory, or a run id under the default
/// place); nullopt with @p error saying what is missing or why it cannot be resumed.
[[nodiscard]] std::optional<ResumeSource> loadResumeSource(const QString &run, QString *error);

/// Empty when @p profile evaluates what @p saved evaluated (a resume may change hosts, not what
/// is evaluated), else every difference, named by its profile field. @p recordedBatch is the
/// checkpoint's batch (0: not recorded): a batch of "auto" on either side stands for it, so a fixed
/// batch equal to the one an auto run used is the same computation.
[[nodiscard]] QStringList resumeMismatches(const ClusterProfile &saved, const ClusterProfile &profile, const QString &schedule,
                                           std::int64_t recordedBatch = 0);

} // namespace cppl::core::run
