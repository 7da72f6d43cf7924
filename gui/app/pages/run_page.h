// SPDX-License-Identifier: MIT
#pragma once

// The Run page: a view of one run. Fed by the main window from RunEngine's signals (or by the
// synthetic run for screenshots): phase, snapshots with the timeline, alerts, per-rank output and
// the outcome. Selecting a rank anywhere (table, chart, heat map, alert) selects it everywhere.

#include "run/run_engine.h"

#include <QElapsedTimer>
#include <QWidget>

#include <deque>
#include <map>

class QBoxLayout;
class QHBoxLayout;
class QLabel;
class QVBoxLayout;
class QSplitter;
class QLineEdit;
class QPlainTextEdit;
class QComboBox;
class QPushButton;
class QSortFilterProxyModel;
class QTableView;
class QTabWidget;
class QTimer;

namespace cppl::app {

class AlertModel;
class RankTableModel;
class RunCharts;

class RunPage : public QWidget
{
    Q_OBJECT

public:
    explicit RunPage(QWidget *parent = nullptr);

    /// A new run: clears everything. @p groupNames by layout group index.
    void reset(const QString &runId, int worldSize, const std::vector<QString> &groupNames, const Thresholds &thresholds);
    void setPhase(cppl::core::run::RunPhase phase);
    /// The run's schedule ("dynamic", "static"): what the deviation chart says a rank's PPL is over.
    void setSchedule(const QString &schedule);
    /// The run's evaluation.tensor_parallel: the rank table shows each rank's tensor-parallel group.
    void setTensorParallel(int n);
    /// Whether the run evaluates against a reference model: the running KLD and top-token
    /// agreement per rank are charted beside the PPL (RunCharts::setReferenceModel).
    void setReferenceModel(bool on);
    /// The headline follows every snapshot; the rank table and the charts follow at most every
    /// 200 ms beyond 256 ranks, taking turns (see run_page.cpp). @p timeline must stay alive
    /// until the next reset() (the engine's does).
    void showSnapshot(const cppl::core::telemetry::Snapshot &snapshot, const cppl::core::run::RunTimeline &timeline,
                      double elapsedSeconds, bool redrawCharts = false);
    /// Alerts are queued and inserted together once control returns to the event loop (all the
    /// alerts of one snapshot, however many: one model insertion, no per-row measuring).
    void addAlert(const cppl::core::run::RunAlert &alert);
    /// Inserts @p alerts (and any queued) at once.
    void addAlerts(const std::vector<cppl::core::run::RunAlert> &alerts);
    void appendLog(int rank, bool isStderr, const QString &line);
    void showOutcome(const cppl::core::run::RunOutcome &outcome);
    void rankFinished(int rank, int exitCode);
    /// --on-rank-loss continue: the others regrouped without @p rank (RunEngine::rankLost). Its
    /// row and heat-map row read lost, the badge "Recovering", until the run's outcome.
    void rankLost(int rank, const QString &detail);
    /// The engine's latest notice. While the run goes on without lost ranks the line says so
    /// first (rankLostNotice), whatever came after (the checkpoints' regrouping).
    void setNotice(const QString &text);
    [[nodiscard]] QString noticeText() const;
    /// A resumed run: "Resumed run X from round N: ..." under the headline until the next run (empty: hidden).
    void setResumedFrom(const QString &text);
    [[nodiscard]] QString resumedText() const;
    void selectRank(int rank);
    void setRunEnabled(bool canRun, bool canStop);

    // For tests and screenshots.
    [[nodiscard]] QString pplText() const;
    [[nodiscard]] QString phaseText() const;
    [[nodiscard]] int selectedRank() const noexcept { return m_selected; }
    [[nodiscard]] RankTableModel *rankModel() const noexcept { return m_ranks; }
    [[nodiscard]] AlertModel *alertModel() const noexcept { return m_alerts; }
    [[nodiscard]] QSortFilterProxyModel *rankProxy() const noexcept { return m_proxy; }
    [[nodiscard]] RunCharts *charts() const noexcept { return m_charts; }
    /// Whether the rank table is the first tab beside Alerts and Logs (a narrow window) rather
    /// than beside them.
    [[nodiscard]] bool rankTableInTabs() const noexcept { return m_tableInTabs; }
    /// Whether tokens, rate and telemetry are on a line under the PPL (a narrow page) rather than
    /// beside it.
    [[nodiscard]] bool figuresBelow() const noexcept { return m_headline != Headline::OneRow; }

Q_SIGNALS:
    void runRequested();
    void stopRequested();
    void rankSelected(int rank);

protected:
    void resizeEvent(QResizeEvent *event) override;
    bool event(QEvent *event) override;

private:
    static constexpr size_t kLogLinesAll = 20000; // every rank's lines in the log view

    // The page's parts, built once by the constructor (run_page_parts.cpp), and their wiring.
    QHBoxLayout *buildHeadline();
    void buildNotices(QVBoxLayout *layout);
    QWidget *buildRankTable(QWidget *parent);
    QTabWidget *buildTabs(QWidget *parent);
    QTableView *buildAlertView(QWidget *parent);
    QWidget *buildLogTab(QWidget *parent);
    void connectControls();
    // showSnapshot()'s steps: the headline's figures, then the table and the charts (in turns).
    void showFigures(const cppl::core::telemetry::Snapshot &snapshot, double elapsedSeconds);
    void showTelemetryCounts(const cppl::core::telemetry::Snapshot &snapshot);
    void showEta(const cppl::core::telemetry::Snapshot &snapshot, double elapsedSeconds);
    void showTableAndCharts(const cppl::core::telemetry::Snapshot &snapshot, const cppl::core::run::RunTimeline &timeline,
                            bool redrawCharts);
    // showOutcome()'s steps: the result's lines, then the lost ranks (recovered, or the run ended after all).
    QStringList resultLines(const cppl::core::run::RunOutcome &outcome);
    QStringList showRecovered(const cppl::core::run::RunOutcome &outcome);
    void showLostThenEnded(cppl::core::run::RunPhase phase);

    /// The headline in one row when its figures fit on one line each beside the PPL, else in two.
    void placeHeadline();
    /// Beside the Alerts/Logs tabs when both have room (the table's columns and a readable
    /// message column), else the first of the tabs.
    void placeRankTable();
    void showRecovering(); // the badge while the run goes on without m_lostLive's ranks
    void refreshNotice();
    void refreshLogView();
    void catchUp();
    void scheduleLogRefresh();
    void flushAlerts();

    QLabel *m_phase = nullptr;
    QLabel *m_ppl = nullptr;
    QLabel *m_tokens = nullptr;
    QLabel *m_rate = nullptr;
    QLabel *m_eta = nullptr;
    QLabel *m_telemetry = nullptr; // lost, coalesced, rejected messages, when there are any
    QHBoxLayout *m_head = nullptr;     // buttons, phase, PPL, then m_figures and m_times
    QVBoxLayout *m_figures = nullptr;  // tokens over rate, beside the PPL
    QBoxLayout *m_times = nullptr;     // time over telemetry, or beside it over the figures below
    QHBoxLayout *m_headBelow = nullptr; // tokens, rate (and telemetry) when they do not fit beside the PPL
    enum class Headline { OneRow, FiguresBelow, TelemetryBesideTime };
    Headline m_headline = Headline::OneRow;
    QLabel *m_deviation = nullptr;
    QLabel *m_notice = nullptr;
    QString m_noticeLatest; // setNotice()'s text
    QLabel *m_resumed = nullptr;
    QPushButton *m_run = nullptr;
    QPushButton *m_stop = nullptr;
    RunCharts *m_charts = nullptr;
    RankTableModel *m_ranks = nullptr;
    QSortFilterProxyModel *m_proxy = nullptr;
    QTableView *m_table = nullptr;
    QLineEdit *m_rankFilter = nullptr;
    AlertModel *m_alerts = nullptr;
    QTableView *m_alertView = nullptr;
    QTabWidget *m_tabs = nullptr;
    QSplitter *m_bottom = nullptr;   // the rank table (when beside) and m_tabs
    QSplitter *m_split = nullptr;    // the charts over m_bottom
    bool m_referenceRow = false;     // the charts have the reference model's row (more of the height)
    QWidget *m_tableBox = nullptr;   // the filter and the rank table
    int m_tableWidth = 0;            // what the table's columns need, frame and scroll bar included
    bool m_tableInTabs = false;
    QTimer *m_alertTimer = nullptr;
    std::vector<cppl::core::run::RunAlert> m_pendingAlerts;
    QComboBox *m_logRank = nullptr;
    QLineEdit *m_logSearch = nullptr;
    QPlainTextEdit *m_log = nullptr;
    QTimer *m_logTimer = nullptr;
    std::map<int, QString> m_lostLive; // rankLost() while the run goes on
    std::map<int, std::deque<QString>> m_logs; // rank -> lines (-1: the launcher's own)
    std::deque<QString> m_allLogs;             // "[rank R] line", every rank
    QElapsedTimer m_tableClock; // the rank table's last update
    bool m_tableWentLast = false;
    QTimer *m_catchUp = nullptr;
    cppl::core::telemetry::Snapshot m_pending; // the last snapshot, when part of it was not shown
    const cppl::core::run::RunTimeline *m_pendingTimeline = nullptr; // valid until reset()
    double m_finalRate = 0; // the result's tokens_per_second once the run ended
    int m_selected = -1;
    int m_worldSize = 0;
    bool m_updatingSelection = false;
    bool m_stopping = false;
    bool m_running = false;
};

} // namespace cppl::app
