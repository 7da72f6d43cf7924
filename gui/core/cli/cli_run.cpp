// SPDX-License-Identifier: MIT
// `clusterppl-cli run`: the text view of the run engine. Everything a run does happens in
// run/run_engine.cpp; this file parses flags, prints the engine's signals and maps its outcome.
#include "cli/cli_run.h"

#include "cli/cli_commands.h"
#include "cli/cli_history.h"
#include "run/preflight.h"
#include "run/run_directory.h"
#include "run/run_engine.h"
#include "telemetry/collector_state.h"

#include "cppl/counted.h"
#include "cppl/errors.h"
#include "cppl/signal_pipe.h"
#include "cppl/statistics.h"

#include <QCommandLineParser>
#include <QEventLoop>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>
#include <QSocketNotifier>
#include <QTextStream>
#include <QTimer>

#include <fcntl.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <optional>

using namespace Qt::StringLiterals;

namespace cppl::core {

namespace {

using run::RunEngine;
using run::RunOutcome;

const QString kRunUsage = uR"(Usage: clusterppl-cli run --profile PROFILE.json [options]
       clusterppl-cli run --resume RUN [--profile PROFILE.json] [options]

Pre-flight every host, then launch one agent per rank through the profile's launcher (local or
ssh): progress and the final estimate here, live per-rank lines every 2 s (when they changed), the result JSON to
--json, and a summary of who failed and why. Every rank's output also goes to its own log file.

Options:
  --profile FILE            the cluster profile (required, except with --resume)
  --resume RUN              finish an interrupted run (launcher killed, machine off) from its
                            last committed sync round: RUN is its id or its run directory (a
                            --log-dir). Same profile and settings, read from the run directory;
                            with --profile, that profile's hosts (a dynamic-schedule run resumes
                            on any number of ranks) but the same evaluation. The same bits as an
                            uninterrupted run; refused when the run finished, has no committed
                            round, or its model, data or settings changed.
  --json FILE               write rank 0's result JSON here
  --run-id ID               run id: letters, digits, '.', '_', '-' (default: UTC time + random)
  --master-addr ADDR        rendezvous address every host can reach (default: the first host's)
  --master-port PORT        rendezvous port, 1-65535 (default: a free port when the master is this
                            machine: the local launcher, or SSH hosts at a loopback address;
                            29500 over SSH to other machines)
  --agent PATH              agent executable on every host (overrides the profile)
  --ssh-config FILE         ssh_config file (default ~/.ssh/config)
  --known-hosts FILE        known_hosts file (default ~/.ssh/known_hosts)
  --accept-new-host-keys    record unknown SSH host keys (changed keys are always refused)
  --connect-timeout S       SSH connect timeout in seconds, 1-3600 (default 10)
  --log-dir DIR             the run directory: per-rank logs, run.json, checkpoint.json (each
                            committed round), result.json (default
                            ~/.local/state/clusterppl/runs/RUN-ID)
  --no-preflight            skip the pre-flight checks
  --no-telemetry            no live view (ranks stream nothing)
  --no-store                do not record the run in the history (docs/run-history.md)
  --schedule dynamic|static the agents' schedule (overrides the profile's evaluation.schedule,
                            default dynamic): global batches claimed as ranks go, or shards
                            fixed before the run (kept for comparison); same bits
  --on-rank-loss continue|fail
                            a rank dies or stalls (overrides evaluation.on_rank_loss): let the
                            others regroup and finish with the same bits and say recovered, with
                            the rank and the cause (continue, the default with the dynamic
                            schedule; rank 0 may be lost too), or end the run (fail: fail fast;
                            the default and the only choice with the static schedule)
  --overlap-sync on|off     the agents' --overlap-sync (overrides evaluation.overlap_sync): on
                            (default) aggregates round r while round r+1 computes, off waits for
                            each round's aggregation; the same bits either way, also on --resume
                            and with --on-rank-loss continue
  --quantize none|int8|int4|int4-asym
                            the agents' --quantize (overrides evaluation.quantize): weights
                            quantized at load, in groups of evaluation.quant_group (docs/models.md)
  --reference-model DIR     the agents' --reference-model (overrides evaluation.reference_model):
                            also evaluate DIR on the same windows; the result's "reference" has the
                            KL divergence, top-token agreement and PPL ratio to it
  --check-only              "check hosts": pre-flight every host, print each host's report (agent,
                            LibTorch, GPUs, NCCL, memory, paths, refusals) and launch nothing;
                            --json FILE gets the reports. `clusterppl-cli check` is the same.
  -h, --help                this text

Exit codes (docs/exit-codes.md): 0 ok, 1 failed, 2 bad arguments or profile, 3 file not
readable/writable, 10 pre-flight refused, 11 launch failed, 12 a rank failed, 13 a rank timed
out, 14 result check failed, 130 stopped.
)"_s;

/// Reads a passphrase from the controlling terminal without echo; nullopt without a terminal.
std::optional<std::string> askPassphrase(const std::string &prompt)
{
    static std::mutex mutex; // one prompt at a time across host threads
    const std::lock_guard lock(mutex);
    const int fd = ::open("/dev/tty", O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return std::nullopt;
    termios old{};
    const bool tty = ::tcgetattr(fd, &old) == 0;
    bool quiet = false;
    if (tty) {
        termios noEcho = old;
        noEcho.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        quiet = ::tcsetattr(fd, TCSAFLUSH, &noEcho) == 0;
    }
    if (!quiet) { // never read a secret that would be echoed
        ::close(fd);
        return std::nullopt;
    }
    (void)!::write(fd, prompt.data(), prompt.size());
    std::string line;
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n')
        line += c;
    (void)!::write(fd, "\n", 1);
    (void)::tcsetattr(fd, TCSAFLUSH, &old);
    ::close(fd);
    return line;
}

QString stateName(telemetry::RankState s)
{
    const auto n = telemetry::rankStateName(s);
    return QString::fromLatin1(n.data(), static_cast<qsizetype>(n.size()));
}

/// @p o's value into @p into when it is set and an integer @p lo..@p hi; else what is wrong.
QString readInteger(const QCommandLineParser &parser, const QCommandLineOption &o, int lo, int hi, int &into)
{
    if (!parser.isSet(o))
        return {};
    bool ok = false;
    const QString v = parser.value(o);
    const int n = v.toInt(&ok);
    if (!ok || n < lo || n > hi)
        return u"--%1: expected an integer %2-%3, got \"%4\""_s.arg(o.names().front()).arg(lo).arg(hi).arg(v);
    into = n;
    return {};
}

/// @p o's value into @p into (empty when not set); what is wrong when it is none of @p allowed.
QString readChoice(const QCommandLineParser &parser, const QCommandLineOption &o, const QStringList &allowed, QString &into)
{
    into = parser.value(o);
    if (parser.isSet(o) && !allowed.contains(into))
        return u"--%1 \"%2\" is not one of %3"_s.arg(o.names().front(), into, allowed.join(u", "_s));
    return {};
}

/// Parses flags into a request; an empty string on success, else the message (exit 2).
QString parseRunFlags(const QStringList &arguments, run::RunRequest &req, QString &profilePath, QString &jsonPath, QString &resume)
{
    QCommandLineParser parser;
    const QCommandLineOption profileOpt(u"profile"_s, {}, u"FILE"_s);
    const QCommandLineOption acceptOpt(u"accept-new-host-keys"_s, {});
    const QCommandLineOption jsonOpt(u"json"_s, {}, u"FILE"_s);
    const QCommandLineOption runIdOpt(u"run-id"_s, {}, u"ID"_s);
    const QCommandLineOption addrOpt(u"master-addr"_s, {}, u"ADDR"_s);
    const QCommandLineOption portOpt(u"master-port"_s, {}, u"PORT"_s);
    const QCommandLineOption agentOpt(u"agent"_s, {}, u"PATH"_s);
    const QCommandLineOption sshConfigOpt(u"ssh-config"_s, {}, u"FILE"_s);
    const QCommandLineOption knownHostsOpt(u"known-hosts"_s, {}, u"FILE"_s);
    const QCommandLineOption timeoutOpt(u"connect-timeout"_s, {}, u"S"_s);
    const QCommandLineOption logDirOpt(u"log-dir"_s, {}, u"DIR"_s);
    const QCommandLineOption noPreflightOpt(u"no-preflight"_s, {});
    const QCommandLineOption noTelemetryOpt(u"no-telemetry"_s, {});
    const QCommandLineOption noStoreOpt(u"no-store"_s, {});
    const QCommandLineOption checkOnlyOpt(u"check-only"_s, {});
    const QCommandLineOption resumeOpt(u"resume"_s, {}, u"RUN"_s);
    const QCommandLineOption scheduleOpt(u"schedule"_s, {}, u"static|dynamic"_s);
    const QCommandLineOption onRankLossOpt(u"on-rank-loss"_s, {}, u"continue|fail"_s);
    const QCommandLineOption overlapSyncOpt(u"overlap-sync"_s, {}, u"on|off"_s);
    const QCommandLineOption quantizeOpt(u"quantize"_s, {}, u"none|int8|int4|int4-asym"_s);
    const QCommandLineOption referenceOpt(u"reference-model"_s, {}, u"DIR"_s);
    parser.addOptions({resumeOpt, profileOpt, acceptOpt, jsonOpt, runIdOpt, addrOpt, portOpt, agentOpt, sshConfigOpt, knownHostsOpt, timeoutOpt,
                       logDirOpt, noPreflightOpt, noTelemetryOpt, noStoreOpt, checkOnlyOpt, scheduleOpt, onRankLossOpt,
                       overlapSyncOpt, quantizeOpt, referenceOpt});
    if (!parser.parse(QStringList{u"clusterppl-cli"_s} + arguments))
        return parser.errorText() + u" (clusterppl-cli run --help lists the options)"_s;
    if (!parser.positionalArguments().isEmpty())
        return u"unexpected argument \"%1\" (run takes only options)"_s.arg(parser.positionalArguments().front());
    resume = parser.value(resumeOpt);
    if (parser.isSet(resumeOpt) && parser.isSet(runIdOpt))
        return u"--resume keeps the interrupted run's id; it cannot be combined with --run-id"_s;
    if (parser.isSet(resumeOpt) && parser.isSet(checkOnlyOpt))
        return u"--resume starts a run; check the hosts with --check-only on its own"_s;
    if (!parser.isSet(profileOpt) && !parser.isSet(resumeOpt))
        return u"needs --profile FILE (or --resume RUN)"_s;
    profilePath = parser.value(profileOpt);
    jsonPath = parser.value(jsonOpt);
    req.runId = parser.value(runIdOpt);
    if (parser.isSet(runIdOpt))
        if (const QString why = run::validateRunId(req.runId); !why.isEmpty())
            return u"--run-id: "_s + why;
    // The first problem, in the order of the options' checks.
    for (const QString &why : {readInteger(parser, portOpt, 1, 65535, req.masterPort),
                               readInteger(parser, timeoutOpt, 1, 3600, req.launcher.connectTimeoutSeconds),
                               readChoice(parser, scheduleOpt, {u"static"_s, u"dynamic"_s}, req.schedule),
                               readChoice(parser, onRankLossOpt, {u"fail"_s, u"continue"_s}, req.onRankLoss),
                               readChoice(parser, overlapSyncOpt, {u"on"_s, u"off"_s}, req.overlapSync),
                               readChoice(parser, quantizeOpt, {u"none"_s, u"int8"_s, u"int4"_s, u"int4-sym"_s, u"int4-asym"_s}, req.quantize)})
        if (!why.isEmpty())
            return why;
    req.referenceModel = parser.value(referenceOpt);
    if (parser.isSet(referenceOpt) && req.referenceModel.isEmpty())
        return u"--reference-model needs a directory"_s;
    req.masterAddr = parser.value(addrOpt);
    req.agent = parser.value(agentOpt);
    req.logDir = parser.value(logDirOpt);
    req.checkOnly = parser.isSet(checkOnlyOpt);
    if (req.checkOnly && parser.isSet(noPreflightOpt))
        return u"--check-only runs only the pre-flight; it cannot be combined with --no-preflight"_s;
    req.preflight = !parser.isSet(noPreflightOpt);
    req.telemetry = !parser.isSet(noTelemetryOpt);
    req.launcher.newHostKeys = parser.isSet(acceptOpt) ? NewHostKeys::Accept : NewHostKeys::Refuse;
    req.launcher.sshConfigFile = parser.value(sshConfigOpt).toStdString();
    req.launcher.knownHostsFile = parser.value(knownHostsOpt).toStdString();
    req.launcher.passphrase = askPassphrase;
    return {};
}

} // namespace

QStringList liveLines(const telemetry::Snapshot &snap)
{
    QStringList lines;
    if (snap.global.tokens == 0)
        return lines;
    int stalled = 0, evaluating = 0;
    for (const auto &r : snap.ranks) {
        stalled += r.state == telemetry::RankState::Stalled;
        evaluating += r.state == telemetry::RankState::Evaluating || r.state == telemetry::RankState::Syncing;
    }
    QString straggler;
    if (!snap.rounds.empty() && snap.rounds.back().straggler >= 0)
        straggler = u", straggler of round %1: rank %2"_s.arg(snap.rounds.back().round).arg(snap.rounds.back().straggler);
    auto percent = [](std::int64_t part, std::int64_t whole) {
        return QString::number(whole > 0 ? 100.0 * double(part) / double(whole) : 0.0, 'f', 1);
    };
    if (snap.ranks.size() <= 16)
        for (const auto &r : snap.ranks) {
            // Static shards: its windows of its own shard. Dynamic: a rank claims batches as it
            // goes (a fast one does more than an even share), so its count and its part of the run.
            // A rank not heard from yet (still loading or connecting) has no host, group or
            // windows to show: its slot's defaults ("(, group 0)", "0 windows of the run's 0")
            // would name a wrong group.
            if (r.host.empty() && r.windowsTotal == 0) {
                lines << u"[live]   rank %1: %2, not heard from yet"_s.arg(r.rank).arg(stateName(r.state));
                continue;
            }
            const QString windows = snap.windowsGlobal
                                        ? u"%1 windows (%2% of the run's %3)"_s.arg(r.windowsDone).arg(percent(r.windowsDone, r.windowsTotal)).arg(r.windowsTotal)
                                        : u"%1/%2 windows of its shard"_s.arg(r.windowsDone).arg(r.windowsTotal);
            lines << u"[live]   rank %1 (%2, group %3): %4, %5, %6 tok/s, ppl %7, comm %8%"_s.arg(r.rank)
                         .arg(QString::fromStdString(r.host))
                         .arg(r.group)
                         .arg(stateName(r.state), windows)
                         .arg(r.tokensPerSecond, 0, 'f', 0)
                         .arg(r.stats.tokens > 0 ? cppl::computePerplexity(r.stats).ppl : 0.0, 0, 'f', 4)
                         .arg(100 * r.commShare, 0, 'f', 2);
        }
    lines << (snap.worldSize == 1 ? u"[live] ppl %1 +/- %2 over %3 tokens, windows %4/%5 (%6%), %7 tok/s, %8/%9 rank evaluating"_s
                                  : u"[live] ppl %1 +/- %2 over %3 tokens, windows %4/%5 (%6%), %7 tok/s, %8/%9 ranks evaluating"_s)
                     .arg(snap.globalPpl.ppl, 0, 'f', 4)
                     .arg(snap.globalPpl.pplStderr, 0, 'f', 5)
                     .arg(snap.global.tokens)
                     .arg(snap.windowsDone)
                     .arg(snap.windowsTotal)
                     .arg(percent(snap.windowsDone, snap.windowsTotal))
                     .arg(snap.tokensPerSecond, 0, 'f', 0)
                     .arg(evaluating)
                     .arg(snap.worldSize)
                 + (stalled ? u", %1 STALLED"_s.arg(stalled) : QString()) + straggler;
    return lines;
}

namespace {

/// What `run` was asked: the request and the files named on the command line.
struct RunArguments
{
    run::RunRequest req;
    QString profilePath, jsonPath, resume;
};

/// --resume with --profile: other hosts may finish the run, but what is evaluated, and relative
/// paths, must stay the run's. Without --profile: the run's own profile. An exit code on refusal.
std::optional<int> applyResume(RunArguments &a, const run::ResumeSource &from, QTextStream &err)
{
    run::RunRequest &req = a.req;
    if (!a.profilePath.isEmpty()) {
        // --schedule overrides the profile's before the comparison (a profile without "schedule"
        // says dynamic, the default; a static run resumes with --schedule static).
        if (!req.schedule.isEmpty())
            req.profile.evaluation.schedule = req.schedule.toStdString();
        const QStringList differences = run::resumeMismatches(from.profile, req.profile, from.schedule, from.batch);
        if (!differences.isEmpty()) {
            err << "clusterppl-cli: run: --resume " << a.resume << " with --profile " << a.profilePath << ": the profile does not evaluate what run "
                << from.runId << " evaluated:\n  " << differences.join(u"\n  "_s)
                << "\n(resume without --profile to use the run's own, saved in " << from.directory << "/run.json";
            if (QString::fromStdString(req.profile.evaluation.schedule) != from.schedule)
                err << ", or add --schedule " << from.schedule;
            err << ")\n";
            return kCliBadArguments;
        }
    } else {
        req.profile = from.profile;
        req.profilePath = from.profilePath;
        // The checkpoint names the schedule the run used (the saved profile says it too).
        if (req.schedule.isEmpty() && !from.schedule.isEmpty())
            req.profile.evaluation.schedule = from.schedule.toStdString();
    }
    req.runId = from.runId;
    req.resumeState = from.checkpoint;
    if (req.logDir.isEmpty())
        req.logDir = from.directory;
    err << "clusterppl-cli: resuming run " << from.runId << " after its round " << from.round << ": " << from.batchesDone << " of "
        << from.batchCount << " global batches committed (" << from.schedule << " schedule, "
        << QString::fromStdString(cppl::counted(from.worldSize, "rank", "ranks")) << " then)\n";
    return std::nullopt;
}

/// The flags, the run to resume and the profile, into @p a; an exit code when they are refused.
std::optional<int> prepareRequest(const QStringList &arguments, RunArguments &a, QTextStream &err)
{
    if (const QString why = parseRunFlags(arguments, a.req, a.profilePath, a.jsonPath, a.resume); !why.isEmpty()) {
        err << "clusterppl-cli: run: " << why << '\n';
        return kCliBadArguments;
    }
    std::optional<run::ResumeSource> from;
    if (!a.resume.isEmpty()) {
        QString why;
        from = run::loadResumeSource(a.resume, &why);
        if (!from) {
            err << "clusterppl-cli: run: " << why << '\n';
            return kCliBadArguments;
        }
    }
    if (!a.profilePath.isEmpty()) {
        try {
            a.req.profile = loadProfile(a.profilePath.toStdString());
        } catch (const IoError &e) {
            err << "clusterppl-cli: " << e.what() << '\n';
            return kCliIoError;
        } catch (const ConfigError &e) {
            err << "clusterppl-cli: " << e.what() << '\n';
            return kCliBadArguments;
        }
        a.req.profilePath = a.profilePath;
    }
    return from ? applyResume(a, *from, err) : std::nullopt;
}

/// The text view of a run: prints the engine's signals as they come (notices, host failures, the
/// ranks' output, pre-flight reports for `check`, alerts) and the live block every 2 s.
class RunView
{
public:
    RunView(RunEngine &engine, const run::RunRequest &request, QTextStream &out, QTextStream &err)
        : m_engine(engine), m_checkOnly(request.checkOnly), m_out(out), m_err(err)
    {
        connectNotices();
        connectOutput();
        connectReports();
        QObject::connect(&m_live, &QTimer::timeout, [this] {
            if (printLive())
                m_lastHostFailure.clear();
        });
        m_live.start(2000);
    }

    /// The live block of the latest snapshot: the global running perplexity merged exactly from
    /// every rank's live sums, per rank while they are few. Not again when nothing in it changed
    /// (a run ending, a rank holding on): the same block twice said nothing new. True when printed.
    bool printLive()
    {
        const auto snap = m_engine.latestSnapshot();
        if (!snap)
            return false;
        const QStringList lines = liveLines(*snap);
        if (lines == m_lastLive)
            return false;
        for (const QString &line : lines)
            m_err << line << '\n';
        m_err.flush();
        m_lastLive = lines;
        return true;
    }

    void stopLive() { m_live.stop(); }
    /// The last host failure printed, unless something was printed after it.
    [[nodiscard]] const QString &lastHostFailure() const { return m_lastHostFailure; }
    [[nodiscard]] const QJsonArray &hostReports() const { return m_hostReports; }

private:
    void connectNotices();
    void connectOutput();
    void connectReports();

    RunEngine &m_engine;
    bool m_checkOnly = false;
    QTextStream &m_out;
    QTextStream &m_err;
    QTimer m_live;
    QStringList m_lastLive;
    // A host's launch failure as it happens; `check` shows it in the host's block instead, and the
    // verdict at the end does not say it again when nothing but the alert came after it.
    QString m_lastHostFailure;
    bool m_zeroLost = false;
    QJsonArray m_hostReports; // `check`: each host's report, for --json
};

void RunView::connectNotices()
{
    QObject::connect(&m_engine, &RunEngine::notice, &m_live, [this](const QString &text) {
        m_lastHostFailure.clear();
        m_err << "clusterppl-cli: " << text << '\n';
        m_err.flush();
    });
    QObject::connect(&m_engine, &RunEngine::hostFailed, &m_live, [this](const QString &host, const QString &message) {
        if (m_checkOnly)
            return;
        m_lastHostFailure = u"host %1: %2"_s.arg(host, message);
        m_err << "clusterppl-cli: " << m_lastHostFailure << '\n';
        m_err.flush();
    });
    QObject::connect(&m_engine, &RunEngine::alertRaised, &m_live, [this](const run::RunAlert &a) {
        m_err << "clusterppl-cli: ALERT (" << run::alertKindName(a.kind) << "): " << a.message << '\n';
        m_err.flush();
    });
}

void RunView::connectOutput()
{
    // The reporting rank's stdout (the final estimate) is rank 0's, or once a tolerant run lost
    // rank 0, the lowest survivor's (the others print nothing there but what the engine takes).
    QObject::connect(&m_engine, &RunEngine::rankFinished, &m_live, [this](int rank, int exitCode) {
        if (rank == 0 && exitCode != 0)
            m_zeroLost = true;
    });
    QObject::connect(&m_engine, &RunEngine::rankOutput, &m_live, [this](int rank, bool isStderr, const QString &line) {
        m_lastHostFailure.clear();
        if (rank < 0)
            m_err << "clusterppl-cli: " << line << '\n';
        else if (!isStderr && (rank == 0 || m_zeroLost))
            m_out << line << '\n';
        else if (isStderr && rank == 0)
            m_err << line << '\n';
        else if (isStderr)
            m_err << "[rank " << rank << "] " << line << '\n';
        m_out.flush();
        m_err.flush();
    });
}

void RunView::connectReports()
{
    // Check hosts: each host's report as it is judged, one block per host.
    QObject::connect(&m_engine, &RunEngine::preflightHost, &m_live, [this](const run::HostPreflight &h) {
        if (!m_checkOnly)
            return;
        const bool ok = h.ran && h.problems.isEmpty();
        m_out << "host " << h.host << ": " << (ok ? "ok" : "REFUSED") << "  " << run::preflightSummary(h.report, h.problems) << '\n';
        for (const QString &line : run::preflightDetails(h.report, h.problems).split(u'\n', Qt::SkipEmptyParts))
            m_out << "  " << line << '\n';
        m_out.flush();
        m_hostReports.append(QJsonObject{{u"host"_s, h.host}, {u"ok"_s, ok}, {u"ran"_s, h.ran},
                                         {u"problems"_s, QJsonArray::fromStringList(h.problems)}, {u"report"_s, h.report}});
    });
}

/// Starts the run and waits for its end; SIGINT/SIGTERM/SIGHUP stop it (every rank ends; a second
/// signal is not needed).
void runToTheEnd(RunEngine &engine, const run::RunRequest &req, QTextStream &err)
{
    QEventLoop loop;
    QObject::connect(&engine, &RunEngine::finished, &loop, &QEventLoop::quit, Qt::QueuedConnection);
    std::unique_ptr<SignalPipe> sigPipe;
    std::unique_ptr<QSocketNotifier> notifier;
    try {
        sigPipe = std::make_unique<SignalPipe>(std::initializer_list<int>{SIGINT, SIGTERM, SIGHUP});
        notifier = std::make_unique<QSocketNotifier>(sigPipe->readFd(), QSocketNotifier::Read);
        QObject::connect(notifier.get(), &QSocketNotifier::activated, &engine, [&] {
            const int sig = sigPipe->drain();
            err << "clusterppl-cli: signal " << sig << ": stopping the run\n";
            err.flush();
            engine.stop();
        });
    } catch (const cppl::Error &e) {
        err << "clusterppl-cli: " << e.what() << "; Ctrl-C will end this process without stopping remote ranks cleanly\n";
    }
    if (engine.start(req) || !run::isTerminal(engine.phase()))
        loop.exec();
}

bool writeJson(const QString &path, const QJsonDocument &doc, const QString &what, QTextStream &err)
{
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(doc.toJson(QJsonDocument::Indented)) < 0 || !f.commit()) {
        err << "clusterppl-cli: " << path << ": cannot write " << what << ": " << f.errorString() << '\n';
        return false;
    }
    return true;
}

/// What the run ended with: the final live block, the telemetry check, --json, the verdict.
int reportOutcome(const RunEngine &engine, RunView &view, const RunArguments &a, QTextStream &out, QTextStream &err)
{
    const RunOutcome &o = engine.outcome();
    view.printLive(); // the final per-rank totals, however short the run was
    if (o.liveMergeMatches.has_value()) {
        const auto snap = engine.latestSnapshot();
        err << "clusterppl-cli: telemetry: " << QString::fromStdString(cppl::counted(snap ? std::int64_t(snap->ranks.size()) : 0, "rank", "ranks"))
            << ", " << o.telemetryMessages << " messages, " << (snap ? snap->lostTotal : 0) << " lost, " << (snap ? snap->authRejected : 0)
            << " rejected; live exact merge " << (*o.liveMergeMatches ? "equals" : "DIFFERS FROM") << " rank 0's result\n";
    }
    if (a.req.checkOnly && !a.jsonPath.isEmpty()) {
        const QJsonObject doc{{u"profile"_s, a.profilePath}, {u"ok"_s, o.exitCode == kCliOk}, {u"hosts"_s, view.hostReports()},
                              {u"first_cause"_s, o.firstCause}};
        if (!writeJson(a.jsonPath, QJsonDocument(doc), u"the host reports"_s, err))
            return kCliIoError;
    }
    if (o.exitCode != kCliOk) {
        const QString verdict = o.summary.isEmpty() ? o.firstCause : o.summary;
        if (verdict != view.lastHostFailure())
            err << "clusterppl-cli: " << verdict << '\n';
        if (!o.logDir.isEmpty())
            err << "clusterppl-cli: every rank's output is in " << o.logDir << '\n';
        return o.exitCode;
    }
    if (a.req.checkOnly) {
        out << "every host passed pre-flight; nothing was launched\n";
        return kCliOk;
    }
    if (!a.jsonPath.isEmpty() && !writeJson(a.jsonPath, QJsonDocument::fromJson(o.resultJson), u"the result"_s, err))
        return kCliIoError;
    return kCliOk;
}

} // namespace

int cliRun(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    if (arguments.contains(u"--help"_s) || arguments.contains(u"-h"_s)) {
        out << kRunUsage;
        return kCliOk;
    }
    RunArguments a;
    if (const std::optional<int> refused = prepareRequest(arguments, a, err))
        return *refused;
    RunEngine engine;
    // The history (docs/run-history.md): recorded as it runs, with the stored one-rank baseline.
    RunRecordingPtr recording;
    if (!arguments.contains(u"--no-store"_s) && !a.req.checkOnly) {
        QString refusal;
        recording = recordRun(engine, a.req, err, &refusal);
        if (!refusal.isEmpty()) {
            err << "clusterppl-cli: run: " << refusal << '\n';
            return kCliBadArguments;
        }
    }
    RunView view(engine, a.req, out, err);
    runToTheEnd(engine, a.req, err);
    view.stopLive();
    return reportOutcome(engine, view, a, out, err);
}

} // namespace cppl::core
