// SPDX-License-Identifier: MIT
// The Slurm launcher on a four-node Slurm whose nodes are really separate hosts: network
// namespaces with their own addresses and hostnames, one slurmd each (NodeName=nodeN, NodeAddr its
// address), slurmctld on this host as "head", node1's sshd as the login node
// (tests/common/netns_cluster.h). A job across the four nodes: pre-flight on each, the store and
// rendezvous on the first allocated node's address, every task on its own node, telemetry through
// the relay on the login node and the SSH tunnel, the one-rank bits, nothing left on any node;
// protocol lines and pre-flight reports longer than the 1 KiB pieces srun -l cuts lines into.
// Root only (CI is root).
#include "netns_cluster.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_skip.h"
#include "test_verify.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonObject>
#include <QTest>

using namespace Qt::StringLiterals;
using cppl::test::kAgent;
using cppl::test::kCli;
using cppl::test::kModel;
using cppl::test::kText;
using cppl::test::ProcessResult;
using cppl::test::readJson;
using cppl::test::runProcess;

class TestNetnsSlurm : public QObject
{
    Q_OBJECT

private:
    cppl::test::RunDir m_run;
    cppl::test::NetnsCluster m_cluster;
    QString m_skip;
    QString m_oneRankExact;
    /// Each checkpoint line's padding (CLUSTERPPL_TEST_LONG_LINES): three of srun's 1 KiB pieces.
    static constexpr int kPadding = 3000;
    QString m_model; // kModel behind a path long enough that a node's pre-flight report passes 1 KiB

    QString path(const QString &name) const { return m_run.path(name); }

    /// A checkout in a deep directory (CI's) makes the pre-flight report longer than Slurm's
    /// labelled-output chunk (1 KiB), which srun -l once split into two "lines": point the model
    /// at kModel through such a path, so that this test covers the long report everywhere.
    bool linkModelDeep()
    {
        QString dir = path(u"long"_s);
        for (int i = 0; i < 4; ++i)
            dir += u"/a-directory-name-as-long-as-some-cluster-file-systems-give-their-project-and-scratch-trees-%1"_s.arg(i);
        m_model = dir + u"/model"_s;
        return QDir().mkpath(dir) && QFile::link(kModel, m_model);
    }

    QString profileJson(const QString &evaluation) const
    {
        return uR"({"format": "clusterppl-profile", "version": 1, "name": "netns slurm", "launcher": "slurm",
  "hosts": [{"name": "login", "ssh": {"alias": "login"}, "workdir": "%1", "env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                                                                  "CLUSTERPPL_TEST_LONG_LINES": "%8"}}],
  "groups": "size:2",
  "slurm": {"agent": "%2", "env_script": "%3", "nodes": 4, "ntasks_per_node": 1, "partition": "debug", "time_limit": "10:00"},
  "evaluation": {"model": "%4", "text": "%5", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2,
                 "max_windows": %6, "dtype": "float32", "device": "cpu", "backend": "gloo", "topology": "hierarchical"%7},
  "thresholds": {"sync_every_tokens": 300, "collective_timeout_seconds": 30}})"_s
            .arg(path(u"login"_s), kAgent, m_cluster.slurmEnvScript(), m_model, kText)
            .arg(cppl::test::kRunWindows)
            .arg(evaluation)
            .arg(kPadding);
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_run.init(cppl::test::RunDir::Access::OthersRead));
        qputenv("CLUSTERPPL_STORE", path(u"history.sqlite"_s).toUtf8());
        QVERIFY(QDir().mkpath(path(u"login"_s)) && QDir().mkpath(path(u"cluster"_s)));
        QVERIFY(linkModelDeep());
        m_oneRankExact = m_run.oneRank(cppl::test::kRunWindows, u"one.json"_s).value(u"nll_sum_exact"_s).toString();
        QVERIFY(m_oneRankExact.startsWith(u"xs1:"_s));
        m_skip = m_cluster.start(path(u"cluster"_s), 4, 2);
        if (m_skip.isEmpty())
            m_skip = m_cluster.startSshd();
        if (m_skip.isEmpty())
            m_skip = m_cluster.startSlurm();
        if (!m_skip.isEmpty())
            m_skip = u"the network-namespace Slurm: "_s + m_skip;
    }

    void cleanupTestCase() { m_cluster.stop(); }

    /// One job, one task on each of the four nodes, static and tolerant (a store of its own in the
    /// batch step on node1): the one-rank bits, every task on its node, the rendezvous on node1.
    void jobAcrossFourNodes_data()
    {
        QTest::addColumn<QString>("evaluation");
        QTest::addRow("static, fail") << u", \"schedule\": \"static\", \"on_rank_loss\": \"fail\""_s;
        QTest::addRow("dynamic, continue (own store)") << u", \"schedule\": \"dynamic\", \"on_rank_loss\": \"continue\""_s;
    }
    void jobAcrossFourNodes()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        QFETCH(QString, evaluation);
        const QString profile = m_run.writeProfile(u"slurm"_s, profileJson(evaluation));
        QVERIFY(!profile.isEmpty());
        const QString runId = u"netns-slurm-%1-%2"_s.arg(QCoreApplication::applicationPid()).arg(QString::fromUtf8(QTest::currentDataTag()).left(6));
        const QString json = path(runId + u".json"_s);
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--json"_s, json, u"--ssh-config"_s,
                                                  m_cluster.sshConfigFile(), u"--known-hosts"_s, m_cluster.knownHosts()},
                                           600000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe() + m_cluster.tail(u"log/slurmctld.log"_s)));
        CPPL_VERIFY2(r.err.contains(u"pre-flight ok on 4 nodes of job"_s), qPrintable(r.err));
        CPPL_VERIFY2(cppl::test::liveMergeEqualsResult(r), qPrintable(r.err));
        const QJsonObject j = readJson(json);
        QCOMPARE(j.value(u"world_size"_s).toInt(), 4);
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_oneRankExact);
        CPPL_VERIFY2(j.value(u"rendezvous"_s).toObject().value(u"store"_s).toString().startsWith(u"node1:"_s), qPrintable(r.err));
        const QJsonArray ranks = j.value(u"ranks"_s).toArray();
        QCOMPARE(ranks.size(), 4);
        for (int rank = 0; rank < 4; ++rank)
            QCOMPARE(ranks[rank].toObject().value(u"host"_s).toString(), u"node%1"_s.arg(rank + 1));
        // The checkpoint lines, cut by srun -l, joined again: checkpoint.json has the last round whole.
        CPPL_VERIFY2(!r.err.contains(u"malformed"_s), qPrintable(r.err));
        const QJsonObject checkpoint = readJson(path(u"state/clusterppl/runs/%1/checkpoint.json"_s.arg(runId)));
        QCOMPARE(checkpoint.value(u"test_padding"_s).toString(), QString(kPadding, u'x'));
        QVERIFY(checkpoint.value(u"round"_s).toInt() > 0);
        QTRY_VERIFY_WITH_TIMEOUT(cppl::test::agentsOfRun(runId).isEmpty(), 20000);
        for (int n = 1; n <= 4; ++n) // no step or task left on any node (only its sshd and slurmd)
            QTRY_COMPARE_WITH_TIMEOUT(m_cluster.processesOn(n).size(), 2, 20000);
    }
};

QTEST_GUILESS_MAIN(TestNetnsSlurm)
#include "tst_netns_slurm.moc"
