// SPDX-License-Identifier: MIT
#include "run_page.h"

#include "alert_model.h"
#include "clock_text.h"
#include "history_model.h"
#include "rank_table_model.h"
#include "run_charts.h"

#include "history/run_record.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLocale>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

using namespace Qt::StringLiterals;
using cppl::core::run::RunPhase;

namespace cppl::app {

namespace {
constexpr size_t kLogLinesPerRank = 2000;
constexpr int kTakeTurnsAbove = 256; // ranks
constexpr qint64 kTableEveryMs = 190; // beyond kTakeTurnsAbove ranks: ~5 Hz (snapshot jitter)
constexpr int kCatchUpMs = 300;       // no snapshot for this long: show what was left out

QString duration(double seconds)
{
    if (!std::isfinite(seconds) || seconds < 0)
        return u"–"_s;
    return clockText(qint64(seconds + 0.5));
}

/// The run-state badge of a run that goes on, or went on, without lost ranks: white on dark
/// orange, bold. Font and padding are set on the label, not in the style sheet, so that its size
/// hint (FigureLabel) measures the text as drawn.
void setBadge(QLabel *label, bool on)
{
    QFont f = label->font();
    f.setBold(on);
    label->setFont(f);
    // The padding as contents margins, which the size hint counts (a style sheet's it does not).
    label->setStyleSheet(on ? u"QLabel { color: white; background-color: #b34f00; border-radius: 4px; }"_s : QString());
    label->setContentsMargins(on ? QMargins(8, 2, 8, 2) : QMargins());
    label->updateGeometry();
}

} // namespace

RunPage::RunPage(QWidget *parent)
    : QWidget(parent)
    , m_ranks(new RankTableModel(this))
    , m_proxy(new QSortFilterProxyModel(this))
    , m_alerts(new AlertModel(this))
    , m_alertTimer(new QTimer(this))
    , m_logTimer(new QTimer(this))
    , m_catchUp(new QTimer(this))
{
    // Top to bottom: the headline (what a user looks at first), the notices, then the charts over
    // the rank table beside the Alerts and Logs tabs (run_page_parts.cpp builds each).
    auto *layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(buildHeadline());
    // Tokens, rate and telemetry on a line of their own under the PPL when the row is too narrow
    // for them (placeHeadline); empty otherwise.
    m_headBelow = new QHBoxLayout;
    m_headBelow->setSpacing(std::max(12, 3 * m_head->spacing()));
    layout->addLayout(m_headBelow);
    buildNotices(layout);
    auto *split = m_split = new QSplitter(Qt::Vertical, this);
    m_charts = new RunCharts(split);
    split->addWidget(m_charts);
    m_bottom = new QSplitter(Qt::Horizontal, split);
    m_bottom->addWidget(buildRankTable(m_bottom));
    m_bottom->addWidget(buildTabs(m_bottom));
    m_bottom->setStretchFactor(0, 2); // the rank table needs its ten columns; alerts wrap
    m_bottom->setStretchFactor(1, 1);
    split->addWidget(m_bottom);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    layout->addWidget(split, 1);
    connectControls();
    reset({}, 0, {}, Thresholds{});
}

void RunPage::connectControls()
{
    m_catchUp->setSingleShot(true);
    m_catchUp->setInterval(kCatchUpMs);
    connect(m_catchUp, &QTimer::timeout, this, &RunPage::catchUp);
    m_alertTimer->setSingleShot(true);
    m_alertTimer->setInterval(0);
    connect(m_alertTimer, &QTimer::timeout, this, &RunPage::flushAlerts);
    m_logTimer->setSingleShot(true);
    m_logTimer->setInterval(100);
    connect(m_logTimer, &QTimer::timeout, this, &RunPage::refreshLogView);
    connect(m_run, &QPushButton::clicked, this, &RunPage::runRequested);
    connect(m_stop, &QPushButton::clicked, this, &RunPage::stopRequested);
    connect(m_rankFilter, &QLineEdit::textChanged, m_proxy, &QSortFilterProxyModel::setFilterFixedString);
    // Selecting a rank anywhere selects it everywhere: the table, an alert, a chart, the log's rank.
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex &cur) {
        if (!m_updatingSelection && cur.isValid())
            selectRank(cur.data(RankTableModel::RankRole).toInt());
    });
    connect(m_alertView, &QTableView::clicked, this, [this](const QModelIndex &i) {
        const int r = i.data(AlertModel::RankRole).toInt();
        if (r >= 0)
            selectRank(r);
    });
    connect(m_charts, &RunCharts::rankClicked, this, &RunPage::selectRank);
    connect(m_logRank, &QComboBox::activated, this, [this] {
        const int r = m_logRank->currentData().toInt();
        if (r >= 0 && r != m_selected)
            selectRank(r);
        else
            refreshLogView();
    });
    connect(m_logSearch, &QLineEdit::textChanged, this, &RunPage::scheduleLogRefresh);
}

void RunPage::reset(const QString &runId, int worldSize, const std::vector<QString> &groupNames, const Thresholds &thresholds)
{
    m_worldSize = worldSize;
    m_selected = -1;
    m_stopping = false;
    m_ranks->clear();
    m_ranks->setGroupNames(groupNames);
    m_alertTimer->stop();
    m_pendingAlerts.clear();
    m_alerts->clear();
    m_tabs->setTabText(m_tabs->indexOf(m_alertView), tr("Alerts"));
    m_logs.clear();
    m_allLogs.clear();
    m_log->clear();
    m_charts->reset(worldSize, thresholds.commShareAlert);
    m_phase->setText(runId.isEmpty() ? tr("No run yet: press Run (Ctrl+R)") : tr("Run %1").arg(runId));
    m_ppl->setText(tr("PPL –"));
    m_tokens->setText(tr("tokens scored –"));
    m_rate->setText(tr("– tok/s"));
    m_eta->setText(QString());
    m_telemetry->clear();
    m_telemetry->hide();
    m_finalRate = 0;
    m_deviation->clear();
    m_deviation->hide();
    m_notice->clear();
    m_notice->hide();
    m_noticeLatest.clear();
    m_resumed->clear();
    m_resumed->hide();
    m_lostLive.clear();
    m_running = false;
    m_tableClock.invalidate();
    m_tableWentLast = false;
    m_catchUp->stop();
    m_pendingTimeline = nullptr;
    m_logRank->clear();
    m_logRank->addItem(tr("all ranks"), -2);
    m_logRank->addItem(tr("launcher"), -1);
    for (int r = 0; r < worldSize; ++r)
        m_logRank->addItem(tr("rank %1").arg(r), r);
}

void RunPage::rankFinished(int rank, int exitCode)
{
    m_ranks->setRankExit(rank, exitCode, m_stopping);
}

void RunPage::rankLost(int rank, const QString &detail)
{
    if (!m_lostLive.count(rank))
        m_noticeLatest.clear(); // what came before the loss (the engine says it next: rankLostNotice)
    m_lostLive[rank] = detail;
    std::vector<int> ranks;
    for (const auto &[r, text] : m_lostLive)
        ranks.push_back(r);
    m_ranks->setLostRanks(m_lostLive, true);
    m_charts->setLostRanks(ranks);
    showRecovering();
    refreshNotice();
}

void RunPage::showRecovering()
{
    QJsonArray lost;
    QStringList detail;
    for (const auto &[r, text] : m_lostLive) {
        lost.append(QJsonObject{{u"rank"_s, r}});
        detail << text;
    }
    // Short, so that the headline row keeps its width while the ETA is still shown; which ranks in the tooltip.
    m_phase->setText(u"● "_s + tr("Recovering"));
    m_phase->setToolTip(tr("%1: the other ranks regrouped without them and the run goes on; they evaluate their unfinished "
                           "batches again, so the result will have the same bits as one rank.\n%2")
                            .arg(lostRanksSummary(lost), detail.join(u"\n"_s)));
    setBadge(m_phase, true);
}

void RunPage::setPhase(RunPhase phase)
{
    m_running = phase == RunPhase::Running;
    if (phase == RunPhase::Stopping || phase == RunPhase::Stopped)
        m_stopping = true;
    else if (!cppl::core::run::isTerminal(phase))
        m_stopping = false;
    const QString name = cppl::core::run::phaseName(phase);
    const QString symbol = phase == RunPhase::Finished ? u"✓ "_s
                           : phase == RunPhase::Failed ? u"✗ "_s
                           : phase == RunPhase::Stopped ? u"■ "_s
                                                        : u"● "_s;
    m_phase->setText(symbol + name);
    m_phase->setToolTip(QString());
    setBadge(m_phase, false);
    if (!m_lostLive.empty() && !cppl::core::run::isTerminal(phase) && phase != RunPhase::Stopping)
        showRecovering();
    refreshNotice();
}

QString RunPage::phaseText() const
{
    return m_phase->text();
}

QString RunPage::pplText() const
{
    return m_ppl->text();
}

void RunPage::setRunEnabled(bool canRun, bool canStop)
{
    m_run->setEnabled(canRun);
    m_stop->setEnabled(canStop);
}

void RunPage::setResumedFrom(const QString &text)
{
    m_resumed->setText(text.isEmpty() ? QString() : u"↻ "_s + text);
    m_resumed->setVisible(!text.isEmpty());
}

QString RunPage::resumedText() const
{
    return m_resumed->text();
}

void RunPage::setSchedule(const QString &schedule)
{
    m_charts->setSchedule(schedule);
}

void RunPage::setReferenceModel(bool on)
{
    m_charts->setReferenceModel(on);
    if (on == m_referenceRow)
        return;
    m_referenceRow = on;
    // A third row of charts takes its height from the tables below (4:1 instead of 3:2): in a
    // 1024 x 768 window the reference charts' plots were 20 px high. Back to 3:2 without it.
    const QList<int> sizes = m_split->sizes();
    const int total = sizes.size() == 2 ? sizes[0] + sizes[1] : 0;
    m_split->setStretchFactor(0, on ? 4 : 3);
    m_split->setStretchFactor(1, on ? 1 : 2);
    if (total > 0)
        m_split->setSizes({total * (on ? 4 : 3) / 5, total - total * (on ? 4 : 3) / 5});
}

void RunPage::setTensorParallel(int n)
{
    m_ranks->setTensorParallel(n);
}

void RunPage::setNotice(const QString &text)
{
    m_noticeLatest = text;
    refreshNotice();
}

void RunPage::refreshNotice()
{
    QString text = m_noticeLatest;
    if (m_running && !m_lostLive.empty()) {
        // The most important thing about the run stays said while it holds; a later notice (the
        // checkpoints after the regrouping) goes below it rather than in its place.
        std::vector<int> ranks;
        for (const auto &lost : m_lostLive)
            ranks.push_back(lost.first);
        const QString lost = cppl::core::run::rankLostNotice(ranks);
        if (text != lost)
            text = text.isEmpty() ? lost : lost + u'\n' + text;
    }
    m_notice->setText(text);
    m_notice->setVisible(!text.isEmpty());
}

QString RunPage::noticeText() const
{
    return m_notice->text();
}

void RunPage::showSnapshot(const cppl::core::telemetry::Snapshot &s, const cppl::core::run::RunTimeline &timeline,
                           double elapsed, bool redrawCharts)
{
    showFigures(s, elapsed);
    showTelemetryCounts(s);
    showEta(s, elapsed);
    if (m_worldSize != int(s.ranks.size())) {
        m_worldSize = int(s.ranks.size());
        const int keep = m_logRank->count();
        for (int r = keep - 2; r < m_worldSize; ++r)
            m_logRank->addItem(tr("rank %1").arg(r), r);
    }
    showTableAndCharts(s, timeline, redrawCharts);
}

void RunPage::showFigures(const cppl::core::telemetry::Snapshot &s, double elapsed)
{
    const auto &p = s.globalPpl;
    if (s.global.tokens > 0 && std::isfinite(p.ppl)) {
        // Six decimals: the figure a user compares with the result file and the CLI's line.
        QString text = tr("PPL %1").arg(p.ppl, 0, 'f', 6);
        if (std::isfinite(p.pplStderr))
            text += tr(" ± %1").arg(p.pplStderr, 0, 'f', 6);
        m_ppl->setText(text);
    }
    m_tokens->setText(tr("%1 tokens scored · windows %2 / %3")
                          .arg(QLocale().toString(qlonglong(s.global.tokens)))
                          .arg(QLocale().toString(qlonglong(s.windowsDone)))
                          .arg(QLocale().toString(qlonglong(s.windowsTotal))));
    if (m_finalRate > 0)
        m_rate->setText(tr("%1 tok/s (all ranks, whole run)").arg(QLocale().toString(m_finalRate, 'f', 0)));
    else if (!m_running && s.tokensPerSecond <= 0 && s.global.tokens > 0 && elapsed > 0)
        // Every rank is done, so none has a current rate: the run's average instead of "0 tok/s".
        m_rate->setText(tr("%1 tok/s (all ranks, average)").arg(QLocale().toString(double(s.global.tokens) / elapsed, 'f', 0)));
    else
        m_rate->setText(tr("%1 tok/s (all ranks)").arg(QLocale().toString(s.tokensPerSecond, 'f', 0)));
}

void RunPage::showTelemetryCounts(const cppl::core::telemetry::Snapshot &s)
{
    if (s.lostTotal <= 0 && s.coalescedTotal <= 0 && s.decode.rejectedTotal() <= 0)
        return;
    QStringList parts;
    if (s.lostTotal > 0)
        parts << tr("%1 lost").arg(QLocale().toString(qlonglong(s.lostTotal)));
    if (s.coalescedTotal > 0)
        parts << tr("%1 skipped (superseded)").arg(QLocale().toString(qlonglong(s.coalescedTotal)));
    if (s.decode.rejectedTotal() > 0)
        parts << tr("%1 rejected").arg(QLocale().toString(qlonglong(s.decode.rejectedTotal())));
    // "messages": beside a "Recovering" badge, "telemetry: 33 lost" read as 33 lost ranks.
    m_telemetry->setText(tr("telemetry messages: %1").arg(parts.join(u" · "_s)));
    m_telemetry->show();
}

void RunPage::showEta(const cppl::core::telemetry::Snapshot &s, double elapsed)
{
    // The ETA from the current rate of all ranks (the windows left at the tokens per window so far),
    // once every rank has reported progress (or ended): from the elapsed time instead, the model's
    // load and the ranks that had not started counted as evaluation, and 3 s into a run it read
    // 49:26 for a run of 10 minutes; while ranks are still starting their rates are missing from
    // the sum. Until then a figure not known yet: "—".
    const bool starting = std::any_of(s.ranks.begin(), s.ranks.end(), [](const auto &r) { return !r.hasProgress && !r.exitCode; });
    if (m_running && s.windowsTotal > 0 && s.windowsDone > 0 && s.windowsDone < s.windowsTotal && s.tokensPerSecond > 0 && s.global.tokens > 0)
        m_eta->setText(tr("elapsed %1 · ETA %2")
                           .arg(duration(elapsed))
                           .arg(starting ? tr("—")
                                         : duration(double(s.windowsTotal - s.windowsDone) * double(s.global.tokens) / double(s.windowsDone)
                                                    / s.tokensPerSecond)));
    else
        m_eta->setText(tr("elapsed %1").arg(duration(elapsed)));
}

void RunPage::showTableAndCharts(const cppl::core::telemetry::Snapshot &s, const cppl::core::run::RunTimeline &timeline,
                                 bool redrawCharts)
{
    bool showTable = true, showCharts = true;
    unsigned parts = RunCharts::AllParts;
    if (int(s.ranks.size()) > kTakeTurnsAbove && !redrawCharts && m_tableClock.isValid()) {
        // Beyond 256 ranks the page is shown in two halves that take turns, each at most every
        // 200 ms: the table with the global PPL and the comm bars; the rank-level charts over
        // time. One snapshot's paint pass then holds one half, never all, and the GUI thread
        // stays free for input. When both are due, the one that did not go last goes first.
        // The first snapshot after reset() shows everything.
        const bool firstDue = !m_tableClock.isValid() || m_tableClock.elapsed() >= kTableEveryMs;
        const bool secondDue = m_charts->due(timeline, RunCharts::RankPart);
        showTable = firstDue && (!secondDue || !m_tableWentLast);
        showCharts = showTable || secondDue;
        parts = showTable ? RunCharts::GlobalPart : RunCharts::RankPart;
    }
    if (showTable) {
        m_tableClock.start();
        m_updatingSelection = true;
        m_ranks->update(s);
        m_updatingSelection = false;
    }
    if (showCharts)
        m_charts->update(timeline, s, redrawCharts, parts);
    if (showTable || showCharts)
        m_tableWentLast = showTable;
    // What this snapshot did not show, the next one will; if none comes (the run ended, the
    // collector went quiet), a copy of this one is shown when the stream has paused.
    if (showTable && parts == RunCharts::AllParts) {
        m_catchUp->stop();
        return;
    }
    m_pending = s; // reuses the rows' storage after the first time
    m_pendingTimeline = &timeline;
    m_catchUp->start();
}

void RunPage::catchUp()
{
    if (!m_pendingTimeline)
        return;
    m_tableClock.start();
    m_updatingSelection = true;
    m_ranks->update(m_pending);
    m_updatingSelection = false;
    m_charts->update(*m_pendingTimeline, m_pending, true);
    m_pendingTimeline = nullptr;
}

void RunPage::addAlert(const cppl::core::run::RunAlert &alert)
{
    m_pendingAlerts.push_back(alert);
    if (!m_alertTimer->isActive())
        m_alertTimer->start();
}

void RunPage::addAlerts(const std::vector<cppl::core::run::RunAlert> &alerts)
{
    m_pendingAlerts.insert(m_pendingAlerts.end(), alerts.begin(), alerts.end());
    flushAlerts();
}

void RunPage::flushAlerts()
{
    m_alertTimer->stop();
    if (m_pendingAlerts.empty())
        return;
    const QScrollBar *bar = m_alertView->verticalScrollBar();
    const bool following = bar->value() == bar->maximum(); // a user who scrolled up stays there
    m_alerts->append(m_pendingAlerts);
    m_pendingAlerts.clear();
    if (following)
        m_alertView->scrollToBottom();
    m_tabs->setTabText(m_tabs->indexOf(m_alertView), tr("Alerts (%1)").arg(QLocale().toString(qlonglong(m_alerts->allAlerts().size()))));
}

void RunPage::appendLog(int rank, bool isStderr, const QString &line)
{
    Q_UNUSED(isStderr);
    auto &lines = m_logs[rank];
    lines.push_back(line);
    if (lines.size() > kLogLinesPerRank)
        lines.pop_front();
    m_allLogs.push_back((rank < 0 ? u"[launcher] "_s : u"[rank %1] "_s.arg(rank)) + line);
    if (m_allLogs.size() > kLogLinesAll)
        m_allLogs.pop_front();
    scheduleLogRefresh();
}

void RunPage::scheduleLogRefresh()
{
    if (!m_logTimer->isActive())
        m_logTimer->start();
}

void RunPage::refreshLogView()
{
    const int which = m_logRank->currentData().toInt();
    const std::deque<QString> *source = &m_allLogs;
    static const std::deque<QString> none;
    if (which >= -1) {
        const auto it = m_logs.find(which);
        source = it == m_logs.end() ? &none : &it->second;
    }
    const QString needle = m_logSearch->text();
    QStringList shown;
    for (const QString &l : *source)
        if (needle.isEmpty() || l.contains(needle, Qt::CaseInsensitive))
            shown << l;
    m_log->setPlainText(shown.join(u'\n'));
    m_log->moveCursor(QTextCursor::End);
}

void RunPage::selectRank(int rank)
{
    if (rank == m_selected)
        return;
    m_selected = rank;
    m_updatingSelection = true;
    for (int row = 0; row < m_proxy->rowCount(); ++row) {
        const QModelIndex i = m_proxy->index(row, 0);
        if (i.data(RankTableModel::RankRole).toInt() == rank) {
            m_table->setCurrentIndex(i);
            m_table->scrollTo(i);
            break;
        }
    }
    m_updatingSelection = false;
    m_charts->setSelectedRank(rank);
    const int li = m_logRank->findData(rank);
    if (li >= 0)
        m_logRank->setCurrentIndex(li);
    refreshLogView();
    Q_EMIT rankSelected(rank);
}

void RunPage::showOutcome(const cppl::core::run::RunOutcome &o)
{
    flushAlerts();
    if (m_catchUp->isActive()) {
        m_catchUp->stop();
        catchUp(); // the last snapshot in full, now: no more are coming
    }
    setPhase(o.phase);
    QStringList lines = resultLines(o);
    // --on-rank-loss continue: finished without some ranks. A badge a user notices, the causes in
    // its tooltip and below, the lost ranks marked in the table and the heat map.
    if (o.phase == RunPhase::Finished && !o.recovered.isEmpty())
        lines << showRecovered(o);
    else if (!m_lostLive.empty())
        showLostThenEnded(o.phase);
    m_lostLive.clear();
    refreshNotice(); // the engine's last word ("recovered (…)"), no longer "the run goes on"
    if (!o.logDir.isEmpty())
        lines << tr("Per-rank logs: %1").arg(o.logDir);
    m_deviation->setText(lines.join(u'\n'));
    m_deviation->setVisible(!lines.isEmpty());
    m_eta->setText(m_eta->text().section(u" · "_s, 0, 0)); // no ETA once it ended
}

QStringList RunPage::resultLines(const cppl::core::run::RunOutcome &o)
{
    QStringList lines;
    if (!o.firstCause.isEmpty())
        lines << tr("First cause: %1").arg(o.firstCause);
    const QJsonObject result = QJsonDocument::fromJson(o.resultJson).object();
    if (const double rate = result.value(u"tokens_per_second"_s).toDouble(); rate > 0) {
        m_finalRate = rate;
        m_rate->setText(tr("%1 tok/s (all ranks, whole run)").arg(QLocale().toString(rate, 'f', 0)));
    }
    if (result.contains(u"ppl"_s)) {
        QString l = tr("Result: PPL %1").arg(result.value(u"ppl"_s).toDouble(), 0, 'f', 6);
        if (o.liveMergeMatches)
            l += *o.liveMergeMatches ? tr(" · the live exact merge equals the result bit for bit")
                                     : tr(" · ✗ the live merge differs from the result");
        lines << l;
    }
    if (o.baselineIdentical) {
        lines << (*o.baselineIdentical ? tr("Final deviation from the one-rank baseline: none (bit-identical sums)")
                                       : tr("Final deviation from the one-rank baseline: %1%")
                                             .arg(100.0 * o.baselineRelativeDeviation, 0, 'g', 3));
    } else if (o.phase == RunPhase::Finished && !o.baselineNotCompared.isEmpty()) {
        lines << tr("Final deviation from the one-rank baseline: not compared (%1)").arg(o.baselineNotCompared);
    } else if (o.phase == RunPhase::Finished) {
        lines << tr("Final deviation from a one-rank baseline: not known (no baseline run of these settings)");
    }
    return lines;
}

QStringList RunPage::showRecovered(const cppl::core::run::RunOutcome &o)
{
    const QJsonArray lost = cppl::core::history::lostRanksOf(o.resultJson);
    const QStringList detail = lostRanksDetail(lost);
    m_phase->setText(u"✓ "_s + tr("Recovered") + u" · "_s + lostRanksSummary(lost));
    m_phase->setToolTip(tr("The run finished without the lost ranks: the others evaluated their unfinished batches "
                           "again, and the result has the same bits as one rank.\n%1")
                            .arg(detail.join(u"\n"_s)));
    setBadge(m_phase, true);
    QStringList lines;
    for (const QString &d : detail)
        lines << tr("Recovered: %1").arg(d);
    // The engine's last notice, "recovered (…)", says what the lines above say.
    for (const QString &r : o.recovered)
        if (m_noticeLatest == cppl::core::run::recoveredNotice(r))
            m_noticeLatest.clear();
    std::map<int, QString> byRank;
    std::vector<int> ranks;
    for (qsizetype i = 0; i < lost.size(); ++i) {
        const int r = lost.at(i).toObject().value(u"rank"_s).toInt();
        byRank[r] = detail.value(i);
        ranks.push_back(r);
    }
    m_ranks->setLostRanks(std::move(byRank));
    m_charts->setLostRanks(ranks);
    return lines;
}

void RunPage::showLostThenEnded(RunPhase phase)
{
    // The others regrouped without a rank, and the run then failed or was stopped: the lost ranks
    // read as what their processes did, and the notice no longer says the run goes on.
    m_ranks->setLostRanks({});
    m_charts->setLostRanks({});
    std::vector<int> ranks;
    for (const auto &lost : m_lostLive)
        ranks.push_back(lost.first);
    if (phase == RunPhase::Failed || phase == RunPhase::Stopped)
        setNotice((ranks.size() == 1 ? tr("rank %1 lost; the others went on without it until the run %2")
                                 : tr("ranks %1 lost; the others went on without them until the run %2"))
                  .arg(QString::fromStdString(rankListText(ranks)), phase == RunPhase::Stopped ? tr("was stopped") : tr("failed")));
}

} // namespace cppl::app
