// SPDX-License-Identifier: MIT
// Unknown SSH host keys (refuse / accept once / accept always) and "Check hosts" (the run engine's
// pre-flight-only mode, and `clusterppl-cli check`), against a real sshd on 127.0.0.1
// (tests/common/test_sshd.h) and this build's agents on real local hosts.
#include "launch/launch_plan.h"
#include "launch/launcher.h"
#include "run/preflight.h"
#include "run/run_engine.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_skip.h"
#include "test_ssh_echo.h"
#include "test_sshd.h"
#include "test_verify.h"

#include "cppl/cluster_profile.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <atomic>

using namespace Qt::StringLiterals;
using namespace cppl::core::run;
using cppl::core::HostKeyAnswer;
using cppl::test::ProcessResult;
using cppl::test::readFile;
using cppl::test::runEchoOnNode1;
using cppl::test::runProcess;
using cppl::test::SshEcho;
using cppl::test::writeFile;

using cppl::test::kCli;
using cppl::test::kAgent;
using cppl::test::kModel;
using cppl::test::kText;

namespace {

/// Processes of this user whose command line runs the agent's `eval` (a launched rank).
/// The parent of @p pid, 0 once it has ended. /proc/PID/stat is "pid (comm) state ppid ...", and comm
/// may hold spaces, so the fields are read after the last ')'.
qint64 parentOf(qint64 pid)
{
    const QByteArray stat = readFile(u"/proc/%1/stat"_s.arg(pid));
    const qsizetype close = stat.lastIndexOf(')');
    if (close < 0)
        return 0;
    const QList<QByteArray> fields = stat.mid(close + 2).split(' ');
    return fields.size() > 1 ? fields[1].toLongLong() : 0;
}

/// Whether @p pid was started, directly or not, by this test: its CLI runs, its engine and the
/// fixture's sshd (whose sessions start the SSH agents) are all children of this process.
bool startedByThisTest(qint64 pid)
{
    const qint64 self = QCoreApplication::applicationPid();
    for (int depth = 0; pid > 1 && depth < 64; ++depth) {
        pid = parentOf(pid);
        if (pid == self)
            return true;
    }
    return false;
}

/// Evaluating agents this test started. Other tests run beside this one (ctest -j) and start agents
/// of their own, so a count of every agent on the machine would not say what this test launched.
int evalAgents()
{
    int n = 0;
    for (const QString &e : QDir(u"/proc"_s).entryList(QDir::Dirs)) {
        bool ok = false;
        const qint64 pid = e.toLongLong(&ok);
        if (!ok)
            continue;
        const QList<QByteArray> argv = readFile(u"/proc/%1/cmdline"_s.arg(pid)).split('\0');
        n += argv.size() > 1 && argv[0] == kAgent.toUtf8() && argv[1] == "eval" && startedByThisTest(pid);
    }
    return n;
}

/// A profile of the given hosts (name, ssh alias or empty for local), 2 slots each.
QString profileJson(const QString &launcher, const QStringList &hosts, const QString &model = kModel, const QString &agent = kAgent)
{
    QString list;
    for (const QString &h : hosts) {
        const QString ssh = launcher == u"ssh"_s ? u", \"ssh\": {\"alias\": \"%1\"}"_s.arg(h) : QString();
        list += u"%1{\"name\": \"%2\", \"address\": \"127.0.0.1\", \"slots\": 2, \"agent\": \"%3\"%4}"_s.arg(list.isEmpty() ? QString() : u","_s, h,
                                                                                                           agent, ssh);
    }
    return uR"({"format": "clusterppl-profile", "version": 1, "name": "check", "launcher": "%1", "hosts": [%2], "groups": "by-host",
  "evaluation": {"model": "%3", "text": "%4", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2,
                 "max_windows": 8, "dtype": "float32", "device": "cpu", "backend": "gloo", "topology": "hierarchical"}})"_s
        .arg(launcher, list, model, kText);
}

cppl::ClusterProfile parse(const QString &json)
{
    auto r = cppl::parseProfile(json.toStdString());
    if (!r.ok())
        qFatal("test profile invalid: %s", r.errors.front().c_str());
    return r.profile;
}

} // namespace

class TestCheckHosts : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    cppl::test::TestSshd m_sshd;
    QString m_skip;

    QString path(const QString &name) const { return m_dir.filePath(name); }

    cppl::core::LauncherSettings sshSettings() const
    {
        cppl::core::LauncherSettings s;
        s.sshConfigFile = m_sshd.sshConfigFile().toStdString();
        s.knownHostsFile = m_sshd.knownHosts().toStdString();
        s.connectTimeoutSeconds = 5;
        return s;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_STATE_HOME", path(u"state"_s).toUtf8());
        qputenv("CLUSTERPPL_STORE", path(u"store.sqlite"_s).toUtf8());
        m_skip = m_sshd.start(m_dir.path());
    }

    void hostKeyAnswers()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        QFile::remove(m_sshd.knownHosts());
        cppl::core::LauncherSettings s = sshSettings();
        s.newHostKeys = cppl::core::NewHostKeys::Ask;
        int asked = 0;
        HostKeyAnswer answer = HostKeyAnswer::Refuse;
        QString seenHost, seenFingerprint;
        s.askNewHostKey = [&](const std::string &host, const std::string &fp) {
            ++asked;
            seenHost = QString::fromStdString(host);
            seenFingerprint = QString::fromStdString(fp);
            return answer;
        };

        // Refuse: nothing runs, the message names the host and the key, nothing is recorded.
        SshEcho o = runEchoOnNode1(s);
        QCOMPARE(asked, 1);
        QVERIFY(seenHost.startsWith(u"node1"_s) && seenFingerprint.contains(u"SHA256:"_s));
        QVERIFY(o.out.isEmpty());
        CPPL_VERIFY2(o.hostErrors.size() == 1 && o.hostErrors[0].contains(u"host node1"_s) && o.hostErrors[0].contains(u"refused"_s)
                     && o.hostErrors[0].contains(seenFingerprint),
                 qPrintable(o.hostErrors.join(u'\n')));
        QVERIFY(o.exitCode != 0);
        QVERIFY(!QFile::exists(m_sshd.knownHosts()));

        // Accept once: it runs, and the key is written nowhere (so the next connection asks again).
        answer = HostKeyAnswer::AcceptOnce;
        o = runEchoOnNode1(s);
        QCOMPARE(o.out, QStringList{u"ok"_s});
        QCOMPARE(o.exitCode, 0);
        CPPL_VERIFY2(o.notices.join(u'\n').contains(u"not recorded"_s), qPrintable(o.notices.join(u'\n')));
        CPPL_VERIFY2(!m_sshd.knownHostsContent().contains("127.0.0.1"), m_sshd.knownHostsContent().constData());
        o = runEchoOnNode1(s);
        QCOMPARE(o.exitCode, 0);
        QCOMPARE(asked, 3);
        QVERIFY(!m_sshd.knownHostsContent().contains("127.0.0.1"));

        // Always: recorded in the given known_hosts file; afterwards nobody is asked.
        answer = HostKeyAnswer::AcceptAlways;
        o = runEchoOnNode1(s);
        QCOMPARE(o.exitCode, 0);
        QCOMPARE(asked, 4);
        CPPL_VERIFY2(m_sshd.knownHostsContent().contains(QByteArray("[127.0.0.1]:" + QByteArray::number(m_sshd.port()))), m_sshd.knownHostsContent().constData());
        answer = HostKeyAnswer::Refuse;
        o = runEchoOnNode1(s);
        QCOMPARE(o.exitCode, 0);
        QCOMPARE(asked, 4);
        QFile::remove(m_sshd.knownHosts());
    }

    void checkOnlyLocal()
    {
        // A local profile: the pre-flight runs, its report comes back per host, no rank starts.
        RunEngine e;
        QSignalSpy hosts(&e, &RunEngine::preflightHost);
        QSignalSpy started(&e, &RunEngine::rankStarted);
        QSignalSpy finished(&e, &RunEngine::finished);
        QList<RunPhase> phases;
        connect(&e, &RunEngine::phaseChanged, this, [&](RunPhase p) { phases << p; });
        RunRequest req;
        req.profile = parse(profileJson(u"local"_s, {u"localhost"_s}));
        req.checkOnly = true;
        const int before = evalAgents();
        QVERIFY(e.start(req));
        QVERIFY(finished.wait(60000));
        QCOMPARE(e.outcome().phase, RunPhase::Finished);
        QCOMPARE(e.outcome().exitCode, int(cppl::core::kCliOk));
        QCOMPARE(phases, (QList<RunPhase>{RunPhase::Preflight, RunPhase::Finished}));
        QCOMPARE(started.size(), 0);
        QCOMPARE(evalAgents(), before);
        QVERIFY(e.outcome().logDir.isEmpty());
        QCOMPARE(hosts.size(), 1);
        const auto h = hosts.front().front().value<HostPreflight>();
        QVERIFY(h.ran && h.problems.isEmpty());
        QCOMPARE(h.host, u"localhost"_s);
        QVERIFY(!h.report.value(u"libtorch_version"_s).toString().isEmpty());
        QCOMPARE(h.report.value(u"paths"_s).toArray().size(), 2); // the model and the text
    }

    /// A host's one-line summary names a backend its agent lacks: NCCL as ever, and Gloo when its
    /// report says so (an agent built from a pip torch); a report from before the field says nothing.
    void summaryNamesMissingBackends()
    {
        QJsonObject report{{u"agent_version"_s, u"0.1.0"_s}, {u"libtorch_version"_s, u"2.11.0"_s}, {u"nccl"_s, QJsonObject{{u"available"_s, true}}}};
        QVERIFY(!preflightSummary(report, {}).contains(u"Gloo"_s));
        report.insert(u"gloo"_s, QJsonObject{{u"available"_s, true}, {u"reason"_s, QString()}});
        QVERIFY(!preflightSummary(report, {}).contains(u"Gloo"_s));
        QVERIFY(!preflightDetails(report, {}).contains(u"Gloo"_s));
        report.insert(u"gloo"_s, QJsonObject{{u"available"_s, false}, {u"reason"_s, u"built without Gloo's headers"_s}});
        const QString s = preflightSummary(report, {});
        QVERIFY2(s.startsWith(u"✓  agent 0.1.0  LibTorch 2.11.0  0 GPUs  NCCL  no Gloo  "_s), qPrintable(s));
        // The host's details (the tooltip and the list under the host form) give the reason.
        const QString d = preflightDetails(report, {});
        QVERIFY2(d.contains(u"NCCL: available\nGloo: not available (built without Gloo's headers)\n"_s), qPrintable(d));
    }

    void checkOnlyLocalRefused()
    {
        RunEngine e;
        QSignalSpy finished(&e, &RunEngine::finished);
        RunRequest req;
        req.profile = parse(profileJson(u"local"_s, {u"localhost"_s}, path(u"no-such-model"_s)));
        req.checkOnly = true;
        QVERIFY(e.start(req));
        QVERIFY(finished.wait(60000));
        QCOMPARE(e.outcome().phase, RunPhase::Failed);
        QCOMPARE(e.outcome().exitCode, int(cppl::core::kCliPreflightRefused));
        CPPL_VERIFY2(e.outcome().firstCause.contains(u"host localhost"_s) && e.outcome().firstCause.contains(u"no-such-model: missing"_s),
                 qPrintable(e.outcome().firstCause));
    }

    /// What each failure to start says to do, and that other failures get no advice.
    void agentStartHints_data()
    {
        QTest::addColumn<QString>("said");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("hint"); ///< its start; empty: none
        const QString none;
        const QString noAgent = u"there is no agent at that path on this host"_s;
        QTest::newRow("QProcess") << u"cannot start /x/clusterppl-agent: execve: No such file or directory"_s << -1 << noAgent;
        QTest::newRow("bash, a path") << u"bash: line 1: /x/clusterppl-agent: No such file or directory"_s << 127 << noAgent;
        QTest::newRow("dash, exit in the text") << u"exit code 127: sh: 1: exec: /x/clusterppl-agent: not found"_s << -1 << noAgent;
        QTest::newRow("bash, a bare name") << u"bash: clusterppl-agent: command not found"_s << 127 << noAgent;
        QTest::newRow("slurmstepd") << u"slurmstepd: error: execve(): clusterppl-agent: No such file or directory"_s << 2 << noAgent;
        QTest::newRow("loader") << u"/p/lib/clusterppl/clusterppl-agent-torch: error while loading shared libraries: libc10_cuda.so: "
                                   "cannot open shared object file: No such file or directory"_s
                                << 127 << u"the agent there cannot load libc10_cuda.so: "_s;
        QTest::newRow("not executable") << u"bash: line 1: /x/clusterppl-agent: Permission denied"_s << 126
                                        << u"the host's \"agent\" is not a file this user may run"_s;
        QTest::newRow("QProcess, not executable") << u"cannot start /x/a: execve: Permission denied"_s << -1
                                                  << u"the host's \"agent\" is not a file this user may run"_s;
        // The agent's own refusals and other failures: their own words are the advice.
        QTest::newRow("a missing model") << u"clusterppl-agent: /m/config.json: No such file or directory"_s << 3 << none;
        QTest::newRow("permission of a data file") << u"clusterppl-agent: /d/x.u32: Permission denied"_s << 4 << none;
        QTest::newRow("connection") << u"cannot connect to node3 (port 22): Connection refused"_s << -1 << none;
        QTest::newRow("a signal") << u"killed by signal 9"_s << 137 << none;
    }
    void agentStartHints()
    {
        QFETCH(QString, said);
        QFETCH(int, exitCode);
        QFETCH(QString, hint);
        const QString got = cppl::core::agentStartHint(said, exitCode);
        CPPL_VERIFY2(hint.isEmpty() ? got.isEmpty() : got.startsWith(hint), qPrintable(got));
    }

    /// An agent that cannot start on a host: the cause, and what to do about it (agentStartHint).
    void checkOnlyAgentCannotStart_data()
    {
        QTest::addColumn<QString>("launcher");
        QTest::addColumn<QString>("agent");   ///< "missing", "not executable" or "no libtorch"
        QTest::addColumn<QString>("said");    ///< the host's own words, in the cause
        QTest::addColumn<QString>("hint");    ///< then what to do
        const QString noAgent = u"there is no agent at that path on this host: install it there (the clusterppl-agent package, or "
                                u"scripts/build-agent.sh for GPU nodes) or set the host's \"agent\" in the profile to where it is"_s;
        QTest::newRow("local, no agent there") << u"local"_s << u"missing"_s << u"execve: No such file or directory"_s << noAgent;
        QTest::newRow("local, not executable") << u"local"_s << u"not executable"_s << u"execve: Permission denied"_s
                                               << u"the host's \"agent\" is not a file this user may run"_s;
        // The front starts (the store runs), its LibTorch half does not: the loader's words, exit 127.
        QTest::newRow("local, LibTorch not at that path")
            << u"local"_s << u"no libtorch"_s
            << u"error while loading shared libraries: libtorch_cuda.so: cannot open shared object file: No such file or directory; exit 127"_s
            << u"the agent there cannot load libtorch_cuda.so: it was built against a library at a path this host does not have"_s;
        QTest::newRow("ssh, no agent there") << u"ssh"_s << u"missing"_s << u"No such file or directory"_s << noAgent;
    }
    void checkOnlyAgentCannotStart()
    {
        QFETCH(QString, launcher);
        QFETCH(QString, agent);
        QFETCH(QString, said);
        QFETCH(QString, hint);
        if (launcher == u"ssh"_s && !m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        QString exe = path(u"no-such-dir/clusterppl-agent"_s);
        if (agent == u"not executable"_s) {
            exe = path(u"agent-not-executable"_s);
            QVERIFY(writeFile(exe, "#!/bin/sh\nexit 0\n"));
        } else if (agent == u"no libtorch"_s) {
            // What a node says when the agent's torch half finds no libtorch_cuda.so at its RUNPATH.
            exe = path(u"agent-without-libtorch"_s);
            QVERIFY(writeFile(exe, "#!/bin/sh\ncase \"$1\" in preflight|eval|comm-check)\n"
                                   "  echo \"$0-torch: error while loading shared libraries: libtorch_cuda.so: cannot open shared object "
                                   "file: No such file or directory\" >&2; exit 127;;\nesac\nexec \""
                                       + kAgent.toUtf8() + "\" \"$@\"\n"));
            QVERIFY(QFile::setPermissions(exe, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        }
        RunRequest req;
        req.profile = parse(profileJson(launcher, {launcher == u"ssh"_s ? u"node1"_s : u"localhost"_s}, kModel, exe));
        req.checkOnly = true;
        if (launcher == u"ssh"_s) {
            req.launcher = sshSettings();
            req.launcher.newHostKeys = cppl::core::NewHostKeys::Ask;
            req.launcher.askNewHostKey = [](const std::string &, const std::string &) { return HostKeyAnswer::AcceptOnce; };
        }
        RunEngine e;
        QSignalSpy hosts(&e, &RunEngine::preflightHost);
        QSignalSpy finished(&e, &RunEngine::finished);
        QVERIFY(e.start(req));
        QVERIFY(finished.wait(120000));
        QCOMPARE(e.outcome().phase, RunPhase::Failed);
        QCOMPARE(hosts.size(), 1);
        const auto h = hosts.front().front().value<HostPreflight>();
        const QString problems = h.problems.join(u'\n');
        CPPL_VERIFY2(!h.ran && problems.startsWith(u"pre-flight did not run ("_s) && problems.contains(said) && problems.contains(hint),
                     qPrintable(problems));
        // The cause the CLI and the dashboard show says it too.
        CPPL_VERIFY2(e.outcome().firstCause.contains(said) && e.outcome().firstCause.contains(hint), qPrintable(e.outcome().firstCause));
    }

    /// The CLI says such a cause once per view: `check` in the host's block (and its verdict), `run`
    /// as it happens and in the alert, not again as the verdict right after.
    void cliSaysTheCauseOnce()
    {
        const QString profile = path(u"local-no-agent.json"_s);
        QVERIFY(writeFile(profile, profileJson(u"local"_s, {u"localhost"_s}, kModel, path(u"no-such-dir/clusterppl-agent"_s)).toUtf8()));
        const QString cause = u"execve: No such file or directory; there is no agent at that path on this host"_s;
        ProcessResult r = runProcess(kCli, {u"check"_s, u"--profile"_s, profile}, 120000);
        CPPL_VERIFY2(r.exitCode == cppl::core::kCliLaunchFailed && r.out.startsWith(u"host localhost: REFUSED"_s)
                         && r.out.contains(u"execve: No such file or directory); there is no agent at that path on this host"_s),
                     qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.count(cause) == 1 && r.err.trimmed().count(u'\n') == 0, qPrintable(r.describe())); // the verdict alone
        r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile}, 120000);
        CPPL_VERIFY2(r.exitCode == cppl::core::kCliLaunchFailed, qPrintable(r.describe()));
        const QStringList lines = r.err.trimmed().split(u'\n');
        CPPL_VERIFY2(lines.size() == 2 && lines[0].startsWith(u"clusterppl-cli: host localhost: "_s) && lines[0].contains(cause)
                         && lines[1].startsWith(u"clusterppl-cli: ALERT (failed): the run failed: host localhost: "_s),
                     qPrintable(r.describe()));
    }

    void checkOnlySsh()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // Two SSH hosts whose keys are accepted once (the dashboard's "this session"): both report,
        // nothing is recorded, nothing is launched. A third host whose sshd is not there is
        // reported too, with the connection failure as its reason.
        QFile::remove(m_sshd.knownHosts());
        const int closed = cppl::freeLoopbackPort();
        QByteArray config = readFile(m_sshd.sshConfigFile());
        const QString cfg = path(u"ssh_config_check"_s);
        QVERIFY(writeFile(cfg, config.replace("Host node1 node2 node3", "Host node1 node2") + "Host node3\n  HostName 127.0.0.1\n  Port "
                                   + QByteArray::number(closed) + "\n"));
        RunRequest req;
        req.profile = parse(profileJson(u"ssh"_s, {u"node1"_s, u"node2"_s}));
        req.checkOnly = true;
        req.launcher = sshSettings();
        req.launcher.sshConfigFile = cfg.toStdString();
        req.launcher.newHostKeys = cppl::core::NewHostKeys::Ask;
        std::atomic<int> asked{0}; // each host's thread asks
        req.launcher.askNewHostKey = [&](const std::string &, const std::string &) {
            ++asked;
            return HostKeyAnswer::AcceptOnce;
        };
        {
            RunEngine e;
            QSignalSpy hosts(&e, &RunEngine::preflightHost);
            QSignalSpy started(&e, &RunEngine::rankStarted);
            QSignalSpy finished(&e, &RunEngine::finished);
            QVERIFY(e.start(req));
            QVERIFY(finished.wait(120000));
            CPPL_VERIFY2(e.outcome().exitCode == cppl::core::kCliOk, qPrintable(e.outcome().firstCause));
            QCOMPARE(hosts.size(), 2);
            for (const auto &args : hosts) {
                const auto h = args.front().value<HostPreflight>();
                CPPL_VERIFY2(h.ran && h.problems.isEmpty(), qPrintable(h.problems.join(u'\n')));
                QVERIFY(!h.report.value(u"agent_version"_s).toString().isEmpty());
            }
            QCOMPARE(started.size(), 0);
            QCOMPARE(asked.load(), 2);
            QVERIFY(!m_sshd.knownHostsContent().contains("127.0.0.1"));
        }
        req.profile = parse(profileJson(u"ssh"_s, {u"node1"_s, u"node2"_s, u"node3"_s}));
        RunEngine e;
        QSignalSpy hosts(&e, &RunEngine::preflightHost);
        QSignalSpy finished(&e, &RunEngine::finished);
        QVERIFY(e.start(req));
        QVERIFY(finished.wait(120000));
        QCOMPARE(e.outcome().exitCode, int(cppl::core::kCliLaunchFailed));
        QCOMPARE(hosts.size(), 3);
        const auto bad = hosts.at(2).front().value<HostPreflight>();
        QCOMPARE(bad.host, u"node3"_s);
        CPPL_VERIFY2(!bad.ran && bad.problems.join(u'\n').contains(u"cannot connect"_s), qPrintable(bad.problems.join(u'\n')));
        QVERIFY(hosts.at(0).front().value<HostPreflight>().ran);
        CPPL_VERIFY2(e.outcome().firstCause.contains(u"node3"_s), qPrintable(e.outcome().firstCause));
    }

    void cliCheck()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        QFile::remove(m_sshd.knownHosts());
        const QString profile = path(u"ssh-check.json"_s);
        QVERIFY(writeFile(profile, profileJson(u"ssh"_s, {u"node1"_s, u"node2"_s}).toUtf8()));
        const QStringList ssh{u"--ssh-config"_s, m_sshd.sshConfigFile(), u"--known-hosts"_s, m_sshd.knownHosts(), u"--connect-timeout"_s, u"5"_s};
        // Unknown keys without the flag: refused, exit 11, each host in its block, the first cause
        // (whichever host answered first) as the verdict.
        ProcessResult r = runProcess(kCli, QStringList{u"check"_s, u"--profile"_s, profile} + ssh, 120000);
        CPPL_VERIFY2(r.exitCode == cppl::core::kCliLaunchFailed && r.out.contains(u"host node1: REFUSED"_s) && r.out.contains(u"host node2: REFUSED"_s)
                         && r.out.count(u"is not in known_hosts"_s) >= 2 && r.err.startsWith(u"clusterppl-cli: host node"_s)
                         && r.err.contains(u"is not in known_hosts"_s),
                     qPrintable(r.describe()));
        // Accepted: a block per host, the JSON reports, nothing launched.
        const int before = evalAgents();
        r = runProcess(kCli, QStringList{u"check"_s, u"--profile"_s, profile, u"--accept-new-host-keys"_s, u"--json"_s, path(u"check.json"_s)} + ssh,
                       120000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        for (const QString &want : {u"host node1: ok"_s, u"host node2: ok"_s, u"LibTorch"_s, u"NCCL"_s, u"memory:"_s, u"path "_s,
                                    u"nothing was launched"_s})
            CPPL_VERIFY2(r.out.contains(want), qPrintable(want + u"\n"_s + r.describe()));
        QCOMPARE(evalAgents(), before);
        const QJsonObject j = cppl::test::readJson(path(u"check.json"_s));
        QCOMPARE(j.value(u"ok"_s).toBool(), true);
        QCOMPARE(j.value(u"hosts"_s).toArray().size(), 2);
        QCOMPARE(j.value(u"hosts"_s).toArray().at(1).toObject().value(u"host"_s).toString(), u"node2"_s);
        // `run --check-only` is the same command; a refusal exits 10 and says REFUSED per host.
        const QString missing = path(u"local-missing.json"_s);
        QVERIFY(writeFile(missing, profileJson(u"local"_s, {u"localhost"_s}, path(u"no-such-model"_s)).toUtf8()));
        r = runProcess(kCli, {u"run"_s, u"--profile"_s, missing, u"--check-only"_s}, 120000);
        CPPL_VERIFY2(r.exitCode == cppl::core::kCliPreflightRefused && r.out.contains(u"host localhost: REFUSED"_s) && r.out.contains(u"no-such-model: missing"_s),
                 qPrintable(r.describe()));
        QVERIFY(!QDir(path(u"state/clusterppl/runs"_s)).exists()); // no run, no logs
        QFile::remove(m_sshd.knownHosts());
    }

    /// A report that came cut or garbled (srun -l once cut long ones) is refused with the parser's
    /// words, where it stopped and what came, never as a bare "not JSON".
    void reportNotJsonShowsWhatCame()
    {
        cppl::core::LaunchPlan plan;
        cppl::core::RankCommand node;
        node.hostName = "node7";
        plan.ranks.push_back(node);
        const QString cut = u"{\"host\":\"node7\",\"agent_version\":\"0.1.0\",\"paths\":[{\"path\":\"/scratch/a-long-project-directory/"_s
                            + QString(200, u'm') + u"/model\",\"stat"_s;
        const auto reports = cppl::core::run::judgePreflight(plan, {{0, cut}}, {});
        QCOMPARE(reports.size(), std::size_t(1));
        const QString problem = reports.front().problems.join(u'\n');
        CPPL_VERIFY2(!reports.front().ran && problem.startsWith(u"pre-flight did not run (its report is not JSON (unterminated string at byte "_s)
                         && problem.contains(u"of %1: "_s.arg(cut.size())) && problem.contains(u"{\"host\":\"node7\""_s) && problem.contains(u"\"stat"_s)
                         && problem.size() < 400,
                     qPrintable(problem));
    }
};

QTEST_GUILESS_MAIN(TestCheckHosts)
#include "tst_check_hosts.moc"
