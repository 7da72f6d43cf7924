// SPDX-License-Identifier: MIT
// Precisions of one checkpoint and tensor parallelism in the run history, `clusterppl-cli compare`
// and the reports (issues 41 and 40): the precision rows (quality, speed, memory per rank) and when
// runs compare precisions, a sweep's plan over rank counts and precisions, and a tensor-parallel run
// against a baseline of its own N (bit-identical) and against one rank (N = 1: a deviation, with
// float32's bound, never a failure). Runs stored through the real RunHistory; the CLI is the real one.
#include "cppl/errors.h"
#include "history/comparison.h"
#include "history/precision.h"
#include "history/run_history.h"
#include "history/sweep.h"
#include "report/report.h"
#include "test_paths.h"
#include "test_runs.h"
#include "test_verify.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

#include <cmath>

using namespace Qt::StringLiterals;
using namespace cppl::core::history;
using cppl::test::kCli;

namespace {

const QDateTime kT0(QDate(2026, 12, 1), QTime(9, 0), QTimeZone::utc());

/// A finished run of the test model at @p precision (none: float32) with a reference comparison.
RunRecord precisionRun(const QString &id, const QString &precision, double ppl, double kld, double tps, qint64 weights, int minute)
{
    QJsonObject r = cppl::test::agentResult(1, ppl, 0.01, u"xs1:%1"_s.arg(id), 4096, tps, u"/models/llama"_s, u"/data/wiki.txt"_s);
    if (precision != u"none"_s)
        r.insert(u"quantization"_s, QJsonObject{{u"method"_s, precision}, {u"group"_s, 32}});
    r.insert(u"model"_s, QJsonObject{{u"path"_s, u"/models/llama"_s}, {u"weight_bytes"_s, weights}, {u"rss_load_bytes"_s, weights + 1000}});
    r.insert(u"reference"_s, QJsonObject{{u"ppl_ratio"_s, 1 + 10 * kld}, {u"ppl_ratio_stderr"_s, 0.001}, {u"kld_mean"_s, kld},
                                         {u"kld_stderr"_s, kld / 50}, {u"kld_p99"_s, 8 * kld}, {u"same_top"_s, 1 - 3 * kld},
                                         {u"same_top_stderr"_s, 0.002}});
    return cppl::test::finishedRun(id, QJsonDocument(r).toJson(QJsonDocument::Compact), kT0.addSecs(60 * minute), 30);
}

/// A finished run of @p world ranks in groups of @p tp (1: no tensor parallelism) in @p dtype.
RunRecord tpRun(const QString &id, int world, int tp, double ppl, const QString &exact, const QString &dtype, int minute)
{
    QJsonObject r = cppl::test::agentResult(world, ppl, 0.02, exact, 4096, 500.0 * world, u"/models/llama"_s, u"/data/wiki.txt"_s);
    r.insert(u"dtype"_s, dtype);
    if (tp > 1)
        r.insert(u"tensor_parallel"_s, QJsonObject{{u"size"_s, tp}, {u"data_parallel_width"_s, world / tp}, {u"weights_bytes_per_rank"_s, 600000}});
    return cppl::test::finishedRun(id, QJsonDocument(r).toJson(QJsonDocument::Compact), kT0.addSecs(60 * minute), 30);
}

QString runCli(const QStringList &args, int *exitCode = nullptr)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(kCli, args);
    if (!p.waitForFinished(60000))
        return u"(did not finish)"_s;
    if (exitCode)
        *exitCode = p.exitCode();
    return QString::fromUtf8(p.readAll());
}

} // namespace

class TestReportQuality : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;

private Q_SLOTS:
    void precisionRowsSideBySide()
    {
        const std::vector<RunRecord> runs{precisionRun(u"p-none"_s, u"none"_s, 7.0, 0, 1000, 400000000, 0),
                                          precisionRun(u"p-int8"_s, u"int8"_s, 7.01, 0.0011, 1400, 110000000, 1),
                                          precisionRun(u"p-int4"_s, u"int4-sym"_s, 7.7, 0.13, 1700, 60000000, 2)};
        const auto rows = precisionRows(runs);
        QCOMPARE(rows.size(), std::size_t(3));
        QVERIFY(comparesPrecisions(rows));
        QCOMPARE(rows[0].precision, u"float32"_s);
        QCOMPARE(rows[1].precision, u"int8"_s);
        QCOMPARE(rows[2].precision, u"int4-sym"_s);
        QCOMPARE(rows[1].speedup, 1.4);
        QCOMPARE(rows[2].weightBytes, 60000000);
        QCOMPARE(rows[2].rssLoadBytes, 60001000);
        QCOMPARE(rows[2].quality->kldMean, 0.13);
        // One precision twice is no precision comparison; a run without a result has no row.
        QVERIFY(!comparesPrecisions(precisionRows({runs[1], precisionRun(u"p-int8b"_s, u"int8"_s, 7.02, 0.0012, 1390, 110000000, 3)})));
        RunRecord none = runs[0];
        none.resultJson.clear();
        QVERIFY(!precisionRow(none));
        // A tensor-parallel run's memory per rank is its slices: weights_bytes_per_rank.
        QCOMPARE(precisionRow(tpRun(u"tp"_s, 2, 2, 7.0, u"xs1:t"_s, u"float32"_s, 4))->weightBytes, 600000);
    }

    /// Scaling efficiency is one precision's across rank counts: a precision sweep at one rank
    /// showed int8's speed-up as "140% efficiency" and fitted one projection through all of them.
    void efficiencyIsPerPrecision()
    {
        RunRecord int8Two = precisionRun(u"e-int8-2"_s, u"int8"_s, 7.01, 0.0011, 2660, 110000000, 3);
        int8Two.worldSize = 2;
        const std::vector<RunRecord> runs{precisionRun(u"e-none"_s, u"none"_s, 7.0, 0, 1000, 400000000, 0),
                                          precisionRun(u"e-int8"_s, u"int8"_s, 7.01, 0.0011, 1400, 110000000, 1), int8Two};
        const Comparison c = compareRuns(runs, {});
        QCOMPARE(c.points.size(), std::size_t(3));
        for (const ScalingPoint &p : c.points) {
            const double expected = p.runId == u"e-int8-2"_s ? 2660.0 / (2 * 1400.0) : 1.0; // int8 at 2 ranks against int8 at 1
            CPPL_VERIFY2(std::fabs(p.efficiency - expected) < 1e-12, qPrintable(u"%1: efficiency %2"_s.arg(p.runId).arg(p.efficiency)));
        }
        CPPL_VERIFY2(c.warnings.join(u"\n"_s).contains(u"the runs cover 2 precisions (float32, int8): scaling efficiency is each precision's own"_s),
                     qPrintable(c.warnings.join(u"\n"_s)));
        QVERIFY(!c.projection.available);
        QVERIFY(c.projection.why.contains(u"2 precisions"_s));
        // One precision: no such warning.
        const Comparison one = compareRuns({runs[1], runs[2]}, {});
        QVERIFY(!one.warnings.join(u"\n"_s).contains(u"precisions"_s));
    }

    void sweepPlansPrecisionsAtEachCount()
    {
        cppl::ClusterProfile p;
        p.launcher = "local";
        p.evaluation.model = "/models/llama";
        for (int i = 0; i < 2; ++i) {
            cppl::HostSpec h;
            h.name = "h" + std::to_string(i);
            h.slots = 2;
            p.hosts.push_back(h);
        }
        const auto plan = planSweep(p, {1, 4}, {u"none"_s, u"int8"_s, u"int4-asym"_s}, u"/models/base"_s);
        QCOMPARE(plan.size(), std::size_t(6));
        QStringList suffixes;
        for (const SweepRun &r : plan) {
            suffixes << r.idSuffix;
            QCOMPARE(r.profile.evaluation.quantize, r.precision.toStdString());
            QCOMPARE(r.profile.evaluation.referenceModel, std::string("/models/base"));
            QCOMPARE(cppl::rankLayout(r.profile).worldSize(), r.ranks);
        }
        QCOMPARE(suffixes, (QStringList{u"r1-none"_s, u"r1-int8"_s, u"r1-int4-asym"_s, u"r4-none"_s, u"r4-int8"_s, u"r4-int4-asym"_s}));
        // Without a reference given: the profile's, else the model itself.
        QCOMPARE(planSweep(p, {2}, {u"int8"_s}, {}).front().profile.evaluation.referenceModel, std::string("/models/llama"));
        // Without precisions: the rank counts alone, the profile's precision untouched.
        const auto plain = planSweep(p, {1, 2}, {}, {});
        QCOMPARE(plain.size(), std::size_t(2));
        QCOMPARE(plain[1].idSuffix, u"r2"_s);
        QCOMPARE(plain[1].profile.evaluation.quantize, std::string("none"));
        QVERIFY(plain[1].profile.evaluation.referenceModel.empty());
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)planSweep(p, {8}, {u"int8"_s}, {}));
    }

    void settingsKeyReadsBackFromTheStoredSettings()
    {
        const RunRecord one = tpRun(u"n1"_s, 1, 1, 7.0, u"xs1:a"_s, u"float32"_s, 0);
        const RunRecord two = tpRun(u"n2"_s, 2, 2, 7.0, u"xs1:b"_s, u"float32"_s, 1);
        QCOMPARE(settingsKey(settingsInputsFromJson(two.settings)), two.settingsKey);
        QCOMPARE(oneRankSettingsKey(two), one.settingsKey);
        QVERIFY(oneRankSettingsKey(one).isEmpty());
    }

    void tensorParallelAgainstItsOwnNAndOneRank()
    {
        // N = 2: bit-identical to one group of 2 (its baseline); against one rank (N = 1) a deviation
        // of 3e-7, inside float32's 1e-6, shown as a deviation, never as a failure; a run 4e-6 off
        // is beyond the bound and still a deviation; bfloat16 has no bound.
        const double ppl1 = 7.0;
        const RunRecord one = tpRun(u"tp-n1"_s, 1, 1, ppl1, u"xs1:one"_s, u"float32"_s, 0);
        const RunRecord group = tpRun(u"tp-n2-w2"_s, 2, 2, ppl1 * (1 + 3e-7), u"xs1:two"_s, u"float32"_s, 1);
        const RunRecord wide = tpRun(u"tp-n2-w4"_s, 4, 2, ppl1 * (1 + 3e-7), u"xs1:two"_s, u"float32"_s, 2);
        const RunRecord off = tpRun(u"tp-n4-w8"_s, 8, 4, ppl1 * (1 + 4e-6), u"xs1:four"_s, u"float32"_s, 3);
        const RunRecord bf1 = tpRun(u"bf-n1"_s, 1, 1, 7.1, u"xs1:bf1"_s, u"bfloat16"_s, 4);
        const RunRecord bf2 = tpRun(u"bf-n2"_s, 2, 2, 7.1 * (1 + 2e-4), u"xs1:bf2"_s, u"bfloat16"_s, 5);
        const QString store = m_dir.filePath(u"tp/runs.sqlite"_s);
        {
            RunHistory s(store);
            for (const RunRecord *r : {&one, &group, &wide, &off, &bf1, &bf2})
                s.insert(*r);
            // Only the wide runs selected: the baselines come from the store.
            std::vector<RunRecord> baselines;
            for (const RunRecord *r : {&wide, &off, &bf2})
                for (RunRecord &b : storedBaselines(s, *r))
                    baselines.push_back(std::move(b));
            const Comparison c = compareRuns({wide, off, bf2}, baselines);
            QCOMPARE(c.points.size(), std::size_t(3));
            for (const ScalingPoint &p : c.points) {
                if (p.runId == u"tp-n2-w4"_s) {
                    QCOMPARE(p.baselineRunId, u"tp-n2-w2"_s);
                    QVERIFY(p.bitIdentical.value_or(false));
                    QCOMPARE(p.tensorParallel, 2);
                    QCOMPARE(p.oneRankRunId, u"tp-n1"_s);
                    QCOMPARE(*p.oneRankDeviation, (ppl1 * (1 + 3e-7)) / ppl1 - 1);
                    QCOMPARE(p.oneRankBound.value(), kTensorParallelFloat32Bound);
                    QCOMPARE(p.oneRankDeviationText(), u"deviation from N = 1: +3e-07 (float32: within the expected 1e-06)"_s);
                } else if (p.runId == u"tp-n4-w8"_s) {
                    QVERIFY(!p.bitIdentical); // no stored group of 4 alone: no same-N baseline
                    QCOMPARE(p.deviationText(), u"no baseline"_s);
                    QCOMPARE(p.oneRankRunId, u"tp-n1"_s);
                    QVERIFY2(p.oneRankDeviationText().endsWith(u"(float32: beyond the expected 1e-06)"_s), qPrintable(p.oneRankDeviationText()));
                } else {
                    QCOMPARE(p.oneRankRunId, u"bf-n1"_s); // the one-rank run of its own dtype
                    QVERIFY(!p.oneRankBound);
                    QVERIFY2(p.oneRankDeviationText().endsWith(u"(measured, no bound for this dtype)"_s), qPrintable(p.oneRankDeviationText()));
                }
            }
            const QJsonObject j = comparisonToJson(c);
            QJsonObject first;
            for (const QJsonValue &v : j.value(u"points"_s).toArray())
                if (v.toObject().value(u"run_id"_s).toString() == u"tp-n2-w4"_s)
                    first = v.toObject();
            QCOMPARE(first.value(u"one_rank_run_id"_s).toString(), u"tp-n1"_s);
            QCOMPARE(first.value(u"one_rank_deviation_bound"_s).toDouble(), 1e-6);
            QCOMPARE(first.value(u"bit_identical"_s).toBool(), true);
        }
        // The real CLI: the same-N verdict in the table, the deviation from N = 1 labelled as one;
        // exit 0 (a deviation is not a failure).
        int code = -1;
        const QString text = runCli({u"compare"_s, u"--store"_s, store, u"tp-n2-w4"_s, u"tp-n4-w8"_s}, &code);
        QCOMPARE(code, 0);
        QVERIFY2(text.contains(u"bit-identical"_s), qPrintable(text));
        QVERIFY2(text.contains(u"run tp-n2-w4 (tensor parallel 2): deviation from N = 1: +3e-07 (float32: within the expected 1e-06) vs run "
                                "tp-n1; a deviation, not a failure"_s),
                 qPrintable(text));
        QVERIFY2(text.contains(u"beyond the expected 1e-06"_s), qPrintable(text));
        QVERIFY2(!text.contains(u"fail"_s, Qt::CaseInsensitive) || text.contains(u"not a failure"_s), qPrintable(text));
        const QString json = runCli({u"compare"_s, u"--store"_s, store, u"--json"_s, u"tp-n2-w4"_s});
        const QJsonObject point = QJsonDocument::fromJson(json.toUtf8()).object().value(u"points"_s).toArray().at(0).toObject();
        QCOMPARE(point.value(u"one_rank_run_id"_s).toString(), u"tp-n1"_s);
        QCOMPARE(point.value(u"tensor_parallel"_s).toInt(), 2);
        // The report says the same: HTML and CSV.
        const QString html = m_dir.filePath(u"tp.html"_s), csv = m_dir.filePath(u"tp.csv"_s);
        QCOMPARE(runCli({u"report"_s, u"--store"_s, store, u"tp-n2-w4"_s, u"tp-n1"_s, u"-o"_s, html}, &code).isNull(), false);
        QCOMPARE(code, 0);
        QFile h(html);
        QVERIFY(h.open(QIODevice::ReadOnly));
        const QString page = QString::fromUtf8(h.readAll());
        QVERIFY(page.contains(u"deviation from N = 1: +3e-07 (float32: within the expected 1e-06)"_s));
        QVERIFY(page.contains(u"a deviation, not a failure"_s));
        runCli({u"report"_s, u"--store"_s, store, u"tp-n2-w4"_s, u"tp-n1"_s, u"-o"_s, csv}, &code);
        QCOMPARE(code, 0);
        QFile c(csv);
        QVERIFY(c.open(QIODevice::ReadOnly));
        const QStringList lines = QString::fromUtf8(c.readAll()).split(u"\r\n"_s, Qt::SkipEmptyParts);
        const QStringList header = lines.front().split(u',');
        QVERIFY(header.contains(u"one_rank_deviation"_s));
        QVERIFY(lines.size() == 3);
    }

    void reportsCarryThePrecisions()
    {
        const std::vector<RunRecord> runs{precisionRun(u"q-none"_s, u"none"_s, 7.0, 0, 1000, 400000000, 0),
                                          precisionRun(u"q-int8"_s, u"int8"_s, 7.01, 0.0011, 1400, 110000000, 1),
                                          precisionRun(u"q-int4"_s, u"int4-asym"_s, 7.7, 0.13, 1700, 60000000, 2)};
        const QString store = m_dir.filePath(u"q/runs.sqlite"_s);
        {
            RunHistory s(store);
            for (const RunRecord &r : runs)
                s.insert(r);
        }
        const auto data = cppl::core::report::makeReport(runs);
        QCOMPARE(data.precisions.size(), std::size_t(3));
        const QJsonObject j = cppl::core::report::reportJson(data);
        QCOMPARE(j.value(u"precisions"_s).toArray().size(), 3);
        QCOMPARE(j.value(u"precisions"_s).toArray().at(2).toObject().value(u"precision"_s).toString(), u"int4-asym"_s);
        const QString html = QString::fromUtf8(cppl::core::report::reportHtml(data));
        QVERIFY(html.contains(u"<h2>Precisions</h2>"_s) || html.contains(u">Precisions<"_s));
        for (const char16_t *id : {u"precision-speed", u"precision-quality", u"precision-memory"})
            QVERIFY2(html.contains(u"chart-comparison-"_s + QString::fromUtf16(id)), qPrintable(QString::fromUtf16(id)));
        QVERIFY(html.contains(u"int4-asym"_s));
        const QString csvRuns = QString::fromUtf8(cppl::core::report::reportCsvRuns(data));
        QVERIFY(csvRuns.section(u"\r\n"_s, 0, 0).contains(u"kld_mean"_s));
        QVERIFY(csvRuns.contains(u",int8,"_s));
        // The real CLI's PDF carries the section too (pdftotext, as tst_report reads it).
        const QString pdf = m_dir.filePath(u"q.pdf"_s);
        int code = -1;
        runCli({u"report"_s, u"--store"_s, store, u"q-none"_s, u"q-int8"_s, u"q-int4"_s, u"-o"_s, pdf}, &code);
        QCOMPARE(code, 0);
        QProcess p;
        p.start(u"pdftotext"_s, {u"-layout"_s, pdf, u"-"_s});
        QVERIFY(p.waitForFinished(60000));
        const QString text = QString::fromUtf8(p.readAllStandardOutput());
        QVERIFY2(text.contains(u"Precisions"_s) && text.contains(u"KL divergence to the reference per precision"_s), qPrintable(text.left(2000)));
        // One precision only: no precision section.
        QVERIFY(cppl::core::report::makeReport({runs[1], precisionRun(u"q-int8b"_s, u"int8"_s, 7.0, 0.001, 1300, 1, 3)}).precisions.empty());
    }
};

QTEST_MAIN(TestReportQuality)
#include "tst_report_quality.moc"
