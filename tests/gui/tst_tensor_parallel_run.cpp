// SPDX-License-Identifier: MIT
// `clusterppl-cli run` with tensor parallelism, end to end on the local launcher: the profile's
// evaluation.tensor_parallel and `run --tensor-parallel` reach every agent, a fixed N gives the same
// bits at any data-parallel width under the dynamic schedule, the live merge of every rank's
// telemetry equals the result (a group's sums counted once), and N = 1 is a deviation, not the same
// bits (docs/models.md).
#include "launch/launch_plan.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_verify.h"

#include "cppl/cluster_profile.h"

#include <QJsonObject>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <utility>

using namespace Qt::StringLiterals;
using cppl::test::kAgent;
using cppl::test::kCli;
using cppl::test::ProcessResult;
using cppl::test::readFile;
using cppl::test::readJson;
using cppl::test::runProcess;

class TestTensorParallelRun : public QObject
{
    Q_OBJECT

private:
    cppl::test::RunDir m_run;

    /// A local profile of @p slots ranks with evaluation.tensor_parallel @p n (1: the field left out).
    QString profile(const QString &name, int slots, int n)
    {
        QString json = cppl::test::localProfileJson(name, kAgent, slots, u"by-host"_s, cppl::test::kRunWindows);
        if (n != 1)
            json.replace(u"\"topology\": \"hierarchical\"}"_s, u"\"topology\": \"hierarchical\", \"tensor_parallel\": %1}"_s.arg(n));
        return m_run.writeProfile(name, json);
    }

    struct Run
    {
        ProcessResult process;
        QJsonObject result; // empty unless the run succeeded
    };

    /// `run` on @p file with the dynamic schedule (the group leaders claim the batches) and
    /// telemetry on: the collector's live merge is checked against the result.
    Run run(const QString &file, const QStringList &flags = {})
    {
        const QString out = file + u".result"_s;
        Run r;
        r.process = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, file, u"--no-preflight"_s, u"--no-store"_s, u"--schedule"_s, u"dynamic"_s,
                                                 u"--json"_s, out} + flags,
                               300000);
        if (r.process.exitCode == 0)
            r.result = readJson(out);
        return r;
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_run.init()); }

    void everyAgentGetsTheFlag()
    {
        const auto parsed = cppl::parseProfile(readFile(profile(u"flag"_s, 4, 2)).toStdString());
        QVERIFY(parsed.ok());
        const cppl::core::LaunchPlan plan = cppl::core::buildLaunchPlan(parsed.profile, {});
        QCOMPARE(plan.ranks.size(), std::size_t{4});
        for (const auto &rank : plan.ranks) {
            const auto at = std::find(rank.argv.begin(), rank.argv.end(), std::string("--tensor-parallel"));
            QVERIFY(at != rank.argv.end() && at + 1 != rank.argv.end());
            QCOMPARE(*(at + 1), std::string("2"));
        }
        // N = 1, the agents' default, is not said.
        const auto one = cppl::parseProfile(readFile(profile(u"flag1"_s, 2, 1)).toStdString());
        for (const auto &rank : cppl::core::buildLaunchPlan(one.profile, {}).ranks)
            QVERIFY(std::find(rank.argv.begin(), rank.argv.end(), std::string("--tensor-parallel")) == rank.argv.end());
    }

    void fixedNIsBitIdenticalAtAnyWidth()
    {
        // 4 ranks with the profile's tensor_parallel 2 (groups 0-1 and 2-3) against 2 ranks with
        // `run --tensor-parallel 2`: the same bits. Against one rank: within 1e-6 relative PPL.
        const Run four = run(profile(u"tp2x2"_s, 4, 2));
        const Run two = run(profile(u"tp2x1"_s, 2, 1), {u"--tensor-parallel"_s, u"2"_s});
        for (const auto &[r, ranks] : {std::pair{&four, 4}, {&two, 2}}) {
            CPPL_VERIFY2(r->process.exitCode == 0, qPrintable(r->process.describe()));
            QCOMPARE(r->result.value(u"schedule"_s).toString(), u"dynamic"_s);
            // Every rank's telemetry arrived, the followers' too, and the collector counted each
            // group's sums once (its leader's): the live merge is the result's exact sum.
            CPPL_VERIFY2(r->process.err.contains(u"telemetry: %1 ranks,"_s.arg(ranks)), qPrintable(r->process.describe()));
            CPPL_VERIFY2(cppl::test::liveMergeEqualsResult(r->process), qPrintable(r->process.describe()));
        }
        const QJsonObject &fourJ = four.result, &twoJ = two.result;
        QCOMPARE(fourJ.value(u"tensor_parallel"_s).toObject().value(u"size"_s).toInt(), 2);
        QCOMPARE(fourJ.value(u"tensor_parallel"_s).toObject().value(u"data_parallel_width"_s).toInt(), 2);
        QCOMPARE(twoJ.value(u"tensor_parallel"_s).toObject().value(u"size"_s).toInt(), 2);
        QCOMPARE(fourJ.value(u"nll_sum_exact"_s).toString(), twoJ.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(fourJ.value(u"nll_sq_sum_exact"_s).toString(), twoJ.value(u"nll_sq_sum_exact"_s).toString());
        const QJsonObject one = m_run.oneRank(cppl::test::kRunWindows, u"one.json"_s);
        QVERIFY(!one.isEmpty());
        QCOMPARE(fourJ.value(u"tokens_scored"_s).toInteger(), one.value(u"tokens_scored"_s).toInteger());
        const double p1 = one.value(u"ppl"_s).toDouble(), p2 = fourJ.value(u"ppl"_s).toDouble();
        qInfo("PPL %.17g at N = 1, %.17g at N = 2: relative deviation %.3g", p1, p2, std::fabs(p2 - p1) / p1);
        CPPL_VERIFY2(std::fabs(p2 - p1) <= 1e-6 * p1, qPrintable(u"PPL %1 at N = 2, %2 at N = 1"_s.arg(p2, 0, 'g', 17).arg(p1, 0, 'g', 17)));
    }

    void slotsNotAMultipleAreRefused()
    {
        // Before anything starts, the host named; the CLI's flag is checked like the profile's field.
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile(u"bad"_s, 2, 1), u"--tensor-parallel"_s, u"4"_s}, 60000);
        CPPL_VERIFY2(r.exitCode == 2 && r.err.contains(u"host \"localhost\" has 2 slots, not a multiple of it"_s), qPrintable(r.describe()));
        const ProcessResult zero = runProcess(kCli, {u"run"_s, u"--profile"_s, profile(u"zero"_s, 2, 1), u"--tensor-parallel"_s, u"0"_s}, 60000);
        CPPL_VERIFY2(zero.exitCode == 2 && zero.err.contains(u"--tensor-parallel: expected an integer 1-1024"_s), qPrintable(zero.describe()));
    }
};

QTEST_GUILESS_MAIN(TestTensorParallelRun)
#include "tst_tensor_parallel_run.moc"
