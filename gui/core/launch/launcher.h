// SPDX-License-Identifier: MIT
#pragma once

#include "launch_plan.h"

#include <QObject>
#include <QString>
#include <QStringList>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::core {

struct RankEnd;
struct SlurmJob;

/// @brief What a launcher does about SSH host keys it does not know yet.
enum class NewHostKeys { Refuse, Accept, Ask };

/// @brief The answer to NewHostKeys::Ask: refuse, accept for this connection only (nothing is
/// written anywhere), or accept and record the key in known_hosts.
enum class HostKeyAnswer { Refuse, AcceptOnce, AcceptAlways };

/// @brief Settings shared by the launchers (SSH ones are ignored by the local launcher).
struct LauncherSettings
{
    int connectTimeoutSeconds = 10;
    int keepaliveSeconds = 15;
    NewHostKeys newHostKeys = NewHostKeys::Refuse;
    /// NewHostKeys::Ask: called from the host's thread with the host and the key's SHA256
    /// fingerprint (the dashboard asks the user here). Only AcceptAlways records the key.
    std::function<HostKeyAnswer(const std::string &host, const std::string &fingerprint)> askNewHostKey;
    /// An encrypted private key: called from the host's thread with a prompt naming the key;
    /// nullopt gives up. Unset: encrypted keys must come from ssh-agent.
    std::function<std::optional<std::string>(const std::string &prompt)> passphrase;
    std::string sshConfigFile;   ///< empty: ~/.ssh/config
    std::string knownHostsFile;  ///< empty: ~/.ssh/known_hosts
    bool stopAllOnFailure = true;
    /// The agents run with --on-rank-loss continue: a rank that is lost (killed, crashed, failed on
    /// its own) is not the run failing; the survivors regroup without it, rank 0 included once the
    /// agents can (the lowest survivor then reports the result). The run is over when rank 0, or a
    /// rank after the result was reported, exits 0; whatever is still running then (a stopped
    /// rank) is stopped after the grace period. A rank exiting 5 or 6 (the agents' "the run failed
    /// elsewhere" and timeout codes) means the survivors gave up: the rest is stopped as without it.
    bool tolerateRankLoss = false;
    /// SSH: carry telemetry back through a reverse tunnel per host to this local collector port
    /// (agents send to 127.0.0.1 on their node; the SSH session encrypts). 0: no tunnel.
    int telemetryTunnelPort = 0;
    int graceSeconds = 3;        ///< after a failure: time for the others to report before they are stopped
    /// Slurm: pre-flight runs as the job's first step, one task per allocated node. Called on the
    /// launcher's thread with the nodes (allocation order), each node's JSON report and how each
    /// ended; returns the reasons to refuse (empty: the agents start). Unset: they start.
    std::function<QStringList(const std::vector<std::string> &nodes, const std::map<int, QString> &json,
                              const std::map<int, RankEnd> &ends)>
        judgeAllocation;
};

/**
 * @brief What to do when an agent could not start on a host, from what the host said (@p said: a
 * reason, an exit and the last lines; @p exitCode, or -1 when @p said carries it as "exit code N"):
 * no agent at that path, an agent that cannot load its LibTorch (built against a torch package
 * this host does not have at that path), or a file that is not executable. Empty for anything else.
 */
[[nodiscard]] QString agentStartHint(const QString &said, int exitCode = -1);

/// @brief What one stdout line of `clusterppl-agent store` says (docs/agent-lines.md): it serves
/// (its store line), it never will (@p problem: its store line is malformed or of a newer
/// version), or neither (any other line).
struct StoreLine
{
    bool ready = false;
    QString problem;
};
[[nodiscard]] StoreLine readStoreLine(std::string_view line);
/// @brief "no CLUSTERPPL_STORE line within 30 s": a store that never said it serves.
[[nodiscard]] QString noStoreLineText(int seconds);

/// @brief How one rank ended.
struct RankEnd
{
    int exitCode = -1;       ///< the agent's code; 128 + N for a signal; -1 never started
    QString reason;          ///< empty when it exited by itself
    QStringList lastLines;   ///< its last stderr lines
};

/**
 * @brief Starts one agent per rank of a LaunchPlan and reports their output and ends. Qt signals
 * are always emitted on the launcher's thread. Subclasses implement the transport; this base keeps
 * per-rank state, stops the rest when one fails (after a grace period for their own messages), and
 * writes the summary.
 */
class Launcher : public QObject
{
    Q_OBJECT

public:
    explicit Launcher(LauncherSettings settings, QObject *parent = nullptr);
    ~Launcher() override;

    virtual void start(const LaunchPlan &plan) = 0;
    /// @brief Stops every rank this launcher started (and nothing else); finished() follows.
    virtual void stop() = 0;
    /// @brief Writes @p bytes to a started rank's stdin (after the key line); false where the
    /// launcher cannot (only the SSH launcher can).
    virtual bool sendInput(int rank, const std::string &bytes)
    {
        (void)rank;
        (void)bytes;
        return false;
    }

    [[nodiscard]] bool isFinished() const noexcept { return m_finished; }
    [[nodiscard]] const std::map<int, RankEnd> &ends() const noexcept { return m_ends; }
    /// @brief Who failed first and how, and how every other rank ended; empty when all exited 0.
    [[nodiscard]] QString summary() const;
    /// @brief Rank 0's exit code, or the first failing rank's when rank 0 was stopped or never ran; 0 if all succeeded.
    /// Tolerant runs: 0 when a rank finished (exit 0) and nobody gave up, whoever was lost.
    [[nodiscard]] int exitCode() const;
    /// @brief The store process (LaunchPlan::store) exited while ranks were running: "the
    /// rendezvous store on HOST:PORT exited: ..."; empty otherwise.
    [[nodiscard]] QString storeFailure() const { return m_storeFailure; }

Q_SIGNALS:
    void rankOutput(int rank, bool isStderr, const QString &line);
    void rankStarted(int rank, const QString &host);
    void rankFinished(int rank, int exitCode);
    /// @brief The launch itself failed for a host (connect, host key, auth); its ranks count as failed.
    void hostFailed(const QString &host, const QString &message);
    /// @brief A batch scheduler's view of the run (Slurm): job id, state (PENDING, RUNNING...),
    /// its reason while pending, and the allocated nodes once known.
    void jobState(const QString &jobId, const QString &state, const QString &reason, const QString &nodes);
    void finished();

protected:
    void setPlan(const LaunchPlan &plan);
    /// Subclasses call these on the launcher's thread.
    void onOutput(int rank, bool isStderr, const QString &line);
    void onRankEnded(int rank, int exitCode, const QString &reason = {});
    void onHostFailed(int hostIndex, const QString &host, const QString &message);
    void onStarted(int rank);
    /// The store process exited by itself while ranks ran (@p how: its exit and last line).
    void onStoreFailed(const QString &how);
    /// Every rank has ended: a launcher that runs the store process (LaunchPlan::store) ends it
    /// now and calls storeStopped() once it is gone; finished() follows. Default: no store.
    virtual void onAllRanksEnded() { storeStopped(); }
    void storeStopped();
    /// "HOST:PORT" of the plan's store process, for messages.
    [[nodiscard]] QString storeWhere() const;

    LauncherSettings m_settings;
    LaunchPlan m_plan;
    bool m_stopping = false;

private:
    void maybeFinish();
    void maybeRunOver();
    /// The rank the summary names first: the first failure, or in a tolerant run in which nobody
    /// finished, the first rank lost.
    [[nodiscard]] int failureRank() const;
    std::map<int, RankEnd> m_ends;
    std::map<int, bool> m_done;
    int m_firstFailure = -1;
    int m_firstLoss = -1;      ///< tolerant runs: the first rank lost
    bool m_anyFinished = false; ///< tolerant runs: some rank exited 0
    bool m_resultSeen = false;  ///< a result line (docs/agent-lines.md) came from some rank
    bool m_runOver = false;
    bool m_endingStore = false;
    bool m_finished = false;
    QString m_storeFailure;
};

/// @brief N ranks on this machine as child processes (QProcess): each in its own process group,
/// killed with the launcher (PR_SET_PDEATHSIG) and reading EOF on stdin when it goes.
[[nodiscard]] std::unique_ptr<Launcher> makeLocalLauncher(LauncherSettings settings, QObject *parent = nullptr);

/// @brief Ranks on remote hosts through libssh: one thread per host, host keys checked against
/// known_hosts, ~/.ssh/config honoured, agents started with `--exit-on-stdin-eof` so that closing
/// a channel ends its rank.
[[nodiscard]] std::unique_ptr<Launcher> makeSshLauncher(LauncherSettings settings, QObject *parent = nullptr);

/// @brief The ranks of @p job as the tasks of one Slurm job, submitted with sbatch on the profile's
/// login node (hosts[0], reached through the SSH launcher and its host-key checks) and watched
/// there by a driver script; stop() cancels the job (scancel). Its plan: buildLaunchPlan on
/// slurmRankProfile(profile), with the launcher "slurm".
[[nodiscard]] std::unique_ptr<Launcher> makeSlurmLauncher(LauncherSettings settings, const ClusterProfile &profile, const SlurmJob &job,
                                                          QObject *parent = nullptr);

} // namespace cppl::core
