// SPDX-License-Identifier: MIT
// History, Compare and Sweep of the dashboard against a real SQLite store in a temporary directory,
// filled by real agents: a dashboard sweep of 1, 2 and 4 local ranks (recorded as it runs) and a
// dashboard run; copies imported through run_export. Filters, search and delete act on the file;
// Compare's figures equal comparison.h's on the same records; the pages render at 1x and 2x.

#include "compare_model.h"
#include "compare_page.h"
#include "evaluation_page.h"
#include "history_model.h"
#include "history_page.h"
#include "main_window.h"
#include "message_bar.h"
#include "run_detail.h"
#include "theme.h"
#include "sweep_runner.h"
#include "test_paths.h"
#include "test_profile.h"

#include "report/report.h"
#include "history/comparison.h"
#include "history/run_export.h"
#include "history/run_history.h"

#include <QJsonObject>

#include <QAbstractItemModelTester>
#include <QTimer>
#include <QPushButton>
#include <QMenuBar>
#include <QJsonDocument>
#include <QJsonArray>
#include <QFileDialog>
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QGuiApplication>
#include <QScreen>
#include <QLabel>
#include <QLineEdit>
#include <QPixmap>
#include <QSet>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using cppl::app::HistoryModel;
using cppl::app::MainWindow;
using cppl::core::history::RunRecord;
using cppl::core::history::RunStatus;
using cppl::core::history::RunHistory;

using cppl::test::kAgent;

namespace {

QByteArray profileJson(int slots, int maxWindows)
{
    return cppl::test::localProfileJson(u"history-test"_s, kAgent, slots, u"size:2"_s, maxWindows).toUtf8();
}

/// Distinct colours in the image: a blank or single-colour page has very few.
int colours(const QImage &image)
{
    QSet<QRgb> seen;
    for (int y = 0; y < image.height(); y += 3)
        for (int x = 0; x < image.width(); x += 3)
            seen.insert(image.pixel(x, y));
    return int(seen.size());
}

int visibleRows(cppl::app::HistoryPage *page)
{
    return page->filter()->rowCount();
}

/// Answers the next file dialog as a user would: types @p name, picks the file type whose filter
/// starts with @p type ("HTML", "JSON") and presses Save. *seen: the dialog came (its title).
void answerSaveDialog(const QString &name, const QString &type, QString *seen)
{
    QTimer::singleShot(50, [=] {
        auto *d = qobject_cast<QFileDialog *>(QApplication::activeModalWidget());
        if (!d) {
            answerSaveDialog(name, type, seen); // not open yet
            return;
        }
        *seen = d->windowTitle();
        for (const QString &f : d->nameFilters())
            if (f.startsWith(type))
                d->selectNameFilter(f);
        // Typed into the name field (selectFile leaves a focused field as it is).
        const QFileInfo file(name);
        d->setDirectory(file.absolutePath());
        auto *edit = d->findChild<QLineEdit *>(u"fileNameEdit"_s);
        if (edit)
            edit->setText(file.fileName());
        QMetaObject::invokeMethod(d, "accept"); // Save
    });
}

QJsonObject readJson(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

} // namespace

class TestAppHistory : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_store;
    QString m_profile;
    std::unique_ptr<MainWindow> m_window;
    QStringList m_sweepIds;
    QString m_dashboardRun;

    std::unique_ptr<MainWindow> window()
    {
        auto w = std::make_unique<MainWindow>();
        w->setAgentOverride(kAgent);
        w->setLogDirectory(m_dir.filePath(u"logs"_s));
        w->setStoreRuns(true);
        [&] { QVERIFY(w->openProfile(m_profile)); }();
        w->resize(1500, 940);
        w->show();
        return w;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        QVERIFY(QFileInfo(kAgent).isExecutable());
        qputenv("XDG_STATE_HOME", m_dir.filePath(u"state"_s).toUtf8());
        m_store = m_dir.filePath(u"history/runs.sqlite"_s);
        qputenv("CLUSTERPPL_STORE", m_store.toUtf8());
        m_profile = m_dir.filePath(u"profile.json"_s);
        QFile f(m_profile);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(profileJson(4, 16));
        f.close();
        m_window = window();
    }

    void sweepStoresRunsAndOpensCompare()
    {
        MainWindow &w = *m_window;
        QVERIFY(w.startSweep({1, 2, 4}));
        QSignalSpy done(w.sweepRunner(), &cppl::app::SweepRunner::finished);
        QVERIFY(done.wait(600000));
        m_sweepIds = done.front().at(0).toStringList();
        QCOMPARE(m_sweepIds.size(), 3);
        QCOMPARE(done.front().at(1).toInt(), 0); // no failures
        QCOMPARE(w.pages()->currentIndex(), int(MainWindow::ComparePageIndex));

        // The same figures as comparison.h computes from the stored records.
        RunHistory s(m_store);
        std::vector<RunRecord> runs, baselines;
        for (const QString &id : m_sweepIds) {
            auto r = s.get(id);
            QVERIFY2(r.has_value(), qPrintable(id));
            QCOMPARE(r->status, RunStatus::Finished);
            QCOMPARE(r->source, u"sweep"_s);
            QVERIFY(!r->samples.empty());
            if (auto b = s.baselineFor(r->settingsKey))
                baselines.push_back(*b);
            runs.push_back(*r);
        }
        const auto expected = cppl::core::history::compareRuns(runs, baselines, {});
        const auto &shown = w.comparePage()->comparison();
        QCOMPARE(shown.points.size(), expected.points.size());
        QCOMPARE(shown.recommendation, expected.recommendation);
        QCOMPARE(shown.recommendedWorldSize, expected.recommendedWorldSize);
        auto *model = w.comparePage()->model();
        QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QCOMPARE(model->rowCount(), 3);
        for (std::size_t i = 0; i < expected.points.size(); ++i) {
            const auto &a = shown.points[i];
            const auto &b = expected.points[i];
            QCOMPARE(a.runId, b.runId);
            QCOMPARE(a.tokensPerSecond, b.tokensPerSecond);
            QCOMPARE(a.efficiency, b.efficiency);
            QCOMPARE(a.waitShare, b.waitShare);
            QCOMPARE(a.transferShare, b.transferShare);
            QCOMPARE(a.deviationText(), b.deviationText());
            const int row = int(i);
            QCOMPARE(model->data(model->index(row, cppl::app::CompareModel::ColEfficiency)).toString().left(
                         QString::number(100 * b.efficiency, 'f', 1).size()),
                     QString::number(100 * b.efficiency, 'f', 1));
            QCOMPARE(model->data(model->index(row, cppl::app::CompareModel::ColDeviation)).toString(),
                     b.runId == b.baselineRunId ? u"baseline (this run)"_s : b.deviationText());
        }
        // Exact sums across 1, 2 and 4 ranks: the multi-rank runs are bit-identical to the 1-rank one.
        QCOMPARE(shown.points[1].deviationText(), u"bit-identical"_s);
        QCOMPARE(shown.points[2].deviationText(), u"bit-identical"_s);
        QVERIFY(w.comparePage()->recommendationText().contains(u"Recommendation"_s));
        // The 4 ranks share this machine's cores when it has fewer (pre-flight recorded them):
        // Compare says so, marks the row and fits the projection without it.
        const int cpus = runs[2].hosts[0].toObject()[u"cpus"_s].toInt();
        QVERIFY2(cpus >= 1, QJsonDocument(runs[2].hosts).toJson().constData());
        QCOMPARE(shown.points[2].sharedHosts.isEmpty(), cpus >= 4);
        if (cpus < 4) {
            QVERIFY2(w.comparePage()->recommendationText().contains(u"4 ranks share the"_s), qPrintable(w.comparePage()->recommendationText()));
            QCOMPARE(model->data(model->index(2, cppl::app::CompareModel::ColRanks)).toString(), u"4 ⚠"_s);
            QCOMPARE(shown.projection.excluded, QStringList{m_sweepIds[2]});
            if (shown.projection.available)
                QVERIFY2(w.comparePage()->projectionText().contains(u"Left out of the fit"_s), qPrintable(w.comparePage()->projectionText()));
        }
        // The projection names its figures in the text and keeps its formula in the tooltip.
        if (shown.projection.available) {
            QVERIFY2(w.comparePage()->projectionText().startsWith(u"Projected efficiency"_s), qPrintable(w.comparePage()->projectionText()));
            for (const auto &p : shown.projection.points)
                QVERIFY2(w.comparePage()->projectionText().contains(u"%1: "_s.arg(p.ranks)), qPrintable(w.comparePage()->projectionText()));
            const auto *label = w.comparePage()->findChild<QLabel *>(u"projection"_s);
            QVERIFY(label);
            QVERIFY2(label->toolTip().contains(shown.projection.formula), qPrintable(label->toolTip()));
        } else {
            QVERIFY2(w.comparePage()->projectionText().startsWith(u"Projection: not available ("_s), qPrintable(w.comparePage()->projectionText()));
        }

        // A different threshold changes the recommendation exactly as compareRuns() does.
        w.comparePage()->setThreshold(0.99);
        cppl::core::history::CompareOptions o;
        o.threshold = 0.99;
        QCOMPARE(w.comparePage()->comparison().recommendation, cppl::core::history::compareRuns(runs, baselines, o).recommendation);
        w.comparePage()->setThreshold(0.75);

        // History shows them, with the baseline column.
        auto *h = w.historyPage();
        h->refresh();
        for (const QString &id : m_sweepIds)
            QVERIFY(h->model()->rowOf(id) >= 0);
        QCOMPARE(h->model()->baselineText(h->model()->rowOf(m_sweepIds[2])), u"bit-identical"_s);
    }

    void compareExportsReport()
    {
        auto *page = m_window->comparePage();
        QString error;
        const QStringList html = page->exportReport(m_dir.filePath(u"cmp.html"_s), u"html"_s, &error);
        QVERIFY2(html.size() == 1, qPrintable(error));
        QFile f(html.front());
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(f.readAll());
        for (const QString &id : m_sweepIds)
            QVERIFY2(text.contains(id), qPrintable(id));
        const QStringList json = page->exportReport(m_dir.filePath(u"cmp.json"_s), u"json"_s, &error);
        QVERIFY2(json.size() == 1, qPrintable(error));
        QVERIFY(page->exportReport(m_dir.filePath(u"cmp.doc"_s), u"doc"_s, &error).isEmpty());
        QVERIFY2(error.contains(u"cmp.doc"_s) && error.contains(u"pdf, html, csv or json"_s), qPrintable(error));
    }

    void dashboardRunIsStoredAndListed()
    {
        MainWindow &w = *m_window;
        auto e = w.evaluationPage()->evaluation();
        e.maxWindows = 8;
        w.evaluationPage()->load(e, w.evaluationPage()->thresholds());
        QSignalSpy finished(&w, &MainWindow::runFinished);
        QVERIFY(w.startRun());
        m_dashboardRun = w.engine()->runId();
        QVERIFY(finished.wait(300000));
        auto *h = w.historyPage();
        QTRY_VERIFY_WITH_TIMEOUT(h->model()->rowOf(m_dashboardRun) >= 0, 10000);
        const RunRecord &r = h->model()->runAt(h->model()->rowOf(m_dashboardRun));
        QCOMPARE(r.status, RunStatus::Finished);
        QCOMPARE(r.source, u"dashboard"_s);
        QCOMPARE(r.worldSize, 4);
        QVERIFY(r.ppl.has_value());
        // On disk, read by another connection.
        RunHistory s(m_store);
        QVERIFY(s.contains(m_dashboardRun));
    }

    void exportReportFromHistoryDetailAndRunMenu()
    {
        // Every way a dashboard user gets a report without a terminal: Run › Export report of the
        // last run…, History's Export report… (one run, several: a comparison), and the stored
        // run's detail. The file dialog is answered as a user would; the name typed has no suffix
        // and gets the chosen type's.
        MainWindow &w = *m_window;
        auto *h = w.historyPage();
        QAction *last = nullptr;
        for (QAction *menu : w.menuBar()->actions())
            if (menu->menu())
                for (QAction *a : menu->menu()->actions())
                    if (a->text().startsWith(u"E&xport report of"_s))
                        last = a;
        QVERIFY(last);
        QVERIFY(last->isEnabled());
        QVERIFY2(last->text().contains(m_dashboardRun), qPrintable(last->text()));
        const QString dir = m_dir.filePath(u"reports"_s);
        QVERIFY(QDir().mkpath(dir));
        QString title;
        answerSaveDialog(QDir(dir).filePath(u"last-run"_s), u"JSON"_s, &title);
        last->trigger();
        QVERIFY2(title.contains(m_dashboardRun), qPrintable(title));
        QVERIFY2(QFileInfo::exists(QDir(dir).filePath(u"last-run.json"_s)), qPrintable(QDir(dir).entryList(QDir::Files).join(u", "_s) + u" | "_s + w.messageBar()->text()));
        QJsonObject o = readJson(QDir(dir).filePath(u"last-run.json"_s));
        QCOMPARE(o.value(u"kind"_s).toString(), u"run"_s);
        QCOMPARE(o.value(u"runs"_s).toArray().at(0).toObject().value(u"run"_s).toObject().value(u"run_id"_s).toString(), m_dashboardRun);
        QVERIFY2(w.messageBar()->text().contains(u"last-run.json"_s), qPrintable(w.messageBar()->text()));

        // History: nothing selected, no export; two runs, a comparison report, as the CLI writes it.
        w.showPage(MainWindow::HistoryPageIndex);
        auto *button = h->findChild<QPushButton *>(u"historyExport"_s);
        QVERIFY(button);
        h->view()->clearSelection();
        QVERIFY(!button->isEnabled());
        h->selectRuns({m_sweepIds[0], m_sweepIds[2]});
        QVERIFY(button->isEnabled());
        answerSaveDialog(QDir(dir).filePath(u"two"_s), u"HTML"_s, &title);
        QTest::mouseClick(button, Qt::LeftButton);
        QFile html(QDir(dir).filePath(u"two.html"_s));
        QVERIFY(html.open(QIODevice::ReadOnly));
        const QString text = QString::fromUtf8(html.readAll());
        QVERIFY(text.contains(m_sweepIds[0]) && text.contains(m_sweepIds[2]));
        QVERIFY(text.contains(u"id=\"chart-comparison-throughput\""_s));
        QString error;
        const QStringList json = h->exportReport({m_sweepIds[0], m_sweepIds[2]}, QDir(dir).filePath(u"two.json"_s), u"json"_s, &error);
        QVERIFY2(json.size() == 1, qPrintable(error));
        o = readJson(json.front());
        QCOMPARE(o.value(u"kind"_s).toString(), u"comparison"_s);
        {
            RunHistory s(m_store);
            QCOMPARE(o.value(u"comparison"_s).toObject(),
                     cppl::core::history::comparisonToJson(cppl::core::report::loadReport(s, {m_sweepIds[0], m_sweepIds[2]}).comparison));
        }
        // A run deleted elsewhere: the message names it, no file is left.
        QVERIFY(h->exportReport({u"no-such-run"_s}, QDir(dir).filePath(u"none.pdf"_s), u"pdf"_s, &error).isEmpty());
        QVERIFY2(error.contains(u"no-such-run"_s), qPrintable(error));
        QVERIFY(!QFileInfo::exists(QDir(dir).filePath(u"none.pdf"_s)));

        // The stored run's detail: its own report, CSV (runs and ranks).
        h->selectRuns({m_sweepIds[1]});
        for (QPushButton *b : h->findChildren<QPushButton *>())
            if (b->text() == u"&Open"_s)
                QTest::mouseClick(b, Qt::LeftButton);
        QTRY_VERIFY(h->findChild<cppl::app::RunDetailDialog *>() != nullptr);
        auto *detail = h->findChild<cppl::app::RunDetailDialog *>();
        auto *detailButton = detail->findChild<QPushButton *>(u"detailExport"_s);
        QVERIFY(detailButton);
        answerSaveDialog(QDir(dir).filePath(u"one"_s), u"CSV"_s, &title);
        QTest::mouseClick(detailButton, Qt::LeftButton);
        QVERIFY2(title.contains(m_sweepIds[1]), qPrintable(title));
        QFile runs(QDir(dir).filePath(u"one.csv"_s)), ranks(QDir(dir).filePath(u"one-ranks.csv"_s));
        QVERIFY(runs.open(QIODevice::ReadOnly) && ranks.open(QIODevice::ReadOnly));
        const QList<QByteArray> lines = runs.readAll().trimmed().split('\n');
        QCOMPARE(lines.size(), 2); // header and the one run
        QVERIFY(lines[1].contains(m_sweepIds[1].toUtf8()));
        QCOMPARE(ranks.readAll().trimmed().split('\n').size(), 1 + 2); // header and its two ranks
        detail->close();
    }

    void rerunStartsTheStoredRun()
    {
        std::optional<RunRecord> stored;
        {
            RunHistory s(m_store);
            stored = s.get(m_dashboardRun);
        }
        QVERIFY(stored.has_value());
        MainWindow &w = *m_window;
        QSignalSpy finished(&w, &MainWindow::runFinished);
        QVERIFY(w.rerun(*stored));
        const QString id = w.engine()->runId();
        QVERIFY(id != m_dashboardRun);
        QVERIFY(finished.wait(300000));
        auto *h = w.historyPage();
        QTRY_VERIFY_WITH_TIMEOUT(h->model()->rowOf(id) >= 0, 10000);
        const RunRecord &again = h->model()->runAt(h->model()->rowOf(id));
        QCOMPARE(again.status, RunStatus::Finished);
        QCOMPARE(again.settingsKey, stored->settingsKey); // the same evaluation
        QCOMPARE(again.nllSumExact, stored->nllSumExact);  // and the same bits
        QCOMPARE(again.worldSize, stored->worldSize);
    }

    void filtersAndSearch()
    {
        // Imported copies (run_export's JSON, as `clusterppl-cli import` reads it) with other
        // status, date and protocol, so every filter has something to remove.
        {
            RunHistory s(m_store);
            auto base = s.get(m_sweepIds[1]);
            QVERIFY(base.has_value());
            QJsonObject j = cppl::core::history::runToJson(*base);
            RunRecord old = cppl::core::history::runFromJson(j);
            old.id = 0;
            old.runId = u"imported-old"_s;
            old.started = QDateTime(QDate(2025, 1, 15), QTime(12, 0), Qt::UTC);
            old.ended = old.started.addSecs(60);
            old.status = RunStatus::Failed;
            old.firstCause = u"rank 1 exited with code 6 (needle-cause)"_s;
            s.insert(old);
        }
        auto *h = m_window->historyPage();
        QAbstractItemModelTester t1(h->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester t2(h->filter(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        h->refresh();
        const int all = h->model()->rowCount();
        QCOMPARE(all, 6); // three sweep runs, the dashboard run, its re-run, the import
        QCOMPARE(visibleRows(h), all);
        h->searchEdit()->setText(u"needle-cause"_s);
        QCOMPARE(visibleRows(h), 1);
        h->searchEdit()->setText(m_sweepIds[0].left(m_sweepIds[0].lastIndexOf(u'-')));
        QCOMPARE(visibleRows(h), 3);
        h->searchEdit()->clear();
        h->filter()->setStatusFilter(RunStatus::Failed);
        QCOMPARE(visibleRows(h), 1);
        h->filter()->setStatusFilter(std::nullopt);
        h->filter()->setDateRange(QDate(2025, 1, 1), QDate(2025, 1, 31));
        QCOMPARE(visibleRows(h), 1);
        h->filter()->setDateRange(QDate::currentDate().addDays(-1), {});
        QCOMPARE(visibleRows(h), 5);
        h->filter()->setDateRange({}, {});
        h->filter()->setProtocolFilter(u"hf-sliding"_s);
        QCOMPARE(visibleRows(h), 0);
        h->filter()->setProtocolFilter(u"llama.cpp"_s);
        QCOMPARE(visibleRows(h), all);
        h->filter()->setProtocolFilter({});
        h->filter()->setModelFilter(u"shakespeare-byte"_s);
        QCOMPARE(visibleRows(h), all);
        h->filter()->setModelFilter(u"no-such-model"_s);
        QCOMPARE(visibleRows(h), 0);
        h->filter()->setModelFilter({});
        h->filter()->setNodeCount(1);
        QCOMPARE(visibleRows(h), all); // one host
        h->filter()->setNodeCount(2);
        QCOMPARE(visibleRows(h), 0);
        h->filter()->setNodeCount(0);
        // Sorting by ranks uses the numbers.
        h->view()->sortByColumn(HistoryModel::ColWorld, Qt::AscendingOrder);
        QCOMPARE(h->filter()->index(0, HistoryModel::ColWorld).data().toInt(), 1);
        h->view()->sortByColumn(HistoryModel::ColStarted, Qt::DescendingOrder);
        // Status reads without colour.
        const int failedRow = h->model()->rowOf(u"imported-old"_s);
        QVERIFY(h->model()->index(failedRow, HistoryModel::ColStatus).data().toString().contains(u"failed"_s));
    }

    void openShowsStoredRun()
    {
        RunHistory s(m_store);
        const auto r = s.get(m_sweepIds[2]);
        QVERIFY(r.has_value());
        cppl::app::RunDetailDialog d(*r);
        // Within the screen, with room around it (the offscreen screen is 800 x 800: 720 x 700).
        const QSize screen = QGuiApplication::primaryScreen()->availableGeometry().size();
        QVERIFY2(d.width() <= screen.width() * 0.9 + 1 && d.height() <= screen.height() * 0.9 + 1,
                 qPrintable(u"%1x%2 on a %3x%4 screen"_s.arg(d.width()).arg(d.height()).arg(screen.width()).arg(screen.height())));
        QCOMPARE(d.size(), QSize(1000, 700).boundedTo(screen * 0.9));
        QCOMPARE(d.tabs()->count(), 5);
        QVERIFY(d.tabs()->tabText(1).contains(u"4"_s)); // Ranks (4)
        d.resize(1000, 700);
        d.show();
        QTest::qWait(100);
        for (int tab : {0, 1, 2}) {
            d.tabs()->setCurrentIndex(tab);
            QTest::qWait(100);
            const QImage img = d.grab().toImage();
            QVERIFY2(colours(img) > 20, qPrintable(d.tabs()->tabText(tab)));
            if (const QString shots = qEnvironmentVariable("CPPL_HISTORY_SHOTS"); !shots.isEmpty() && QDir().mkpath(shots))
                img.save(u"%1/open-tab%2.png"_s.arg(shots).arg(tab));
        }
    }

    void deleteRemovesFromFile()
    {
        auto *h = m_window->historyPage();
        const int before = h->model()->rowCount();
        QVERIFY(h->deleteRuns({u"imported-old"_s}));
        QCOMPARE(h->model()->rowCount(), before - 1);
        QCOMPARE(h->model()->rowOf(u"imported-old"_s), -1);
        RunHistory s(m_store);
        QVERIFY(!s.contains(u"imported-old"_s));
        QVERIFY(s.contains(m_sweepIds[0]));
        QSignalSpy failed(h, &cppl::app::HistoryPage::failed);
        QVERIFY(!h->deleteRuns({u"imported-old"_s}));
        QCOMPARE(failed.size(), 1);
        QVERIFY(failed.front().front().toString().contains(u"imported-old"_s));
    }

    void pagesRenderAtOneAndTwoX_data()
    {
        QTest::addColumn<qreal>("dpr");
        QTest::addColumn<bool>("dark");
        QTest::newRow("1x light") << 1.0 << false;
        QTest::newRow("2x light") << 2.0 << false;
        QTest::newRow("1x dark") << 1.0 << true;
        QTest::newRow("2x dark") << 2.0 << true;
    }

    void pagesRenderAtOneAndTwoX()
    {
        QFETCH(qreal, dpr);
        QFETCH(bool, dark);
        QApplication::setPalette(cppl::app::themePalette(dark));
        MainWindow &w = *m_window;
        w.compareRuns(m_sweepIds);
        w.historyPage()->selectRuns(m_sweepIds);
        const QString shots = qEnvironmentVariable("CPPL_HISTORY_SHOTS");
        for (auto page : {MainWindow::HistoryPageIndex, MainWindow::ComparePageIndex}) {
            w.showPage(page);
            QTest::qWait(120);
            QPixmap pm(w.size() * dpr);
            pm.setDevicePixelRatio(dpr);
            w.render(&pm);
            const QImage img = pm.toImage();
            QCOMPARE(img.width(), int(w.width() * dpr));
            QVERIFY2(colours(img) > 40, qPrintable(u"page %1: %2 colours"_s.arg(int(page)).arg(colours(img))));
            if (!shots.isEmpty()) {
                QDir().mkpath(shots);
                img.save(u"%1/%2-%3x-%4.png"_s.arg(shots, page == MainWindow::HistoryPageIndex ? u"history"_s : u"compare"_s)
                             .arg(int(dpr))
                             .arg(dark ? u"dark"_s : u"light"_s));
            }
        }
        QApplication::setPalette(cppl::app::themePalette(false));
    }

    void storeThatCannotOpenIsNotFatal()
    {
        // A directory where the file should be: the error shows, the run still starts.
        const QString bad = m_dir.filePath(u"blocked"_s);
        QVERIFY(QDir().mkpath(bad + u"/runs.sqlite"_s));
        qputenv("CLUSTERPPL_STORE", (bad + u"/runs.sqlite"_s).toUtf8());
        auto w = window();
        QVERIFY(w->runHistory() == nullptr);
        w->showPage(MainWindow::HistoryPageIndex);
        QCOMPARE(w->historyPage()->model()->rowCount(), 0);
        qputenv("CLUSTERPPL_STORE", m_store.toUtf8());
    }

    void cleanupTestCase()
    {
        m_window.reset();
    }
};

QTEST_MAIN(TestAppHistory)
#include "tst_app_history.moc"
