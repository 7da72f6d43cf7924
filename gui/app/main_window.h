// SPDX-License-Identifier: MIT
#pragma once

// The dashboard's window: a page list (Cluster, Evaluation, Run; History and Compare plug in the
// same way), menus with Run (Ctrl+R) and Stop (Ctrl+.), a message bar for every error, and the
// binding of one RunEngine at a time to the pages.

#include "run/run_engine.h"

#include <QMainWindow>

#include <memory>

class QLabel;
class QListWidget;
class QStackedWidget;

namespace cppl::core::history {
class RunHistory;
struct RunRecord;
} // namespace cppl::core::history

namespace cppl::app {

class ClusterPage;
class ComparePage;
class HistoryPage;
class SweepRunner;
class EvaluationPage;
class MessageBar;
class RunPage;
class SshPrompter;

class MainWindow : public QMainWindow
{
    Q_OBJECT

public:
    enum Page { ClusterPageIndex, EvaluationPageIndex, RunPageIndex, HistoryPageIndex, ComparePageIndex };

    /// @p historyPath: the run history to open instead of RunHistory::defaultPath() ($CLUSTERPPL_STORE or
    /// the user's), e.g. a temporary one for screenshots, so that the user's is never opened.
    explicit MainWindow(QWidget *parent = nullptr, const QString &historyPath = {});
    ~MainWindow() override;

    /// Loads the last profile, or the embedded "This machine" default on first start.
    void loadStartupProfile();
    bool openProfile(const QString &path);

    /// Starts a run of the profile with the Evaluation page's settings; false (with the reason in
    /// the message bar) when it cannot start.
    bool startRun();
    void stopRun();
    /// "Check hosts": the engine's pre-flight-only mode on every host of the profile (local or
    /// SSH, host keys asked as for a run); reports appear on the Cluster page. False when it
    /// cannot start (the reason in the message bar).
    bool checkHosts();
    [[nodiscard]] cppl::core::run::RunEngine *checkEngine() const noexcept { return m_checkEngine.get(); }
    void showPage(Page page);
    /// Replaces the agent of every host (tests, a build tree); empty: found as the CLI does.
    void setAgentOverride(const QString &agent) { m_agentOverride = agent; }
    /// The status bar's phase word (a run sets it itself; screenshots of synthetic runs say theirs).
    void setStatusPhase(const QString &phase);
    void setLogDirectory(const QString &dir) { m_logDir = dir; }

    [[nodiscard]] ClusterPage *clusterPage() const noexcept { return m_cluster; }
    [[nodiscard]] EvaluationPage *evaluationPage() const noexcept { return m_evaluation; }
    [[nodiscard]] RunPage *runPage() const noexcept { return m_run; }
    [[nodiscard]] MessageBar *messageBar() const noexcept { return m_bar; }
    [[nodiscard]] cppl::core::run::RunEngine *engine() const noexcept { return m_engine.get(); }
    [[nodiscard]] QStackedWidget *pages() const noexcept { return m_pages; }

    // History, Compare, Sweep and the run history (main_window_history.cpp, docs/dashboard.md).
    [[nodiscard]] HistoryPage *historyPage() const;
    [[nodiscard]] ComparePage *comparePage() const;
    [[nodiscard]] SweepRunner *sweepRunner() const;
    /// The run history, opened on first use; null (the reason in the message bar) when it cannot open.
    cppl::core::history::RunHistory *runHistory();
    /// Shows @p runIds on the Compare page (read from the history with their baselines).
    void compareRuns(const QStringList &runIds);
    /// Loads a stored run's profile and settings and starts it again.
    bool rerun(const cppl::core::history::RunRecord &run);
    /// Finishes an interrupted run from its last committed round (`clusterppl-cli run --resume`):
    /// with the profile it ran, or (@p onProfileHosts) on the Cluster page's hosts, whose evaluation
    /// must be the run's. False, with the CLI's refusal in the message bar, when it cannot.
    bool resumeRun(const cppl::core::history::RunRecord &run, bool onProfileHosts = false);
    /// The same evaluation at each rank count, one run after another, then Compare.
    /// @p precisions, @p reference: a precision sweep (SweepRunner::start).
    bool startSweep(const std::vector<int> &counts, const QStringList &precisions = {}, const QString &reference = {});
    void setStoreRuns(bool on);

Q_SIGNALS:
    void runFinished(const cppl::core::run::RunOutcome &outcome);

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    void buildMenus();
    /// What the Cluster, Evaluation and Run pages ask of the window, and what they tell each other.
    void connectPages();
    // Starts @p request on a new engine bound to the pages (Run, Re-run, Resume); @p resumedFrom:
    // the Run page's "resumed from round N" line.
    bool launch(cppl::core::run::RunRequest request, const QString &resumedFrom = {});
    void bindEngine(cppl::core::run::RunEngine *engine);
    void updateActions();
    void updateProfileLabel();
    void showError(const QString &text);
    void showInfo(const QString &text);
    QString agentPath() const;
    void setupHistory(const QString &historyPath);
    void prepareRecording(cppl::core::run::RunRequest &request, cppl::core::run::RunEngine *engine);
    // What Run, Check hosts and a sweep start from: the pages' profile and evaluation, the agent
    // and log overrides, and the SSH prompter.
    cppl::core::run::RunRequest requestFromPages() const;
    struct HistoryState;
    std::shared_ptr<HistoryState> m_history; // shared_ptr: its type stays private to main_window_history.cpp

    MessageBar *m_bar = nullptr;
    QListWidget *m_nav = nullptr;
    QStackedWidget *m_pages = nullptr;
    ClusterPage *m_cluster = nullptr;
    EvaluationPage *m_evaluation = nullptr;
    RunPage *m_run = nullptr;
    SshPrompter *m_prompter = nullptr;
    QLabel *m_statusPhase = nullptr;
    QLabel *m_statusProfile = nullptr;
    QAction *m_runAction = nullptr;
    QAction *m_stopAction = nullptr;
    std::unique_ptr<cppl::core::run::RunEngine> m_engine;
    std::unique_ptr<cppl::core::run::RunEngine> m_checkEngine; // a check runs beside the page's run
    QString m_agentOverride;
    QString m_logDir;
};

} // namespace cppl::app
