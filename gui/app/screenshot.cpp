// SPDX-License-Identifier: MIT
#include "screenshot.h"

#include "cluster_page.h"
#include "evaluation_page.h"
#include "history_page.h"
#include "main_window.h"
#include "message_bar.h"
#include "profile_model.h"
#include "run_detail.h"
#include "run_page.h"
#include "synthetic_history.h"
#include "synthetic_run.h"

#include "store/run_store.h"

#include "cppl/errors.h"

#include <QDir>
#include <QEventLoop>
#include <QPixmap>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QTreeView>

using namespace Qt::StringLiterals;

namespace cppl::app {

QPalette themePalette(bool dark)
{
    if (!dark)
        return QPalette(QColor(0xef, 0xef, 0xef), QColor(0xfa, 0xfa, 0xfa));
    QPalette p;
    const QColor window(0x2b, 0x2d, 0x30), base(0x1e, 0x1f, 0x22), text(0xe6, 0xe6, 0xe6);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(0x26, 0x28, 0x2b));
    p.setColor(QPalette::ToolTipBase, base);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, QColor(0x9a, 0x9a, 0x9a));
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(0x35, 0x37, 0x3b));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, Qt::white);
    p.setColor(QPalette::Light, QColor(0x45, 0x47, 0x4b));
    p.setColor(QPalette::Midlight, QColor(0x3a, 0x3c, 0x40));
    p.setColor(QPalette::Mid, QColor(0x25, 0x26, 0x29));
    p.setColor(QPalette::Dark, QColor(0x18, 0x19, 0x1b));
    p.setColor(QPalette::Shadow, Qt::black);
    p.setColor(QPalette::Highlight, QColor(0x3d, 0x7a, 0xc7));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Link, QColor(0x6c, 0xb4, 0xff));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0x80, 0x80, 0x80));
    return p;
}

namespace {

// Lets posted layout and timer events run for a moment (a nested event loop, not processEvents).
void settle(int ms)
{
    QEventLoop loop;
    QTimer::singleShot(ms, &loop, &QEventLoop::quit);
    loop.exec();
}

bool save(QWidget *w, const QString &path, QStringList &files, QString *error)
{
    const QPixmap pm = w->grab();
    if (pm.isNull() || !pm.save(path, "PNG")) {
        if (error)
            *error = QObject::tr("%1: cannot write the screenshot").arg(path);
        return false;
    }
    files << path;
    return true;
}

// History and Compare as the window's store has them; with a synthetic sweep (ScreenshotStore)
// History with the newest run selected and its detail (History › Open), and Compare of the sweep.
bool renderHistory(MainWindow &window, const ScreenshotOptions &o, const QDir &dir, QStringList &files, QString *error)
{
    window.showPage(MainWindow::HistoryPageIndex); // opens the store, as a user's first visit does
    const SyntheticSweep *sweep = o.sweep;
    if (sweep) {
        window.historyPage()->selectRuns({sweep->lostRankRunId});
        window.historyPage()->view()->setFocus();
    }
    settle(150);
    if (!save(&window, dir.filePath(u"history.png"_s), files, error))
        return false;
    if (sweep) {
        cppl::core::store::RunStore *store = window.store();
        std::optional<cppl::core::store::RunRecord> run;
        try {
            if (store)
                run = store->get(sweep->lostRankRunId);
        } catch (const cppl::Error &e) {
            if (error)
                *error = QString::fromUtf8(e.what());
            return false;
        }
        if (!run) {
            if (error)
                *error = QObject::tr("the synthetic run %1 is not in the run store").arg(sweep->lostRankRunId);
            return false;
        }
        // What History › Open shows of it: the summary, then its stored samples as charts.
        RunDetailDialog detail(*run, &window);
        detail.resize(std::min(1000, o.width), std::min(700, o.height));
        detail.show();
        settle(150);
        if (!save(&detail, dir.filePath(u"history-detail.png"_s), files, error))
            return false;
        detail.tabs()->setCurrentIndex(2);
        settle(150);
        if (!save(&detail, dir.filePath(u"history-detail-charts.png"_s), files, error))
            return false;
        detail.close();
        window.compareRuns(sweep->sweepRunIds); // read back with their baseline, as Compare selected does
    } else {
        window.showPage(MainWindow::ComparePageIndex);
    }
    settle(150);
    return save(&window, dir.filePath(u"compare.png"_s), files, error);
}

} // namespace

ScreenshotStore::ScreenshotStore(int maxRanks)
{
    if (!m_dir.isValid())
        throw IoError(QObject::tr("cannot create a temporary directory for the synthetic run store: %1").arg(m_dir.errorString()).toStdString());
    m_path = m_dir.filePath(u"runs.sqlite"_s);
    cppl::core::store::RunStore store(m_path);
    m_sweep = writeSyntheticSweep(store, maxRanks);
}

QStringList renderScreenshots(MainWindow &window, const ScreenshotOptions &o, QString *error)
{
    QStringList files;
    if (!QDir().mkpath(o.directory)) {
        if (error)
            *error = QObject::tr("%1: cannot create the directory").arg(o.directory);
        return {};
    }
    const QDir dir(o.directory);
    window.resize(o.width, o.height);
    window.show();
    {
        // The preview is a child process: wait for it (bounded) so the page shows its figures.
        QEventLoop loop;
        QObject::connect(window.evaluationPage(), &EvaluationPage::previewUpdated, &loop, &QEventLoop::quit);
        QTimer::singleShot(8000, &loop, &QEventLoop::quit);
        if (window.evaluationPage()->previewText().startsWith(QObject::tr("Waiting"))
            || window.evaluationPage()->previewText().startsWith(QObject::tr("Planning")))
            loop.exec();
    }
    window.showPage(MainWindow::ClusterPageIndex);
    // A selected host shows the form filled in, as a user sees it while editing.
    window.clusterPage()->tree()->setCurrentIndex(window.clusterPage()->model()->indexOfHost(0));
    settle(150);
    if (!save(&window, dir.filePath(u"cluster.png"_s), files, error))
        return {};
    // The message bar at its two common levels: what a refused edit and a finished run look like.
    window.messageBar()->showMessage(MessageBar::Level::Error, QObject::tr("hosts[0].slots: expected an integer >= 1, got 0 (the edit was not applied)"));
    settle(100);
    if (!save(&window, dir.filePath(u"message-error.png"_s), files, error))
        return {};
    window.messageBar()->showMessage(MessageBar::Level::Info, QObject::tr("Run 20261130-150203-3fa2 finished."));
    settle(100);
    if (!save(&window, dir.filePath(u"message-info.png"_s), files, error))
        return {};
    window.messageBar()->hide();
    window.showPage(MainWindow::EvaluationPageIndex);
    settle(150);
    if (!save(&window, dir.filePath(u"evaluation.png"_s), files, error))
        return {};
    if (!renderHistory(window, o, dir, files, error))
        return {};
    window.showPage(MainWindow::RunPageIndex);
    window.statusBar()->clearMessage(); // "Opened …" at start: a run's notices would have replaced it
    if (o.syntheticRanks <= 0) {
        settle(150);
        if (!save(&window, dir.filePath(u"run.png"_s), files, error))
            return {};
        return files;
    }
    {
        // Its first seconds: some ranks still loading (no progress yet), no sync round yet.
        SyntheticRun start = SyntheticRun::advanced(o.syntheticRanks, 3);
        start.showOn(*window.runPage());
        window.setStatusPhase(QObject::tr("running"));
        settle(150);
        if (!save(&window, dir.filePath(u"run-starting-%1.png"_s.arg(o.syntheticRanks)), files, error))
            return {};
    }
    SyntheticRun run = SyntheticRun::advanced(o.syntheticRanks, 0.6 * 600 + 12); // past the stall, so it shows
    run.showOn(*window.runPage());
    window.runPage()->selectRank(run.slowRanks().front());
    window.runPage()->showSnapshot(run.snapshot(), run.timeline(), run.seconds(), true);
    window.setStatusPhase(QObject::tr("running")); // as a run sets it, not "idle" beside a running page
    settle(150);
    if (!save(&window, dir.filePath(u"run-live-%1.png"_s.arg(o.syntheticRanks)), files, error))
        return {};
    if (run.stalledRank() >= 0) {
        // The same moment had the run gone on without the stalled rank (on_rank_loss continue).
        window.runPage()->selectRank(run.stalledRank());
        run.showStalledRankLostOn(*window.runPage());
        window.runPage()->showSnapshot(run.snapshot(), run.timeline(), run.seconds(), true); // as the next snapshot would
        window.setStatusPhase(QObject::tr("recovering"));
        settle(150);
        if (!save(&window, dir.filePath(u"run-recovering-%1.png"_s.arg(o.syntheticRanks)), files, error))
            return {};
    }
    run.advanceTo(600);
    run.finish();
    run.showOn(*window.runPage());
    window.setStatusPhase(QObject::tr("finished"));
    settle(150);
    if (!save(&window, dir.filePath(u"run-finished-%1.png"_s.arg(o.syntheticRanks)), files, error))
        return {};
    // The same run had it continued without the stalled rank: the "Recovered" badge, the lost
    // rank silent from its loss on (not caught up, as in the finished shot above).
    SyntheticRun lostRun = SyntheticRun::advanced(o.syntheticRanks, 600);
    lostRun.finish(true);
    lostRun.showOn(*window.runPage());
    lostRun.showRecoveredOn(*window.runPage());
    window.setStatusPhase(QObject::tr("recovered"));
    settle(150);
    if (!save(&window, dir.filePath(u"run-recovered-%1.png"_s.arg(o.syntheticRanks)), files, error))
        return {};
    return files;
}

} // namespace cppl::app
