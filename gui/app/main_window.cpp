// SPDX-License-Identifier: MIT
#include "main_window.h"

#include "app_paths.h"
#include "cluster_page.h"
#include "evaluation_page.h"
#include "host_dialogs.h"
#include "message_bar.h"
#include "profile_model.h"
#include "run_page.h"

#include "launch/slurm_job.h"
#include "run/agent_locator.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;
using cppl::core::run::RunEngine;
using cppl::core::run::RunPhase;

namespace cppl::app {

namespace {

/// The GPUs a tensor-parallel group may span: one host's slots (the smallest host's; a Slurm job's
/// tasks per node).
int gpusPerNode(const ClusterProfile &p)
{
    if (p.launcher == "slurm")
        return p.slurm.ntasksPerNode;
    int fewest = 0;
    for (const HostSpec &h : p.hosts)
        fewest = fewest == 0 ? h.slots : std::min(fewest, h.slots);
    return std::max(fewest, 1);
}

} // namespace

MainWindow::MainWindow(QWidget *parent, const QString &historyPath)
    : QMainWindow(parent)
{
    setWindowTitle(tr("ClusterPPL"));
    auto *central = new QWidget(this);
    auto *outer = new QVBoxLayout(central);
    outer->setContentsMargins(6, 6, 6, 6);
    m_bar = new MessageBar(central);
    outer->addWidget(m_bar);
    auto *row = new QHBoxLayout;
    m_nav = new QListWidget(central);
    m_nav->setObjectName(u"pageList"_s);
    m_nav->addItems({tr("Cluster"), tr("Evaluation"), tr("Run")});
    m_nav->setFixedWidth(m_nav->fontMetrics().horizontalAdvance(u"Evaluation"_s) * 2);
    m_nav->setSpacing(2);
    m_pages = new QStackedWidget(central);
    m_cluster = new ClusterPage(m_pages);
    m_evaluation = new EvaluationPage(m_pages);
    m_run = new RunPage(m_pages);
    m_pages->addWidget(m_cluster);
    m_pages->addWidget(m_evaluation);
    m_pages->addWidget(m_run);
    row->addWidget(m_nav);
    row->addWidget(m_pages, 1);
    outer->addLayout(row, 1);
    setCentralWidget(central);
    m_prompter = new SshPrompter(this);

    // The profile's file name (long paths crowded out the messages); the full path in the tooltip.
    m_statusProfile = new QLabel(this);
    m_statusProfile->setObjectName(u"statusProfile"_s);
    statusBar()->addPermanentWidget(m_statusProfile);
    m_statusPhase = new QLabel(tr("idle"), this);
    statusBar()->addPermanentWidget(m_statusPhase);
    buildMenus();
    setupHistory(historyPath); // History and Compare pages, Store runs, Sweep (main_window_history.cpp)

    connectPages();
    m_evaluation->setAgent(agentPath());
    QSettings s;
    restoreGeometry(s.value(u"window/geometry"_s).toByteArray());
    restoreState(s.value(u"window/state"_s).toByteArray());
    if (!s.contains(u"window/geometry"_s))
        resize(1400, 900);
    m_nav->setCurrentRow(s.value(u"window/page"_s, 0).toInt());
    updateActions();
}

MainWindow::~MainWindow() = default;

void MainWindow::connectPages()
{
    connect(m_nav, &QListWidget::currentRowChanged, m_pages, &QStackedWidget::setCurrentIndex);
    connect(m_cluster, &ClusterPage::failed, this, &MainWindow::showError);
    connect(m_cluster, &ClusterPage::checkHostsRequested, this, &MainWindow::checkHosts);
    // File operations confirm in the status bar; the message bar is for what needs attention.
    connect(m_cluster, &ClusterPage::info, this, [this](const QString &text) {
        statusBar()->showMessage(text, 8000);
        updateProfileLabel(); // Save as… changes the file without changing the profile
    });
    connect(m_cluster, &ClusterPage::profileChanged, this, [this] {
        int ranks = 0;
        for (const auto &h : m_cluster->profile().hosts)
            ranks += h.slots;
        m_evaluation->setWorldSize(ranks);
        m_evaluation->setGpusPerNode(gpusPerNode(m_cluster->profile()));
        m_evaluation->setBaseDirectory(QFileInfo(m_cluster->profilePath()).absolutePath());
        updateProfileLabel();
        updateActions();
    });
    // The Cluster tree names each rank's tensor-parallel group as the Evaluation page sets N.
    connect(m_evaluation, &EvaluationPage::changed, this,
            [this] { m_cluster->model()->setTensorParallel(m_evaluation->evaluation().tensorParallel); });
    connect(m_evaluation, &EvaluationPage::saveIntoProfileRequested, this, [this] {
        ClusterProfile p = m_cluster->profile();
        p.evaluation = m_evaluation->evaluation();
        p.thresholds = m_evaluation->thresholds();
        m_cluster->setProfile(p, m_cluster->profilePath());
        showInfo(tr("The evaluation settings are now part of profile \"%1\"; save the profile to keep them in its file.")
                     .arg(QString::fromStdString(p.name)));
    });
    connect(m_run, &RunPage::runRequested, this, &MainWindow::startRun);
    connect(m_run, &RunPage::stopRequested, this, &MainWindow::stopRun);
    // Beyond 32 ranks the charts name only some ranks: redraw them with the selected one added.
    connect(m_run, &RunPage::rankSelected, this, [this] {
        if (m_engine && m_engine->latestSnapshot())
            m_run->showSnapshot(*m_engine->latestSnapshot(), m_engine->timeline(), m_engine->elapsedSeconds(), true);
    });
}

void MainWindow::buildMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open profile…"), QKeySequence::Open, this, [this] {
        const QString p = QFileDialog::getOpenFileName(this, tr("Open profile"), {}, tr("Profiles (*.json);;All files (*)"));
        if (!p.isEmpty())
            openProfile(p);
    });
    file->addAction(tr("&Save profile as…"), QKeySequence::SaveAs, this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Save profile"), m_cluster->profilePath(), tr("Profiles (*.json)"));
        if (!p.isEmpty())
            m_cluster->saveProfile(p);
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    QMenu *run = menuBar()->addMenu(tr("&Run"));
    m_runAction = run->addAction(tr("&Run"), this, &MainWindow::startRun);
    m_runAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    m_stopAction = run->addAction(tr("&Stop"), this, &MainWindow::stopRun);
    m_stopAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Period));
    run->addSeparator();
    run->addAction(tr("&Check hosts"), this, &MainWindow::checkHosts);

    QMenu *view = menuBar()->addMenu(tr("&View"));
    const QStringList names{tr("&Cluster"), tr("&Evaluation"), tr("R&un")};
    for (int i = 0; i < names.size(); ++i) {
        QAction *a = view->addAction(names[i], this, [this, i] { showPage(Page(i)); });
        a->setShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)));
    }
    QMenu *help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About ClusterPPL"), this, [this] {
        QMessageBox::about(this, tr("About ClusterPPL"),
                           tr("<p><b>ClusterPPL</b>: exact perplexity of a language model across a cluster, "
                              "watched live.</p><p>MIT licence. Built with Qt %1 (LGPL-3).</p>")
                               .arg(QString::fromLatin1(qVersion())));
    });
}

void MainWindow::setStatusPhase(const QString &phase)
{
    m_statusPhase->setText(phase);
}

void MainWindow::showPage(Page page)
{
    m_nav->setCurrentRow(int(page));
}

void MainWindow::showError(const QString &text)
{
    m_bar->showMessage(MessageBar::Level::Error, text);
    statusBar()->showMessage(text.section(u'\n', 0, 0), 10000);
}

void MainWindow::showInfo(const QString &text)
{
    m_bar->showMessage(MessageBar::Level::Info, text);
    statusBar()->showMessage(text.section(u'\n', 0, 0), 5000);
}

QString MainWindow::agentPath() const
{
    if (!m_agentOverride.isEmpty())
        return m_agentOverride;
    const QString local = cppl::core::run::localAgentFor(m_cluster->profile());
    return local.isEmpty() ? findAgent() : local;
}

void MainWindow::loadStartupProfile()
{
    QSettings s;
    const QString last = s.value(u"profile/path"_s).toString();
    bool loaded = false;
    if (!last.isEmpty() && QFileInfo::exists(last))
        loaded = openProfile(last);
    if (!loaded) {
        const QString def = defaultProfilePath();
        if (def.isEmpty()) {
            showError(tr("The embedded profile \"This machine\" (share/clusterppl/profiles/local-default.json) was not "
                         "found; reinstall ClusterPPL or open a profile with File > Open profile"));
            return;
        }
        loaded = openProfile(def);
    }
    m_evaluation->restoreSettings();
}

bool MainWindow::openProfile(const QString &path)
{
    if (!m_cluster->openProfile(path))
        return false;
    ClusterProfile p = m_cluster->profile();
    if (QFileInfo(path).fileName() == u"local-default.json"_s && p.name == "local-default") {
        p.name = tr("This machine").toStdString();
        m_cluster->setProfile(p, m_cluster->profilePath());
    }
    m_evaluation->setBaseDirectory(QFileInfo(path).absolutePath());
    m_evaluation->load(p.evaluation, p.thresholds);
    m_evaluation->setAgent(agentPath());
    QSettings().setValue(u"profile/path"_s, QFileInfo(path).absoluteFilePath());
    return true;
}

cppl::core::run::RunRequest MainWindow::requestFromPages() const
{
    cppl::core::run::RunRequest request;
    request.profile = m_cluster->profile();
    request.profile.evaluation = m_evaluation->evaluation();
    request.profile.thresholds = m_evaluation->thresholds();
    request.profilePath = m_cluster->profilePath();
    request.agent = m_agentOverride;
    request.logDir = m_logDir;
    m_prompter->install(request.launcher);
    return request;
}

bool MainWindow::startRun()
{
    if (m_engine && !cppl::core::run::isTerminal(m_engine->phase()) && m_engine->phase() != RunPhase::Idle) {
        showError(tr("A run is in progress (%1); stop it first (Ctrl+.)").arg(m_engine->runId()));
        return false;
    }
    const QStringList problems = m_cluster->model()->problems();
    if (!problems.isEmpty()) {
        showError(tr("The profile has problems; fix them on the Cluster page first:\n%1").arg(problems.join(u'\n')));
        showPage(ClusterPageIndex);
        return false;
    }
    cppl::core::run::RunRequest request = requestFromPages();
    m_evaluation->saveSettings();
    return launch(std::move(request));
}

bool MainWindow::launch(cppl::core::run::RunRequest request, const QString &resumedFrom)
{
    if (m_engine) {
        // Finished engines only (checked above): dropping it ends nothing.
        m_engine.reset();
    }
    m_engine = std::make_unique<RunEngine>();
    bindEngine(m_engine.get());
    prepareRecording(request, m_engine.get()); // the history's baseline and recorder, before start()
    m_bar->hide();
    const cppl::core::run::RunRequest copy = request;
    m_run->reset({}, 0, {}, copy.profile.thresholds);
    m_run->setSchedule(QString::fromStdString(copy.profile.evaluation.schedule));
    m_run->setReferenceModel(!copy.profile.evaluation.referenceModel.empty());
    m_run->setResumedFrom(resumedFrom);
    if (!resumedFrom.isEmpty()) // planned() resets the page for the run's ranks; the line stays
        connect(m_engine.get(), &RunEngine::planned, this, [this, resumedFrom] { m_run->setResumedFrom(resumedFrom); });
    m_cluster->model()->clearPreflight();
    showPage(RunPageIndex);
    const bool ok = m_engine->start(std::move(request));
    updateActions();
    return ok;
}

bool MainWindow::checkHosts()
{
    using cppl::core::run::isTerminal;
    if (m_checkEngine && !isTerminal(m_checkEngine->phase())) {
        showError(tr("Check hosts is already running; wait for its reports on the Cluster page"));
        return false;
    }
    if (const QStringList problems = m_cluster->model()->problems(); !problems.isEmpty()) {
        showError(tr("The profile has problems; fix them before checking its hosts:\n%1").arg(problems.join(u'\n')));
        showPage(ClusterPageIndex);
        return false;
    }
    // The same request as Run, so the check tests what a run would use (model, data, backend,
    // agent); only the engine's checkOnly differs, as for `clusterppl-cli check`.
    // (logDir is set too, as the CLI's check does: a check launches nothing, so it writes no logs.)
    cppl::core::run::RunRequest request = requestFromPages();
    request.checkOnly = true;
    m_checkEngine = std::make_unique<RunEngine>();
    RunEngine *e = m_checkEngine.get();
    connect(e, &RunEngine::preflightHost, m_cluster, &ClusterPage::showPreflight);
    connect(e, &RunEngine::preflightHost, m_evaluation, [this](const cppl::core::run::HostPreflight &h) { m_evaluation->notePreflight(h.report); });
    connect(e, &RunEngine::finished, this, [this, e](const cppl::core::run::RunOutcome &o) {
        const int hosts = int(e->preflightReports().size());
        if (o.phase == RunPhase::Finished) {
            const QString verdict = hosts == 1 ? tr("1 host passed pre-flight; nothing was launched.")
                                              : tr("%n hosts passed pre-flight; nothing was launched.", nullptr, hosts);
            m_cluster->endCheck(true, verdict);
            showInfo(tr("Check hosts: %1").arg(verdict));
        } else {
            // Each host's block above says what it said; the verdict counts them (the message bar
            // names the first cause).
            int failed = 0;
            for (const auto &h : e->preflightReports())
                failed += !(h.ran && h.problems.isEmpty());
            m_cluster->endCheck(false, failed == 0 ? o.firstCause
                                                   : (hosts == 1 ? tr("1 of 1 host failed pre-flight (above); nothing was launched.")
                                                                 : tr("%1 of %n hosts failed pre-flight (above); nothing was launched.", nullptr, hosts)
                                                                       .arg(failed)));
            showError(tr("Check hosts: %1").arg(o.firstCause));
        }
    });
    m_bar->hide();
    m_cluster->beginCheck();
    showPage(ClusterPageIndex);
    statusBar()->showMessage(request.profile.hosts.size() == 1 ? tr("Checking 1 host…")
                                                                : tr("Checking %n hosts…", nullptr, int(request.profile.hosts.size())));
    return e->start(std::move(request));
}

void MainWindow::stopRun()
{
    if (m_engine && !cppl::core::run::isTerminal(m_engine->phase()))
        m_engine->stop();
}

void MainWindow::bindEngine(RunEngine *e)
{
    connect(e, &RunEngine::phaseChanged, this, [this](RunPhase phase) {
        m_run->setPhase(phase);
        m_statusPhase->setText(cppl::core::run::phaseName(phase));
        updateActions();
    });
    connect(e, &RunEngine::planned, this, [this, e] {
        std::vector<QString> groups;
        int world = int(e->plan().ranks.size());
        // A Slurm profile's one host is the login node: the ranks' groups are those of the job's
        // layout (nodes x tasks per node), as the launch plan has them.
        const cppl::ClusterProfile &requested = e->request().profile;
        if (cppl::validateProfile(requested).empty())
            for (const auto &g : cppl::rankLayout(requested.launcher == "slurm" ? cppl::core::slurmRankProfile(requested) : requested).groups)
                groups.push_back(QString::fromStdString(g.name));
        m_run->reset(e->runId(), world, groups, e->request().profile.thresholds);
        m_run->setSchedule(QString::fromStdString(requested.evaluation.schedule));
        m_run->setTensorParallel(requested.evaluation.tensorParallel);
        m_run->setReferenceModel(!requested.evaluation.referenceModel.empty());
        m_run->setPhase(e->phase());
        statusBar()->showMessage(world == 1 ? tr("Run %1: 1 rank").arg(e->runId()) : tr("Run %1: %2 ranks").arg(e->runId()).arg(world));
    });
    connect(e, &RunEngine::preflightHost, m_cluster, &ClusterPage::showPreflight);
    connect(e, &RunEngine::preflightHost, m_evaluation, [this](const cppl::core::run::HostPreflight &h) { m_evaluation->notePreflight(h.report); });
    connect(e, &RunEngine::preflightFinished, this, [this](bool ok, const QStringList &refusals) {
        if (!ok)
            showError(tr("Pre-flight refused the launch:\n%1").arg(refusals.join(u'\n')));
    });
    connect(e, &RunEngine::rankOutput, m_run, &RunPage::appendLog);
    connect(e, &RunEngine::rankFinished, m_run, &RunPage::rankFinished);
    connect(e, &RunEngine::rankLost, this, [this](int rank, const QString &detail) {
        m_run->rankLost(rank, detail);
        m_statusPhase->setText(tr("recovering"));
    });
    connect(e, &RunEngine::hostFailed, this, [this](const QString &host, const QString &message) {
        showError(tr("Host %1: %2").arg(host, message));
    });
    connect(e, &RunEngine::snapshotReady, this, [this, e](const cppl::core::run::SnapshotPtr &s) {
        if (s)
            m_run->showSnapshot(*s, e->timeline(), e->elapsedSeconds());
    });
    connect(e, &RunEngine::alertRaised, m_run, &RunPage::addAlert);
    connect(e, &RunEngine::notice, this, [this](const QString &text) {
        m_run->setNotice(text);
        statusBar()->showMessage(text, 8000);
    });
    connect(e, &RunEngine::finished, this, [this, e](const cppl::core::run::RunOutcome &o) {
        // The last snapshot may have been coalesced away; show the final state the engine holds.
        if (const auto s = e->latestSnapshot())
            m_run->showSnapshot(*s, e->timeline(), e->elapsedSeconds());
        m_run->showOutcome(o);
        const bool recovered = o.phase == RunPhase::Finished && !o.recovered.isEmpty();
        m_statusPhase->setText(recovered ? tr("recovered") : cppl::core::run::phaseName(o.phase));
        if (o.phase == RunPhase::Failed)
            showError(tr("The run failed: %1").arg(o.firstCause.isEmpty() ? o.summary : o.firstCause));
        else if (recovered)
            showInfo(tr("Run %1 finished, recovered from a lost rank: %2.").arg(e->runId(), o.recovered.join(u"; "_s)));
        else if (o.phase == RunPhase::Finished)
            showInfo(tr("Run %1 finished.").arg(e->runId()));
        updateActions();
        Q_EMIT runFinished(o);
    });
}

void MainWindow::updateProfileLabel()
{
    const QString path = m_cluster->profilePath();
    m_statusProfile->setText(path.isEmpty() ? tr("profile not saved") : QFileInfo(path).fileName());
    m_statusProfile->setToolTip(path.isEmpty() ? tr("The profile has no file yet (File > Save profile as…)")
                                               : QDir::toNativeSeparators(QFileInfo(path).absoluteFilePath()));
}

void MainWindow::updateActions()
{
    const bool running = m_engine && !cppl::core::run::isTerminal(m_engine->phase()) && m_engine->phase() != RunPhase::Idle;
    m_runAction->setEnabled(!running);
    m_stopAction->setEnabled(running && m_engine->phase() != RunPhase::Stopping);
    m_run->setRunEnabled(!running, running);
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    QSettings s;
    s.setValue(u"window/geometry"_s, saveGeometry());
    s.setValue(u"window/state"_s, saveState());
    s.setValue(u"window/page"_s, m_nav->currentRow());
    m_evaluation->saveSettings();
    // Destroying the engine stops its ranks (no orphans).
    m_engine.reset();
    m_checkEngine.reset();
    QMainWindow::closeEvent(event);
}

} // namespace cppl::app
