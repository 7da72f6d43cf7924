// SPDX-License-Identifier: MIT
// The dashboard for quantization and tensor parallelism (issues 41 and 40), offscreen: the Compare
// page's precisions side by side in the scaling charts' place (table and the reports' charts), a
// tensor-parallel run's deviation from one rank beside its same-N verdict, and Run › Sweep…'s
// precision axis. Rendered to PNG ($CPPL_QUALITY_SHOTS=DIR keeps them) and checked for clipping.
#include "compare_model.h"
#include "compare_page.h"
#include "sweep_dialog.h"

#include "test_runs.h"

#include "cppl/errors.h"
#include "charts/chart.h"
#include "charts/chart_widget.h"
#include "history/sweep.h"

#include <QCheckBox>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLineEdit>
#include <QTableWidget>
#include <QTest>
#include <QTimeZone>

using namespace Qt::StringLiterals;
using cppl::charts::ChartWidget;
using cppl::core::history::RunRecord;

namespace {

const QDateTime kT0(QDate(2026, 12, 1), QTime(9, 0), QTimeZone::utc());

RunRecord precisionRun(const QString &id, const QString &precision, double kld, double tps, qint64 weights, int minute)
{
    QJsonObject r = cppl::test::agentResult(2, 7.0 * (1 + 10 * kld), 0.01, u"xs1:%1"_s.arg(id), 4096, tps, u"/models/llama"_s, u"/data/wiki.txt"_s);
    if (precision != u"none"_s)
        r.insert(u"quantization"_s, QJsonObject{{u"method"_s, precision}, {u"group"_s, 32}});
    r.insert(u"model"_s, QJsonObject{{u"path"_s, u"/models/llama"_s}, {u"weight_bytes"_s, weights}, {u"rss_load_bytes"_s, weights + 4096}});
    r.insert(u"reference"_s, QJsonObject{{u"ppl_ratio"_s, 1 + 10 * kld}, {u"ppl_ratio_stderr"_s, 0.001}, {u"kld_mean"_s, kld},
                                         {u"kld_stderr"_s, kld / 50}, {u"kld_p99"_s, 8 * kld}, {u"same_top"_s, 1 - 3 * kld},
                                         {u"same_top_stderr"_s, 0.002}});
    return cppl::test::finishedRun(id, QJsonDocument(r).toJson(QJsonDocument::Compact), kT0.addSecs(60 * minute), 30);
}

RunRecord tpRun(const QString &id, int world, int tp, double ppl, const QString &exact, int minute)
{
    QJsonObject r = cppl::test::agentResult(world, ppl, 0.02, exact, 4096, 500.0 * world, u"/models/llama"_s, u"/data/wiki.txt"_s);
    if (tp > 1)
        r.insert(u"tensor_parallel"_s, QJsonObject{{u"size"_s, tp}, {u"data_parallel_width"_s, world / tp}});
    return cppl::test::finishedRun(id, QJsonDocument(r).toJson(QJsonDocument::Compact), kT0.addSecs(60 * minute), 30);
}

void save(QWidget &w, const QString &name)
{
    const QString dir = qEnvironmentVariable("CPPL_QUALITY_SHOTS");
    const QImage image = w.grab().toImage();
    QVERIFY(!image.isNull());
    if (!dir.isEmpty())
        QVERIFY(image.save(dir + u'/' + name));
}

} // namespace

class TestAppQuality : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void comparePageShowsPrecisions_data()
    {
        QTest::addColumn<QSize>("size");
        QTest::addRow("1500x940") << QSize(1500, 940);
        QTest::addRow("1024x700") << QSize(1024, 700);
    }
    void comparePageShowsPrecisions()
    {
        QFETCH(QSize, size);
        cppl::app::ComparePage page;
        page.resize(size);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        const std::vector<RunRecord> runs{precisionRun(u"sweep-r2-none"_s, u"none"_s, 0, 1000, 400000000, 0),
                                          precisionRun(u"sweep-r2-int8"_s, u"int8"_s, 0.0011, 1400, 110000000, 1),
                                          precisionRun(u"sweep-r2-int4"_s, u"int4-sym"_s, 0.13, 1700, 60000000, 2),
                                          precisionRun(u"sweep-r2-int4-asym"_s, u"int4-asym"_s, 0.09, 1650, 64000000, 3)};
        page.setRuns(runs);
        QTest::qWait(50); // the layout of the precisions, shown in the scaling charts' place
        QCOMPARE(page.precisions().size(), std::size_t(4));
        auto *precisions = page.findChild<QWidget *>(u"precisions"_s);
        QVERIFY(precisions && precisions->isVisible());
        auto *rateView = page.findChild<ChartWidget *>(); // the first: a scaling chart, hidden in this mode
        QVERIFY(rateView);
        QTableWidget *table = page.precisionTable();
        QCOMPARE(table->rowCount(), 4);
        QCOMPARE(table->item(0, 0)->text(), u"float32"_s);
        QCOMPARE(table->item(2, 0)->text(), u"int4-sym"_s);
        QCOMPARE(table->item(1, 8)->text(), u"1.40×"_s);
        QCOMPARE(table->item(2, 9)->text(), u"57.2 MiB"_s);
        QVERIFY(table->item(2, 4)->text().startsWith(u"0.13 ± "_s));
        for (const char16_t *name : {u"precisionSpeedChart", u"precisionQualityChart", u"precisionMemoryChart"}) {
            auto *view = page.findChild<ChartWidget *>(QString::fromUtf16(name));
            QVERIFY(view && view->isVisible() && view->chart());
            QVERIFY(view->chart()->hasData());
            QVERIFY2(view->height() >= 150 && view->width() >= 200, qPrintable(u"%1: %2x%3"_s.arg(QString::fromUtf16(name)).arg(view->width()).arg(view->height())));
            (void)view->grab();
            QVERIFY(view->chart()->lastEmptyTextRect().isEmpty());
        }
        // The table shows every row without scrolling, below the charts (not over them).
        QVERIFY2(table->height() >= table->horizontalHeader()->height() + 4 * table->rowHeight(0),
                 qPrintable(u"table %1 px high"_s.arg(table->height())));
        const auto *speed = page.findChild<ChartWidget *>(u"precisionSpeedChart"_s);
        QVERIFY(speed->mapTo(&page, QPoint(0, speed->height())).y() <= table->mapTo(&page, QPoint(0, 0)).y());
        save(page, u"compare-precisions-%1x%2.png"_s.arg(size.width()).arg(size.height()));
        // Runs of one precision: the scaling charts again.
        page.setRuns({runs[1], precisionRun(u"again-int8"_s, u"int8"_s, 0.0012, 1390, 110000000, 4)});
        QVERIFY(page.precisions().empty());
        QVERIFY(!precisions->isVisible());
    }

    void compareTableShowsTheDeviationFromOneRank()
    {
        cppl::app::ComparePage page;
        page.resize(1500, 940);
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        const RunRecord one = tpRun(u"n1"_s, 1, 1, 7.0, u"xs1:one"_s, 0);
        const RunRecord group = tpRun(u"n2-w2"_s, 2, 2, 7.0 * (1 + 3e-7), u"xs1:two"_s, 1);
        const RunRecord wide = tpRun(u"n2-w4"_s, 4, 2, 7.0 * (1 + 3e-7), u"xs1:two"_s, 2);
        page.setRuns({wide}, {group, one});
        QTest::qWait(50);
        const auto &points = page.comparison().points;
        QCOMPARE(points.size(), std::size_t(1));
        const QString cell = page.model()->data(page.model()->index(0, cppl::app::CompareModel::ColDeviation)).toString();
        QCOMPARE(cell, u"bit-identical; deviation from N = 1: +3e-07 (float32: within the expected 1e-06)"_s);
        save(page, u"compare-tensor-parallel.png"_s);
    }

    void sweepDialogHasThePrecisionAxis()
    {
        cppl::app::SweepDialog dialog(4, u"1,2,4"_s);
        dialog.show();
        QVERIFY(QTest::qWaitForWindowExposed(&dialog));
        auto *reference = dialog.findChild<QLineEdit *>(u"sweepReference"_s);
        QVERIFY(reference && !reference->isEnabled()); // no precision checked: the profile's precision
        QVERIFY(dialog.precisions().isEmpty());
        QCOMPARE(dialog.counts(), (std::vector<int>{1, 2, 4}));
        for (const char16_t *q : {u"none", u"int8", u"int4", u"int4-asym"})
            QVERIFY(dialog.findChild<QCheckBox *>(u"sweepPrecision-"_s + QString::fromUtf16(q)));
        dialog.findChild<QCheckBox *>(u"sweepPrecision-int4-asym"_s)->setChecked(true);
        dialog.findChild<QCheckBox *>(u"sweepPrecision-none"_s)->setChecked(true);
        QVERIFY(reference->isEnabled());
        reference->setText(u"/models/base"_s);
        dialog.setCounts(u"4"_s);
        QTest::qWait(50);
        QCOMPARE(dialog.precisions(), (QStringList{u"none"_s, u"int4-asym"_s})); // the CLI's order
        QCOMPARE(dialog.referenceModel(), u"/models/base"_s);
        save(dialog, u"sweep-dialog.png"_s);
        // What the dashboard then runs: each precision at each count against that reference.
        cppl::ClusterProfile p;
        p.launcher = "local";
        p.evaluation.model = "/models/llama";
        cppl::HostSpec h;
        h.name = "localhost";
        h.slots = 4;
        p.hosts.push_back(h);
        const auto plan = cppl::core::history::planSweep(p, dialog.counts(), dialog.precisions(), dialog.referenceModel());
        QCOMPARE(plan.size(), std::size_t(2));
        QCOMPARE(plan[1].idSuffix, u"r4-int4-asym"_s);
        QCOMPARE(plan[1].profile.evaluation.quantize, std::string("int4-asym"));
        QCOMPARE(plan[1].profile.evaluation.referenceModel, std::string("/models/base"));
        dialog.setCounts(u"1,x"_s);
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)dialog.counts());
    }
};

QTEST_MAIN(TestAppQuality)
#include "tst_app_quality.moc"
