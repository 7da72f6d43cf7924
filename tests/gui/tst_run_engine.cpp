// SPDX-License-Identifier: MIT
// The run engine both front ends drive, with real agents: phases and signals of a whole local run,
// its result against a one-rank run, refusals, a stop, a killed rank; and its pure parts (alerts,
// the bounded timeline, run ids) on synthetic snapshots.
#include "run/run_engine.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"

#include "cppl/cluster_profile.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <signal.h>

#include <algorithm>
#include <numeric>

using namespace Qt::StringLiterals;
using namespace cppl::core::run;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::RankView;
using cppl::core::telemetry::Snapshot;

using cppl::test::agentsOfRun;
using cppl::test::ranksOfRun;
using cppl::test::readFile;

using cppl::test::kAgent;
using cppl::test::kModel;
using cppl::test::kText;

namespace {

/// A run that lasts until it is interrupted: every window is ~2 s of compute for 4 ranks under
/// dynamic batches, which can end before a test acts on its first counted tokens; static shards
/// with rank @p slowRank sleeping 100 ms per batch (CLUSTERPPL_TEST_SLOW_RANK in the host's env)
/// make it ~11 s, as every round waits for that rank. on_rank_loss fail outright: a killed rank
/// fails the run (static shards allow nothing else).
cppl::ClusterProfile longRun(cppl::ClusterProfile p, int slowRank = 3)
{
    p.evaluation.maxWindows = 0;
    p.evaluation.schedule = "static";
    p.evaluation.onRankLoss = "fail";
    p.hosts.front().env["CLUSTERPPL_TEST_SLOW_RANK"] = std::to_string(slowRank) + ":100";
    return p;
}

/// Whether @p e's run ended before it was interrupted: it produced a result, or rank 0's log has
/// its final estimate.
bool ranToTheEnd(const RunEngine &e)
{
    return !e.outcome().resultJson.isEmpty() || readFile(e.outcome().logDir + u"/rank-0.log"_s).contains("Final estimate");
}

cppl::ClusterProfile profile(int slots, const QString &groups, std::int64_t maxWindows, const QString &model = kModel)
{
    const QString json = cppl::test::localProfileJson(u"engine-test"_s, kAgent, slots, groups, maxWindows, model);
    auto r = cppl::parseProfile(json.toStdString());
    if (!r.ok())
        qFatal("test profile invalid: %s", r.errors.front().c_str());
    return r.profile;
}

RankView rankView(int rank, RankState state, double commShare = 0, double seconds = 10)
{
    RankView r;
    r.rank = rank;
    r.host = "node" + std::to_string(rank);
    r.state = state;
    r.heard = true;
    r.computeSeconds = seconds * (1 - commShare);
    r.waitSeconds = seconds * commShare;
    r.commShare = commShare;
    r.waitShare = commShare;
    r.tokensPerSecond = 100.0 * (rank + 1);
    return r;
}

} // namespace

class TestRunEngine : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    QByteArray m_oneRankResult;

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_STATE_HOME", m_dir.filePath(u"state"_s).toUtf8());
        // The one-rank reference, straight from the agent.
        const QString json = m_dir.filePath(u"one.json"_s);
        const auto one = cppl::test::oneRankEval(kAgent, kText, 24, json);
        QVERIFY2(one.exitCode == 0, qPrintable(one.describe()));
        m_oneRankResult = readFile(json);
        QVERIFY(!m_oneRankResult.isEmpty());
    }

    void runIds_data()
    {
        QTest::addColumn<QString>("id");
        QTest::addColumn<QString>("problem");
        QTest::addRow("generated") << generateRunId() << QString();
        QTest::addRow("plain") << u"sweep-8.nodes_2"_s << QString();
        QTest::addRow("empty") << QString() << u"empty"_s;
        QTest::addRow("slash") << u"a/b"_s << u"may contain only"_s;
        QTest::addRow("dot-dot") << u".."_s << u"must not start with '.'"_s;
        QTest::addRow("space") << u"my run"_s << u"may contain only"_s;
        QTest::addRow("too long") << QString(129, u'x') << u"at most 128"_s;
    }
    void runIds()
    {
        QFETCH(QString, id);
        QFETCH(QString, problem);
        const QString why = validateRunId(id);
        if (problem.isEmpty())
            QVERIFY2(why.isEmpty(), qPrintable(why));
        else
            QVERIFY2(why.contains(problem), qPrintable(why));
    }

    void alertsAreEdgeTriggered()
    {
        cppl::Thresholds t;
        t.commShareAlert = 0.05;
        AlertMonitor m;
        m.reset(t);
        Snapshot s;
        s.worldSize = 3;
        s.ranks = {rankView(0, RankState::Evaluating, 0.01), rankView(1, RankState::Evaluating, 0.20), rankView(2, RankState::Stalled)};
        auto raised = m.update(1.0, s);
        QCOMPARE(raised.size(), std::size_t(2));
        QCOMPARE(raised[0].rank, 1);
        QCOMPARE(raised[0].kind, AlertKind::CommShare);
        QVERIFY2(raised[0].message.contains(u"rank 1 on node1"_s) && raised[0].message.contains(u"20.0%"_s), qPrintable(raised[0].message));
        QCOMPARE(raised[1].kind, AlertKind::Stalled);
        QCOMPARE(raised[1].rank, 2);
        // The same conditions again: nothing new.
        QVERIFY(m.update(2.0, s).empty());
        // Cleared, then again: a second alert.
        s.ranks[1] = rankView(1, RankState::Evaluating, 0.01);
        s.ranks[2] = rankView(2, RankState::Evaluating);
        QVERIFY(m.update(3.0, s).empty());
        s.ranks[2] = rankView(2, RankState::Stalled);
        raised = m.update(4.0, s);
        QCOMPARE(raised.size(), std::size_t(1));
        QCOMPARE(raised[0].seconds, 4.0);
        // A young rank's comm share is not judged (start-up rendezvous).
        s.ranks[0] = rankView(0, RankState::Evaluating, 0.9, 1.0);
        QVERIFY(m.update(5.0, s).empty());
        // Failure is raised once and never again.
        s.ranks[0] = rankView(0, RankState::Failed);
        s.ranks[0].exitCode = 4;
        s.ranks[0].error = "bad data";
        raised = m.update(6.0, s);
        QCOMPARE(raised.size(), std::size_t(1));
        QVERIFY2(raised[0].message.contains(u"(exit 4): bad data"_s), qPrintable(raised[0].message));
        QVERIFY(m.update(7.0, s).empty());
        QCOMPARE(m.alerts().size(), std::size_t(4)); // comm 1, stall 2, stall 2 again, failed 0
    }

    void timelineStaysBounded()
    {
        RunTimeline tl;
        tl.reset({64, 0.0});
        Snapshot s;
        s.worldSize = 8;
        for (int r = 0; r < 8; ++r)
            s.ranks.push_back(rankView(r, RankState::Evaluating, 0.01 * r));
        s.global.tokens = 1000;
        s.globalPpl.ppl = 3.5;
        std::size_t firstBytes = 0;
        for (int i = 0; i < 10000; ++i) {
            s.tokensPerSecond = i;
            QVERIFY(tl.append(i * 0.1, s));
            if (i == 200)
                firstBytes = tl.bytes();
            QVERIFY(tl.size() <= 64);
        }
        QCOMPARE(tl.times().back(), 9999 * 0.1); // the newest sample is always the last one
        // The start is still covered: the first sample stands for the run's first 1/size or so.
        QVERIFY2(tl.times().front() <= 2 * 999.9 / static_cast<double>(tl.size()), qPrintable(QString::number(tl.times().front())));
        QVERIFY(std::is_sorted(tl.times().begin(), tl.times().end()));
        // Evenly spread: neighbouring samples are one bucket apart (the newest may be partial).
        const auto times = tl.times();
        const double step = times[1] - times[0];
        for (std::size_t i = 1; i + 1 < times.size(); ++i)
            QVERIFY2(std::abs(times[i] - times[i - 1] - step) < 1e-6, qPrintable(QString::number(i)));
        QCOMPARE(tl.rank(RankMetric::TokensPerSecond, 7).size(), tl.size());
        QCOMPARE(tl.global(GlobalMetric::TokensPerSecond).size(), tl.size());
        // Rates are bucket means: s.tokensPerSecond was i, so the samples average to ~4999.5.
        const auto rate = tl.global(GlobalMetric::TokensPerSecond);
        const double meanRate = std::accumulate(rate.begin(), rate.end(), 0.0) / static_cast<double>(rate.size());
        QVERIFY2(std::abs(meanRate - 4999.5) < 200, qPrintable(QString::number(meanRate)));
        QVERIFY(rate.front() < 300); // the first bucket: the run's first snapshots
        QCOMPARE(tl.rank(RankMetric::TokensPerSecond, 7).back(), 800.0F);
        QCOMPARE(tl.rank(RankMetric::WaitShare, 3).front(), 0.03F);
        QCOMPARE(tl.global(GlobalMetric::Ppl).back(), 3.5);
        QVERIFY(tl.bytes() <= firstBytes * 2); // memory does not grow with the run's length
        QVERIFY(tl.rank(RankMetric::TokensPerSecond, 8).empty());
        // Snapshots closer than the minimum interval are skipped.
        RunTimeline sparse;
        sparse.reset({64, 0.5});
        QVERIFY(sparse.append(0.0, s));
        QVERIFY(!sparse.append(0.2, s));
        QVERIFY(sparse.append(0.6, s));
    }

    void refusesBadRequests_data()
    {
        QTest::addColumn<QString>("runId");
        QTest::addColumn<int>("slots");
        QTest::addColumn<int>("code");
        QTest::addColumn<QString>("message");
        QTest::addRow("bad run id") << u"../x"_s << 2 << int(cppl::core::kCliBadArguments) << u"may contain only"_s;
        QTest::addRow("invalid profile") << u"ok"_s << 0 << int(cppl::core::kCliBadArguments) << u"hosts[0].slots"_s;
    }
    void refusesBadRequests()
    {
        QFETCH(QString, runId);
        QFETCH(int, slots);
        QFETCH(int, code);
        QFETCH(QString, message);
        RunEngine e;
        QSignalSpy finished(&e, &RunEngine::finished);
        RunRequest req;
        req.profile = profile(2, u"by-host"_s, 4);
        req.profile.hosts[0].slots = slots;
        req.runId = runId;
        QVERIFY(!e.start(req));
        QVERIFY(finished.wait(5000));
        QCOMPARE(e.outcome().exitCode, code);
        QCOMPARE(e.phase(), RunPhase::Failed);
        QVERIFY2(e.outcome().firstCause.contains(message), qPrintable(e.outcome().firstCause));
    }

    void preflightRefusesMissingModel()
    {
        RunEngine e;
        QSignalSpy hosts(&e, &RunEngine::preflightHost);
        QSignalSpy finished(&e, &RunEngine::finished);
        RunRequest req;
        req.profile = profile(2, u"by-host"_s, 4, m_dir.filePath(u"no-such-model"_s));
        QVERIFY(e.start(req));
        QVERIFY(finished.wait(60000));
        QCOMPARE(e.outcome().exitCode, int(cppl::core::kCliPreflightRefused));
        QCOMPARE(hosts.size(), 1);
        const auto report = hosts.front().front().value<HostPreflight>();
        QVERIFY(report.ran);
        QVERIFY2(report.problems.join(u'\n').contains(u"no-such-model: missing"_s), qPrintable(report.problems.join(u'\n')));
        QVERIFY(!report.report.value(u"agent_version"_s).toString().isEmpty());
        QVERIFY2(e.outcome().firstCause.startsWith(u"pre-flight refused the launch"_s), qPrintable(e.outcome().firstCause));
        QCOMPARE(agentsOfRun(e.runId()).size(), 0);
    }

    /// A whole local run: 4 ranks in 2 groups, every signal in order, the result bit-identical to
    /// one rank, the live merge equal to it, the baseline comparison, logs on disk.
    void wholeRun()
    {
        RunEngine e;
        QList<RunPhase> phases;
        connect(&e, &RunEngine::phaseChanged, this, [&](RunPhase p) { phases << p; });
        QSignalSpy planned(&e, &RunEngine::planned);
        QSignalSpy hosts(&e, &RunEngine::preflightHost);
        QSignalSpy started(&e, &RunEngine::rankStarted);
        QSignalSpy ended(&e, &RunEngine::rankFinished);
        QSignalSpy snapshots(&e, &RunEngine::snapshotReady);
        QSignalSpy finished(&e, &RunEngine::finished);
        RunRequest req;
        req.profile = profile(4, u"size:2"_s, 24);
        req.runId = u"engine-whole-run"_s;
        req.baselineResultJson = m_oneRankResult;
        QVERIFY(e.start(req));
        QCOMPARE(planned.size(), 1);
        QCOMPARE(e.plan().ranks.size(), std::size_t(4));
        QCOMPARE(QString::fromStdString(e.plan().groups), u"0,1;2,3"_s);
        QVERIFY(finished.wait(240000));
        const RunOutcome &o = e.outcome();
        QVERIFY2(o.exitCode == cppl::core::kCliOk, qPrintable(o.firstCause + u'\n' + o.summary));
        QCOMPARE(phases, (QList<RunPhase>{RunPhase::Preflight, RunPhase::Launching, RunPhase::Running, RunPhase::Finished}));
        QCOMPARE(hosts.size(), 1);
        QCOMPARE(started.size(), 4);
        QCOMPARE(ended.size(), 4);
        QVERIFY(snapshots.size() >= 1);
        const QJsonObject mine = QJsonDocument::fromJson(o.resultJson).object();
        const QJsonObject one = QJsonDocument::fromJson(m_oneRankResult).object();
        QCOMPARE(mine.value(u"world_size"_s).toInt(), 4);
        QCOMPARE(mine.value(u"nll_sum_exact"_s).toString(), one.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(mine.value(u"tokens_scored"_s).toInteger(), one.value(u"tokens_scored"_s).toInteger());
        QVERIFY(o.liveMergeMatches.has_value() && *o.liveMergeMatches);
        QVERIFY(o.baselineIdentical.has_value() && *o.baselineIdentical);
        QCOMPARE(o.baselineRelativeDeviation, 0.0);
        QVERIFY(o.telemetryMessages > 0);
        // The last snapshot carries every rank done, and the timeline saw the run.
        const auto snap = e.latestSnapshot();
        QVERIFY(snap);
        QCOMPARE(snap->ranks.size(), std::size_t(4));
        for (const auto &r : snap->ranks)
            QCOMPARE(r.state, RankState::Done);
        QCOMPARE(snap->global.tokens, one.value(u"tokens_scored"_s).toInteger());
        QVERIFY(e.timeline().size() >= 1);
        QCOMPARE(e.timeline().worldSize(), 4);
        // Logs: one per rank, rank 0's with its final estimate.
        QVERIFY(QFile::exists(o.logDir + u"/rank-3.log"_s));
        QVERIFY(readFile(o.logDir + u"/rank-0.log"_s).contains("O Final estimate: PPL = "));
        QVERIFY(e.alerts().empty() || std::none_of(e.alerts().begin(), e.alerts().end(), [](const RunAlert &a) {
                    return a.kind == AlertKind::Failed || a.kind == AlertKind::ResultMismatch || a.kind == AlertKind::Deviation;
                }));
        QCOMPARE(agentsOfRun(e.runId()).size(), 0);
    }

    void baselineThatRanOtherwise_data()
    {
        QTest::addColumn<QString>("dtype");     // the baseline's, doctored
        QTest::addColumn<QString>("device");
        QTest::addColumn<int>("batch");         // 0: the baseline's own
        QTest::addColumn<QString>("alert");     // the Deviation alert's text, in part; empty: none
        QTest::addColumn<QString>("notice");    // a notice, in part; empty: none expected
        // Both profiles left dtype to the agents ("auto"), one run on GPUs: one settings key, two
        // precisions. The gap says nothing about this run's sums: no comparison, and why.
        QTest::addRow("another dtype: not compared")
            << u"bfloat16"_s << u"cpu"_s << 0 << QString() << u"not compared with the one-rank baseline: it ran in bfloat16, this run in float32"_s;
        // Another device kind and batch: compared, and the alert says how the baseline ran.
        QTest::addRow("another device and batch: the alert says so")
            << u"float32"_s << u"cuda:0"_s << 64 << u"; it ran otherwise: device cpu, the baseline's cuda; batch "_s << QString();
        QTest::addRow("the same way: the plain alert") << u"float32"_s << u"cpu"_s << 0 << u"from the one-rank baseline"_s << QString();
    }
    void baselineThatRanOtherwise()
    {
        QFETCH(QString, dtype);
        QFETCH(QString, device);
        QFETCH(int, batch);
        QFETCH(QString, alert);
        QFETCH(QString, notice);
        QJsonObject base = QJsonDocument::fromJson(m_oneRankResult).object();
        base.insert(u"dtype"_s, dtype);
        base.insert(u"device"_s, device);
        if (batch > 0)
            base.insert(u"batch"_s, batch);
        // Another sum, 0.4 % off: past the default tolerance (0, bit-identical).
        base.insert(u"nll_sum_exact"_s, QString(u"xs1:"_s + QString(112, u'0')));
        base.insert(u"ppl"_s, base.value(u"ppl"_s).toDouble() * 1.004);
        RunEngine e;
        QSignalSpy finished(&e, &RunEngine::finished);
        QStringList notices;
        connect(&e, &RunEngine::notice, this, [&](const QString &t) { notices << t; });
        RunRequest req;
        req.profile = profile(2, u"by-host"_s, 24);
        req.runId = u"engine-baseline-%1"_s.arg(QString::fromLatin1(QTest::currentDataTag()).section(u':', 0, 0)).replace(u' ', u'-');
        req.preflight = false;
        req.baselineResultJson = QJsonDocument(base).toJson(QJsonDocument::Compact);
        QVERIFY(e.start(req));
        QVERIFY(finished.wait(240000));
        const RunOutcome &o = e.outcome();
        QVERIFY2(o.exitCode == cppl::core::kCliOk, qPrintable(o.firstCause + u'\n' + o.summary));
        QStringList deviations;
        for (const RunAlert &a : e.alerts())
            if (a.kind == AlertKind::Deviation)
                deviations << a.message;
        if (alert.isEmpty()) {
            QVERIFY2(deviations.isEmpty(), qPrintable(deviations.join(u'\n')));
            QVERIFY(!o.baselineIdentical.has_value());
            QCOMPARE(o.baselineNotCompared, u"it ran in bfloat16, this run in float32"_s);
        } else {
            QVERIFY(o.baselineNotCompared.isEmpty());
            QCOMPARE(deviations.size(), 1);
            QVERIFY2(deviations.front().contains(alert), qPrintable(deviations.front()));
            QVERIFY2(deviations.front().contains(u"deviates -0.398% from the one-rank baseline"_s), qPrintable(deviations.front()));
            QCOMPARE(deviations.front().contains(u"it ran otherwise"_s), batch > 0);
            QVERIFY(o.baselineIdentical.has_value() && !*o.baselineIdentical);
        }
        if (!notice.isEmpty())
            QVERIFY2(notices.join(u'\n').contains(notice), qPrintable(notices.join(u'\n')));
    }

    void stopLeavesNoAgent()
    {
        RunEngine e;
        QSignalSpy finished(&e, &RunEngine::finished);
        RunRequest req;
        req.profile = longRun(profile(4, u"size:2"_s, 0));
        req.runId = u"engine-stop"_s;
        req.preflight = false;
        QVERIFY(e.start(req));
        QTRY_VERIFY_WITH_TIMEOUT(e.latestSnapshot() && e.latestSnapshot()->global.tokens > 0, 120000);
        // Static shards, on_rank_loss fail (longRun): the 4 ranks and no store process of their own.
        QCOMPARE(agentsOfRun(e.runId()).size(), 4);
        e.stop();
        QCOMPARE(e.phase(), RunPhase::Stopping);
        QVERIFY(finished.wait(30000));
        QCOMPARE(e.phase(), RunPhase::Stopped);
        QCOMPARE(e.outcome().exitCode, int(cppl::core::kCliStopped));
        QVERIFY2(!ranToTheEnd(e), "the run ended before it was stopped");
        QTRY_COMPARE_WITH_TIMEOUT(agentsOfRun(e.runId()).size(), 0, 10000);
    }

    void killedRankRaisesAlert()
    {
        RunEngine e;
        QSignalSpy finished(&e, &RunEngine::finished);
        QList<RunAlert> alerts;
        connect(&e, &RunEngine::alertRaised, this, [&](const RunAlert &a) { alerts << a; });
        RunRequest req;
        req.profile = longRun(profile(4, u"size:2"_s, 0), 1); // rank 2, the victim, must not finish first
        req.runId = u"engine-kill"_s;
        req.preflight = false;
        QVERIFY(e.start(req));
        QTRY_VERIFY_WITH_TIMEOUT(e.latestSnapshot() && e.latestSnapshot()->global.tokens > 0, 120000);
        // The agent of rank 2: its environment says RANK=2.
        const QList<qint64> victims = agentsOfRun(e.runId(), "RANK=2");
        QCOMPARE(victims.size(), 1);
        const qint64 victim = victims.front();
        QElapsedTimer t;
        t.start();
        QVERIFY(::kill(static_cast<pid_t>(victim), SIGKILL) == 0);
        auto failedAlert = [&] {
            return std::any_of(alerts.begin(), alerts.end(), [](const RunAlert &a) { return a.kind == AlertKind::Failed && a.rank == 2; });
        };
        // The launcher reports the exit at once (an event); the limit only catches "never", and is
        // generous because a loaded machine delays every process (the time is printed below).
        QTRY_VERIFY_WITH_TIMEOUT(failedAlert(), 30000);
        qInfo("rank 2's failure alert after %lld ms", static_cast<long long>(t.elapsed()));
        const auto it = std::find_if(alerts.begin(), alerts.end(), [](const RunAlert &a) { return a.kind == AlertKind::Failed && a.rank == 2; });
        QVERIFY2(it->message.contains(u"killed by signal 9"_s), qPrintable(it->message));
        // The others may have ended while QTRY_VERIFY ran the event loop: QSignalSpy::wait() would
        // then wait for a second end, so the spy's count is what is checked.
        QTRY_VERIFY_WITH_TIMEOUT(!finished.isEmpty(), 30000);
        QCOMPARE(e.phase(), RunPhase::Failed);
        QCOMPARE(e.outcome().exitCode, int(cppl::core::kCliRankFailed));
        QVERIFY2(e.outcome().firstCause.contains(u"rank 2 on localhost: killed by signal 9"_s), qPrintable(e.outcome().firstCause));
        QVERIFY2(!ranToTheEnd(e), "the run ended before rank 2 was killed");
        QTRY_COMPARE_WITH_TIMEOUT(agentsOfRun(e.runId()).size(), 0, 10000);
    }
};

QTEST_GUILESS_MAIN(TestRunEngine)
#include "tst_run_engine.moc"
