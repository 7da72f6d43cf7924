// SPDX-License-Identifier: MIT
// Recorded runs with real agents through clusterppl-cli and a real SQLite file: a 1/2/4-rank
// sweep (identical bits, efficiency recomputed from the stored data equal to compare --json),
// SIGKILL of the CLI mid-run (the run reopens as interrupted with its samples; no agent survives),
// export/import of a real run, and the history commands' exit codes.
#include "history/comparison.h"
#include "history/run_export.h"
#include "history/run_history.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_verify.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QSet>
#include <QTest>
#include <QThread>

#include <signal.h>

#include <cmath>

using namespace Qt::StringLiterals;
using namespace cppl::core::history;

using cppl::test::agentsOfRun;
using cppl::test::readFile;
using cppl::test::writeFile;

using cppl::test::kCli;
using cppl::test::kAgent;

namespace {

QByteArray profileJson(int slots, int maxWindows)
{
    return cppl::test::localProfileJson(u"store-test"_s, kAgent, slots, u"size:2"_s, maxWindows).toUtf8();
}

bool near(double a, double b)
{
    return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(b));
}

} // namespace

class TestHistoryRuns : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_store;
    QString m_profile;

    cppl::test::ProcessResult cli(const QStringList &args, int timeoutMs = 60000)
    {
        return cppl::test::runProcess(kCli, args, timeoutMs);
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_STATE_HOME", m_dir.filePath(u"state"_s).toUtf8());
        m_store = m_dir.filePath(u"history/runs.sqlite"_s);
        qputenv("CLUSTERPPL_STORE", m_store.toUtf8()); // the CLI's store, for every command below
        m_profile = m_dir.filePath(u"profile.json"_s);
        QVERIFY(writeFile(m_profile, profileJson(4, 16)));
    }

    void sweepOfOneTwoFourRanks()
    {
        const QString json = m_dir.filePath(u"sweep.json"_s);
        const auto sweep = cli({u"sweep"_s, u"--profile"_s, m_profile, u"--nodes"_s, u"1,2,4"_s, u"--json"_s, json, u"--run-id-prefix"_s, u"sw"_s,
                            u"--no-preflight"_s},
                           600000);
        CPPL_VERIFY2(sweep.exitCode == 0, qPrintable(sweep.describe()));
        qInfo("%s", qPrintable(sweep.out));
        QVERIFY(sweep.out.contains(u"recommendation (threshold 75%)"_s));
        RunHistory s(m_store);
        std::vector<RunRecord> runs;
        for (const QString &id : {u"sw-r1"_s, u"sw-r2"_s, u"sw-r4"_s}) {
            auto rec = s.get(id);
            CPPL_VERIFY2(rec, qPrintable(id));
            QCOMPARE(rec->status, RunStatus::Finished);
            QCOMPARE(rec->source, u"sweep"_s);
            runs.push_back(std::move(*rec));
        }
        QCOMPARE(runs[0].worldSize, 1);
        QCOMPARE(runs[1].worldSize, 2);
        QCOMPARE(runs[2].worldSize, 4);
        QCOMPARE(runs[2].groupsCount, 2);
        // The same bits on every rank count, and the same settings key (so r1 is the baseline).
        for (const RunRecord &r : runs) {
            QCOMPARE(r.nllSumExact, runs[0].nllSumExact);
            QCOMPARE(r.tokensScored, runs[0].tokensScored);
            QCOMPARE(*r.ppl, *runs[0].ppl);
            QCOMPARE(r.settingsKey, runs[0].settingsKey);
            QVERIFY(!r.versions.value(u"agent"_s).toString().isEmpty());
        }
        QCOMPARE(runs[2].ranks.size(), std::size_t(4));
        QVERIFY(runs[2].samples.size() >= 4); // at least the final per-rank sample
        QVERIFY(!runs[2].logs.empty());
        // Efficiency and comm share recomputed here from the stored rows, against the sweep's JSON.
        const QJsonObject out = cppl::test::readJson(json);
        const QJsonArray pts = out[u"points"_s].toArray();
        QCOMPARE(pts.size(), 3);
        const double t1 = *runs[0].tokensPerSecond;
        for (int i = 0; i < 3; ++i) {
            const RunRecord &r = runs[static_cast<std::size_t>(i)];
            const QJsonObject p = pts[i].toObject();
            QCOMPARE(p[u"run_id"_s].toString(), r.runId);
            const double eff = *r.tokensPerSecond / (t1 * r.worldSize);
            double compute = 0, wait = 0, transfer = 0;
            for (const RankSummary &k : r.ranks) {
                compute += k.computeSeconds;
                wait += k.waitSeconds;
                transfer += k.transferSeconds;
            }
            const double waitShare = wait / (compute + wait + transfer);
            const double transferShare = transfer / (compute + wait + transfer);
            CPPL_VERIFY2(near(p[u"efficiency"_s].toDouble(), eff), qPrintable(u"%1 vs %2"_s.arg(p[u"efficiency"_s].toDouble()).arg(eff)));
            QVERIFY(near(p[u"wait_share"_s].toDouble(), waitShare));
            QVERIFY(near(p[u"transfer_share"_s].toDouble(), transferShare));
            QVERIFY(near(p[u"tokens_per_second"_s].toDouble(), *r.tokensPerSecond));
            QCOMPARE(p[u"deviation"_s].toString(), u"bit-identical"_s);
            qInfo("%d ranks: %.1f tokens/s, efficiency %.1f%%, wait %.2f%%, transfer %.3f%%", r.worldSize, *r.tokensPerSecond, 100 * eff,
                  100 * waitShare, 100 * transferShare);
        }
        const QJsonObject proj = out[u"projection"_s].toObject();
        QVERIFY(proj[u"available"_s].toBool());
        // The CPUs the ranks could use, from rank 0's result (no pre-flight). On a machine with
        // fewer than 4, the 4 ranks share its cores: that run is said so and left out of the fit
        // (fitted on 1 and 2, nothing is left to hold out); with 4 or more, all three are fitted.
        const int cpus = runs[2].hosts[0].toObject()[u"cpus"_s].toInt();
        QVERIFY2(cpus >= 1, QJsonDocument(runs[2].hosts).toJson().constData());
        QCOMPARE(runs[0].hosts[0].toObject()[u"cpus"_s].toInt(), cpus);
        if (cpus < 4) {
            QCOMPARE(pts[2].toObject()[u"shared_hosts"_s].toString(), u"4 ranks share the %1 of localhost"_s.arg(cpus == 1 ? u"1 CPU core"_s : u"%1 CPU cores"_s.arg(cpus)));
            QCOMPARE(proj[u"excluded_runs"_s].toArray(), QJsonArray{u"sw-r4"_s});
            QVERIFY(!proj[u"held_out"_s].toObject()[u"available"_s].toBool());
            CPPL_VERIFY2(sweep.out.contains(u"warning: run sw-r4: 4 ranks share the"_s) && sweep.out.contains(u"left out of the fit: sw-r4"_s),
                         qPrintable(sweep.out));
        } else {
            QVERIFY(pts[2].toObject()[u"shared_hosts"_s].isNull());
            QVERIFY(proj[u"excluded_runs"_s].toArray().isEmpty());
            QVERIFY(proj[u"held_out"_s].toObject()[u"available"_s].toBool());
            qInfo("held-out (fit on 1, 2; predict 4): efficiency %+.1f points, comm share %+.2f points, throughput %+.1f%%",
                  proj[u"held_out"_s].toObject()[u"efficiency_error_points"_s].toDouble(),
                  proj[u"held_out"_s].toObject()[u"comm_share_error_points"_s].toDouble(),
                  100 * proj[u"held_out"_s].toObject()[u"throughput_relative_error"_s].toDouble());
        }
        // compare --json over the same ids gives the same figures.
        const auto c = cli({u"compare"_s, u"sw-r4"_s, u"sw-r1"_s, u"sw-r2"_s, u"--json"_s});
        CPPL_VERIFY2(c.exitCode == 0, qPrintable(c.describe()));
        const QJsonObject cmp = QJsonDocument::fromJson(c.out.toUtf8()).object();
        QCOMPARE(cmp[u"points"_s].toArray(), pts);
        QCOMPARE(cmp[u"recommended_world_size"_s], out[u"recommended_world_size"_s]);
        // A later run of the same settings finds r1 as its baseline and says so.
        const auto again = cli({u"run"_s, u"--profile"_s, m_profile, u"--run-id"_s, u"after-sweep"_s, u"--no-preflight"_s}, 300000);
        CPPL_VERIFY2(again.exitCode == 0, qPrintable(again.describe()));
        CPPL_VERIFY2(again.err.contains(u"baseline: one-rank run sw-r1"_s), qPrintable(again.err));
        // A run id already stored: the old run stays, the new one is recorded next to it.
        const auto dup = cli({u"run"_s, u"--profile"_s, m_profile, u"--run-id"_s, u"after-sweep"_s, u"--no-preflight"_s}, 300000);
        CPPL_VERIFY2(dup.exitCode == 0, qPrintable(dup.describe()));
        CPPL_VERIFY2(dup.err.contains(u"run after-sweep is already in the history; this run is recorded as after-sweep.2"_s), qPrintable(dup.err));
        QCOMPARE(RunHistory(m_store).get(u"after-sweep.2"_s)->nllSumExact, runs[0].nllSumExact);
        const auto unstored = cli({u"run"_s, u"--profile"_s, m_profile, u"--run-id"_s, u"sw-r1"_s, u"--no-preflight"_s, u"--no-store"_s}, 300000);
        CPPL_VERIFY2(unstored.exitCode == 0, qPrintable(unstored.describe()));
        QCOMPARE(RunHistory(m_store).list().size(), std::size_t(5)); // the --no-store run is not there
    }

    void sigkillOfTheCliLeavesAnInterruptedRun()
    {
        const QString longProfile = m_dir.filePath(u"long.json"_s);
        QVERIFY(writeFile(longProfile, profileJson(4, 0))); // every window: long enough to interrupt
        const QString runId = u"killed-mid-run"_s;
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(u"CLUSTERPPL_STORE"_s, m_store);
        // Rank 0 sleeps 40 ms a batch (the local launcher passes the CLI's environment on), so the
        // run lasts seconds and, with static shards (the dynamic default would let the others take
        // its batches), the other ranks wait for it at every round: the kill below always finds all
        // four agents, however fast this machine evaluates the text.
        env.insert(u"CLUSTERPPL_TEST_SLOW_RANK"_s, u"0:40"_s);
        p.setProcessEnvironment(env);
        p.start(kCli, {u"run"_s, u"--profile"_s, longProfile, u"--run-id"_s, runId, u"--no-preflight"_s, u"--schedule"_s, u"static"_s});
        QVERIFY(p.waitForStarted());
        // Wait until the history holds samples of every rank twice (written by the CLI's writer
        // thread, read here through another connection), then kill.
        QElapsedTimer t;
        t.start();
        int before = 0;
        while (t.elapsed() < 120000 && p.state() == QProcess::Running) {
            QThread::msleep(250);
            const RunHistory s(m_store);
            if (const auto rec = s.get(runId)) {
                QCOMPARE(rec->status, RunStatus::Running); // its process is alive: not interrupted
                before = static_cast<int>(rec->samples.size());
                if (before >= 8)
                    break;
            }
        }
        CPPL_VERIFY2(before >= 8, qPrintable(u"samples before the kill: %1\n"_s.arg(before) + QString::fromUtf8(p.readAllStandardError())));
        QCOMPARE(cppl::test::ranksOfRun(runId).size(), 4); // the rendezvous store's process too (on_rank_loss continue): none may outlive the CLI
        ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
        QVERIFY(p.waitForFinished(10000));
        t.restart();
        while (!agentsOfRun(runId).isEmpty() && t.elapsed() < 10000)
            QThread::msleep(100);
        QCOMPARE(agentsOfRun(runId).size(), 0);
        qInfo("every agent gone %lld ms after SIGKILL of the CLI", static_cast<long long>(t.elapsed()));
        RunHistory s(m_store);
        QVERIFY(s.interruptedOnOpen().contains(runId));
        const auto rec = s.get(runId);
        QCOMPARE(rec->status, RunStatus::Interrupted);
        CPPL_VERIFY2(static_cast<int>(rec->samples.size()) >= before, qPrintable(u"%1 < %2"_s.arg(rec->samples.size()).arg(before)));
        QVERIFY(rec->ended > rec->started);
        QCOMPARE(rec->worldSize, 4);
        QVERIFY(!rec->profile.isEmpty());
        qInfo("interrupted run: %zu samples (%d seen before the kill), %zu log lines", rec->samples.size(), before, rec->logs.size());
        const auto list = cli({u"list"_s, u"--status"_s, u"interrupted"_s});
        CPPL_VERIFY2(list.exitCode == 0 && list.out.contains(runId), qPrintable(list.describe()));
    }

    void exportImportOfARealRun()
    {
        const QString file = m_dir.filePath(u"sw-r2.json"_s);
        auto r = cli({u"export"_s, u"sw-r2"_s, u"-o"_s, file});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QString other = m_dir.filePath(u"other/runs.sqlite"_s);
        r = cli({u"import"_s, file, u"--store"_s, other});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const RunRecord a = *RunHistory(m_store).get(u"sw-r2"_s);
        const RunRecord b = *RunHistory(other).get(u"sw-r2"_s);
        QCOMPARE(runToJson(b), runToJson(a));
        QCOMPARE(b.samples.size(), a.samples.size());
        // A bare agent result (rank 0's JSON) imports as a finished run with its exact sum.
        const QString result = m_dir.filePath(u"result.json"_s);
        QVERIFY(writeFile(result, a.resultJson));
        r = cli({u"import"_s, result, u"--store"_s, other, u"--run-id"_s, u"bare"_s});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const RunRecord bare = *RunHistory(other).get(u"bare"_s);
        QCOMPARE(bare.nllSumExact, a.nllSumExact);
        QCOMPARE(bare.worldSize, 2);
        QCOMPARE(bare.ranks.size(), std::size_t(2));
        r = cli({u"import"_s, file, u"--store"_s, other});
        QCOMPARE(r.exitCode, 2);
        CPPL_VERIFY2(r.err.contains(u"already in the store"_s), qPrintable(r.err));
    }

    void historyCommandsAndTheirExitCodes()
    {
        auto r = cli({u"list"_s});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        for (const QString &id : {u"sw-r1"_s, u"sw-r2"_s, u"sw-r4"_s, u"after-sweep"_s})
            CPPL_VERIFY2(r.out.contains(id), qPrintable(r.out));
        r = cli({u"list"_s, u"--world-size"_s, u"2"_s, u"--json"_s});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QJsonArray runs = QJsonDocument::fromJson(r.out.toUtf8()).object()[u"runs"_s].toArray();
        QCOMPARE(runs.size(), 1);
        QCOMPARE(runs[0].toObject()[u"run_id"_s].toString(), u"sw-r2"_s);
        r = cli({u"show"_s, u"sw-r4"_s});
        CPPL_VERIFY2(r.exitCode == 0 && r.out.contains(u"4 ranks on 1 node, 2 groups"_s), qPrintable(r.describe()));
        struct Case { QStringList args; int code; QString message; };
        const QList<Case> cases{
            {{u"show"_s, u"nope"_s}, 4, u"no run \"nope\""_s},
            {{u"delete"_s, u"nope"_s}, 4, u"no run \"nope\""_s},
            {{u"export"_s, u"nope"_s, u"-o"_s, m_dir.filePath(u"x.json"_s)}, 4, u"no run \"nope\""_s},
            {{u"compare"_s}, 2, u"compare takes one or more RUN ids"_s},
            {{u"list"_s, u"--status"_s, u"bogus"_s}, 2, u"--status: \"bogus\""_s},
            {{u"list"_s, u"--since"_s, u"yesterday"_s}, 2, u"--since: \"yesterday\" is not an ISO 8601 date"_s},
            {{u"compare"_s, u"sw-r1"_s, u"--threshold"_s, u"150"_s}, 2, u"--threshold"_s},
            {{u"import"_s, m_dir.filePath(u"missing.json"_s)}, 3, u"does not exist"_s},
            {{u"sweep"_s, u"--profile"_s, m_profile, u"--nodes"_s, u"1,8"_s}, 2, u"8 ranks asked for"_s},
            {{u"list"_s, u"--store"_s, u"/proc/no/such/dir/runs.sqlite"_s}, 3, u"/proc/no/such/dir"_s},
        };
        for (const Case &c : cases) {
            const auto res = cli(c.args);
            CPPL_VERIFY2(res.exitCode == c.code && res.err.contains(c.message), qPrintable(c.args.join(u' ') + u'\n' + res.describe()));
        }
        r = cli({u"delete"_s, u"after-sweep"_s});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QVERIFY(!RunHistory(m_store).contains(u"after-sweep"_s));
    }

    void precisionSweep()
    {
        // sweep --quantize: each precision of one checkpoint at one rank count, stored (a settings key
        // each), every run compared with the float model token by token; the table and the
        // JSON put quality, speed and memory side by side. Its own store: the counts above stay.
        const QString store = m_dir.filePath(u"precision/runs.sqlite"_s), json = m_dir.filePath(u"precision.json"_s);
        const auto sweep = cli({u"sweep"_s, u"--profile"_s, m_profile, u"--quantize"_s, u"none,int8,int4"_s, u"--nodes"_s, u"2"_s, u"--json"_s, json,
                                u"--run-id-prefix"_s, u"pr"_s, u"--no-preflight"_s, u"--store"_s, store},
                               600000);
        CPPL_VERIFY2(sweep.exitCode == 0, qPrintable(sweep.describe()));
        qInfo("%s", qPrintable(sweep.out));
        QVERIFY(sweep.out.contains(u"KLD mean"_s) && sweep.out.contains(u"int4-sym"_s) && !sweep.out.contains(u"(no reference)"_s));
        QVERIFY2(!sweep.out.contains(u"recommendation"_s), qPrintable(sweep.out)); // one rank count: no scaling table
        RunHistory s(store);
        std::vector<RunRecord> runs;
        QStringList keys;
        for (const QString &id : {u"pr-r2-none"_s, u"pr-r2-int8"_s, u"pr-r2-int4"_s}) {
            auto rec = s.get(id);
            CPPL_VERIFY2(rec && rec->status == RunStatus::Finished && rec->worldSize == 2 && rec->source == u"sweep"_s, qPrintable(id));
            keys << rec->settingsKey;
            runs.push_back(std::move(*rec));
        }
        QCOMPARE(QSet<QString>(keys.begin(), keys.end()).size(), 3);
        const QJsonArray rows = QJsonDocument::fromJson(readFile(json)).object().value(u"precisions"_s).toArray();
        QCOMPARE(rows.size(), 3);
        QCOMPARE(rows[0].toObject().value(u"precision"_s).toString(), u"float32"_s);
        // The float run against itself: the same logits, so no divergence at all.
        QCOMPARE(rows[0].toObject().value(u"reference"_s).toObject().value(u"kld_mean"_s).toDouble(), 0.0);
        QCOMPARE(rows[0].toObject().value(u"reference"_s).toObject().value(u"same_top"_s).toDouble(), 1.0);
        QCOMPARE(rows[0].toObject().value(u"speedup"_s).toDouble(), 1.0);
        for (int i = 0; i < 3; ++i) {
            const QJsonObject result = QJsonDocument::fromJson(runs[std::size_t(i)].resultJson).object();
            const QJsonObject ref = result.value(u"reference"_s).toObject();
            QCOMPARE(ref.value(u"model"_s).toObject().value(u"path"_s).toString(), cppl::test::kModel);
            const QJsonObject row = rows[i].toObject();
            QCOMPARE(row.value(u"precision"_s).toString(), QStringList({u"float32"_s, u"int8"_s, u"int4-sym"_s})[i]);
            QCOMPARE(row.value(u"reference"_s).toObject().value(u"kld_mean"_s).toDouble(), ref.value(u"kld_mean"_s).toDouble());
            QCOMPARE(row.value(u"reference"_s).toObject().value(u"same_top"_s).toDouble(), ref.value(u"same_top"_s).toDouble());
            QVERIFY(i == 0 || row.value(u"weight_bytes"_s).toInteger() < rows[0].toObject().value(u"weight_bytes"_s).toInteger());
        }
        QVERIFY(rows[1].toObject()[u"reference"_s].toObject()[u"kld_mean"_s].toDouble() > 0);
        QVERIFY(rows[1].toObject()[u"reference"_s].toObject()[u"kld_mean"_s].toDouble() < rows[2].toObject()[u"reference"_s].toObject()[u"kld_mean"_s].toDouble());
        for (const auto &[args, message] : {std::pair{QStringList{u"--quantize"_s, u"int3"_s}, u"--quantize: \"int3\" is not one of none, int8"_s},
                                           std::pair{QStringList{u"--quantize"_s, u"int8,int8"_s}, u"\"int8\" is listed twice"_s},
                                           std::pair{QStringList{u"--reference-model"_s, cppl::test::kModel}, u"--reference-model goes with --quantize"_s}}) {
            const auto bad = cli(QStringList{u"sweep"_s, u"--profile"_s, m_profile, u"--store"_s, store} + args);
            CPPL_VERIFY2(bad.exitCode == 2 && bad.err.contains(message), qPrintable(bad.describe()));
        }
    }

    /// Without CLUSTERPPL_STORE the CLI opens the history the dashboard opens
    /// (RunHistory::defaultPath(), no application name in it), made once from the stores each kept
    /// in earlier builds: here the CLI's, holding this test's real runs.
    void theCliAdoptsItsEarlierHistory()
    {
        QTemporaryDir home;
        const auto restore = qScopeGuard([this] {
            qputenv("CLUSTERPPL_STORE", m_store.toUtf8());
            qunsetenv("XDG_DATA_HOME");
        });
        qunsetenv("CLUSTERPPL_STORE");
        qputenv("XDG_DATA_HOME", QFile::encodeName(home.path()));
        const QString earlier = home.filePath(u"clusterppl-cli/runs.sqlite"_s);
        QVERIFY(QDir().mkpath(QFileInfo(earlier).absolutePath()));
        QVERIFY(QFile::copy(m_store, earlier)); // the writer closed it: no write-ahead log
        const std::size_t stored = RunHistory(m_store).list().size();
        QVERIFY(stored >= 3);

        auto r = cli({u"list"_s});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QString shared = home.filePath(u"clusterppl/runs.sqlite"_s);
        CPPL_VERIFY2(r.err.contains(u"clusterppl-cli: run history: %1 runs from %2\n"_s.arg(stored).arg(earlier)), qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.contains(u"the dashboard and clusterppl-cli now share "_s + shared), qPrintable(r.describe()));
        CPPL_VERIFY2(r.out.contains(u"sw-r1"_s) && r.out.contains(u" runs in "_s + shared), qPrintable(r.out));
        QCOMPARE(RunHistory(shared).list().size(), stored);
        // Once.
        r = cli({u"list"_s});
        CPPL_VERIFY2(r.exitCode == 0 && !r.err.contains(u"run history"_s) && r.out.contains(u"sw-r1"_s), qPrintable(r.describe()));
        // --store names another file: the default is not looked at.
        QVERIFY(QFile::remove(shared));
        r = cli({u"list"_s, u"--store"_s, m_store});
        CPPL_VERIFY2(r.exitCode == 0 && !r.err.contains(u"run history"_s) && !QFileInfo::exists(shared), qPrintable(r.describe()));
    }
};

QTEST_GUILESS_MAIN(TestHistoryRuns)
#include "tst_history_runs.moc"
