// SPDX-License-Identifier: MIT
#include "run_command.h"

#include "launcher.h"

#include "cppl/config.h"
#if CLUSTERPPL_HAVE_ZMQ
#include "telemetry/collector.h"
#endif

#include "cppl/cluster_profile.h"
#include "cppl/config.h"
#include "cppl/errors.h"

#include <QCommandLineParser>
#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QSocketNotifier>
#include <QStandardPaths>
#include <QTextStream>
#include <QThread>
#include <QTimer>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <mutex>
#include <optional>

#include <map>
#include <set>

extern char **environ;

using namespace Qt::StringLiterals;

namespace cppl::core {

namespace {

int g_signalFd = -1;

void onSignal(int sig)
{
    const char c = static_cast<char>(sig);
    (void)!::write(g_signalFd, &c, 1);
}

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
    if (tty) {
        termios quiet = old;
        quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
        ::tcsetattr(fd, TCSAFLUSH, &quiet);
    }
    (void)!::write(fd, prompt.data(), prompt.size());
    std::string line;
    char c = 0;
    while (::read(fd, &c, 1) == 1 && c != '\n')
        line += c;
    (void)!::write(fd, "\n", 1);
    if (tty)
        ::tcsetattr(fd, TCSAFLUSH, &old);
    ::close(fd);
    return line;
}

int freeLocalPort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a);
    ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len);
    ::close(fd);
    return ntohs(a.sin_port);
}

std::unique_ptr<Launcher> makeLauncher(const std::string &kind, const LauncherSettings &s)
{
    return kind == "ssh" ? makeSshLauncher(s) : makeLocalLauncher(s);
}

/// Runs a plan to its end on a local event loop; SIGINT/SIGTERM stop it.
void runToEnd(Launcher &launcher, const LaunchPlan &plan)
{
    QEventLoop loop;
    QObject::connect(&launcher, &Launcher::finished, &loop, &QEventLoop::quit);
    int pipefd[2];
    std::unique_ptr<QSocketNotifier> notifier;
    if (::pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) == 0) {
        g_signalFd = pipefd[1];
        struct sigaction sa{};
        sa.sa_handler = onSignal;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, nullptr);
        sigaction(SIGTERM, &sa, nullptr);
        sigaction(SIGHUP, &sa, nullptr);
        notifier = std::make_unique<QSocketNotifier>(pipefd[0], QSocketNotifier::Read);
        QObject::connect(notifier.get(), &QSocketNotifier::activated, &launcher, [&launcher, fd = pipefd[0]] {
            char c;
            while (::read(fd, &c, 1) == 1) {
            }
            launcher.stop();
        });
    }
    launcher.start(plan);
    if (!launcher.isFinished())
        loop.exec();
    if (notifier) {
        notifier.reset();
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        ::close(pipefd[0]);
        ::close(pipefd[1]);
        g_signalFd = -1;
    }
}

/// Pre-flight: `clusterppl-agent preflight --json` on every host, through the same launcher.
/// Returns the reasons to refuse the launch (empty: go).
QStringList preflight(const ClusterProfile &profile, const LaunchPlan &plan, const LauncherSettings &settings, QTextStream &err)
{
    LaunchPlan pre = plan;
    pre.ranks.clear();
    std::set<int> seen;
    std::map<int, int> slots;
    for (const auto &r : plan.ranks)
        ++slots[r.hostIndex];
    for (const auto &r : plan.ranks) {
        if (!seen.insert(r.hostIndex).second)
            continue;
        RankCommand c = r;
        c.rank = static_cast<int>(pre.ranks.size());
        c.env.clear();
        const auto &e = profile.evaluation;
        auto argOf = [&](const std::string &flag) {
            for (std::size_t i = 0; i + 1 < r.argv.size(); ++i)
                if (r.argv[i] == flag)
                    return r.argv[i + 1];
            return std::string();
        };
        c.argv = {r.argv.front(), "preflight", "--json", "--model", argOf("--model")};
        for (const char *flag : {"--tokens", "--text"})
            if (const auto v = argOf(flag); !v.empty())
                c.argv.insert(c.argv.end(), {"--data", v});
        if (const auto t = argOf("--tokenizer"); !t.empty() && t != "bytes")
            c.argv.insert(c.argv.end(), {"--tokenizer", t});
        c.argv.insert(c.argv.end(), {"--backend", e.backend, "--slots", std::to_string(slots[r.hostIndex])});
        c.argv.insert(c.argv.end(), {"--master-addr", plan.masterAddr, "--master-port", std::to_string(plan.masterPort)});
        pre.ranks.push_back(std::move(c));
    }
    LauncherSettings s = settings;
    s.stopAllOnFailure = false;
    s.telemetryTunnelPort = 0;
    auto launcher = makeLauncher(plan.launcher, s);
    std::map<int, QString> reports;
    QObject::connect(launcher.get(), &Launcher::rankOutput, [&](int rank, bool isStderr, const QString &line) {
        if (rank < 0)
            err << "clusterppl-cli: " << line << '\n';
        else if (!isStderr && line.startsWith(u'{'))
            reports[rank] = line;
    });
    QObject::connect(launcher.get(), &Launcher::hostFailed, [&](const QString &host, const QString &message) {
        err << "clusterppl-cli: host " << host << ": " << message << '\n';
    });
    runToEnd(*launcher, pre);
    QStringList refusals;
    QString firstVersion, firstHost;
    for (const auto &r : pre.ranks) {
        const QString host = QString::fromStdString(r.hostName);
        const auto it = reports.find(r.rank);
        if (it == reports.end()) {
            const auto &end = launcher->ends().at(r.rank);
            refusals << u"host %1: pre-flight did not run (%2)"_s.arg(
                host, end.reason.isEmpty() ? end.lastLines.join(u" / "_s) + u" exit %1"_s.arg(end.exitCode) : end.reason);
            continue;
        }
        const QJsonObject j = QJsonDocument::fromJson(it->second.toUtf8()).object();
        const QString version = j.value(u"agent_version"_s).toString();
        if (firstVersion.isEmpty()) {
            firstVersion = version;
            firstHost = host;
        } else if (version != firstVersion) {
            refusals << u"host %1 runs agent %2 but host %3 runs %4: use one agent version everywhere"_s.arg(host, version, firstHost, firstVersion);
        }
        for (const auto &p : j.value(u"problems"_s).toArray())
            refusals << u"host %1: %2"_s.arg(host, p.toString());
    }
    return refusals;
}

} // namespace

int runCommand(const QStringList &arguments, QTextStream &out, QTextStream &err)
{
    QCommandLineParser parser;
    const QCommandLineOption profileOpt(u"profile"_s, u"Profile JSON."_s, u"FILE"_s);
    const QCommandLineOption acceptOpt(u"accept-new-host-keys"_s, u"Record unknown SSH host keys."_s);
    const QCommandLineOption jsonOpt(u"json"_s, u"Write the result JSON here."_s, u"FILE"_s);
    const QCommandLineOption runIdOpt(u"run-id"_s, u"Run id (default: time + random)."_s, u"ID"_s);
    const QCommandLineOption addrOpt(u"master-addr"_s, u"Rendezvous address every host can reach (default: the first host's address)."_s, u"ADDR"_s);
    const QCommandLineOption portOpt(u"master-port"_s, u"Rendezvous port (default: free port locally, 29500 over SSH)."_s, u"PORT"_s);
    const QCommandLineOption agentOpt(u"agent"_s, u"Agent executable on every host (overrides the profile)."_s, u"PATH"_s);
    const QCommandLineOption sshConfigOpt(u"ssh-config"_s, u"ssh_config file (default ~/.ssh/config)."_s, u"FILE"_s);
    const QCommandLineOption knownHostsOpt(u"known-hosts"_s, u"known_hosts file (default ~/.ssh/known_hosts)."_s, u"FILE"_s);
    const QCommandLineOption timeoutOpt(u"connect-timeout"_s, u"SSH connect timeout in seconds (default 10)."_s, u"S"_s);
    const QCommandLineOption logDirOpt(u"log-dir"_s, u"Per-rank logs (default ~/.local/state/clusterppl/runs/RUN-ID)."_s, u"DIR"_s);
    const QCommandLineOption noPreflightOpt(u"no-preflight"_s, u"Skip the pre-flight checks."_s);
    parser.addOptions({profileOpt, acceptOpt, jsonOpt, runIdOpt, addrOpt, portOpt, agentOpt, sshConfigOpt, knownHostsOpt, timeoutOpt, logDirOpt, noPreflightOpt});
    if (!parser.parse(QStringList{u"clusterppl-cli"_s} + arguments) || !parser.isSet(profileOpt) || !parser.positionalArguments().isEmpty()) {
        err << "clusterppl-cli: run: " << (parser.errorText().isEmpty() ? u"needs --profile FILE and no other arguments"_s : parser.errorText())
            << '\n';
        return 2;
    }
    const QString profilePath = parser.value(profileOpt);
    ClusterProfile profile;
    try {
        profile = loadProfile(profilePath.toStdString());
    } catch (const IoError &e) {
        err << "clusterppl-cli: " << e.what() << '\n';
        return 3;
    } catch (const ConfigError &e) {
        err << "clusterppl-cli: " << e.what() << '\n';
        return 2;
    }
    LaunchOptions lo;
    lo.runId = parser.isSet(runIdOpt) ? parser.value(runIdOpt).toStdString()
                                      : QString(QDateTime::currentDateTimeUtc().toString(u"yyyyMMdd-HHmmss"_s) + u'-'
                                                + QString::number(QRandomGenerator::global()->bounded(0x10000), 16))
                                            .toStdString();
    lo.masterPort = parser.isSet(portOpt) ? parser.value(portOpt).toInt() : (profile.launcher == "local" ? freeLocalPort() : 29500);
    lo.masterAddr = parser.value(addrOpt).toStdString();
    lo.profileDir = QFileInfo(profilePath).absolutePath().toStdString();
    lo.agentOverride = parser.value(agentOpt).toStdString();
    if (lo.agentOverride.empty() && profile.launcher == "local") {
        // A bare agent name not on PATH: the agent next to this CLI (installed side by side, or
        // this build tree's agent/ directory).
        for (const auto &h : profile.hosts) {
            const QString name = QString::fromStdString(h.agent);
            if (name.contains(u'/') || !QStandardPaths::findExecutable(name).isEmpty())
                continue;
            const QString dir = QCoreApplication::applicationDirPath();
            for (const QString &candidate : QStringList{QString(dir + u'/' + name), QString(dir + u"/../agent/"_s + name)})
                if (QFileInfo(candidate).isExecutable()) {
                    lo.agentOverride = QFileInfo(candidate).canonicalFilePath().toStdString();
                    break;
                }
            break;
        }
    }
    for (char **e = environ; *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        if (eq != std::string::npos && isPassThroughVariable(kv.substr(0, eq)))
            lo.passEnv.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
#if CLUSTERPPL_HAVE_ZMQ
    // Every rank streams telemetry to a collector in this process: the live status line below,
    // and a check that the live exact merge equals rank 0's result.
    std::unique_ptr<telemetry::Collector> collector;
    int collectorPort = 0;
    {
        // Local ranks reach it on loopback; SSH ranks through a reverse tunnel of their host's
        // session (the agents send to 127.0.0.1 on their node, SSH encrypts the way back).
        telemetry::CollectorOptions co;
        co.state.run = lo.runId;
        co.state.stallAfterSeconds = std::max(3.0, profile.thresholds.stallSeconds);
        collector = std::make_unique<telemetry::Collector>(co);
        lo.telemetry = collector->endpoint();
        collectorPort = std::stoi(lo.telemetry.substr(lo.telemetry.rfind(':') + 1));
    }
#endif
    LaunchPlan plan;
    try {
        plan = buildLaunchPlan(profile, lo);
        if (plan.launcher == "ssh")
            for (const auto &r : plan.ranks)
                (void)remoteCommand(r); // refuse unsafe values before connecting anywhere
    } catch (const ConfigError &e) {
        err << "clusterppl-cli: " << profilePath << ": " << e.what() << '\n';
        return 2;
    }
    LauncherSettings settings;
    settings.newHostKeys = parser.isSet(acceptOpt) ? NewHostKeys::Accept : NewHostKeys::Refuse;
    settings.sshConfigFile = parser.value(sshConfigOpt).toStdString();
    settings.knownHostsFile = parser.value(knownHostsOpt).toStdString();
    if (parser.isSet(timeoutOpt))
        settings.connectTimeoutSeconds = std::max(1, parser.value(timeoutOpt).toInt());
    settings.passphrase = askPassphrase;
#if CLUSTERPPL_HAVE_ZMQ
    settings.telemetryTunnelPort = profile.launcher == "ssh" ? collectorPort : 0;
#endif

    err << "clusterppl-cli: run " << QString::fromStdString(lo.runId) << ": " << plan.ranks.size() << " ranks on " << profile.hosts.size()
        << " hosts (" << QString::fromStdString(plan.launcher) << "), groups " << QString::fromStdString(plan.groups) << ", master "
        << QString::fromStdString(plan.masterAddr) << ':' << plan.masterPort << '\n';
    err.flush();
    if (!parser.isSet(noPreflightOpt)) {
        const QStringList refusals = preflight(profile, plan, settings, err);
        if (!refusals.isEmpty()) {
            err << "clusterppl-cli: pre-flight refused the launch:\n";
            for (const auto &r : refusals)
                err << "  " << r << '\n';
            return 1;
        }
        err << "clusterppl-cli: pre-flight ok on " << profile.hosts.size() << " hosts\n";
        err.flush();
    }

    // Every line of every rank also goes to its own log file: nothing is lost when a terminal scrolls.
    QString logDir = parser.value(logDirOpt);
    if (logDir.isEmpty()) {
        const QString state = qEnvironmentVariable("XDG_STATE_HOME", QDir::homePath() + u"/.local/state"_s);
        logDir = state + u"/clusterppl/runs/"_s + QString::fromStdString(lo.runId);
    }
    std::map<int, std::unique_ptr<QFile>> logs;
    if (QDir().mkpath(logDir)) {
        for (const auto &r : plan.ranks) {
            auto f = std::make_unique<QFile>(u"%1/rank-%2.log"_s.arg(logDir).arg(r.rank));
            if (f->open(QIODevice::WriteOnly | QIODevice::Append | QIODevice::Text))
                logs[r.rank] = std::move(f);
        }
        err << "clusterppl-cli: per-rank logs in " << logDir << '\n';
    } else {
        err << "clusterppl-cli: cannot create the log directory " << logDir << "; logs go to the terminal only\n";
    }
    auto launcher = makeLauncher(plan.launcher, settings);
    QByteArray result;
    QObject::connect(launcher.get(), &Launcher::rankOutput, [&](int rank, bool isStderr, const QString &line) {
        if (const auto it = logs.find(rank); it != logs.end()) {
            it->second->write((isStderr ? u"E "_s : u"O "_s).toUtf8() + line.toUtf8() + '\n');
            it->second->flush();
        }
        if (rank < 0) {
            err << "clusterppl-cli: " << line << '\n';
        } else if (!isStderr) {
            if (line.startsWith(u"CLUSTERPPL_RESULT "_s))
                result = line.mid(18).toUtf8();
            else if (rank == 0)
                out << line << '\n';
        } else if (rank == 0) {
            err << line << '\n';
        } else {
            err << "[rank " << rank << "] " << line << '\n';
        }
        out.flush();
        err.flush();
    });
    QObject::connect(launcher.get(), &Launcher::hostFailed, [&](const QString &host, const QString &message) {
        err << "clusterppl-cli: host " << host << ": " << message << '\n';
        err.flush();
    });
#if CLUSTERPPL_HAVE_ZMQ
    auto printStatus = [&] {
        const auto snap = collector->snapshot();
        if (snap.global.tokens == 0)
            return;
        int stalled = 0, evaluating = 0;
        QString straggler;
        for (const auto &r : snap.ranks) {
            stalled += r.state == telemetry::RankState::Stalled;
            evaluating += r.state == telemetry::RankState::Evaluating || r.state == telemetry::RankState::Syncing;
        }
        if (!snap.rounds.empty() && snap.rounds.back().straggler >= 0)
            straggler = u", straggler of round %1: rank %2"_s.arg(snap.rounds.back().round).arg(snap.rounds.back().straggler);
        if (snap.ranks.size() <= 16) // per rank, while it is readable
            for (const auto &r : snap.ranks)
                err << u"[live]   rank %1 (%2, group %3): %4, %5/%6 windows, %7 tok/s, ppl %8, comm %9%"_s.arg(r.rank)
                           .arg(QString::fromStdString(r.host))
                           .arg(r.group)
                           .arg(QString::fromLatin1(telemetry::rankStateName(r.state).data(), static_cast<qsizetype>(telemetry::rankStateName(r.state).size())))
                           .arg(r.windowsDone)
                           .arg(r.windowsTotal)
                           .arg(r.tokensPerSecond, 0, 'f', 0)
                           .arg(r.stats.tokens > 0 ? cppl::computePerplexity(r.stats).ppl : 0.0, 0, 'f', 4)
                           .arg(100 * r.commShare, 0, 'f', 2)
                    << '\n';
        err << u"[live] ppl %1 +/- %2 over %3 tokens, %4 tok/s, %5/%6 ranks evaluating%7%8"_s.arg(snap.globalPpl.ppl, 0, 'f', 4)
                   .arg(snap.globalPpl.pplStderr, 0, 'f', 5)
                   .arg(snap.global.tokens)
                   .arg(snap.tokensPerSecond, 0, 'f', 0)
                   .arg(evaluating)
                   .arg(snap.worldSize)
                   .arg(stalled ? u", %1 STALLED"_s.arg(stalled) : QString(), straggler)
            << '\n';
        err.flush();
    };
    QTimer status;
    if (collector) {
        // Every 2 s: the global running perplexity merged exactly from every rank's live sums.
        QObject::connect(&status, &QTimer::timeout, printStatus);
        status.start(2000);
    }
#endif
    runToEnd(*launcher, plan);
    const int code = launcher->exitCode();
    if (code != 0) {
        err << "clusterppl-cli: " << launcher->summary() << '\n';
        return code;
    }
    if (result.isEmpty()) {
        err << "clusterppl-cli: rank 0 finished without reporting a result\n";
        return 1;
    }
#if CLUSTERPPL_HAVE_ZMQ
    if (collector) {
        status.stop();
        printStatus(); // the final per-rank totals, however short the run was
        // The result travelled twice: over rank 0's stdout and as telemetry; the live merge of the
        // ranks' final sums must equal it bit for bit.
        for (int i = 0; i < 50; ++i) {
            const auto snap = collector->snapshot();
            if (snap.resultMatches.has_value()) {
                err << "clusterppl-cli: telemetry: " << snap.ranks.size() << " ranks, " << collector->messagesReceived() << " messages, "
                    << snap.lostTotal << " lost; live exact merge " << (*snap.resultMatches ? "equals" : "DIFFERS FROM")
                    << " rank 0's result\n";
                break;
            }
            QThread::msleep(20);
        }
        collector->stop();
    }
#endif
    if (parser.isSet(jsonOpt)) {
        QFile f(parser.value(jsonOpt));
        const QJsonDocument doc = QJsonDocument::fromJson(result);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(doc.toJson(QJsonDocument::Indented)) < 0) {
            err << "clusterppl-cli: " << parser.value(jsonOpt) << ": cannot write the result: " << f.errorString() << '\n';
            return 3;
        }
    }
    return 0;
}

} // namespace cppl::core
