// SPDX-License-Identifier: MIT
// MainWindow's History, Compare and Sweep parts and the run history: every dashboard run is recorded
// (RunRecorder) with the stored one-rank baseline, as `clusterppl-cli run` does (cli_history.cpp).

#include "main_window.h"

#include "cluster_page.h"
#include "compare_page.h"
#include "evaluation_page.h"
#include "host_dialogs.h"
#include "history_page.h"
#include "message_bar.h"
#include "profile_model.h"
#include "resume_state.h"
#include "run_page.h"
#include "sweep_dialog.h"
#include "sweep_runner.h"

#include "history/run_recorder.h"
#include "history/run_history.h"
#include "history/comparison.h"
#include "history/sweep.h"

#include "cppl/errors.h"

#include <QAction>
#include <QFileInfo>
#include <QLabel>
#include <QJsonDocument>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTimer>

using namespace Qt::StringLiterals;
using cppl::core::run::RunEngine;
using cppl::core::history::RunRecord;
using cppl::core::history::RunHistory;

namespace cppl::app {

// Destroyed in reverse: the recorder and the sweep (which stop writing) before the history.
struct MainWindow::HistoryState
{
    std::unique_ptr<RunHistory> runHistory;
    QString historyPath; // empty: RunHistory::defaultPath()
    QString historyError;
    std::unique_ptr<cppl::core::history::RunRecorder> recorder;
    std::unique_ptr<SweepRunner> sweep;
    HistoryPage *historyPage = nullptr;
    ComparePage *compare = nullptr;
    QAction *storeAction = nullptr;
    QAction *sweepAction = nullptr;
    QAction *exportLastAction = nullptr; // Run › Export report of the last run…
    QString lastRecorded;                // the run it exports: the last one recorded in this window
};

HistoryPage *MainWindow::historyPage() const { return m_history->historyPage; }
ComparePage *MainWindow::comparePage() const { return m_history->compare; }
SweepRunner *MainWindow::sweepRunner() const { return m_history->sweep.get(); }

void MainWindow::setupHistory(const QString &historyPath)
{
    m_history = std::make_shared<HistoryState>();
    HistoryState &h = *m_history;
    h.historyPath = historyPath;
    h.historyPage = new HistoryPage(m_pages);
    h.compare = new ComparePage(m_pages);
    m_pages->addWidget(h.historyPage);
    m_pages->addWidget(h.compare);
    m_nav->addItems({tr("History"), tr("Compare")});

    connect(h.historyPage, &HistoryPage::failed, this, &MainWindow::showError);
    connect(h.historyPage, &HistoryPage::info, this, &MainWindow::showInfo);
    connect(h.compare, &ComparePage::failed, this, &MainWindow::showError);
    connect(h.compare, &ComparePage::info, this, &MainWindow::showInfo);
    connect(h.historyPage, &HistoryPage::compareRequested, this, &MainWindow::compareRuns);
    connect(h.historyPage, &HistoryPage::rerunRequested, this, &MainWindow::rerun);
    connect(h.historyPage, &HistoryPage::resumeRequested, this, &MainWindow::resumeRun);
    // The history opens when first needed: the History page shown, or a run started.
    connect(m_pages, &QStackedWidget::currentChanged, this, [this](int index) {
        if (index == HistoryPageIndex && !m_history->runHistory && m_history->historyError.isEmpty())
            m_history->historyPage->setHistory(runHistory(), m_history->historyError);
    });

    QMenu *view = nullptr;
    QMenu *runMenu = nullptr;
    for (QAction *a : menuBar()->actions()) {
        if (a->menu() && a->text() == tr("&View"))
            view = a->menu();
        if (a->menu() && a->text() == tr("&Run"))
            runMenu = a->menu();
    }
    if (view) {
        QAction *hist = view->addAction(tr("&History"), this, [this] { showPage(HistoryPageIndex); });
        hist->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_4));
        QAction *cmp = view->addAction(tr("C&ompare"), this, [this] { showPage(ComparePageIndex); });
        cmp->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_5));
    }
    if (runMenu) {
        runMenu->addSeparator();
        h.sweepAction = runMenu->addAction(tr("S&weep…"), this, [this] {
            int slots = 0;
            for (const auto &host : m_cluster->profile().hosts)
                slots += host.slots;
            QStringList def;
            for (int n = 1; n <= slots && n <= 8; n *= 2)
                def << QString::number(n);
            SweepDialog dialog(slots, def.join(u','), this);
            if (dialog.exec() != QDialog::Accepted)
                return;
            try {
                startSweep(dialog.counts(), dialog.precisions(), dialog.referenceModel());
            } catch (const cppl::Error &e) {
                showError(tr("Sweep: %1").arg(QString::fromUtf8(e.what())));
            }
        });
        // The run just watched, as `clusterppl-cli report <run id>` writes it; History's Export
        // report… does any stored run or several.
        h.exportLastAction = runMenu->addAction(tr("E&xport report of the last run…"), this, [this] {
            if (!m_history->lastRecorded.isEmpty() && runHistory())
                m_history->historyPage->askExport({m_history->lastRecorded}, this);
        });
        h.exportLastAction->setEnabled(false);
        h.exportLastAction->setToolTip(tr("Enabled once a run started here has been stored in the history"));
        h.storeAction = runMenu->addAction(tr("S&tore runs in the history"));
        h.storeAction->setCheckable(true);
        h.storeAction->setChecked(QSettings().value(u"history/storeRuns"_s, true).toBool());
        h.storeAction->setToolTip(tr("Record every run (settings, result, per-rank samples, logs, alerts) in %1").arg(historyPath.isEmpty() ? RunHistory::defaultPath() : historyPath));
        connect(h.storeAction, &QAction::toggled, this, [](bool on) { QSettings().setValue(u"history/storeRuns"_s, on); });
    }
}

void MainWindow::setStoreRuns(bool on)
{
    if (m_history->storeAction)
        m_history->storeAction->setChecked(on);
}

RunHistory *MainWindow::runHistory()
{
    HistoryState &h = *m_history;
    if (!h.runHistory) {
        try {
            const QStringList adopted = h.historyPath.isEmpty() ? RunHistory::adoptEarlierStores() : QStringList();
            h.runHistory = std::make_unique<RunHistory>(h.historyPath.isEmpty() ? RunHistory::defaultPath() : h.historyPath);
            h.historyError.clear();
            h.historyPage->setHistory(h.runHistory.get());
            QStringList news = adopted;
            if (!h.runHistory->interruptedOnOpen().isEmpty())
                news << tr("Runs left running by a process that ended are marked interrupted: %1").arg(h.runHistory->interruptedOnOpen().join(u", "_s));
            if (!news.isEmpty())
                showInfo(news.join(u'\n'));
        } catch (const cppl::Error &e) {
            h.historyError = QString::fromUtf8(e.what());
            h.historyPage->setHistory(nullptr, h.historyError);
            // Deferred: startRun() clears the message bar right after asking for the history.
            QTimer::singleShot(0, this, [this, why = h.historyError] {
                showError(tr("The run history cannot be opened, so runs are not stored: %1\n"
                             "Set CLUSTERPPL_STORE to a writable file, or turn off Run > Store runs in the history.")
                              .arg(why));
            });
            return nullptr;
        }
    }
    return h.runHistory.get();
}

void MainWindow::prepareRecording(cppl::core::run::RunRequest &request, cppl::core::run::RunEngine *engine)
{
    HistoryState &h = *m_history;
    h.recorder.reset();
    if (h.storeAction && !h.storeAction->isChecked())
        return;
    RunHistory *s = runHistory();
    if (!s)
        return;
    if (request.runId.isEmpty())
        request.runId = cppl::core::run::generateRunId();
    if (request.baselineResultJson.isEmpty()) {
        const QString dir = request.profilePath.isEmpty() ? QString() : QFileInfo(request.profilePath).absolutePath();
        const QString key = cppl::core::history::settingsKey(cppl::core::history::settingsInputsFromProfile(request.profile, dir));
        try {
            if (const auto b = s->baselineFor(key))
                request.baselineResultJson = b->resultJson;
        } catch (const cppl::Error &e) {
            statusBar()->showMessage(tr("No baseline: %1").arg(QString::fromUtf8(e.what())), 8000);
        }
    }
    cppl::core::history::RunRecorder::Options o;
    o.source = u"dashboard"_s;
    // A resumed run keeps its id; as with `clusterppl-cli run`, a stored id is recorded as ID.2, ID.3...
    try {
        if (s->contains(request.runId)) {
            int n = 2;
            while (s->contains(request.runId + u'.' + QString::number(n)))
                ++n;
            o.recordAs = request.runId + u'.' + QString::number(n);
        }
    } catch (const cppl::Error &e) {
        statusBar()->showMessage(tr("This run is not recorded: %1").arg(QString::fromUtf8(e.what())), 8000);
        return;
    }
    h.recorder = std::make_unique<cppl::core::history::RunRecorder>(*s, o);
    h.recorder->attach(engine);
    connect(h.recorder.get(), &cppl::core::history::RunRecorder::recorded, h.historyPage, &HistoryPage::refresh);
    connect(h.recorder.get(), &cppl::core::history::RunRecorder::recorded, this, [this](const QString &runId) {
        m_history->lastRecorded = runId;
        if (QAction *a = m_history->exportLastAction) {
            a->setEnabled(true);
            a->setText(tr("E&xport report of run %1…").arg(runId));
        }
    });
}

void MainWindow::compareRuns(const QStringList &runIds)
{
    RunHistory *s = runHistory();
    if (!s)
        return;
    std::vector<RunRecord> runs, baselines;
    try {
        s->flush();
        for (const QString &id : runIds) {
            auto r = s->get(id);
            if (!r) {
                showError(tr("Run %1 is not in the history %2").arg(id, s->path()));
                continue;
            }
            for (RunRecord &b : cppl::core::history::storedBaselines(*s, *r))
                baselines.push_back(std::move(b));
            runs.push_back(std::move(*r));
        }
    } catch (const cppl::Error &e) {
        showError(tr("Reading the run history: %1").arg(QString::fromUtf8(e.what())));
        return;
    }
    m_history->compare->setRuns(std::move(runs), std::move(baselines));
    showPage(ComparePageIndex);
}

bool MainWindow::rerun(const RunRecord &run)
{
    if (m_history->sweep && m_history->sweep->running()) {
        showError(tr("A sweep is running; stop it (Ctrl+.) before re-running %1").arg(run.runId));
        return false;
    }
    const ProfileParseResult parsed = parseProfile(QJsonDocument(run.profile).toJson().toStdString(), run.runId.toStdString());
    if (!parsed.ok()) {
        showError(tr("Run %1's stored profile cannot be used: %2").arg(run.runId, QString::fromStdString(parsed.errors.front())));
        return false;
    }
    ClusterProfile p = parsed.profile;
    // The history keeps model and data as absolute paths; the profile's may be relative to a file
    // that is not known here.
    if (!run.model.isEmpty())
        p.evaluation.model = run.model.toStdString();
    if (!run.data.isEmpty())
        (p.evaluation.text.empty() ? p.evaluation.tokens : p.evaluation.text) = run.data.toStdString();
    // No file path: saving must not overwrite the user's profile file with the stored one.
    m_cluster->setProfile(p, QString());
    m_evaluation->load(p.evaluation, p.thresholds);
    return startRun();
}

bool MainWindow::resumeRun(const RunRecord &run, bool onProfileHosts)
{
    if (m_history->sweep && m_history->sweep->running()) {
        showError(tr("A sweep is running; stop it (Ctrl+.) before resuming %1").arg(run.runId));
        return false;
    }
    if (m_engine && !cppl::core::run::isTerminal(m_engine->phase()) && m_engine->phase() != cppl::core::run::RunPhase::Idle) {
        showError(tr("A run is in progress (%1); stop it first (Ctrl+.)").arg(m_engine->runId()));
        return false;
    }
    // The checks and messages of `clusterppl-cli run --resume` (cli_run.cpp), on the run's directory.
    const QString dir = runDirectoryOf(run);
    QString why;
    const auto from = loadResumeFrom(dir, &why);
    if (!from) {
        showError(tr("Cannot resume run %1: %2").arg(run.runId, why));
        return false;
    }
    cppl::core::run::RunRequest request;
    if (onProfileHosts) {
        if (const QStringList problems = m_cluster->model()->problems(); !problems.isEmpty()) {
            showError(tr("The profile has problems; fix them on the Cluster page first:\n%1").arg(problems.join(u'\n')));
            showPage(ClusterPageIndex);
            return false;
        }
        // Other hosts may finish the run; what is evaluated, and relative paths, must stay the run's.
        request = requestFromPages();
        const QStringList differences = cppl::core::run::resumeMismatches(from->profile, request.profile, from->schedule, from->batch);
        if (!differences.isEmpty()) {
            showError(tr("Cannot resume run %1 on profile \"%2\": the profile does not evaluate what run %1 evaluated:\n  %3\n"
                         "(Resume without the Cluster page's hosts uses the run's own profile, saved in %4/run.json)")
                          .arg(from->runId, QString::fromStdString(request.profile.name), differences.join(u"\n  "_s), from->directory));
            return false;
        }
    } else {
        request.profile = from->profile;
        request.profilePath = from->profilePath;
        request.agent = m_agentOverride;
        m_prompter->install(request.launcher);
    }
    request.runId = from->runId;
    request.resumeState = from->checkpoint;
    request.logDir = from->directory;
    const QString resumed = tr("Resumed run %1 from round %2: %3 of %4 global batches were committed before it stopped (%5 schedule, "
                               "%6 ranks then); only the rest is evaluated.")
                                .arg(from->runId)
                                .arg(from->round)
                                .arg(from->batchesDone)
                                .arg(from->batchCount)
                                .arg(from->schedule)
                                .arg(from->worldSize);
    statusBar()->showMessage(resumed, 8000);
    return launch(std::move(request), resumed);
}

bool MainWindow::startSweep(const std::vector<int> &counts, const QStringList &precisions, const QString &reference)
{
    HistoryState &h = *m_history;
    if (m_engine && !cppl::core::run::isTerminal(m_engine->phase()) && m_engine->phase() != cppl::core::run::RunPhase::Idle) {
        showError(tr("A run is in progress; stop it before a sweep"));
        return false;
    }
    RunHistory *s = runHistory();
    if (!s)
        return false;
    if (!h.sweep) {
        h.sweep = std::make_unique<SweepRunner>(*s);
        connect(h.sweep.get(), &SweepRunner::progress, this, [this](int i, int n, int ranks, const QString &id) {
            // The Run page shows each run of the sweep live, as it shows a single run.
            RunEngine *e = m_history->sweep->engine();
            bindEngine(e);
            // After bindEngine's handlers (which look at m_engine only): the sweep stays stoppable.
            connect(e, &RunEngine::phaseChanged, this, [this] {
                m_runAction->setEnabled(false);
                m_stopAction->setEnabled(true);
                m_run->setRunEnabled(false, true);
            });
            showPage(RunPageIndex);
            m_bar->showMessage(MessageBar::Level::Info, tr("Sweep: run %1 of %2 (%3 ranks): %4. Run > Stop ends the sweep.")
                                                            .arg(i + 1).arg(n).arg(ranks).arg(id));
            m_statusPhase->setText(tr("sweep %1/%2").arg(i + 1).arg(n));
        });
        connect(h.sweep.get(), &SweepRunner::runEnded, this, [this] { m_history->historyPage->refresh(); });
        connect(h.sweep.get(), &SweepRunner::finished, this, [this](const QStringList &ids, int failures, bool stopped) {
            m_stopAction->setEnabled(false);
            m_runAction->setEnabled(true);
            m_statusPhase->setText(tr("idle"));
            m_run->setRunEnabled(true, false);
            m_history->historyPage->refresh();
            if (stopped)
                showInfo(ids.size() == 1 ? tr("Sweep stopped after 1 run.") : tr("Sweep stopped after %n runs.", nullptr, int(ids.size())));
            else if (failures > 0)
                showError(tr("Sweep: %1 of %2 runs did not finish; see History").arg(failures).arg(ids.size()));
            else
                showInfo(ids.size() == 1 ? tr("Sweep finished: 1 run.") : tr("Sweep finished: %n runs.", nullptr, int(ids.size())));
            compareRuns(ids);
        });
        // Stop (Ctrl+.) ends the sweep as well as its current run.
        connect(m_stopAction, &QAction::triggered, h.sweep.get(), &SweepRunner::stop);
        connect(m_run, &RunPage::stopRequested, h.sweep.get(), &SweepRunner::stop);
    }
    const cppl::core::run::RunRequest base = requestFromPages();
    QString error;
    if (!h.sweep->start(base, counts, &error, precisions, reference)) {
        showError(tr("Sweep: %1").arg(error));
        return false;
    }
    m_runAction->setEnabled(false);
    m_stopAction->setEnabled(true);
    return true;
}

} // namespace cppl::app
