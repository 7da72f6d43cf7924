// SPDX-License-Identifier: MIT
// The synthetic node-count sweep that screenshots show on History and Compare (synthetic_history.h):
// written through the history's writer, read back by another connection as a user's runs are; the
// Compare page's figures (throughput, efficiency, comm share, deviation from the one-rank run)
// against the same figures worked out here from the stored result JSONs; History's columns; and
// the logarithmic axes the Compare charts use.

#include "compare_model.h"
#include "compare_page.h"
#include "history_model.h"
#include "history_page.h"
#include "main_window.h"
#include "synthetic_history.h"

#include "charts/chart_axis.h"
#include "history/comparison.h"
#include "history/run_history.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <map>
#include <set>

using namespace Qt::StringLiterals;
using cppl::app::CompareModel;
using cppl::app::HistoryModel;
using cppl::app::MainWindow;
using cppl::core::history::RunRecord;
using cppl::core::history::RunStatus;
using cppl::core::history::RunHistory;

namespace {

/// A store file at @p path holding the synthetic sweep up to @p ranks, closed again (the pages
/// under test open it as another connection would).
cppl::app::SyntheticSweep seedSweep(const QString &path, int ranks)
{
    RunHistory store(path);
    return cppl::app::writeSyntheticSweep(store, ranks);
}

QJsonObject resultOf(const RunRecord &r)
{
    return QJsonDocument::fromJson(r.resultJson).object();
}

} // namespace

class TestHistorySweep : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true); // the window's QSettings are not the user's
    }

    void sizes()
    {
        QCOMPARE(cppl::app::syntheticSweepSizes(1), (std::vector<int>{1, 2, 4, 8}));
        QCOMPARE(cppl::app::syntheticSweepSizes(4), (std::vector<int>{1, 2, 4, 8}));
        QCOMPARE(cppl::app::syntheticSweepSizes(12), (std::vector<int>{1, 2, 4, 8, 12}));
        QCOMPARE(cppl::app::syntheticSweepSizes(1024).back(), 1024);
        QCOMPARE(cppl::app::syntheticSweepSizes(1024).size(), std::size_t(11));
    }

    void storeHoldsTheSweep_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addRow("up to 8 ranks") << 4;
        QTest::addRow("up to 12 ranks") << 12;
        QTest::addRow("up to 1024 ranks") << 1024;
    }

    void storeHoldsTheSweep()
    {
        QFETCH(int, ranks);
        QTemporaryDir dir;
        const QString path = dir.filePath(u"runs.sqlite"_s);
        const cppl::app::SyntheticSweep sweep = seedSweep(path, ranks);
        const std::vector<int> sizes = cppl::app::syntheticSweepSizes(ranks);
        QCOMPARE(sweep.worldSizes, sizes);
        QCOMPARE(sweep.sweepRunIds.size(), qsizetype(sizes.size()));

        // Another connection, as the dashboard's History reads a store the CLI wrote.
        RunHistory store(path);
        QVERIFY(store.interruptedOnOpen().isEmpty()); // every run was finished by its writer
        const std::vector<RunRecord> all = store.list();
        QCOMPARE(all.size(), sizes.size() + 2);
        std::set<QString> keys;
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            const auto r = store.get(sweep.sweepRunIds[qsizetype(i)]);
            QVERIFY(r);
            QCOMPARE(r->status, RunStatus::Finished);
            QCOMPARE(r->worldSize, sizes[i]);
            QCOMPARE(r->nodeCount, (sizes[i] + sweep.ranksPerNode - 1) / sweep.ranksPerNode);
            QCOMPARE(r->groupsCount, r->nodeCount); // one group a node (by host)
            QCOMPARE(int(r->ranks.size()), sizes[i]);
            QCOMPARE(r->source, u"sweep"_s);
            QVERIFY(r->ppl && r->pplStderr && r->tokensPerSecond);
            QVERIFY(!r->nllSumExact.isEmpty());
            QVERIFY(r->lostRanks.isEmpty());
            QCOMPARE(r->exitCode, std::optional<int>(0));
            // The per-rank tokens add up to the run's, as a real result's ranks[] do.
            std::int64_t tokens = 0;
            for (const auto &k : r->ranks)
                tokens += k.tokens;
            QCOMPARE(tokens, r->tokensScored);
            // Samples of every rank, in time order, as the recorder keeps them.
            QVERIFY(!r->samples.empty());
            std::set<int> sampled;
            for (std::size_t s = 0; s < r->samples.size(); ++s) {
                sampled.insert(r->samples[s].rank);
                if (s > 0)
                    QVERIFY(r->samples[s].t >= r->samples[s - 1].t);
            }
            QCOMPARE(int(sampled.size()), sizes[i]);
            QVERIFY(!r->logs.empty());
            QVERIFY(r->ended > r->started);
            keys.insert(r->settingsKey);
        }
        QCOMPARE(keys.size(), std::size_t(1)); // one evaluation at every size: one settings key

        // The one-rank run is the history's baseline for them.
        const auto baseline = store.baselineFor(*keys.begin());
        QVERIFY(baseline);
        QCOMPARE(baseline->runId, sweep.sweepRunIds.front());

        const auto failed = store.get(sweep.failedRunId);
        QVERIFY(failed);
        QCOMPARE(failed->status, RunStatus::Failed);
        QVERIFY(!failed->ppl);
        QVERIFY(failed->exitCode && *failed->exitCode != 0);
        QVERIFY(failed->firstCause.contains(u"killed by signal 9"_s));
        QCOMPARE(failed->alerts.size(), std::size_t(1));
        QCOMPARE(failed->settingsKey, *keys.begin());

        const auto lost = store.get(sweep.lostRankRunId);
        QVERIFY(lost);
        QCOMPARE(lost->status, RunStatus::Finished);
        QCOMPARE(lost->worldSize, sizes.back());
        QCOMPARE(lost->lostRanks.size(), qsizetype(1));
        const int lostRank = lost->lostRanks.first().toObject().value(u"rank"_s).toInt();
        QVERIFY(lostRank > 0 && lostRank < sizes.back());
        QCOMPARE(lost->ranks[std::size_t(lostRank)].exitCode, std::optional<int>(137));
        QCOMPARE(lost->nllSumExact, baseline->nllSumExact); // recovered runs keep the bits
        QVERIFY(!lost->alerts.empty());
        QVERIFY(lost->alerts.front().kind == u"rank lost"_s);
    }

    void compareComputesTheSweep_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addRow("up to 8 ranks") << 4;
        QTest::addRow("up to 1024 ranks") << 1024;
    }

    void compareComputesTheSweep()
    {
        QFETCH(int, ranks);
        QTemporaryDir dir;
        const QString path = dir.filePath(u"runs.sqlite"_s);
        const cppl::app::SyntheticSweep sweep = seedSweep(path, ranks);
        MainWindow w(nullptr, path);
        w.resize(1500, 940);
        w.show();
        w.compareRuns(sweep.sweepRunIds); // what "Compare selected" does on History
        QCOMPARE(w.pages()->currentIndex(), int(MainWindow::ComparePageIndex));
        const CompareModel *m = w.comparePage()->model();
        QCOMPARE(m->rowCount(), int(sweep.sweepRunIds.size()));

        // The figures, worked out here from what the history holds (the result JSONs rank 0 wrote).
        RunHistory store(path);
        std::map<int, RunRecord> byRanks;
        for (const QString &id : sweep.sweepRunIds) {
            auto r = store.get(id);
            QVERIFY(r);
            byRanks[r->worldSize] = *r;
        }
        const QJsonObject one = resultOf(byRanks.at(1));
        const double rate1 = one.value(u"tokens_per_second"_s).toDouble();
        QVERIFY(rate1 > 0);
        const QLocale loc;
        std::map<int, double> efficiency, comm;
        int otherBits = 0;
        for (int row = 0; row < m->rowCount(); ++row) {
            const auto &p = m->pointAt(row);
            const QJsonObject res = resultOf(byRanks.at(p.worldSize));
            const double rate = res.value(u"tokens_per_second"_s).toDouble();
            const double eff = rate / (rate1 * p.worldSize);
            double compute = 0, wait = 0, transfer = 0;
            for (const QJsonValue &v : res.value(u"ranks"_s).toArray()) {
                compute += v.toObject().value(u"compute_seconds"_s).toDouble();
                wait += v.toObject().value(u"wait_seconds"_s).toDouble();
                transfer += v.toObject().value(u"transfer_seconds"_s).toDouble();
            }
            const double waitShare = p.worldSize == 1 ? 0.0 : wait / (compute + wait + transfer);
            const double transferShare = p.worldSize == 1 ? 0.0 : transfer / (compute + wait + transfer);
            const QString what = u"%1 ranks"_s.arg(p.worldSize);
            QVERIFY2(std::abs(p.tokensPerSecond - rate) < 1e-9 * rate, qPrintable(what));
            QVERIFY2(std::abs(p.efficiency - eff) < 1e-12, qPrintable(what));
            QVERIFY2(std::abs(p.waitShare - waitShare) < 1e-12, qPrintable(what));
            QVERIFY2(std::abs(p.transferShare - transferShare) < 1e-12, qPrintable(what));
            efficiency[p.worldSize] = eff;
            comm[p.worldSize] = waitShare + transferShare;

            auto cell = [&](int column) { return m->index(row, column).data().toString(); };
            // tok/s whole and grouped; efficiency and shares in percent.
            QCOMPARE(cell(CompareModel::ColRate), loc.toString(qlonglong(std::llround(rate))));
            QCOMPARE(cell(CompareModel::ColIdeal), loc.toString(qlonglong(std::llround(rate1 * p.worldSize))));
            QVERIFY2(cell(CompareModel::ColEfficiency).startsWith(QString::number(100 * eff, 'f', 1) + u'%'), qPrintable(cell(CompareModel::ColEfficiency)));
            QCOMPARE(cell(CompareModel::ColWait), QString::number(100 * waitShare, 'f', 1) + u'%');

            // Deviation from the one-rank run: equal exact sums and tokens are the same bits.
            const bool same = res.value(u"nll_sum_exact"_s).toString() == one.value(u"nll_sum_exact"_s).toString()
                              && res.value(u"tokens_scored"_s).toInteger() == one.value(u"tokens_scored"_s).toInteger();
            QCOMPARE(p.baselineRunId, sweep.sweepRunIds.front());
            QCOMPARE(p.bitIdentical, std::optional<bool>(same));
            const double dev = res.value(u"ppl"_s).toDouble() / one.value(u"ppl"_s).toDouble() - 1;
            QVERIFY(p.relativeDeviation && std::abs(*p.relativeDeviation - dev) < 1e-15);
            const QString devText = cell(CompareModel::ColDeviation);
            if (p.worldSize == 1) {
                QVERIFY2(devText.contains(u"baseline"_s), qPrintable(devText));
            } else if (same) {
                QCOMPARE(devText, u"bit-identical"_s);
            } else {
                ++otherBits;
                QCOMPARE(p.runId, sweep.otherDriverRunId);
                QVERIFY(std::abs(dev) > 0 && std::abs(dev) < 1e-5);
                // A relative deviation in the table reads as a number with its sign.
                QVERIFY2(devText.startsWith(u'+') || devText.startsWith(u'-') || devText.startsWith(u"−"_s), qPrintable(devText));
            }
        }
        QCOMPARE(otherBits, 1);

        // A plausible sweep: the one-rank run is the reference (100 %, no communication), the
        // efficiency falls from 2 ranks to the largest, and the comm share grows with the ranks.
        const int top = sweep.worldSizes.back();
        QCOMPARE(efficiency.at(1), 1.0);
        QCOMPARE(comm.at(1), 0.0);
        QVERIFY(efficiency.at(2) > 0.9 && efficiency.at(2) <= 1.02);
        QVERIFY2(efficiency.at(top) < efficiency.at(2) && efficiency.at(top) > 0.3, qPrintable(QString::number(efficiency.at(top))));
        QVERIFY(comm.at(top) > comm.at(2));
        // The recommendation is one of the compared sizes, at or above the threshold.
        const auto rec = w.comparePage()->comparison().recommendedWorldSize;
        QVERIFY(rec && efficiency.count(*rec) && efficiency.at(*rec) >= w.comparePage()->threshold());
    }

    void historyShowsTheSweep()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(u"runs.sqlite"_s);
        const cppl::app::SyntheticSweep sweep = seedSweep(path, 8);
        MainWindow w(nullptr, path);
        w.resize(1500, 940);
        w.show();
        w.showPage(MainWindow::HistoryPageIndex); // opens the window's store
        const HistoryModel *m = w.historyPage()->model();
        QCOMPARE(m->rowCount(), int(sweep.sweepRunIds.size()) + 2);
        auto cell = [&](const QString &id, int column) { return m->index(m->rowOf(id), column).data().toString(); };
        QCOMPARE(cell(sweep.sweepRunIds.front(), HistoryModel::ColBaseline), u"baseline (1 rank)"_s);
        for (const QString &id : sweep.sweepRunIds.mid(1))
            if (id != sweep.otherDriverRunId)
                QCOMPARE(cell(id, HistoryModel::ColBaseline), u"bit-identical"_s);
        const QString other = cell(sweep.otherDriverRunId, HistoryModel::ColBaseline);
        QVERIFY2(other.startsWith(u'+') || other.startsWith(u'-'), qPrintable(other));
        // Written as Compare writes it (History had "+3.10e-07" beside Compare's "+3.1e-07"), and
        // the stored PPLs' ratio to three significant digits.
        const auto &otherRun = m->runAt(m->rowOf(sweep.otherDriverRunId));
        const auto &oneRank = m->runAt(m->rowOf(sweep.sweepRunIds.front()));
        QVERIFY(otherRun.ppl && oneRank.ppl);
        const double dev = *otherRun.ppl / *oneRank.ppl - 1;
        QCOMPARE(other, cppl::core::history::relativeDeviationText(dev));
        QVERIFY2(std::abs(other.toDouble() / dev - 1) < 5e-3, qPrintable(other));
        QVERIFY(cell(sweep.lostRankRunId, HistoryModel::ColStatus).contains(u"recovered"_s));
        QVERIFY(cell(sweep.failedRunId, HistoryModel::ColStatus).contains(u"failed"_s));
        QCOMPARE(cell(sweep.failedRunId, HistoryModel::ColPpl), u"—"_s);
        // Node counts as stored: 8 ranks on two nodes of four.
        QCOMPARE(cell(sweep.sweepRunIds.back(), HistoryModel::ColNodes), u"2"_s);
    }

    void logAxes()
    {
        using cppl::charts::ValueFormat;
        // Ranks 1..1024 on a log2 axis: whole powers of two, labelled as counts.
        const auto t = cppl::charts::niceTicks(0, 10, 6, ValueFormat::Log2Count, false);
        QStringList labels;
        for (double v : t.values) {
            QCOMPARE(v, std::round(v));
            labels << cppl::charts::formatTick(v, t.step, ValueFormat::Log2Count);
        }
        QCOMPARE(labels.front(), u"1"_s);
        QCOMPARE(labels.back(), u"1024"_s);
        QVERIFY(labels.size() >= 3 && labels.size() <= 6);
        // tok/s from 9.2k to 74k on a log10 axis: 1-2-5 ticks bracketing the data, "10k".
        const double lo = std::log10(9200.0), hi = std::log10(73600.0);
        const auto y = cppl::charts::niceTicks(lo, hi, 6, ValueFormat::Log10Si, true);
        QVERIFY(y.min <= lo && y.max >= hi);
        QStringList ys;
        for (double v : y.values)
            ys << cppl::charts::formatTick(v, y.step, ValueFormat::Log10Si);
        QVERIFY2(ys.contains(u"10k"_s) && ys.contains(u"20k"_s) && ys.contains(u"50k"_s), qPrintable(ys.join(u", "_s)));
        // Over four decades: one tick a decade, within the count asked for.
        const auto wide = cppl::charts::niceTicks(lo, std::log10(9.4e6), 6, ValueFormat::Log10Si, true);
        QVERIFY(int(wide.values.size()) <= 6);
        QStringList ws;
        for (double v : wide.values)
            ws << cppl::charts::formatTick(v, wide.step, ValueFormat::Log10Si);
        QVERIFY2(ws.contains(u"100k"_s) && ws.contains(u"1M"_s), qPrintable(ws.join(u", "_s)));
        QCOMPARE(cppl::charts::formatValue(std::log10(73612.0), ValueFormat::Log10Si), u"73.6k"_s);
        QCOMPARE(cppl::charts::formatValue(3, ValueFormat::Log2Count), u"8"_s);
    }
};

QTEST_MAIN(TestHistorySweep)
#include "tst_history_sweep.moc"
