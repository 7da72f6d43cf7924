// SPDX-License-Identifier: MIT
// clusterppl-cli run with an SSH profile on hosts that are really separate: four nodes in network
// namespaces with their own addresses, hostnames and sshd, in two racks (tests/common/netns_cluster.h).
// What loopback cannot show: the rendezvous on a non-loopback master address, the telemetry tunnel
// from each node's own loopback, the results bit-identical to one rank (over Gloo, and over NCCL
// through the fake CUDA runtime and NCCL of tests/fakes), no process of the run left on any node;
// a node whose link goes down mid-run, detected and recovered with the same bits, the launcher
// finishing without it; a rate limit between the racks, whose comm share this test prints; and
// issue 43's launcher fixes: the launching machine's environment stays home, a host's "devices"
// list chooses its GPUs, pre-flight runs with the hosts' env and names each host's interface
// toward the master. Root only (CI is root).
#include "netns_cluster.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_skip.h"
#include "test_verify.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QMap>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QTest>

using namespace Qt::StringLiterals;
using cppl::test::kAgent;
using cppl::test::kCli;
using cppl::test::kModel;
using cppl::test::kText;
using cppl::test::ProcessResult;
using cppl::test::readFile;
using cppl::test::readJson;
using cppl::test::runProcess;

namespace {

/// The comm share and efficiency of a result: the ranks' mean time in collectives (waiting for
/// the last rank + transfer) and mean compute time, each over the run's wall time.
struct CommFigures
{
    double share = 0;
    double efficiency = 0;
};
CommFigures commFigures(const QJsonObject &result)
{
    double comm = 0, compute = 0;
    const QJsonArray ranks = result.value(u"ranks"_s).toArray();
    for (const QJsonValue &v : ranks) {
        const QJsonObject r = v.toObject();
        comm += r.value(u"wait_seconds"_s).toDouble() + r.value(u"transfer_seconds"_s).toDouble();
        compute += r.value(u"compute_seconds"_s).toDouble();
    }
    const double wall = result.value(u"seconds"_s).toDouble();
    if (ranks.isEmpty() || wall <= 0)
        return {};
    const auto n = static_cast<double>(ranks.size());
    return {comm / n / wall, compute / n / wall};
}

} // namespace

#define REQUIRE_FAKES()                                                                                                                    \
    do {                                                                                                                                   \
        if (QStringLiteral(CPPL_FAKES_LIB).isEmpty())                                                                                      \
            CPPL_SKIP_MISSING("this build has no NCCL support, so no fake NCCL (tests/fakes)");                                            \
    } while (false)

#define REQUIRE_CLUSTER()                                                                                                                  \
    do {                                                                                                                                   \
        if (!m_skip.isEmpty())                                                                                                             \
            CPPL_SKIP_MISSING(qPrintable(m_skip));                                                                                         \
    } while (false)

class TestNetnsCluster : public QObject
{
    Q_OBJECT

private:
    cppl::test::RunDir m_run;
    cppl::test::NetnsCluster m_cluster;
    QString m_skip;
    QJsonObject m_one, m_oneFull;

    QString path(const QString &name) const { return m_run.path(name); }

    /// A profile of the 4 nodes, one slot each, in groups of two (the racks), over @p backend.
    /// @p evaluation: more evaluation fields (", \"schedule\": ..."); @p hostEnv: more of every host's env.
    QString writeProfile(const QString &name, const QString &backend, const QString &evaluation, const QString &hostEnv = QString(), int windows = cppl::test::kRunWindows,
                         const QString &thresholds = u"\"sync_every_tokens\": 300, \"collective_timeout_seconds\": 30"_s)
    {
        QString hosts;
        for (int n = 1; n <= m_cluster.nodes(); ++n)
            hosts += u"%1{\"name\": \"node%2\", \"address\": \"%3\", \"slots\": 1, \"agent\": \"%4\", \"ssh\": {\"alias\": \"node%2\"}, \"workdir\": \"%5\","
                     " \"env\": {\"OMP_NUM_THREADS\": \"1\", \"OPENBLAS_NUM_THREADS\": \"1\"%6}}"_s.arg(n > 1 ? u","_s : QString())
                         .arg(n)
                         .arg(m_cluster.address(n), kAgent, m_run.dir(), hostEnv);
        const QString json = uR"({"format": "clusterppl-profile", "version": 1, "name": "%1", "launcher": "ssh", "hosts": [%2], "groups": "size:2",
  "evaluation": {"model": "%3", "text": "%4", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2, "max_windows": %5,
                 "dtype": "float32", "device": "cpu", "backend": "%6", "topology": "hierarchical"%7},
  "thresholds": {%8}})"_s.arg(name, hosts, kModel, kText)
                                 .arg(windows)
                                 .arg(backend, evaluation, thresholds);
        return m_run.writeProfile(name, json);
    }

    /// A profile of @p nodes (1-based), each with @p slots slots, grouped by host, static and failing
    /// fast; @p hostEnv: more of every host's env, @p hostExtra: more fields of every host.
    QString writeNodesProfile(const QString &name, const QString &backend, const QList<int> &nodes, int slots, const QString &hostEnv,
                         const QString &hostExtra = QString())
    {
        QString hosts;
        for (const int n : nodes)
            hosts += u"%1{\"name\": \"node%2\", \"address\": \"%3\", \"slots\": %4, \"agent\": \"%5\", \"ssh\": {\"alias\": \"node%2\"}, \"workdir\": \"%6\"%7,"
                     " \"env\": {\"OMP_NUM_THREADS\": \"1\", \"OPENBLAS_NUM_THREADS\": \"1\"%8}}"_s.arg(hosts.isEmpty() ? QString() : u","_s)
                         .arg(n)
                         .arg(m_cluster.address(n))
                         .arg(slots)
                         .arg(kAgent, m_run.dir(), hostExtra, hostEnv);
        const QString json = uR"({"format": "clusterppl-profile", "version": 1, "name": "%1", "launcher": "ssh", "hosts": [%2], "groups": "by-host",
  "evaluation": {"model": "%3", "text": "%4", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2, "max_windows": 37,
                 "dtype": "float32", "device": "cpu", "backend": "%5", "topology": "hierarchical", "schedule": "static", "on_rank_loss": "fail"},
  "thresholds": {"sync_every_tokens": 300, "collective_timeout_seconds": 30}})"_s.arg(name, hosts, kModel, kText, backend);
        return m_run.writeProfile(name, json);
    }

    QStringList sshArgs() const
    {
        return {u"--ssh-config"_s, m_cluster.sshConfigFile(), u"--known-hosts"_s, m_cluster.knownHosts(), u"--connect-timeout"_s, u"10"_s};
    }

    /// The processes of run @p runId still alive on any node (or on this host), by node.
    QString leftoversOf(const QString &runId) const
    {
        QString s;
        for (const qint64 pid : cppl::test::agentsOfRun(runId))
            s += u"pid %1 on node %2: %3\n"_s.arg(pid).arg(m_cluster.nodeOf(pid)).arg(QString::fromUtf8(cppl::test::readFile(u"/proc/%1/cmdline"_s.arg(pid)).replace('\0', ' ')));
        return s;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_run.init(cppl::test::RunDir::Access::OthersRead));
        m_one = m_run.oneRank(cppl::test::kRunWindows, u"one.json"_s);
        QVERIFY(m_one.value(u"nll_sum_exact"_s).toString().startsWith(u"xs1:"_s));
        QVERIFY(QDir().mkpath(path(u"cluster"_s)));
        m_skip = m_cluster.start(path(u"cluster"_s), 4, 2);
        if (m_skip.isEmpty())
            m_skip = m_cluster.startSshd();
        if (!m_skip.isEmpty())
            m_skip = u"the network-namespace cluster: "_s + m_skip;
    }

    void cleanupTestCase() { m_cluster.stop(); }

    /// Each node is a host of its own: its name, its address, only the private subnet as a route;
    /// it reaches the others and this host by address and by name.
    void nodesAreSeparateHosts()
    {
        REQUIRE_CLUSTER();
        for (int n = 1; n <= m_cluster.nodes(); ++n) {
            const ProcessResult r = m_cluster.exec(n, {u"sh"_s, u"-c"_s, u"hostname; ip -4 -o addr show eth0; ip route; getent hosts node4"_s});
            CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
            const QStringList lines = r.out.split(u'\n', Qt::SkipEmptyParts);
            QCOMPARE(lines.value(0), u"node%1"_s.arg(n));
            CPPL_VERIFY2(lines.value(1).contains(u"inet %1/24"_s.arg(m_cluster.address(n))), qPrintable(r.out));
            CPPL_VERIFY2(!r.out.contains(u"default"_s), qPrintable(r.out)); // no route leaves the machine
            CPPL_VERIFY2(r.out.contains(m_cluster.address(4) + u" "_s), qPrintable(r.out));
        }
        const ProcessResult across = m_cluster.exec(1, {u"bash"_s, u"-c"_s, u"</dev/tcp/node3/22 && </dev/tcp/%1/22 && echo reached"_s.arg(m_cluster.address(4))});
        CPPL_VERIFY2(across.out.contains(u"reached"_s), qPrintable(across.describe()));
        // A node's loopback is its own: node3's sshd listens on its address, so node1 finds nothing on 127.0.0.1:22.
        const ProcessResult loop = m_cluster.exec(1, {u"bash"_s, u"-c"_s, u"</dev/tcp/127.0.0.1/22 && echo open || echo closed"_s});
        CPPL_VERIFY2(loop.out.contains(u"closed"_s), qPrintable(loop.describe()));
    }

    /// clusterppl-cli run over SSH to the four nodes: the store and rendezvous on node1's address,
    /// every rank on its own host, the telemetry back through each node's tunnel, the one-rank bits,
    /// nothing of the run left on any node. Over Gloo, and over NCCL (the fakes, the model on the CPU).
    void sshRunOnSeparateHosts_data()
    {
        QTest::addColumn<QString>("backend");
        QTest::addRow("gloo") << u"gloo"_s;
        QTest::addRow("nccl (fake)") << u"nccl"_s;
    }
    void sshRunOnSeparateHosts()
    {
        REQUIRE_CLUSTER();
        QFETCH(QString, backend);
        QString env;
        if (backend == u"nccl"_s && QStringLiteral(CPPL_FAKES_LIB).isEmpty())
            CPPL_SKIP_MISSING("this build has no NCCL support, so no fake NCCL (tests/fakes)");
        if (backend == u"nccl"_s)
            env = u", \"LD_LIBRARY_PATH\": \"%1\", \"CPPL_FAKE_CUDA_DEVICES\": \"1\""_s.arg(QStringLiteral(CPPL_FAKES_LIB));
        const QString profile = writeProfile(u"ssh-"_s + backend, backend, QString(), env);
        const QString runId = u"netns-ssh-%1-%2"_s.arg(backend).arg(QCoreApplication::applicationPid());
        const QString json = path(runId + u".json"_s);
        QStringList args{u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--json"_s, json};
        // Pre-flight runs with the hosts' env, so it finds the fakes through their LD_LIBRARY_PATH
        // (issue 43: before, it ran without it and refused every host over NCCL).
        const ProcessResult r = runProcess(kCli, args + sshArgs(), 600000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        CPPL_VERIFY2(cppl::test::liveMergeEqualsResult(r) && r.err.contains(u" 0 lost"_s), qPrintable(r.describe()));
        const QJsonObject j = readJson(json);
        QCOMPARE(j.value(u"backend"_s).toString(), backend);
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_one.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(j.value(u"rendezvous"_s).toObject().value(u"store"_s).toString(), m_cluster.address(1) + u":29500"_s);
        const QJsonArray ranks = j.value(u"ranks"_s).toArray();
        QCOMPARE(ranks.size(), 4);
        for (int rank = 0; rank < 4; ++rank)
            QCOMPARE(ranks[rank].toObject().value(u"host"_s).toString(), u"node%1"_s.arg(rank + 1));
        QTRY_VERIFY2_WITH_TIMEOUT(cppl::test::agentsOfRun(runId).isEmpty(), qPrintable(leftoversOf(runId)), 15000);
    }

    /// Node 3's link goes down while every rank evaluates (ip link set down): the watchdog finds
    /// rank 2 silent after --timeout, the others regroup (on_rank_loss continue, dynamic batches)
    /// and end with the one-rank bits of every window; rank 2 ends by itself on its unreachable
    /// node. The launcher then finishes while node3 stays unreachable (it no longer waits for the
    /// lost host's SSH session: before, observed 2026-12-06, it printed "0/4 ranks evaluating, 1
    /// STALLED" until killed 300 s after the link went down); the link comes back after that.
    void linkDownMidRun()
    {
        REQUIRE_CLUSTER();
        if (m_oneFull.isEmpty())
            m_oneFull = m_run.oneRank(0, u"one-full.json"_s);
        QVERIFY(!m_oneFull.isEmpty());
        const QString profile = writeProfile(u"link-down"_s, u"gloo"_s, u", \"schedule\": \"dynamic\", \"on_rank_loss\": \"continue\""_s,
                                             u", \"CLUSTERPPL_TEST_SLOW_RANK\": \"*:20\""_s, 0,
                                             u"\"sync_every_tokens\": 300, \"collective_timeout_seconds\": 10"_s);
        const QString runId = u"netns-link-%1"_s.arg(QCoreApplication::applicationPid());
        const QString json = path(runId + u".json"_s);
        QProcess cli;
        cli.start(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--no-preflight"_s, u"--json"_s, json} + sshArgs());
        QVERIFY(cli.waitForStarted());
        cli.setReadChannel(QProcess::StandardError);
        QByteArray err;
        QElapsedTimer t;
        t.start();
        while (!err.contains("4/4 ranks evaluating") && cli.state() == QProcess::Running && t.elapsed() < 180000)
            if (cli.waitForReadyRead(500))
                err += cli.readAllStandardError();
        CPPL_VERIFY2(err.contains("4/4 ranks evaluating"), err.constData());
        QCOMPARE(m_cluster.setLink(3, false), QString());
        const qint64 downAt = t.elapsed();
        // Every rank ends, the unreachable one too (its watchdog lost the hub).
        while ((!cppl::test::ranksOfRun(runId).isEmpty() || !err.contains("recovered")) && t.elapsed() - downAt < 240000)
            if (cli.waitForReadyRead(500))
                err += cli.readAllStandardError();
        const qint64 ranksGoneAt = t.elapsed();
        const bool ranksGone = cppl::test::ranksOfRun(runId).isEmpty();
        const QString leftovers = leftoversOf(runId);
        // Every rank has ended: the launcher has nothing left to wait for, though node3 is still unreachable.
        const bool finished = ranksGone && cli.waitForFinished(60000);
        const qint64 finishedAt = t.elapsed();
        QCOMPARE(m_cluster.setLink(3, true), QString());
        err += cli.readAllStandardError();
        if (!finished) {
            cli.kill();
            cli.waitForFinished();
        }
        CPPL_VERIFY2(ranksGone, qPrintable(leftovers));
        CPPL_VERIFY2(finished && cli.exitStatus() == QProcess::NormalExit && cli.exitCode() == 0, err.constData());
        // Found by the heartbeat (the link is down, nothing closed): after the 10 s timeout, or a little later under load.
        const QRegularExpressionMatch silent = QRegularExpression(u"recovered \\(rank 2 \\(node3\\): stopped responding: no heartbeat for (\\d+\\.\\d) s"_s)
                                                   .match(QString::fromUtf8(err));
        CPPL_VERIFY2(silent.hasMatch() && silent.captured(1).toDouble() >= 10.0, err.constData());
        const QJsonObject j = readJson(json);
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_oneFull.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(j.value(u"tokens_scored"_s).toInteger(), m_oneFull.value(u"tokens_scored"_s).toInteger());
        const QJsonArray lost = j.value(u"lost_ranks"_s).toArray();
        QCOMPARE(lost.size(), 1);
        QCOMPARE(lost[0].toObject().value(u"rank"_s).toInt(), 2);
        qInfo("node3's link down at %.1f s; every rank gone %.1f s later; the CLI finished %.1f s after that, node3 still unreachable",
              static_cast<double>(downAt) / 1000.0, static_cast<double>(ranksGoneAt - downAt) / 1000.0,
              static_cast<double>(finishedAt - ranksGoneAt) / 1000.0);
        QTRY_VERIFY2_WITH_TIMEOUT(cppl::test::agentsOfRun(runId).isEmpty(), qPrintable(leftoversOf(runId)), 30000);
    }

    /// A token bucket on the link between the racks (the leaders' all-reduce crosses it; so do
    /// rack 2's telemetry and SSH): the same bits, and a comm share that is not loopback's. The
    /// figures are printed (qInfo) for docs/testing.md.
    void rateLimitBetweenRacks()
    {
        REQUIRE_CLUSTER();
        const QString profile = writeProfile(u"racks"_s, u"gloo"_s, u", \"schedule\": \"static\", \"on_rank_loss\": \"fail\""_s, QString(), cppl::test::kRunWindows,
                                             u"\"sync_every_tokens\": 0, \"collective_timeout_seconds\": 60"_s);
        CommFigures figures[2];
        for (int limited = 0; limited < 2; ++limited) {
            // 64 kbit/s with a bucket of one frame: a round's collective waits for the bucket.
            QCOMPARE(m_cluster.limitRacks(limited ? u"64kbit"_s : u"off"_s, u"2kb"_s), QString());
            const QString json = path(u"racks-%1.json"_s.arg(limited));
            const ProcessResult r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--json"_s, json} + sshArgs(), 600000);
            CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
            const QJsonObject j = readJson(json);
            QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_one.value(u"nll_sum_exact"_s).toString());
            figures[limited] = commFigures(j);
            qInfo("racks %s: comm share %.2f%%, efficiency %.2f%% (%lld rounds, %.2f s)", limited ? "limited to 64 kbit/s" : "unlimited",
                  100 * figures[limited].share, 100 * figures[limited].efficiency, static_cast<long long>(j.value(u"rounds"_s).toInteger()),
                  j.value(u"seconds"_s).toDouble());
        }
        QCOMPARE(m_cluster.limitRacks(u"off"_s), QString());
        CPPL_VERIFY2(figures[1].share > figures[0].share, qPrintable(u"comm share %1 limited vs %2 unlimited"_s.arg(figures[1].share).arg(figures[0].share)));
    }

    /// Issue 43, point 1. The launcher's own NCCL_*, CUDA_* and LD_LIBRARY_PATH must not reach the
    /// ranks on other hosts (only what the profile asks for, never device visibility). Before the
    /// fix, observed (2026-12-06): all four reached every rank of a 4-node run, each rank's environ holding
    /// CUDA_VISIBLE_DEVICES=0, NCCL_SOCKET_IFNAME=<this host's bridge>, NCCL_IB_HCA=mlx5_9 and
    /// LD_LIBRARY_PATH=/opt/workstation/lib.
    void launcherEnvironmentStaysHome()
    {
        REQUIRE_CLUSTER();
        const QString profile = writeNodesProfile(u"env"_s, u"gloo"_s, {1, 2, 3, 4}, 1, QString());
        const QString runId = u"netns-env-%1"_s.arg(QCoreApplication::applicationPid());
        const QMap<QString, QString> workstation{{u"CUDA_VISIBLE_DEVICES"_s, u"0"_s},
                                                 {u"NCCL_SOCKET_IFNAME"_s, u"cppl%1b1"_s.arg(m_cluster.tag())},
                                                 {u"NCCL_IB_HCA"_s, u"mlx5_9"_s},
                                                 {u"LD_LIBRARY_PATH"_s, u"/opt/workstation/lib"_s}};
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (auto it = workstation.begin(); it != workstation.end(); ++it)
            env.insert(it.key(), it.value());
        QProcess cli;
        cli.setProcessEnvironment(env);
        cli.start(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId} + sshArgs());
        QVERIFY(cli.waitForStarted());
        QList<qint64> ranks;
        QElapsedTimer t;
        t.start();
        while ((ranks = cppl::test::ranksOfRun(runId)).size() < 4 && cli.state() == QProcess::Running && t.elapsed() < 120000)
            QThread::msleep(100);
        QStringList leaked;
        for (const qint64 pid : ranks)
            for (const QByteArray &kv : readFile(u"/proc/%1/environ"_s.arg(pid)).split('\0'))
                for (auto it = workstation.begin(); it != workstation.end(); ++it)
                    if (kv == (it.key() + u'=' + it.value()).toUtf8())
                        leaked << u"node %1: %2"_s.arg(m_cluster.nodeOf(pid)).arg(QString::fromUtf8(kv));
        QVERIFY(cli.waitForFinished(300000));
        QCOMPARE(ranks.size(), 4);
        CPPL_VERIFY2(leaked.isEmpty(), qPrintable(leaked.join(u'\n')));
    }

    /// Issue 43, point 1, its consequence: the workstation's NCCL_SOCKET_IFNAME names an interface
    /// the nodes lack. Over NCCL (the fake, which reads NCCL_SOCKET_IFNAME as NCCL does) the run
    /// must still give the one-rank bits. Before the fix, observed (2026-12-06): every rank failed at once with
    /// "Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=cppl<tag>b1)" from ncclGetUniqueId
    /// or ncclCommInitRankConfig, and the run failed.
    void workstationInterfaceDoesNotBreakNccl()
    {
        REQUIRE_CLUSTER();
        REQUIRE_FAKES();
        const QString profile = writeNodesProfile(u"ifname"_s, u"nccl"_s, {1, 2, 3, 4}, 1,
                                             u", \"LD_LIBRARY_PATH\": \"%1\", \"CPPL_FAKE_CUDA_DEVICES\": \"1\""_s.arg(QStringLiteral(CPPL_FAKES_LIB)));
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(u"NCCL_SOCKET_IFNAME"_s, u"cppl%1b1"_s.arg(m_cluster.tag())); // this host's bridge: no node has it
        QProcess cli;
        cli.setProcessEnvironment(env);
        cli.start(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--json"_s, path(u"ifname.json"_s)} + sshArgs());
        QVERIFY(cli.waitForFinished(600000));
        const QString err = QString::fromUtf8(cli.readAllStandardError());
        CPPL_VERIFY2(cli.exitCode() == 0, qPrintable(err));
        QCOMPARE(readJson(path(u"ifname.json"_s)).value(u"nll_sum_exact"_s).toString(), m_one.value(u"nll_sum_exact"_s).toString());
    }

    /// Issue 43, point 2. A host's "devices" list must choose its ranks' GPUs: node1 with slots 2
    /// and "devices": [2, 3] of 4 must run its ranks' NCCL on devices 2 and 3 (the fake's PCI buses
    /// 0x1a and 0x1b), through the agents' --devices. Before the fix, observed (2026-12-06): ranks 0
    /// and 1 made their communicators on cuda:0 and cuda:1 (PCI 0000:18:00.0 and 0000:19:00.0).
    void devicesListHonoured()
    {
        REQUIRE_CLUSTER();
        REQUIRE_FAKES();
        const QString profile = writeNodesProfile(u"devices"_s, u"nccl"_s, {1}, 2,
                                             u", \"LD_LIBRARY_PATH\": \"%1\", \"CPPL_FAKE_CUDA_DEVICES\": \"4\", \"CPPL_FAKE_NCCL_TRACE\": \"1\""_s.arg(QStringLiteral(CPPL_FAKES_LIB)),
                                             u", \"devices\": [2, 3]"_s);
        const QString logs = path(u"devices-logs"_s);
        const ProcessResult r = cppl::test::runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--no-preflight"_s, u"--log-dir"_s, logs} + sshArgs(),
                                                       600000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QRegularExpression made(u"making communicator 'clusterppl world' \\(rank (\\d) of 2\\) on cuda:\\d+ \\(PCI ([0-9a-f:.]+)\\)"_s);
        QStringList buses;
        for (int rank = 0; rank < 2; ++rank) {
            const QString log = QString::fromUtf8(readFile(logs + u"/rank-%1.log"_s.arg(rank)));
            const auto m = made.match(log);
            CPPL_VERIFY2(m.hasMatch(), qPrintable(log.right(3000)));
            buses << m.captured(2);
        }
        QCOMPARE(buses, (QStringList{u"0000:1a:00.0"_s, u"0000:1b:00.0"_s}));
    }

    /// Issue 43, point 1 (pre-flight). Pre-flight must show which interface each host would use to
    /// reach the master address (master.route). Before the fix, observed (2026-12-06): `clusterppl-cli
    /// check --json` reported no interface at all (nothing named eth0, the nodes' only interface toward node1).
    void preflightNamesTheInterfaceToTheMaster()
    {
        REQUIRE_CLUSTER();
        const QString profile = writeNodesProfile(u"check"_s, u"gloo"_s, {1, 2, 3, 4}, 1, QString());
        const QString json = path(u"check.json"_s);
        const ProcessResult r = cppl::test::runProcess(kCli, QStringList{u"check"_s, u"--profile"_s, profile, u"--json"_s, json} + sshArgs(), 300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QString report = QString::fromUtf8(readFile(json));
        for (int n = 2; n <= 4; ++n)
            CPPL_VERIFY2(report.contains(u"eth0"_s) && report.contains(m_cluster.address(n)), qPrintable(report.left(3000)));
    }
};

QTEST_GUILESS_MAIN(TestNetnsCluster)
#include "tst_netns_cluster.moc"
