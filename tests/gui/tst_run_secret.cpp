// SPDX-License-Identifier: MIT
// A run's telemetry secret on a shared node (docs/telemetry.md, "Security"): the collector binds
// CURVE with fresh per-run keys and admits only the run's client key; the agents get that key as the
// first line of their stdin. Real sockets on 127.0.0.1, real agent processes, the real local launcher.
#include "cppl/cluster_profile.h"
#include "cppl/errors.h"
#include "cppl/host.h"
#include "cppl/telemetry.h"
#include "launch/launch_plan.h"
#include "launch/launcher.h"
#include "telemetry/collector.h"
#include "telemetry/publisher.h"
#include "telemetry/stdin_keys.h"
#include "telemetry_fixtures.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QDir>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <algorithm>
#include <functional>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using namespace cppl::core::telemetry;
using cppl::telemetry::Kind;
using cppl::test::header;
using cppl::test::RawPush;

using cppl::test::kAgent;
using cppl::test::kModel;
using cppl::test::kText;

namespace {

QByteArray readAll(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

/// PIDs whose environment has CLUSTERPPL_RUN_ID=@p id (the ranks of one run).
QList<qint64> processesOfRun(const QByteArray &id)
{
    QList<qint64> out;
    for (const QString &e : QDir(u"/proc"_s).entryList(QDir::Dirs)) {
        bool ok = false;
        const qint64 pid = e.toLongLong(&ok);
        if (ok && readAll(u"/proc/%1/environ"_s.arg(pid)).split('\0').contains("CLUSTERPPL_RUN_ID=" + id))
            out << pid;
    }
    return out;
}

/// True when neither /proc/PID/cmdline nor /proc/PID/environ holds any of the run's keys.
bool keysHidden(qint64 pid, const cppl::telemetry::Credentials &agent, QString *where)
{
    for (const char *file : {"cmdline", "environ"}) {
        const QByteArray text = readAll(u"/proc/%1/%2"_s.arg(pid).arg(QLatin1StringView(file)));
        for (const std::string *key : {&agent.clientSecret, &agent.clientPublic.front(), &agent.serverPublic})
            if (text.contains(QByteArray::fromStdString(*key))) {
                *where = u"/proc/%1/%2"_s.arg(pid).arg(QLatin1StringView(file));
                return false;
            }
    }
    return true;
}

/// Runs @p plan through the local launcher until every rank ended (or 120 s).
int runLocal(const cppl::core::LaunchPlan &plan, const std::function<void(int rank)> &onStarted = {})
{
    auto launcher = cppl::core::makeLocalLauncher({});
    QEventLoop loop;
    QObject::connect(launcher.get(), &cppl::core::Launcher::finished, &loop, &QEventLoop::quit);
    if (onStarted)
        QObject::connect(launcher.get(), &cppl::core::Launcher::rankStarted, &loop, [&](int rank, const QString &) { onStarted(rank); });
    QObject::connect(launcher.get(), &cppl::core::Launcher::rankOutput, &loop, [](int rank, bool isStderr, const QString &line) {
        if (isStderr) // what a failing rank says; stdout is the result line
            qInfo("rank %d: %s", rank, qPrintable(line));
    });
    QTimer::singleShot(120000, &loop, &QEventLoop::quit);
    launcher->start(plan);
    if (!launcher->isFinished())
        loop.exec();
    return launcher->isFinished() ? launcher->exitCode() : -999;
}

} // namespace

class TestRunSecret : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QString path(const QString &name) const { return m_dir.filePath(name); }

    /// Agent eval flags for a small run of the byte model (one thread: quick on a busy machine).
    QStringList evalArgs(int windows) const
    {
        return {u"eval"_s,         u"--model"_s,     kModel,   u"--text"_s,    kText,   u"--tokenizer"_s, u"bytes"_s, u"--protocol"_s,
                u"llama.cpp"_s,    u"--context"_s,   u"64"_s,  u"--batch"_s,   u"2"_s,  u"--max-windows"_s, QString::number(windows),
                u"--threads"_s,    u"1"_s,           u"--blas-threads"_s, u"1"_s, u"--quiet"_s};
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void keyLineRoundTripAndGarbage()
    {
        const auto run = cppl::telemetry::generateCredentials();
        QVERIFY(run.collector.hasServer() && run.agent.hasClient());
        QVERIFY(run.agent.serverSecret.empty()); // the agents never hold the server's secret
        QVERIFY(cppl::telemetry::generateCredentials().agent.clientSecret != run.agent.clientSecret); // fresh per run
        const std::string line = cppl::telemetry::formatKeyLine(run.agent);
        QVERIFY(line.ends_with('\n'));
        QCOMPARE(std::count(line.begin(), line.end(), '\n'), 1);
        const auto back = cppl::telemetry::parseKeyLine(line);
        QCOMPARE(back.serverPublic, run.agent.serverPublic);
        QCOMPARE(back.clientPublic, run.agent.clientPublic);
        QCOMPARE(back.clientSecret, run.agent.clientSecret);
        // Garbled lines are refused with what is wrong, and the message never echoes the secret.
        const std::string secret = run.agent.clientSecret;
        const std::string body = line.substr(0, line.size() - 1);
        const std::vector<std::pair<std::string, std::string>> bad{
            {"", "empty"},
            {"hello " + secret, "does not start with"},
            {std::string(cppl::telemetry::kKeyLineTag) + " " + secret, "2 words instead of 4"},
            {body + " extra", "more than 4 words"},
            {body.substr(0, body.size() - 1) + "~", "client secret key is not 40 Z85"},
            {std::string(cppl::telemetry::kKeyLineTag) + "  " + run.agent.serverPublic, "exactly one space"},
        };
        for (const auto &[text, expected] : bad) {
            try {
                (void)cppl::telemetry::parseKeyLine(text);
                QFAIL(qPrintable(u"accepted a garbled key line, expected: "_s + QString::fromStdString(expected)));
            } catch (const cppl::ConfigError &e) {
                const std::string what = e.what();
                CPPL_VERIFY2(what.find(expected) != std::string::npos, e.what());
                CPPL_VERIFY2(what.find(secret) == std::string::npos && what.find(secret.substr(0, 20)) == std::string::npos, e.what());
            }
        }
    }

    void readKeyLineTakesOnlyTheFirstLine()
    {
        const auto run = cppl::telemetry::generateCredentials();
        int fds[2];
        QVERIFY(::pipe(fds) == 0);
        const std::string sent = cppl::telemetry::formatKeyLine(run.agent) + "after";
        QCOMPARE(::write(fds[1], sent.data(), sent.size()), static_cast<ssize_t>(sent.size()));
        const auto got = cppl::agent::telemetry::readKeyLine(fds[0], std::chrono::milliseconds(2000));
        QCOMPARE(got.clientSecret, run.agent.clientSecret);
        char rest[16] = {};
        QCOMPARE(::read(fds[0], rest, sizeof rest), 5); // what follows is left for the stdin-EOF watcher
        QCOMPARE(QByteArray(rest, 5), QByteArray("after"));

        // Nothing written: a timeout naming the limit, within it.
        QElapsedTimer t;
        t.start();
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)cppl::agent::telemetry::readKeyLine(fds[0], std::chrono::milliseconds(300)));
        // Not before the limit; the upper bound only catches a wait that ignores it (a loaded machine
        // can stall the thread for seconds).
        CPPL_VERIFY2(t.elapsed() >= 290 && t.elapsed() < 60000, QByteArray::number(t.elapsed()).constData());
        try {
            (void)cppl::agent::telemetry::readKeyLine(fds[0], std::chrono::milliseconds(100));
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(std::string(e.what()).find("no key line on stdin within 0.1 s") != std::string::npos, e.what());
        }
        // Half a line, then EOF.
        QVERIFY(::write(fds[1], "clusterppl-telemetry", 20) == 20);
        ::close(fds[1]);
        try {
            (void)cppl::agent::telemetry::readKeyLine(fds[0], std::chrono::milliseconds(2000));
            QFAIL("a truncated key line was accepted");
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(std::string(e.what()).find("stdin ended in the middle of the key line") != std::string::npos, e.what());
        }
        ::close(fds[0]);
    }

    // (a) A publisher with the run's keys gets through, and nothing is counted as rejected.
    void runKeysGetThrough()
    {
        const auto run = cppl::telemetry::generateCredentials();
        CollectorOptions o;
        o.curve = run.collector;
        Collector collector(o);
        auto pub = cppl::agent::telemetry::Publisher::open(collector.endpoint(), {"run-a", 0, "localhost", 0, 0, 1}, run.agent);
        pub->log(cppl::telemetry::LogLevel::Info, "hello over CURVE");
        pub->close(0);
        QTRY_VERIFY_WITH_TIMEOUT(collector.snapshot().ranks.size() == 1 && collector.snapshot().ranks[0].state == RankState::Done, 10000);
        QVERIFY(collector.messagesReceived() >= 3); // hello, log, bye
        QCOMPARE(collector.authRejected(), 0);
        QCOMPARE(collector.snapshot().authRejected, 0);
    }

    // (b) Another user's publisher, with a key pair of its own and the run's public server key
    // (which is no secret): ZAP refuses it, nothing reaches the decoder, the refusals are counted.
    void otherClientKeyIsRejectedAndCounted()
    {
        const auto run = cppl::telemetry::generateCredentials();
        CollectorOptions o;
        o.curve = run.collector;
        Collector collector(o);
        auto intruder = run.agent;
        const auto own = cppl::telemetry::generateCurveKeyPair();
        intruder.clientPublic = {own.publicKey};
        intruder.clientSecret = own.secretKey;
        {
            cppl::agent::telemetry::PublisherOptions po;
            po.closeTimeout = std::chrono::milliseconds(200);
            auto pub = cppl::agent::telemetry::Publisher::open(collector.endpoint(), {"run-a", 0, "evil", 0, 0, 1}, intruder, po);
            for (int i = 0; i < 20; ++i)
                pub->log(cppl::telemetry::LogLevel::Error, "injected");
            QTRY_VERIFY_WITH_TIMEOUT(collector.authRejected() >= 1, 10000);
            QTest::qWait(300);
        }
        QCOMPARE(collector.messagesReceived(), 0);
        const auto snap = collector.snapshot();
        QVERIFY(snap.ranks.empty() || !snap.ranks[0].heard);
        QVERIFY(snap.authRejected >= 1);
        qInfo("foreign client key: %lld handshakes rejected", static_cast<long long>(snap.authRejected));
    }

    // (c) A plaintext PUSH (what any local user can open to 127.0.0.1) is rejected and counted.
    void plaintextIsRejectedAndCounted()
    {
        const auto run = cppl::telemetry::generateCredentials();
        CollectorOptions o;
        o.curve = run.collector;
        Collector collector(o);
        {
            RawPush plain(collector.endpoint());
            for (int i = 0; i < 5; ++i)
                plain.send(cppl::telemetry::encode(header("run-a", 0, 1, i, Kind::Heartbeat)));
            QTRY_VERIFY_WITH_TIMEOUT(collector.authRejected() >= 1, 10000);
            QTest::qWait(300);
        }
        QCOMPARE(collector.messagesReceived(), 0);
        QVERIFY(collector.snapshot().authRejected >= 1);
        qInfo("plaintext PUSH: %lld handshakes rejected", static_cast<long long>(collector.authRejected()));
        // The run's own key still gets through the same collector afterwards.
        RawPush good(collector.endpoint(), run.agent);
        good.sendAll(cppl::telemetry::encode(header("run-a", 0, 1, 0, Kind::Heartbeat)));
        QTRY_COMPARE_WITH_TIMEOUT(collector.messagesReceived(), 1, 10000);
    }

    // (d) Two real agents started by the local launcher from a profile: the plan passes only
    // --telemetry-keys-stdin, the launcher writes the key line, the agents stream into a CURVE
    // collector, the live merge equals rank 0's result, and no key shows in /proc.
    void agentsStreamWithKeysFromStdin()
    {
        const auto run = cppl::telemetry::generateCredentials();
        CollectorOptions o;
        o.curve = run.collector;
        Collector collector(o);
        const QString json = uR"({"format": "clusterppl-profile", "version": 1, "name": "secret", "launcher": "local",
  "hosts": [{"name": "localhost", "slots": 2, "agent": "%1", "env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}}],
  "groups": "by-host",
  "evaluation": {"model": "%2", "text": "%3", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 64, "batch": 2,
                 "max_windows": 24, "dtype": "float32", "device": "cpu", "backend": "gloo", "topology": "hierarchical"},
  "thresholds": {"sync_every_tokens": 200, "collective_timeout_seconds": 60}})"_s.arg(kAgent, kModel, kText);
        const auto parsed = cppl::parseProfile(json.toStdString());
        CPPL_VERIFY2(parsed.ok(), parsed.errors.empty() ? "" : parsed.errors.front().c_str());
        cppl::core::LaunchOptions lo;
        lo.runId = "secret-" + std::to_string(::getpid());
        lo.masterPort = cppl::freeLoopbackPort();
        lo.telemetry = collector.endpoint();
        lo.telemetryCredentials = run.agent;
        const auto plan = cppl::core::buildLaunchPlan(parsed.profile, lo);
        QCOMPARE(plan.keyLine, cppl::telemetry::formatKeyLine(run.agent));
        for (const auto &r : plan.ranks) {
            QVERIFY(cppl::core::readsKeyLine(r));
            for (const auto &a : r.argv)
                QVERIFY(a.find(run.agent.clientSecret) == std::string::npos);
            for (const auto &[k, v] : r.env)
                QVERIFY(v.find(run.agent.clientSecret) == std::string::npos);
        }
        int checked = 0;
        QString leak;
        const int exit = runLocal(plan, [&](int) {
            for (const qint64 pid : processesOfRun(QByteArray::fromStdString(lo.runId))) {
                ++checked;
                if (!keysHidden(pid, run.agent, &leak))
                    break;
            }
        });
        CPPL_VERIFY2(leak.isEmpty(), qPrintable(u"a key is visible in "_s + leak));
        QVERIFY(checked >= 1);
        qInfo("%d agent processes checked in /proc: no key in cmdline or environ", checked);
        QCOMPARE(exit, 0);
        QTRY_VERIFY_WITH_TIMEOUT(collector.snapshot().resultMatches.has_value(), 10000);
        const auto snap = collector.snapshot();
        QCOMPARE(snap.ranks.size(), std::size_t{2});
        QCOMPARE(snap.stateCounts[static_cast<std::size_t>(RankState::Done)], 2);
        QVERIFY(*snap.resultMatches);
        QCOMPARE(snap.authRejected, 0);
        qInfo("2 agents over CURVE with stdin keys: %lld messages, %lld tokens", static_cast<long long>(collector.messagesReceived()),
              static_cast<long long>(snap.global.tokens));
    }

    // The agent's side of the key line: missing, garbled, or without --telemetry is exit code 2 with
    // a message; after the line, --exit-on-stdin-eof still ends the rank when stdin closes.
    void agentKeyLineErrorsAndStdinEof()
    {
        const auto run = cppl::telemetry::generateCredentials();
        CollectorOptions o;
        o.curve = run.collector;
        Collector collector(o);
        const QStringList withKeys = evalArgs(4) + QStringList{u"--telemetry"_s, QString::fromStdString(collector.endpoint()),
                                                                u"--telemetry-keys-stdin"_s, u"--exit-on-stdin-eof"_s};
        auto start = [&](const QStringList &args, const QByteArray &input, bool closeStdin) {
            auto p = std::make_unique<QProcess>();
            p->start(kAgent, args);
            if (!p->waitForStarted())
                return p;
            p->write(input);
            p->waitForBytesWritten(5000);
            if (closeStdin)
                p->closeWriteChannel();
            return p;
        };
        auto finish = [](QProcess &p) {
            if (!p.waitForFinished(60000)) {
                p.kill();
                p.waitForFinished();
                return std::pair{-1, QString()};
            }
            return std::pair{p.exitCode(), QString::fromUtf8(p.readAllStandardError())};
        };
        {
            auto p = start(withKeys, {}, true);
            const auto [code, err] = finish(*p);
            QCOMPARE(code, 2);
            CPPL_VERIFY2(err.contains(u"stdin ended before the key line"_s), qPrintable(err));
        }
        {
            auto p = start(withKeys, "not a key line\n", false);
            const auto [code, err] = finish(*p);
            QCOMPARE(code, 2);
            CPPL_VERIFY2(err.contains(u"--telemetry-keys-stdin: telemetry key line: it does not start with"_s), qPrintable(err));
        }
        {
            auto p = start(evalArgs(4) + QStringList{u"--telemetry-keys-stdin"_s}, QByteArray::fromStdString(cppl::telemetry::formatKeyLine(run.agent)), false);
            const auto [code, err] = finish(*p);
            QCOMPARE(code, 2);
            CPPL_VERIFY2(err.contains(u"--telemetry-keys-stdin needs --telemetry"_s), qPrintable(err));
        }
        {
            // A credentials file on stdin is read to EOF, which --exit-on-stdin-eof takes for "launcher gone".
            auto p = start(evalArgs(4) + QStringList{u"--telemetry"_s, QString::fromStdString(collector.endpoint()), u"--telemetry-keys"_s,
                                                     u"-"_s, u"--exit-on-stdin-eof"_s},
                           QByteArray::fromStdString(cppl::telemetry::formatCredentials(run.agent)), true);
            const auto [code, err] = finish(*p);
            QCOMPARE(code, 2);
            CPPL_VERIFY2(err.contains(u"--telemetry-keys - reads stdin to its end"_s) && err.contains(u"--telemetry-keys-stdin"_s), qPrintable(err));
        }
        QCOMPARE(collector.messagesReceived(), 0);
        {
            // Many windows, so the rank is still evaluating when its launcher "goes away".
            QStringList longRun = withKeys;
            longRun[longRun.indexOf(u"--max-windows"_s) + 1] = u"100000"_s;
            auto p = start(longRun, QByteArray::fromStdString(cppl::telemetry::formatKeyLine(run.agent)), false);
            QTRY_VERIFY_WITH_TIMEOUT(!collector.snapshot().ranks.empty() && collector.snapshot().ranks[0].heard, 30000);
            QVERIFY(p->state() == QProcess::Running);
            p->closeWriteChannel();
            const auto [code, err] = finish(*p);
            QCOMPARE(code, 1);
            CPPL_VERIFY2(err.contains(u"the launcher went away (stdin closed)"_s), qPrintable(err));
            QCOMPARE(collector.authRejected(), 0);
        }
    }

    // (e) A key file other users can read is refused, saying so and what to do.
    void keyFileMustBePrivate()
    {
        const auto run = cppl::telemetry::generateCredentials();
        const QString file = path(u"run.keys"_s);
        cppl::telemetry::writeCredentialsFile(file.toStdString(), run.agent);
        QCOMPARE(QFileInfo(file).permissions() & (QFileDevice::ReadGroup | QFileDevice::ReadOther), QFileDevice::Permissions());
        QVERIFY(::chmod(file.toLocal8Bit().constData(), 0644) == 0);
        const auto r = cppl::test::runProcess(kAgent, evalArgs(2) + QStringList{u"--telemetry"_s, u"tcp://127.0.0.1:9"_s, u"--telemetry-keys"_s, file}, 60000);
        QCOMPARE(r.exitCode, 2);
        CPPL_VERIFY2(r.err.contains(u"(mode 0644); they must be mode 0600 or 0400"_s) && r.err.contains(u"chmod 600"_s), qPrintable(r.describe()));
        QVERIFY(::chmod(file.toLocal8Bit().constData(), 0400) == 0);
        QCOMPARE(cppl::telemetry::readCredentialsFile(file.toStdString()).clientSecret, run.agent.clientSecret);
        // Owned by someone else (only root can make such a file; CI runs as root).
        if (::geteuid() == 0) {
            QVERIFY(::chown(file.toLocal8Bit().constData(), 65534, 65534) == 0);
            QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)cppl::telemetry::readCredentialsFile(file.toStdString()));
            try {
                (void)cppl::telemetry::readCredentialsFile(file.toStdString());
            } catch (const cppl::ConfigError &e) {
                CPPL_VERIFY2(std::string(e.what()).find("belong to uid 65534, not to this user") != std::string::npos, e.what());
            }
        }
    }

    // (f) The local launcher delivers the line on stdin, keeps stdin open afterwards, and the key
    // is in neither the child's command line nor its environment.
    void localLauncherWritesTheLineToStdin()
    {
        const auto run = cppl::telemetry::generateCredentials();
        cppl::core::LaunchPlan plan;
        plan.launcher = "local";
        plan.keyLine = cppl::telemetry::formatKeyLine(run.agent);
        const QString got = path(u"got.txt"_s), eof = path(u"eof.txt"_s);
        cppl::core::RankCommand c;
        c.env = {{"CLUSTERPPL_RUN_ID", "stdin-" + std::to_string(::getpid())}};
        // Reads the line, then waits for stdin's EOF (which only comes when the launcher stops it).
        c.argv = {"/bin/sh", "-c", "read -r l; printf '%s\\n' \"$l\" > \"$1\"; while read -r x; do :; done; echo eof > \"$2\"", "sh",
                  got.toStdString(), eof.toStdString(), std::string(cppl::core::kKeysStdinFlag)};
        plan.ranks.push_back(c);
        auto launcher = cppl::core::makeLocalLauncher({});
        QEventLoop loop;
        connect(launcher.get(), &cppl::core::Launcher::finished, &loop, &QEventLoop::quit);
        launcher->start(plan);
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(got) && readAll(got).endsWith('\n'), 10000);
        QCOMPARE(readAll(got).toStdString(), plan.keyLine);
        const auto pids = processesOfRun(QByteArray::fromStdString(c.env[0].second));
        QCOMPARE(pids.size(), 1);
        QString leak;
        CPPL_VERIFY2(keysHidden(pids[0], run.agent, &leak), qPrintable(leak));
        QTest::qWait(300);
        CPPL_VERIFY2(!QFile::exists(eof), "stdin was closed after the key line");
        QVERIFY(!launcher->isFinished());
        launcher->stop();
        QTimer::singleShot(10000, &loop, &QEventLoop::quit);
        if (!launcher->isFinished())
            loop.exec();
        QVERIFY(launcher->isFinished());

        // A rank without the flag gets nothing written: its stdin's first read is EOF... once the
        // launcher is gone, so here: nothing arrives within a moment.
        cppl::core::LaunchPlan quiet = plan;
        quiet.ranks[0].argv.pop_back();
        QFile::remove(got);
        auto second = cppl::core::makeLocalLauncher({});
        QEventLoop loop2;
        connect(second.get(), &cppl::core::Launcher::finished, &loop2, &QEventLoop::quit);
        second->start(quiet);
        QTest::qWait(500);
        QVERIFY(!QFile::exists(got));
        second->stop();
        QTimer::singleShot(10000, &loop2, &QEventLoop::quit);
        if (!second->isFinished())
            loop2.exec();
    }
};

QTEST_GUILESS_MAIN(TestRunSecret)
#include "tst_run_secret.moc"
