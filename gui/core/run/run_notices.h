// SPDX-License-Identifier: MIT
#pragma once

// What a run says to its user, in words: the phases' names, the launch notice, a lost rank's
// alert and notices, what the checkpoints mean after a regrouping, a failure after a loss. Both
// front ends show these texts as they are (the Run page's notice line and alerts, the CLI's stderr).

#include "cppl/agent_lines.h"

#include <QMetaType>
#include <QString>

#include <string>
#include <vector>

namespace cppl::core::run {

enum class RunPhase {
    Idle,       ///< nothing started yet
    Preflight,  ///< `clusterppl-agent preflight` on every host
    Launching,  ///< ranks being started (SSH connects, host keys, auth)
    Running,    ///< ranks started; telemetry flowing
    Stopping,   ///< stop() asked, or a rank failed: the others are being ended
    Finished,   ///< every rank exited 0 and the result checked out
    Failed,     ///< refused, failed to launch, a rank failed, or the result did not check out
    Stopped,    ///< the user (or a signal) stopped it
};
[[nodiscard]] QString phaseName(RunPhase phase);
[[nodiscard]] inline bool isTerminal(RunPhase p) noexcept
{
    return p == RunPhase::Finished || p == RunPhase::Failed || p == RunPhase::Stopped;
}

/// What a run says as it launches (the Run page's notice line, the CLI's stderr): "run ID: 4 ranks
/// on 1 host (local), groups [0–1] [2–3], master 127.0.0.1:29500". @p groups is the agents'
/// --groups list ("0,1;2,3"); beyond 6 groups the first 3 and the last are named, with the count.
[[nodiscard]] QString runStartNotice(const QString &runId, int ranks, int hosts, const QString &launcher, const std::string &groups,
                                     const QString &masterAddr, int masterPort);
/// --on-rank-loss continue, while the run goes on without @p ranks: "rank 2 lost; the others
/// regrouped without it and the run goes on".
[[nodiscard]] QString rankLostNotice(const std::vector<int> &ranks);
/// What the checkpoints mean for the user after such a regrouping, in plain words: "if the run is
/// interrupted, it can be resumed from round 4, the last one saved; the next to be saved is round
/// 7, the first after the regrouping" (@p lastSaved: the last checkpoint written, -1: none; then it
/// cannot be resumed before @p firstRound is saved).
[[nodiscard]] QString checkpointRegroupNotice(int firstRound, int lastSaved);
/// A lost rank's alert (AlertKind::RankLost) while the run goes on (@p endedAs Running), and as
/// amended once it finished, failed or was stopped. @p cause and @p round (-1) may be unknown.
[[nodiscard]] QString rankLostAlertText(int rank, const QString &host, const QString &cause, int round, RunPhase endedAs);
/// The last notice of a run that finished without a lost rank, one per RunOutcome::recovered line:
/// "recovered (rank 2 (HOST): CAUSE; lost after round N)".
[[nodiscard]] QString recoveredNotice(const QString &recovered);

/// How RunEngine::rankLost words a lost rank: from the reporting rank's rank-lost line, "rank 2
/// (node1) died: its connection closed; lost after round 4, 120 of its windows kept, 3 batches
/// queued again so far"; from a regroup line alone, "rank 2 (node1): lost after round 4; the
/// others regrouped without it".
[[nodiscard]] QString rankLostDetail(const cppl::lines::RankLost &lost);
[[nodiscard]] QString regroupedWithoutDetail(int rank, const QString &host, int round);
/// A rank's process that ended badly, as its Failed alert says it: "rank 2 on node1 ended: killed by signal 9".
[[nodiscard]] QString rankEndedText(int rank, const QString &host, const QString &how);
/// A tolerant run that failed after losing @p lost: the first of the others to end (@p rank on
/// @p host, @p how) is its cause: "run failed: rank 3 on node1: exit code 5 first, after rank 2
/// lost (the others had gone on without it)".
[[nodiscard]] QString failedAfterLossText(int rank, const QString &host, const QString &how, const std::vector<int> &lost);
/// A run's first cause on one line, without the launcher's leading "run failed: " (an alert says it).
[[nodiscard]] QString failureWords(const QString &cause);

} // namespace cppl::core::run

Q_DECLARE_METATYPE(cppl::core::run::RunPhase)
