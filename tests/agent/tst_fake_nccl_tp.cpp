// SPDX-License-Identifier: MIT
// Tensor-parallel groups over NCCL on a CPU: real agent processes load the fake CUDA runtime and
// NCCL of tests/fakes (LD_LIBRARY_PATH). comm-check --tensor-parallel N checks every reduction of
// the groups bit for bit against the member-order sums (N = 2, N = 4, 2 x 2), GPU memory gathered
// on the device included; a tensor-parallel collective that never completes ends within
// --timeout naming its group; a member stuck in one when its peer dies is ended by the watchdog
// without blocking; eval over an NCCL group (the model on the CPU: the reductions staged through
// the fake GPU) has the Gloo group's bits, 2 x 2 has 2 x 1's, also after a lost follower took its
// group out.
#include "fake_gpu.h"
#include "reference_fixture.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QJsonArray>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>
#include <cstdint>
#include <fstream>
#include <random>
#include <tuple>

using namespace Qt::StringLiterals;
using cppl::test::fakeGpuEnvironment;
using cppl::test::withNcclTrace;
using cppl::test::kAgent;
using cppl::test::runTimed;
using cppl::test::TimedRun;

namespace {

QString describe(const TimedRun &r)
{
    return u"after %1 ms%2: %3"_s.arg(r.ms).arg(r.timedOut ? u" (timed out, killed)"_s : QString(), r.result.describe());
}

QStringList commCheckArgs(const QString &backend, int n, int timeoutSeconds, const QString &words)
{
    return {u"comm-check"_s, u"--backend"_s, backend, u"--tensor-parallel"_s, QString::number(n), u"--words"_s, words, u"--timeout"_s,
            QString::number(timeoutSeconds)};
}

QStringList standalone(int ranks, const QStringList &args)
{
    return QStringList{u"run"_s, u"--standalone"_s, u"--nproc-per-node"_s, QString::number(ranks), u"--"_s} + args;
}

bool waitForLine(cppl::test::HandRanks &ranks, int rank, const QString &text, qint64 ms)
{
    while (!ranks.err(rank).contains(text) && ranks.elapsed() < ms)
        QThread::msleep(50);
    return ranks.err(rank).contains(text);
}


} // namespace

class TestFakeNcclTensorParallel : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    /// Every reduction exact on every member, over NCCL (GPU memory gathered on the device) and
    /// over Gloo alike: one group of 2, one of 4, two of 2.
    void commCheck_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("n");
        QTest::addRow("N = 2") << 2 << 2;
        QTest::addRow("N = 4") << 4 << 4;
        QTest::addRow("2 x 2") << 4 << 2;
    }
    void commCheck()
    {
        QFETCH(int, ranks);
        QFETCH(int, n);
        const QRegularExpression verdict(u"comm-check: tensor-parallel group 0, member 0: (\\d+) elements: (exact|\\d+ WRONG),"_s);
        QStringList verdicts[2];
        for (int b = 0; b < 2; ++b) {
            const QString backend = b == 0 ? u"nccl"_s : u"gloo"_s;
            const TimedRun r = runTimed(kAgent, standalone(ranks, commCheckArgs(backend, n, 60, u"1,7,65536"_s)), fakeGpuEnvironment(ranks), 240000);
            CPPL_VERIFY2(r.result.exitCode == 0, qPrintable(describe(r)));
            CPPL_VERIFY2(r.result.out.contains(u"comm-check: backend %1, tensor-parallel groups of %2, %3 groups"_s.arg(backend).arg(n).arg(ranks / n)),
                         qPrintable(describe(r)));
            CPPL_VERIFY2(r.result.out.contains(u"GPU memory gathered on the device"_s) == (b == 0), qPrintable(describe(r)));
            CPPL_VERIFY2(r.result.out.contains(u"every tensor-parallel reduction exact on every rank"_s), qPrintable(describe(r)));
            for (auto it = verdict.globalMatch(r.result.out); it.hasNext();) {
                const auto m = it.next();
                verdicts[b] << m.captured(1) + u' ' + m.captured(2);
            }
        }
        QCOMPARE(verdicts[0], (QStringList{u"1 exact"_s, u"7 exact"_s, u"65536 exact"_s}));
        QCOMPARE(verdicts[0], verdicts[1]);
    }

    /// A tensor-parallel collective that never completes (rank 1's second collective: the first
    /// connects the group) ends every member within --timeout, and the message names the group.
    void hangEndsAtTheTimeout()
    {
        QProcessEnvironment env = fakeGpuEnvironment(2);
        env.insert(u"CPPL_FAKE_NCCL_HANG"_s, u"1:1"_s);
        cppl::test::HandRanks ranks(2, commCheckArgs(u"nccl"_s, 2, 5, u"1,7"_s), env);
        const QList<cppl::test::RankEnd> ends = ranks.wait(120000);
        const QString all = cppl::test::describeEnds(ends);
        CPPL_VERIFY2(ends[1].err.contains(u"never completes (CPPL_FAKE_NCCL_HANG)"_s), qPrintable(all));
        CPPL_VERIFY2(all.contains(u"in the tensor-parallel group 0 did not finish within 5 s"_s), qPrintable(all));
        for (const cppl::test::RankEnd &e : ends)
            CPPL_VERIFY2(e.exitCode > 0 && e.ms >= 5000 && e.ms < 60000, qPrintable(all));
    }

    /// A member stuck in a tensor-parallel collective when its peer dies: the watchdog ends it at
    /// once, without an NCCL call that could block (an abort here would: ABORT_BLOCKS), long
    /// before --timeout.
    void watchdogEndsAStuckMember()
    {
        QProcessEnvironment env = fakeGpuEnvironment(2);
        env.insert(u"CPPL_FAKE_NCCL_HANG"_s, u"1:1"_s);
        env.insert(u"CPPL_FAKE_NCCL_ABORT_BLOCKS"_s, u"1"_s);
        cppl::test::HandRanks ranks(2, commCheckArgs(u"nccl"_s, 2, 60, u"1,7"_s), env);
        QVERIFY2(waitForLine(ranks, 1, u"never completes (CPPL_FAKE_NCCL_HANG)"_s, 60000), qPrintable(ranks.err(1)));
        QCOMPARE(::kill(static_cast<pid_t>(ranks.pid(0)), SIGKILL), 0);
        const QList<cppl::test::RankEnd> ends = ranks.wait(120000);
        const QString all = cppl::test::describeEnds(ends);
        CPPL_VERIFY2(ends[1].exitCode > 0 && ends[1].ms < 40000, qPrintable(all));
        CPPL_VERIFY2(ends[1].err.contains(u"rank 0"_s), qPrintable(all));
    }

    /// eval over an NCCL tensor-parallel group (the model on the CPU: its reductions staged through
    /// the fake GPU) has the Gloo group's bits; two groups have one group's.
    void evalOverNcclGroups()
    {
        QTemporaryDir dir;
        const QString model = dir.filePath(u"m"_s);
        const cppl::test::ProcessResult made
            = cppl::test::runReference(u"make_checkpoint.py"_s, {u"--out"_s, model, u"--arch"_s, u"llama"_s, u"--gqa"_s});
        QVERIFY2(made.exitCode == 0, qPrintable(made.describe()));
        const QString tokens = cppl::test::writeRandomTokens(dir.filePath(QStringLiteral("tokens.u32")), 700, 97, 4);
        auto eval = [&](int ranks, const QString &backend, const QString &json, const QStringList &more = {},
                        const QProcessEnvironment &extra = {}) {
            const QStringList args{u"eval"_s,    u"--model"_s,   model,   u"--tokens"_s,  tokens,   u"--context"_s,         u"64"_s,
                                   u"--batch"_s, u"2"_s,         u"--threads"_s, u"1"_s,  u"--quiet"_s, u"--device"_s,     u"cpu"_s,
                                   u"--backend"_s, backend,      u"--tensor-parallel"_s, u"2"_s, u"--timeout"_s, u"60"_s, u"--json"_s,
                                   dir.filePath(json)};
            QProcessEnvironment env = fakeGpuEnvironment(ranks);
            for (const QString &k : extra.keys())
                env.insert(k, extra.value(k));
            return runTimed(kAgent, standalone(ranks, args + more), env, 300000);
        };
        for (const auto &[ranks, backend, json] : {std::tuple{2, u"gloo"_s, u"gloo.json"_s}, {2, u"nccl"_s, u"nccl.json"_s}, {4, u"nccl"_s, u"nccl2.json"_s}}) {
            const TimedRun r = eval(ranks, backend, json, {}, withNcclTrace({}));
            CPPL_VERIFY2(r.result.exitCode == 0, qPrintable(describe(r)));
            if (ranks == 4) {
                // Each group's communicator carries activations: NCCL's own channel count. The
                // data-parallel world (the two leaders) carries the sums: one channel.
                for (int g = 0; g < 2; ++g)
                    CPPL_VERIFY2(r.result.err.contains(QRegularExpression(
                                     u"making communicator 'clusterppl tensor-parallel group %1' \\(rank [01] of 2\\)[^\\n]*, CTAs of NCCL's choice\\n"_s.arg(g))),
                                 qPrintable(describe(r)));
                CPPL_VERIFY2(r.result.err.contains(QRegularExpression(u"making communicator 'clusterppl world' \\(rank 0 of 2\\)[^\\n]*, at most 1 CTAs\\n"_s)),
                             qPrintable(describe(r)));
                QVERIFY(!r.result.err.contains(QRegularExpression(u"making communicator 'clusterppl (world|node group|leaders)'[^\\n]*NCCL's choice"_s)));
            }
        }
        const QJsonObject gloo = cppl::test::readJson(dir.filePath(u"gloo.json"_s)), one = cppl::test::readJson(dir.filePath(u"nccl.json"_s)),
                          two = cppl::test::readJson(dir.filePath(u"nccl2.json"_s));
        QCOMPARE(one.value(u"backend"_s).toString(), u"nccl"_s);
        for (const QJsonObject &j : {one, two}) {
            QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), gloo.value(u"nll_sum_exact"_s).toString());
            QCOMPARE(j.value(u"nll_sq_sum_exact"_s).toString(), gloo.value(u"nll_sq_sum_exact"_s).toString());
            QCOMPARE(j.value(u"tokens_scored"_s).toInteger(), gloo.value(u"tokens_scored"_s).toInteger());
        }
        // The shared-GPU test mode (CLUSTERPPL_NCCL_SHARE_GPU=1): 2 x 2 on ONE GPU, each process its
        // own NCCL host, a follower's (which makes no data-parallel communicator) set by its
        // group's communicator from the rank it started as; the same bits.
        QProcessEnvironment shared;
        shared.insert(u"CPPL_FAKE_CUDA_DEVICES"_s, u"1"_s);
        shared.insert(u"CLUSTERPPL_NCCL_SHARE_GPU"_s, u"1"_s);
        const TimedRun sh = eval(4, u"nccl"_s, u"shared.json"_s, {}, shared);
        CPPL_VERIFY2(sh.result.exitCode == 0, qPrintable(describe(sh)));
        for (int rank = 0; rank < 4; ++rank)
            CPPL_VERIFY2(sh.result.err.contains(u"-rank%1, NCCL_NET=Socket"_s.arg(rank)), qPrintable(describe(sh)));
        QCOMPARE(cppl::test::readJson(dir.filePath(u"shared.json"_s)).value(u"nll_sum_exact"_s).toString(), gloo.value(u"nll_sum_exact"_s).toString());
        // A follower of group 1 (rank 3) dies after its first range (every rank slowed so that the
        // run outlasts it): its leader leaves at once, the leaders' NCCL communicators regroup,
        // group 0 keeps its own, redoes group 1's batches, and ends with the 2 x 1 bits.
        QProcessEnvironment faults;
        faults.insert(u"CLUSTERPPL_TEST_DIE"_s, u"3:tp-range"_s);
        faults.insert(u"CLUSTERPPL_TEST_SLOW_RANK"_s, u"*:40"_s);
        const TimedRun r = eval(4, u"nccl"_s, u"lost.json"_s,
                                {u"--on-rank-loss"_s, u"continue"_s, u"--schedule"_s, u"dynamic"_s, u"--sync-every-tokens"_s, u"200"_s}, faults);
        CPPL_VERIFY2(r.result.exitCode == 0 && r.ms < 45000, qPrintable(describe(r)));
        CPPL_VERIFY2(r.result.err.contains(u"tensor-parallel group 1 lost rank 3 ("_s), qPrintable(describe(r)));
        CPPL_VERIFY2(r.result.err.contains(u"nccl regrouping (epoch 1, 1 ranks): "_s), qPrintable(describe(r)));
        const QJsonObject lost = cppl::test::readJson(dir.filePath(u"lost.json"_s));
        QCOMPARE(lost.value(u"nll_sum_exact"_s).toString(), one.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(lost.value(u"tokens_scored"_s).toInteger(), one.value(u"tokens_scored"_s).toInteger());
        QCOMPARE(lost.value(u"lost_ranks"_s).toArray().size(), 1);
        QCOMPARE(lost.value(u"lost_ranks"_s).toArray().first().toObject().value(u"rank"_s).toInt(), 2);
    }
};

QTEST_GUILESS_MAIN(TestFakeNcclTensorParallel)
#include "tst_fake_nccl_tp.moc"
