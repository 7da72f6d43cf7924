// SPDX-License-Identifier: MIT
#pragma once

// The run engine: one evaluation's whole life (plan -> pre-flight -> launch -> collect -> result)
// as a QObject that both front ends drive. clusterppl-cli prints its signals; the dashboard binds
// them to models and charts. Nothing here knows about widgets or terminals.

#include "cli/exit_codes.h"
#include "launch/launch_plan.h"
#include "launch/launcher.h"
#include "run/alerts.h"
#include "run/run_notices.h"
#include "run/run_timeline.h"
#include "telemetry/snapshot_ptr.h"

#include "cppl/cluster_profile.h"

#include <QByteArray>
#include <QDateTime>
#include <QJsonObject>
#include <QMetaType>
#include <QObject>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace cppl::core::run {

using telemetry::SnapshotPtr;

struct RunRequest
{
    ClusterProfile profile;
    /// Relative model/data paths resolve against this file's directory (local launcher); empty: cwd.
    QString profilePath;
    /// Names the run everywhere (logs, telemetry, history); [A-Za-z0-9._-], <= 128. Empty: generated.
    QString runId;
    QString masterAddr;        ///< empty: the first host's address (127.0.0.1 for local runs)
    int masterPort = 0;        ///< 0: a free port when the master is this machine (local, or SSH to loopback), else 29500
    /// Replaces every host's agent (a build tree, tests). Empty: the profile's; a bare name that is
    /// not on PATH resolves to the agent installed next to this executable.
    QString agent;
    QString logDir;            ///< per-rank logs; empty: $XDG_STATE_HOME/clusterppl/runs/RUN-ID
    QString schedule;          ///< overrides the profile's evaluation.schedule (static, dynamic); empty: the profile's
    /// Overrides the profile's evaluation.on_rank_loss (fail, continue); empty: the profile's.
    /// continue: a lost rank other than 0 is "recovered", not a failure (docs/communication.md).
    QString onRankLoss;
    /// Overrides the profile's evaluation.overlap_sync: "on", "off"; empty: the profile's.
    QString overlapSync;
    /// Override evaluation.quantize (none, int8, int4, int4-sym, int4-asym) and
    /// evaluation.reference_model; empty: the profile's.
    QString quantize;
    QString referenceModel;
    bool preflight = true;
    /// "Check hosts": pre-flight on every host and finish (Finished, or Failed with the refusals);
    /// no rank, collector or log is started. Reports arrive as preflightHost() as in a run.
    bool checkOnly = false;
    bool telemetry = true;     ///< live telemetry (needs ZeroMQ at build time)
    /// SSH settings and the callbacks for unknown host keys and passphrases (called on a host's
    /// thread: a GUI must marshal them to its own thread and block until the user answers).
    LauncherSettings launcher;
    /// A finished one-rank run of the same model, data, protocol and settings (from the history):
    /// the final result is compared with it (bit-identical or a relative deviation, alert past the
    /// profile's tolerance). Its result JSON.
    QByteArray baselineResultJson;
    /// `run --resume`: the interrupted run's checkpoint.json (run_directory.h). Every rank gets it as
    /// --resume-state and evaluates only what its ledger lacks; checkpoints continue in the run
    /// directory from its ledger.
    QByteArray resumeState;
};

/// What pre-flight found on one host.
struct HostPreflight
{
    int hostIndex = 0;
    QString host;
    bool ran = false;          ///< the agent answered with a report
    QStringList problems;      ///< reasons to refuse the launch; empty: fine
    QJsonObject report;        ///< the agent's `preflight --json` object (versions, GPUs, memory, paths)
};

struct RunOutcome
{
    RunPhase phase = RunPhase::Idle;
    int exitCode = kCliOk;     ///< CliExit (cli/exit_codes.h): what `clusterppl-cli run` exits with
    QString firstCause;        ///< the first thing that went wrong, specific; empty on success
    QString summary;           ///< every rank's end, when some failed
    QByteArray resultJson;     ///< rank 0's aggregated result (agent result JSON, docs/result-json.md)
    std::optional<bool> liveMergeMatches; ///< the telemetry's exact merge equals the result bit for bit
    std::optional<bool> baselineIdentical; ///< exact sums equal the baseline's (when one was given)
    double baselineRelativeDeviation = 0;  ///< ppl / baseline ppl - 1
    /// Why a baseline given was not compared ("it ran in float32, this run in bfloat16"); empty otherwise.
    QString baselineNotCompared;
    std::map<int, RankEnd> ends;
    std::int64_t telemetryMessages = 0; ///< received by the collector
    QString logDir;
    /// --on-rank-loss continue: the ranks lost and recovered from, "rank R (HOST): CAUSE" (from the result's lost_ranks).
    QStringList recovered;
    /// Slurm runs: the job id, partition (empty: the cluster's default), allocated node list, and
    /// the batch script as submitted (also saved on the cluster, docs/launching.md).
    QString slurmJobId, slurmPartition, slurmNodes;
    QByteArray slurmScript;
    QDateTime started;
    QDateTime ended;
};

/**
 * One run. start() returns at once; everything after arrives as signals on the engine's thread.
 * An engine runs once: make a new one for the next run. Destroying it stops the run and leaves no
 * rank behind (the launchers' no-orphans rules, docs/launching.md).
 */
class RunEngine : public QObject
{
    Q_OBJECT

public:
    explicit RunEngine(QObject *parent = nullptr);
    ~RunEngine() override;

    /// Validates the request and starts. False (and finished() with the reason, queued) when it
    /// cannot even start: a bad run id, an unsafe profile value, no free port, a collector that
    /// cannot bind.
    bool start(RunRequest request);
    /// Ends every rank this run started; finished() follows with RunPhase::Stopped.
    void stop();

    [[nodiscard]] RunPhase phase() const noexcept { return m_phase; }
    [[nodiscard]] QString runId() const { return m_runId; }
    [[nodiscard]] const RunRequest &request() const noexcept { return m_request; }
    [[nodiscard]] const LaunchPlan &plan() const noexcept { return m_plan; }
    [[nodiscard]] const std::vector<HostPreflight> &preflightReports() const noexcept { return m_preflight; }
    [[nodiscard]] SnapshotPtr latestSnapshot() const { return m_latest; }
    [[nodiscard]] const RunTimeline &timeline() const noexcept { return m_timeline; }
    [[nodiscard]] const std::vector<RunAlert> &alerts() const noexcept { return m_alerts.alerts(); }
    [[nodiscard]] const RunOutcome &outcome() const noexcept { return m_outcome; }
    /// Seconds since start() on a monotonic clock (the x axis of every live chart).
    [[nodiscard]] double elapsedSeconds() const;

Q_SIGNALS:
    void phaseChanged(cppl::core::run::RunPhase phase);
    /// plan() and runId() are set: the ranks, hosts and groups are known.
    void planned();
    void preflightHost(const cppl::core::run::HostPreflight &report);
    void preflightFinished(bool ok, const QStringList &refusals);
    void rankStarted(int rank, const QString &host);
    /// rank -1: the launcher's own lines (SSH notices, accepted host keys).
    void rankOutput(int rank, bool isStderr, const QString &line);
    void rankFinished(int rank, int exitCode);
    /// --on-rank-loss continue: the surviving ranks regrouped without @p rank and the run goes on
    /// (the reporting rank said so). @p detail: "rank R (HOST) CAUSE; lost after round N, ..."; it
    /// may come again with better words for the same rank.
    void rankLost(int rank, const QString &detail);
    void hostFailed(const QString &host, const QString &message);
    /// Slurm: the job's id, state, pending reason and allocated nodes, as the scheduler reports them.
    void jobState(const QString &jobId, const QString &state, const QString &reason, const QString &nodes);
    /// At most one per 40 ms; timeline() has been updated before it is emitted.
    void snapshotReady(cppl::core::telemetry::SnapshotPtr snapshot);
    void alertRaised(const cppl::core::run::RunAlert &alert);
    /// The engine's own progress lines ("pre-flight ok on 2 hosts", "per-rank logs in ...").
    void notice(const QString &text);
    void finished(const cppl::core::run::RunOutcome &outcome);

private:
    /// Why start() refuses a request: the exit code and the cause finished() carries.
    struct Refusal
    {
        int code = 0;
        QString cause;
    };
    // start()'s steps, in order; each refuses with the reason, or leaves its part done.
    [[nodiscard]] std::optional<Refusal> applyRequest();
    [[nodiscard]] std::optional<Refusal> makeLaunchOptions(LaunchOptions &lo);
    [[nodiscard]] std::optional<Refusal> startCollector(LaunchOptions &lo, int &collectorPort);
    [[nodiscard]] std::optional<Refusal> makePlan(LaunchOptions &lo);
    void makeSlurmPlan(LaunchOptions &lo);
    bool refuse(const Refusal &refusal);

    void setPhase(RunPhase phase);
    void startPreflight();
    void onPreflightDone();
    // startLaunch()'s steps: the run directory (logs, checkpoints, run.json), then the launcher.
    void startLaunch();
    void openRunDirectory();
    void connectLauncher(Launcher *launcher);
    void onRankLine(int rank, bool isStderr, const QString &line);
    void onRankStarted(int rank, const QString &host);
    void onRankFinished(int rank, int exitCode);
    void onHostFailed(const QString &host, const QString &message);
    void onLauncherFinished();
    void onSnapshot(const SnapshotPtr &snapshot);
    /// A rank the others regrouped without: newly lost (@p fresh), or its loss newly worded.
    void noteLost(int rank, bool fresh);
    /// The RankLost alert of @p rank: while the run goes on (@p endedAs not terminal) "… lost, the
    /// run goes on without it …"; once it failed or was stopped, amended to say so.
    void raiseRankLost(int rank, RunPhase endedAs = RunPhase::Running);
    void finishWith(RunPhase phase, int exitCode, const QString &cause);
    /// At the end, each lost rank's alert says how the run ended; a failure after a loss is an alert of its own.
    void amendLostRankAlerts(RunPhase phase, const QString &cause);
    /// The launcher's first line, unless it names a rank the others had gone on without.
    [[nodiscard]] QString failedAfterLoss(const QString &first) const;
    void checkResult();
    /// The result against the live exact merge of the ranks' telemetry; false when that failed the run.
    bool crossCheckLiveMerge(const SnapshotPtr &snapshot);
    void compareWithBaseline();
    QStringList judgeAllocation(const std::vector<std::string> &nodes, const std::map<int, QString> &json, const std::map<int, RankEnd> &ends);

    struct Private;
    std::unique_ptr<Private> d;
    RunRequest m_request;
    RunPhase m_phase = RunPhase::Idle;
    QString m_runId;
    LaunchPlan m_plan;
    std::vector<HostPreflight> m_preflight;
    SnapshotPtr m_latest;
    RunTimeline m_timeline;
    AlertMonitor m_alerts;
    RunOutcome m_outcome;
};

/// A run id for now: UTC time + 16 random bits, e.g. 20261130-150203-3fa2.
[[nodiscard]] QString generateRunId();
/// Empty when @p id is a valid run id, else what is wrong with it.
[[nodiscard]] QString validateRunId(const QString &id);

} // namespace cppl::core::run

Q_DECLARE_METATYPE(cppl::core::run::HostPreflight)
Q_DECLARE_METATYPE(cppl::core::run::RunOutcome)
