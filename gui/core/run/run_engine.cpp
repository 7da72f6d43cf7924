// SPDX-License-Identifier: MIT
#include "run/run_engine.h"

#include "launch/slurm_job.h"
#include "run/agent_locator.h"
#include "run/agent_output.h"
#include "run/preflight.h"
#include "run/result_check.h"
#include "run/run_directory.h"

#include "cppl/config.h"
#if CLUSTERPPL_HAVE_ZMQ
#include "telemetry/collector_object.h"
#endif

#include "cppl/errors.h"
#include "cppl/host.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QTimer>

#include <algorithm>
#include <set>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

QString generateRunId()
{
    return QDateTime::currentDateTimeUtc().toString(u"yyyyMMdd-HHmmss"_s) + u'-'
           + QString::number(QRandomGenerator::global()->bounded(0x10000), 16).rightJustified(4, u'0');
}

QString validateRunId(const QString &id)
{
    // It names a directory (per-rank logs) and travels in telemetry and the store.
    static const QRegularExpression ok(u"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$"_s);
    if (id.isEmpty())
        return u"the run id is empty"_s;
    if (id.size() > 128)
        return u"the run id is %1 characters long; at most 128 are allowed"_s.arg(id.size());
    if (!ok.match(id).hasMatch())
        return u"the run id \"%1\" may contain only letters, digits, '.', '_' and '-', and must not start with '.' or '-'"_s.arg(id);
    return {};
}

namespace {

std::unique_ptr<Launcher> makeLauncher(const std::string &kind, const LauncherSettings &s, const ClusterProfile &profile,
                                       const SlurmJob &job)
{
    if (kind == "slurm")
        return makeSlurmLauncher(s, profile, job);
    return kind == "ssh" ? makeSshLauncher(s) : makeLocalLauncher(s);
}

} // namespace

struct RunEngine::Private
{
    QElapsedTimer clock;
    std::unique_ptr<Launcher> preflightLauncher;
    std::map<int, QString> preflightJson; // by pre-flight "rank" (= host order)
    LaunchPlan preflightPlan;
    std::unique_ptr<Launcher> launcher;
#if CLUSTERPPL_HAVE_ZMQ
    std::unique_ptr<telemetry::CollectorObject> collector;
#endif
    std::map<int, std::unique_ptr<QFile>> logs;
    AgentOutput output;           // the ranks' lines: result, checkpoints, lost ranks (docs/agent-lines.md)
    QStringList hostFailures;     // launch failures, in order: the first is the cause
    std::set<int> startedRanks;
    bool stopRequested = false;
    int resultChecks = 0;
    std::map<int, QString> endedWhy; ///< ranks whose process ended badly -> how (the launcher's words)
    std::vector<std::pair<int, QString>> endOrder; ///< those ranks in the order they ended, how (without their last line)
    std::map<int, bool> lostAlerted; ///< lost ranks whose RankLost alert is raised -> it named a cause
    SlurmJob slurmJob;             // launcher "slurm": what is submitted
    QStringList slurmRefusals;     // pre-flight on the allocation said no
};

RunEngine::RunEngine(QObject *parent) : QObject(parent), d(std::make_unique<Private>())
{
    qRegisterMetaType<RunPhase>();
    qRegisterMetaType<HostPreflight>();
    qRegisterMetaType<RunOutcome>();
    qRegisterMetaType<SnapshotPtr>();
    qRegisterMetaType<RunAlert>();
    m_timeline.reset();
}

RunEngine::~RunEngine()
{
    // Launchers kill what they started in their destructors (process groups, closed channels).
    d->launcher.reset();
    d->preflightLauncher.reset();
#if CLUSTERPPL_HAVE_ZMQ
    d->collector.reset();
#endif
}

double RunEngine::elapsedSeconds() const
{
    return d->clock.isValid() ? static_cast<double>(d->clock.nsecsElapsed()) * 1e-9 : 0.0;
}

void RunEngine::setPhase(RunPhase phase)
{
    if (m_phase == phase)
        return;
    m_phase = phase;
    Q_EMIT phaseChanged(phase);
}

bool RunEngine::start(RunRequest request)
{
    if (m_phase != RunPhase::Idle) {
        Q_EMIT notice(tr("This run engine has already run; start a new one."));
        return false;
    }
    m_request = std::move(request);
    d->clock.start();
    m_outcome = {};
    m_outcome.started = QDateTime::currentDateTimeUtc();
    m_alerts.reset(m_request.profile.thresholds);
    m_timeline.reset();
    LaunchOptions lo;
    int collectorPort = 0;
    std::optional<Refusal> refusal = applyRequest();
    if (!refusal)
        refusal = makeLaunchOptions(lo);
    if (!refusal)
        refusal = startCollector(lo, collectorPort);
    if (!refusal)
        refusal = makePlan(lo);
    if (refusal)
        return refuse(*refusal);
    m_request.launcher.telemetryTunnelPort = m_request.profile.launcher != "local" ? collectorPort : 0;
    if (m_request.checkOnly && m_plan.launcher == "slurm")
        return refuse({kCliBadArguments, tr("Check hosts needs a local or SSH profile: a Slurm job's nodes are known only once "
                                            "it runs, and its pre-flight is the job's first step (run it to check them)")});
    Q_EMIT planned();
    // Slurm runs pre-flight inside the job, on the nodes it was given (judgeAllocation).
    QTimer::singleShot(0, this, (m_request.preflight || m_request.checkOnly) && m_plan.launcher != "slurm" ? &RunEngine::startPreflight
                                                                                                         : &RunEngine::startLaunch);
    return true;
}

bool RunEngine::refuse(const Refusal &refusal)
{
    // Queued: callers connect after start() returns false as well as before.
    QTimer::singleShot(0, this, [this, refusal] { finishWith(RunPhase::Failed, refusal.code, refusal.cause); });
    return false;
}

std::optional<RunEngine::Refusal> RunEngine::applyRequest()
{
    m_runId = m_request.runId.isEmpty() ? generateRunId() : m_request.runId;
    if (const QString why = validateRunId(m_runId); !why.isEmpty())
        return Refusal{kCliBadArguments, why};
    // The CLI's --quantize / --reference-model (a precision sweep's runs) before the profile's checks, which cover them.
    if (!m_request.quantize.isEmpty())
        m_request.profile.evaluation.quantize = m_request.quantize.toStdString();
    if (!m_request.referenceModel.isEmpty())
        m_request.profile.evaluation.referenceModel = m_request.referenceModel.toStdString();
    if (m_request.tensorParallel > 0) // before the checks: each host's slots must be a multiple of it
        m_request.profile.evaluation.tensorParallel = m_request.tensorParallel;
    if (const auto problems = validateProfile(m_request.profile); !problems.empty()) {
        QStringList lines;
        for (const auto &p : problems)
            lines << QString::fromStdString(p);
        return Refusal{kCliBadArguments, tr("the profile is not valid:\n  %1").arg(lines.join(u"\n  "_s))};
    }
    // The CLI's --schedule / --on-rank-loss / --overlap-sync override the profile's (the saved profile says what ran).
    if (!m_request.schedule.isEmpty() && m_request.schedule != u"static"_s && m_request.schedule != u"dynamic"_s)
        return Refusal{kCliBadArguments, tr("schedule \"%1\" is not one of static, dynamic").arg(m_request.schedule)};
    if (!m_request.onRankLoss.isEmpty() && m_request.onRankLoss != u"fail"_s && m_request.onRankLoss != u"continue"_s)
        return Refusal{kCliBadArguments, tr("on-rank-loss \"%1\" is not one of fail, continue").arg(m_request.onRankLoss)};
    if (!m_request.overlapSync.isEmpty() && m_request.overlapSync != u"on"_s && m_request.overlapSync != u"off"_s)
        return Refusal{kCliBadArguments, tr("overlap-sync \"%1\" is not one of on, off").arg(m_request.overlapSync)};
    EvaluationSpec &e = m_request.profile.evaluation;
    if (!m_request.overlapSync.isEmpty())
        e.overlapSync = m_request.overlapSync == u"on"_s;
    if (!m_request.schedule.isEmpty())
        e.schedule = m_request.schedule.toStdString();
    if (m_request.schedule == u"static"_s && m_request.onRankLoss.isEmpty())
        e.onRankLoss = "fail"; // --schedule static alone: its only choice (static shards cannot move)
    if (!m_request.onRankLoss.isEmpty())
        e.onRankLoss = m_request.onRankLoss.toStdString();
    if (e.onRankLoss == "continue" && e.schedule != "dynamic")
        return Refusal{kCliBadArguments, tr("on-rank-loss continue needs the dynamic schedule (evaluation.schedule \"dynamic\" or --schedule "
                                            "dynamic): a static shard cannot move to another rank")};
    m_request.launcher.tolerateRankLoss = e.onRankLoss == "continue";
    return std::nullopt;
}

std::optional<RunEngine::Refusal> RunEngine::makeLaunchOptions(LaunchOptions &lo)
{
    const ClusterProfile &profile = m_request.profile;
    lo.runId = m_runId.toStdString();
    lo.masterAddr = m_request.masterAddr.toStdString();
    try {
        // The master is this machine for the local launcher and for SSH hosts reached at a loopback
        // address (every host is then this machine): a free port, so that two runs side by side
        // never meet on 29500; torchrun's 29500 otherwise (it must be open between the hosts).
        const HostSpec &first = profile.hosts.front();
        const std::string master = !lo.masterAddr.empty() ? lo.masterAddr : !first.address.empty() ? first.address : first.name;
        const bool masterHere = profile.launcher == "local" || (profile.launcher == "ssh" && cppl::isLoopbackHost(master));
        lo.masterPort = m_request.masterPort > 0 ? m_request.masterPort : (masterHere ? cppl::freeLoopbackPort() : 29500);
    } catch (const cppl::Error &e) {
        return Refusal{kCliFailed, QString::fromStdString(e.what())};
    }
    if (lo.masterPort < 1 || lo.masterPort > 65535)
        return Refusal{kCliBadArguments, tr("the rendezvous port %1 is outside 1-65535").arg(lo.masterPort)};
    lo.profileDir = (m_request.profilePath.isEmpty() ? QDir::currentPath() : QFileInfo(m_request.profilePath).absolutePath()).toStdString();
    lo.agentOverride = m_request.agent.toStdString();
    lo.resumeState = m_request.resumeState.toStdString();
    if (!m_request.resumeState.isEmpty()) // the batch the interrupted run used, if its checkpoint says it
        lo.resumeBatch = QJsonDocument::fromJson(m_request.resumeState).object().value(u"batch"_s).toInteger(0);
    if (lo.agentOverride.empty() && profile.launcher == "local")
        lo.agentOverride = localAgentFor(profile).toStdString();
    return std::nullopt;
}

std::optional<RunEngine::Refusal> RunEngine::startCollector(LaunchOptions &lo, int &collectorPort)
{
#if CLUSTERPPL_HAVE_ZMQ
    if (!m_request.telemetry || m_request.checkOnly)
        return std::nullopt;
    // Every rank streams to a collector in this process, over CURVE with keys made for this run
    // alone: local ranks reach it on loopback, SSH ranks through their session's reverse tunnel.
    // The agents get the keys on stdin, never in argv (docs/telemetry.md, "Security").
    const ClusterProfile &profile = m_request.profile;
    telemetry::CollectorOptions co;
    co.state.run = lo.runId;
    co.state.stallAfterSeconds = std::max(3.0, profile.thresholds.stallSeconds);
    co.state.windowsGlobal = profile.evaluation.schedule == "dynamic"; // the agents send the run's windows
    try {
        const auto keys = cppl::telemetry::generateCredentials();
        co.curve = keys.collector;
        lo.telemetryCredentials = keys.agent;
    } catch (const cppl::Error &e) {
        return Refusal{kCliFailed, tr("telemetry keys: %1").arg(QString::fromStdString(e.what()))};
    }
    d->collector = std::make_unique<telemetry::CollectorObject>();
    QString collectorError;
    connect(d->collector.get(), &telemetry::CollectorObject::failed, this, [&collectorError](const QString &why) { collectorError = why; });
    if (!d->collector->start(co))
        return Refusal{kCliFailed, collectorError};
    connect(d->collector.get(), &telemetry::CollectorObject::snapshotReady, this, &RunEngine::onSnapshot);
    lo.telemetry = d->collector->endpoint().toStdString();
    collectorPort = d->collector->endpoint().section(u':', -1).toInt();
#else
    (void)lo;
    (void)collectorPort;
#endif
    return std::nullopt;
}

std::optional<RunEngine::Refusal> RunEngine::makePlan(LaunchOptions &lo)
{
    try {
        if (m_request.profile.launcher == "slurm")
            makeSlurmPlan(lo);
        else
            m_plan = buildLaunchPlan(m_request.profile, lo);
        if (m_plan.launcher == "ssh")
            for (const auto &r : m_plan.ranks)
                (void)remoteCommand(r); // refuse unsafe values before connecting anywhere
    } catch (const cppl::ConfigError &e) {
        return Refusal{kCliBadArguments, QString::fromStdString(e.what())};
    }
    return std::nullopt;
}

void RunEngine::makeSlurmPlan(LaunchOptions &lo)
{
    const ClusterProfile &profile = m_request.profile;
    lo.masterAddr = std::string(kSlurmMasterPlaceholder);
    const ClusterProfile ranks = slurmRankProfile(profile);
    m_plan = buildLaunchPlan(ranks, lo);
    m_plan.launcher = "slurm";
    SlurmJobInputs in;
    in.runId = lo.runId;
    in.evalArgv = m_plan.ranks.front().argv;
    in.env = m_plan.ranks.front().env;
    // Compute nodes reach only the login node: the agents send to the relay there, which
    // forwards through the SSH tunnel (docs/telemetry.md, "Relay").
    for (std::size_t i = 0; i + 1 < in.evalArgv.size(); ++i)
        if (in.evalArgv[i] == "--telemetry")
            in.evalArgv[i + 1] = std::string(kSlurmRelayPlaceholder);
    if (m_request.preflight)
        in.preflightArgv = preflightPlan(ranks, m_plan).ranks.front().argv;
    if (m_plan.store)
        in.storeArgv = m_plan.store->argv;
    m_plan.masterAddr = "the first allocated node";
    in.masterPort = lo.masterPort;
    in.generatedAt = QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
    d->slurmJob = buildSlurmJob(profile, in);
    (void)remoteCommand(slurmDriverCommand(profile, d->slurmJob, false));
    m_outcome.slurmPartition = QString::fromStdString(profile.slurm.partition);
    m_outcome.slurmScript = QByteArray::fromStdString(d->slurmJob.batchScript);
    m_request.launcher.judgeAllocation = [this](const std::vector<std::string> &nodes, const std::map<int, QString> &json,
                                                const std::map<int, RankEnd> &ends) { return judgeAllocation(nodes, json, ends); };
}

QStringList RunEngine::judgeAllocation(const std::vector<std::string> &nodes, const std::map<int, QString> &json,
                                       const std::map<int, RankEnd> &ends)
{
    LaunchPlan pre;
    for (std::size_t n = 0; n < std::max<std::size_t>(nodes.size(), 1); ++n) {
        RankCommand c;
        c.rank = c.hostIndex = static_cast<int>(n);
        c.hostName = n < nodes.size() ? nodes[n] : std::string("(allocated node)");
        pre.ranks.push_back(std::move(c));
    }
    m_preflight = judgePreflight(pre, json, ends);
    const QStringList refusals = preflightRefusals(m_preflight);
    for (const auto &h : m_preflight)
        Q_EMIT preflightHost(h);
    Q_EMIT preflightFinished(refusals.isEmpty(), refusals);
    d->slurmRefusals = refusals;
    return refusals;
}

void RunEngine::stop()
{
    if (isTerminal(m_phase) || d->stopRequested)
        return;
    d->stopRequested = true;
    if (m_phase == RunPhase::Idle) {
        finishWith(RunPhase::Stopped, kCliStopped, tr("stopped before it started"));
        return;
    }
    setPhase(RunPhase::Stopping);
    Q_EMIT notice(tr("stopping every rank of run %1").arg(m_runId));
    if (d->preflightLauncher && !d->preflightLauncher->isFinished())
        d->preflightLauncher->stop();
    else if (d->launcher && !d->launcher->isFinished())
        d->launcher->stop();
    else
        QTimer::singleShot(0, this, [this] { finishWith(RunPhase::Stopped, kCliStopped, tr("stopped by the user")); });
}

void RunEngine::startPreflight()
{
    if (d->stopRequested)
        return finishWith(RunPhase::Stopped, kCliStopped, tr("stopped by the user"));
    setPhase(RunPhase::Preflight);
    d->preflightPlan = preflightPlan(m_request.profile, m_plan);
    LauncherSettings s = m_request.launcher;
    s.stopAllOnFailure = false;
    s.telemetryTunnelPort = 0;
    d->preflightLauncher = makeLauncher(m_plan.launcher, s, m_request.profile, d->slurmJob);
    Launcher *l = d->preflightLauncher.get();
    connect(l, &Launcher::rankOutput, this, [this](int rank, bool isStderr, const QString &line) {
        if (rank < 0)
            Q_EMIT rankOutput(-1, isStderr, line);
        else if (!isStderr && line.startsWith(u'{'))
            d->preflightJson[rank] = line;
    });
    connect(l, &Launcher::hostFailed, this, [this](const QString &host, const QString &message) {
        d->hostFailures << tr("host %1: %2").arg(host, message);
        Q_EMIT hostFailed(host, message);
    });
    connect(l, &Launcher::finished, this, &RunEngine::onPreflightDone, Qt::QueuedConnection);
    l->start(d->preflightPlan);
}

void RunEngine::onPreflightDone()
{
    if (d->stopRequested)
        return finishWith(RunPhase::Stopped, kCliStopped, tr("stopped during pre-flight"));
    m_preflight = judgePreflight(d->preflightPlan, d->preflightJson, d->preflightLauncher->ends());
    QStringList refusals = preflightRefusals(m_preflight);
    for (const auto &h : m_preflight)
        Q_EMIT preflightHost(h);
    Q_EMIT preflightFinished(refusals.isEmpty(), refusals);
    if (!d->hostFailures.isEmpty())
        return finishWith(RunPhase::Failed, kCliLaunchFailed, d->hostFailures.front());
    if (!refusals.isEmpty())
        return finishWith(RunPhase::Failed, kCliPreflightRefused,
                          (m_request.checkOnly ? tr("pre-flight would refuse the launch:\n  %1") : tr("pre-flight refused the launch:\n  %1"))
                              .arg(refusals.join(u"\n  "_s)));
    Q_EMIT notice(m_preflight.size() == 1 ? tr("pre-flight ok on 1 host") : tr("pre-flight ok on %n hosts", nullptr, static_cast<int>(m_preflight.size())));
    if (m_request.checkOnly)
        return finishWith(RunPhase::Finished, kCliOk, {});
    startLaunch();
}

void RunEngine::startLaunch()
{
    if (d->stopRequested)
        return finishWith(RunPhase::Stopped, kCliStopped, tr("stopped by the user"));
    setPhase(RunPhase::Launching);
    openRunDirectory();
    d->launcher = makeLauncher(m_plan.launcher, m_request.launcher, m_request.profile, d->slurmJob);
    connectLauncher(d->launcher.get());
    Q_EMIT notice(runStartNotice(m_runId, static_cast<int>(m_plan.ranks.size()), static_cast<int>(m_request.profile.hosts.size()),
                                 QString::fromStdString(m_plan.launcher), m_plan.groups, QString::fromStdString(m_plan.masterAddr),
                                 m_plan.masterPort));
    d->launcher->start(m_plan);
}

void RunEngine::openRunDirectory()
{
    // Every line of every rank also goes to its own log file: nothing is lost when a view scrolls.
    QString logDir = m_request.logDir;
    if (logDir.isEmpty())
        logDir = defaultRunDirectory(m_runId);
    // What a resume needs (run_directory.h): the profile as run, then each committed round.
    BatchRanges resumedLedger;
    QJsonObject resumedFrom;
    if (!m_request.resumeState.isEmpty()) {
        const QJsonObject cp = QJsonDocument::fromJson(m_request.resumeState).object();
        resumedLedger = parseBatchRanges(cp.value(u"ledger"_s).toString()).value_or(BatchRanges{});
        resumedFrom = QJsonObject{{u"round"_s, cp.value(u"round"_s)}, {u"written"_s, cp.value(u"written"_s)}};
    }
    const bool haveDir = QDir().mkpath(logDir);
    std::vector<QString> hosts;
    for (const auto &r : m_plan.ranks)
        hosts.push_back(QString::fromStdString(r.hostName));
    auto checkpoints = std::make_unique<CheckpointWriter>(haveDir ? logDir : QString(), m_runId, static_cast<int>(m_plan.ranks.size()),
                                                          std::move(resumedLedger), resumedFrom);
    checkpoints->setTensorParallel(m_request.profile.evaluation.tensorParallel);
    d->output.begin(std::move(hosts), std::move(checkpoints));
    if (!haveDir) {
        Q_EMIT notice(tr("cannot create the log directory %1; rank output is shown but not saved").arg(logDir));
        return;
    }
    if (m_request.resumeState.isEmpty()) // a new run: nothing of an older one in a reused directory
        for (const char *stale : {kCheckpointFile, kResultFile})
            QFile::remove(logDir + u'/' + QLatin1StringView(stale));
    if (const QString why = writeRunInfo(logDir, m_runId, m_request.profile, m_request.profilePath, resumedFrom); !why.isEmpty())
        Q_EMIT notice(tr("this run cannot be resumed if interrupted: %1").arg(why));
    for (const auto &r : m_plan.ranks) {
        auto f = std::make_unique<QFile>(u"%1/rank-%2.log"_s.arg(logDir).arg(r.rank));
        if (f->open(QIODevice::WriteOnly | QIODevice::Append | QIODevice::Text))
            d->logs[r.rank] = std::move(f);
    }
    m_outcome.logDir = logDir;
    Q_EMIT notice(tr("per-rank logs in %1").arg(logDir));
}

void RunEngine::connectLauncher(Launcher *l)
{
    connect(l, &Launcher::rankOutput, this, &RunEngine::onRankLine);
    connect(l, &Launcher::rankStarted, this, &RunEngine::onRankStarted);
    connect(l, &Launcher::rankFinished, this, &RunEngine::onRankFinished);
    connect(l, &Launcher::hostFailed, this, &RunEngine::onHostFailed);
    connect(l, &Launcher::jobState, this, [this](const QString &jobId, const QString &state, const QString &reason, const QString &nodes) {
        m_outcome.slurmJobId = jobId;
        if (!nodes.isEmpty())
            m_outcome.slurmNodes = nodes;
        Q_EMIT jobState(jobId, state, reason, nodes);
    });
    connect(l, &Launcher::finished, this, &RunEngine::onLauncherFinished, Qt::QueuedConnection);
}

void RunEngine::onRankLine(int rank, bool isStderr, const QString &line)
{
    if (const auto it = d->logs.find(rank); it != d->logs.end()) {
        it->second->write((isStderr ? "E " : "O ") + line.toUtf8() + '\n');
        it->second->flush();
    }
    const AgentOutput::Reading r = d->output.read(rank, isStderr, line);
    for (const auto &[lost, fresh] : r.lost)
        noteLost(lost, fresh);
    for (const QString &n : r.notices)
        Q_EMIT notice(n);
    if (r.show)
        Q_EMIT rankOutput(rank, isStderr, line);
}

void RunEngine::onRankStarted(int rank, const QString &host)
{
    d->startedRanks.insert(rank);
    if (m_phase == RunPhase::Launching && d->startedRanks.size() == m_plan.ranks.size())
        setPhase(RunPhase::Running);
    Q_EMIT rankStarted(rank, host);
}

void RunEngine::onRankFinished(int rank, int exitCode)
{
    if (exitCode != 0 && !d->stopRequested) {
        const RankEnd &end = d->launcher->ends().at(rank);
        const auto &rc = m_plan.ranks[static_cast<std::size_t>(rank)];
        QString why = !end.reason.isEmpty() ? end.reason
                      : exitCode > 128      ? tr("killed by signal %1").arg(exitCode - 128)
                                            : tr("exit code %1").arg(exitCode);
        d->endOrder.emplace_back(rank, why);
        if (end.reason.isEmpty() && !end.lastLines.isEmpty())
            why += u": "_s + end.lastLines.back();
        d->endedWhy[rank] = why;
        if (d->output.lost().count(rank)) {
            // The others regrouped without it before its process ended (it hung): the run goes
            // on, and its alert already says so; now it can say how the rank ended.
            if (!d->lostAlerted[rank])
                raiseRankLost(rank);
            Q_EMIT rankFinished(rank, exitCode);
            return;
        }
        Q_EMIT alertRaised(m_alerts.raise(elapsedSeconds(), rank, AlertKind::Failed, rankEndedText(rank, QString::fromStdString(rc.hostName), why)));
    }
    Q_EMIT rankFinished(rank, exitCode);
}

void RunEngine::onHostFailed(const QString &host, const QString &message)
{
    d->hostFailures << tr("host %1: %2").arg(host, message);
    Q_EMIT hostFailed(host, message);
}

void RunEngine::noteLost(int rank, bool fresh)
{
    // --on-rank-loss continue: the reporting survivor says so as soon as the others regrouped
    // without a rank (a rank-lost line, and the regroup line for the checkpoints): a new loss
    // gets its notice (every rank lost so far, as the Run page's notice line says), and its alert.
    Q_EMIT rankLost(rank, d->output.lost().at(rank).detail);
    if (fresh)
        Q_EMIT notice(rankLostNotice(d->output.lostRanks()));
    if (fresh || !d->lostAlerted[rank])
        raiseRankLost(rank);
}

void RunEngine::raiseRankLost(int rank, RunPhase endedAs)
{
    // A warning in place of the rank's "ended: killed by signal 9" failure (the Run page's alert
    // list turns that row into this one): what happened and that the run goes on, as the rank's
    // row ("lost · going on") and the badge ("Recovering") say. Should the run then fail or be
    // stopped, finishWith() raises it once more, amended: the alert list's row and the stored
    // history end with what happened, not with "the run goes on".
    const QString host = QString::fromStdString(m_plan.ranks[static_cast<std::size_t>(rank)].hostName);
    const LostRank &lost = d->output.lost().at(rank);
    QString cause = lost.cause;
    if (const auto it = d->endedWhy.find(rank); it != d->endedWhy.end())
        cause = it->second; // the launcher saw how its process ended: the most specific cause
    d->lostAlerted[rank] = !cause.isEmpty();
    Q_EMIT alertRaised(m_alerts.raise(elapsedSeconds(), rank, AlertKind::RankLost, rankLostAlertText(rank, host, cause, lost.round, endedAs)));
}

void RunEngine::onSnapshot(const SnapshotPtr &snapshot)
{
    m_latest = snapshot;
    const double t = elapsedSeconds();
    m_timeline.append(t, *snapshot);
    if (!isTerminal(m_phase))
        for (const auto &a : m_alerts.update(t, *snapshot))
            Q_EMIT alertRaised(a);
    Q_EMIT snapshotReady(snapshot);
}

void RunEngine::onLauncherFinished()
{
    m_outcome.ends = d->launcher->ends();
    if (d->stopRequested)
        return finishWith(RunPhase::Stopped, kCliStopped, tr("stopped by the user"));
    const int code = d->launcher->exitCode();
    if (!d->slurmRefusals.isEmpty())
        return finishWith(RunPhase::Failed, kCliPreflightRefused,
                          tr("pre-flight refused the launch:\n  %1").arg(d->slurmRefusals.join(u"\n  "_s)));
    if (code != 0 && m_plan.launcher == "slurm" && d->startedRanks.empty()) {
        // The job never ran its agents: sbatch refused it, or it ended while queued; Slurm's reason.
        const auto first = m_outcome.ends.find(0);
        return finishWith(RunPhase::Failed, kCliLaunchFailed,
                          !d->hostFailures.isEmpty()            ? d->hostFailures.front()
                          : first != m_outcome.ends.end() ? first->second.reason
                                                                : tr("the Slurm job did not start"));
    }
    if (code != 0) {
        m_outcome.summary = d->launcher->summary();
        const QString first = m_outcome.summary.section(u'\n', 0, 0);
        if (!d->hostFailures.isEmpty() && d->startedRanks.empty())
            return finishWith(RunPhase::Failed, kCliLaunchFailed, d->hostFailures.front());
        // The agents' exit 6 is a timeout (a rank stopped answering); 5 is what the others exit
        // with when a peer died, so the first failing rank's code decides.
        const QString cause = failedAfterLoss(first);
        if (cause != first) { // the CLI prints the summary: its headline says the same, the lost rank's end below it
            QString before = first.startsWith(u"run failed: "_s) ? first.mid(12) : first;
            if (before.endsWith(u" first"_s))
                before.chop(6);
            m_outcome.summary = cause + u"\n  before it, the lost "_s + before + m_outcome.summary.mid(first.size());
        }
        return finishWith(RunPhase::Failed, code == 6 ? kCliRankTimeout : kCliRankFailed, cause);
    }
    if (d->output.result().isEmpty()) {
        if (!d->launcher->storeFailure().isEmpty())
            return finishWith(RunPhase::Failed, kCliRankFailed, d->launcher->storeFailure());
        // A tolerant run's result comes from rank 0 or, when rank 0 was lost, the lowest survivor.
        QString cause = m_request.launcher.tolerateRankLoss ? tr("the run finished without any rank reporting a result")
                                                            : tr("rank 0 finished without reporting a result");
        if (!d->output.resultProblem().isEmpty()) // its result line came, unreadable
            cause += u" ("_s + d->output.resultProblem() + u')';
        return finishWith(RunPhase::Failed, kCliResultMismatch, cause);
    }
    m_outcome.resultJson = d->output.result();
    checkResult();
}

QString RunEngine::failedAfterLoss(const QString &first) const
{
    // --on-rank-loss continue: the launcher names the first rank that ended, which may be one the
    // others went on without; the run failed with the first of the others.
    const auto &lost = d->output.lost();
    if (lost.empty())
        return first;
    const auto it = std::find_if(d->endOrder.begin(), d->endOrder.end(), [&](const auto &e) { return !lost.count(e.first); });
    if (it == d->endOrder.end())
        return first; // none of the others ended badly: the launcher's words (its store, say)
    return failedAfterLossText(it->first, QString::fromStdString(m_plan.ranks[static_cast<std::size_t>(it->first)].hostName), it->second,
                               d->output.lostRanks());
}

void RunEngine::checkResult()
{
    // --on-rank-loss continue: the ranks the others recovered from, as rank 0's result records them.
    if (m_outcome.recovered.isEmpty())
        m_outcome.recovered = recoveredRanks(m_outcome.resultJson);
#if CLUSTERPPL_HAVE_ZMQ
    if (d->collector) {
        // The result travelled twice: over rank 0's stdout and as telemetry. Its last messages may
        // still be in flight for a moment after the processes ended.
        const SnapshotPtr snap = d->collector->snapshotNow();
        if (!snap->resultMatches.has_value() && d->resultChecks++ < 100) {
            QTimer::singleShot(20, this, &RunEngine::checkResult);
            return;
        }
        if (!crossCheckLiveMerge(snap))
            return;
    }
#endif
    for (const QString &r : m_outcome.recovered) // last, so that the Run page's notice line keeps it
        Q_EMIT notice(recoveredNotice(r));
    if (!m_request.baselineResultJson.isEmpty())
        compareWithBaseline();
    finishWith(RunPhase::Finished, kCliOk, {});
}

bool RunEngine::crossCheckLiveMerge(const SnapshotPtr &snap)
{
#if CLUSTERPPL_HAVE_ZMQ
    // The collector's live exact merge of the ranks' final sums must equal the result bit for bit.
    onSnapshot(snap);
    m_outcome.liveMergeMatches = snap->resultMatches;
    d->collector->stop();
    if (!m_outcome.recovered.isEmpty()) {
        // A lost rank's last live sums include batches it never committed (the others redid
        // them), so the live merge cannot equal the result; rank 0 checked instead that every
        // window and token is counted exactly once.
        m_outcome.liveMergeMatches.reset();
        Q_EMIT notice(tr("the live cross-check is skipped: a lost rank's last live sums include batches the others evaluated again"));
    }
    if (snap->resultMatches == false && m_outcome.recovered.isEmpty()) {
        const QString why = tr("the live exact merge of every rank's sums differs from rank 0's result");
        Q_EMIT alertRaised(m_alerts.raise(elapsedSeconds(), -1, AlertKind::ResultMismatch, why));
        finishWith(RunPhase::Failed, kCliResultMismatch, why);
        return false;
    }
#else
    (void)snap;
#endif
    return true;
}

void RunEngine::compareWithBaseline()
{
    const BaselineVerdict v = run::compareWithBaseline(m_outcome.resultJson, m_request.baselineResultJson,
                                                       m_request.profile.thresholds.deviationTolerance);
    m_outcome.baselineIdentical = v.identical;
    m_outcome.baselineRelativeDeviation = v.relativeDeviation;
    m_outcome.baselineNotCompared = v.notCompared;
    if (!v.notCompared.isEmpty())
        Q_EMIT notice(tr("not compared with the one-rank baseline: %1 (the profiles' dtype auto; set evaluation.dtype to compare them)")
                          .arg(v.notCompared));
    if (!v.deviation.isEmpty())
        Q_EMIT alertRaised(m_alerts.raise(elapsedSeconds(), -1, AlertKind::Deviation, v.deviation));
}

void RunEngine::finishWith(RunPhase phase, int exitCode, const QString &cause)
{
    if (isTerminal(m_phase))
        return;
#if CLUSTERPPL_HAVE_ZMQ
    if (d->collector) {
        if (phase != RunPhase::Finished) // keep the last figures the ranks sent
            onSnapshot(d->collector->snapshotNow());
        d->collector->stop();
        m_outcome.telemetryMessages = d->collector->messagesReceived();
    }
#endif
    for (auto &[rank, f] : d->logs)
        f->close();
    if (!m_request.checkOnly)
        amendLostRankAlerts(phase, cause);
    m_outcome.phase = phase;
    m_outcome.exitCode = exitCode;
    m_outcome.firstCause = cause;
    if (m_outcome.resultJson.isEmpty())
        m_outcome.resultJson = d->output.result();
    if (d->launcher)
        m_outcome.ends = d->launcher->ends();
    m_outcome.ended = QDateTime::currentDateTimeUtc();
    // A finished run is not resumed: its result in the run directory says so (run_directory.h).
    if (phase == RunPhase::Finished && !m_request.checkOnly && !m_outcome.logDir.isEmpty() && !m_outcome.resultJson.isEmpty())
        if (const QString why = writeResultFile(m_outcome.logDir, m_outcome.resultJson); !why.isEmpty())
            Q_EMIT notice(tr("the result is not saved in the run directory: %1").arg(why));
    setPhase(phase);
    Q_EMIT finished(m_outcome);
}

void RunEngine::amendLostRankAlerts(RunPhase phase, const QString &cause)
{
    const auto &lost = d->output.lost();
    if (phase == RunPhase::Failed || phase == RunPhase::Stopped) {
        // The Alerts list (and the stored history) must not end on "the run goes on without it":
        // each lost rank's alert is amended, and a failure is an alert of its own, with its cause,
        // where the lost ranks' warnings alone would read as a run that went well, or where no
        // rank's failure was raised at all (a launch refused, no result).
        for (const auto &l : lost)
            raiseRankLost(l.first, phase);
        const bool failureRaised = std::any_of(m_alerts.alerts().begin(), m_alerts.alerts().end(), [](const RunAlert &a) {
            return a.kind == AlertKind::Failed || a.kind == AlertKind::ResultMismatch;
        });
        if (phase == RunPhase::Failed && (!lost.empty() || !failureRaised))
            Q_EMIT alertRaised(m_alerts.raise(elapsedSeconds(), -1, AlertKind::Failed, tr("the run failed: %1").arg(failureWords(cause))));
    } else if (phase == RunPhase::Finished) {
        // Recovered: each lost rank's alert says how the run ended, as the "Recovered" badge does.
        for (const auto &l : lost)
            raiseRankLost(l.first, phase);
    }
}

} // namespace cppl::core::run
