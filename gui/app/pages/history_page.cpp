// SPDX-License-Identifier: MIT
#include "history_page.h"

#include "column_fit.h"
#include "history_model.h"
#include "report_export.h"
#include "run_detail.h"

#include "history/run_history.h"

#include "cppl/errors.h"

#include <QComboBox>
#include <QDateEdit>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QMenu>
#include <QSet>
#include <QStyledItemDelegate>
#include <QToolButton>
#include <QTableView>
#include <QVBoxLayout>

#include <set>

using namespace Qt::StringLiterals;
using cppl::core::history::RunRecord;
using cppl::core::history::RunStatus;

namespace cppl::app {

namespace {

// Text elided in the middle ("sweep-2026…5c1e-r1024"), where the view elides at the right.
class MiddleElideDelegate : public QStyledItemDelegate
{
public:
    using QStyledItemDelegate::QStyledItemDelegate;

protected:
    void initStyleOption(QStyleOptionViewItem *option, const QModelIndex &index) const override
    {
        QStyledItemDelegate::initStyleOption(option, index);
        option->textElideMode = Qt::ElideMiddle;
    }
};

const QDate kAnyDate(2000, 1, 1); // the date edits' minimum, shown as "any"

QDateEdit *dateEdit(QWidget *parent)
{
    auto *d = new QDateEdit(parent);
    d->setCalendarPopup(true);
    d->setMinimumDate(kAnyDate);
    d->setSpecialValueText(QObject::tr("any"));
    d->setDate(kAnyDate);
    d->setDisplayFormat(u"yyyy-MM-dd"_s);
    return d;
}

} // namespace

HistoryPage::HistoryPage(QWidget *parent)
    : QWidget(parent)
{
    auto *outer = new QVBoxLayout(this);
    buildFilters(outer);
    buildTable(outer);
    m_resumeInfo = new QLabel(this);
    m_resumeInfo->setObjectName(u"historyResumeInfo"_s);
    m_resumeInfo->setWordWrap(true);
    m_resumeInfo->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_resumeInfo->hide();
    outer->addWidget(m_resumeInfo);
    buildButtons(outer);
    connectFilters();
    connectButtons();
    updateButtons();
}

void HistoryPage::buildFilters(QVBoxLayout *outer)
{
    // Two rows: search and dates, then the lists. On one row they made the window at least
    // 1,392 px wide (every page's minimum is the window's), too wide for a 1024 px screen.
    auto *filters = new QHBoxLayout;
    auto *lists = new QHBoxLayout;
    m_search = new QLineEdit(this);
    m_search->setObjectName(u"historySearch"_s);
    m_search->setPlaceholderText(tr("Search run id, profile, model, data, cause…"));
    m_search->setClearButtonEnabled(true);
    m_search->setMinimumWidth(m_search->fontMetrics().horizontalAdvance(m_search->placeholderText()) + 30);
    filters->addWidget(m_search, 2);
    auto combo = [&](const QString &label) {
        lists->addWidget(new QLabel(label, this));
        auto *c = new QComboBox(this);
        c->setSizeAdjustPolicy(QComboBox::AdjustToContents);
        // A long model or data file name is elided rather than widening the page (full names in the list).
        c->setMaximumWidth(c->fontMetrics().averageCharWidth() * 32);
        lists->addWidget(c);
        return c;
    };
    m_modelBox = combo(tr("Model"));
    m_dataBox = combo(tr("Data"));
    m_protocolBox = combo(tr("Protocol"));
    m_statusBox = combo(tr("Status"));
    m_nodesBox = combo(tr("Nodes"));
    filters->addWidget(new QLabel(tr("From"), this));
    m_from = dateEdit(this);
    filters->addWidget(m_from);
    filters->addWidget(new QLabel(tr("to"), this));
    m_to = dateEdit(this);
    filters->addWidget(m_to);
    lists->addStretch(1);
    outer->addLayout(filters);
    outer->addLayout(lists);
    m_statusBox->addItem(tr("any"), -1);
    for (RunStatus s : {RunStatus::Finished, RunStatus::Failed, RunStatus::Stopped, RunStatus::Interrupted, RunStatus::Running})
        m_statusBox->addItem(statusLabel(s), int(s));
}

void HistoryPage::buildTable(QVBoxLayout *outer)
{
    m_model = new HistoryModel(this);
    m_filter = new HistoryFilterModel(this);
    m_filter->setSourceModel(m_model);
    m_view = new QTableView(this);
    m_view->setObjectName(u"historyTable"_s);
    m_view->setModel(m_filter);
    m_view->setSortingEnabled(true);
    m_view->sortByColumn(HistoryModel::ColStarted, Qt::DescendingOrder);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_view->verticalHeader()->hide();
    m_view->setAlternatingRowColors(true);
    m_view->setWordWrap(false);
    m_view->horizontalHeader()->setStretchLastSection(true);
    // Paths are long: the file name is shown (elided in a small window), the full path in the
    // tooltip and the filter list; so is a long status ("⚠ interrupted — 18% done, resumable",
    // whole in its tooltip and above the buttons). In a 1024 px window the table scrolled
    // sideways: there the counts of groups and nodes, the protocol and the tokens give way too
    // (the run detail and the filters have them; the header's menu shows them again).
    // A long run id (a sweep's "sweep-20261130-080000-5c1e-r1024") gives way too, elided in the
    // middle: its start and its end (the rank count) tell runs apart; whole in its tooltip. An
    // ordinary id (date, time, four hex digits; digits are the widest) keeps its room.
    m_view->setItemDelegateForColumn(HistoryModel::ColRunId, new MiddleElideDelegate(m_view));
    new ColumnFit(m_view, {{HistoryModel::ColRunId, HistoryModel::ColStatus, HistoryModel::ColModel, HistoryModel::ColData},
                           10,
                           14,
                           18,
                           {HistoryModel::ColGroups, HistoryModel::ColNodes, HistoryModel::ColProtocol, HistoryModel::ColTokens},
                           {{HistoryModel::ColRunId, u"20261130-114320-8888"_s}}});
    outer->addWidget(m_view, 1);
    auto *overlay = new QVBoxLayout(m_view->viewport());
    m_empty = new QLabel(m_view->viewport());
    m_empty->setObjectName(u"historyEmpty"_s);
    m_empty->setAlignment(Qt::AlignCenter);
    m_empty->setWordWrap(true);
    m_empty->setAttribute(Qt::WA_TransparentForMouseEvents);
    overlay->addWidget(m_empty);
}

void HistoryPage::buildButtons(QVBoxLayout *outer)
{
    auto *buttons = new QHBoxLayout;
    m_count = new QLabel(this);
    m_count->setWordWrap(true); // a reason may be long: it wraps rather than widening the window
    buttons->addWidget(m_count, 1);
    m_open = new QPushButton(tr("&Open"), this);
    m_rerun = new QPushButton(tr("Re-&run"), this);
    // Resume beside Re-run: a push button's look (a tool button with a menu arrow for the variant).
    m_resume = new QToolButton(this);
    m_resume->setObjectName(u"historyResume"_s);
    m_resume->setText(tr("Res&ume"));
    m_resume->setPopupMode(QToolButton::MenuButtonPopup);
    m_resume->setToolButtonStyle(Qt::ToolButtonTextOnly);
    m_resume->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Preferred);
    m_resume->setMinimumHeight(m_open->sizeHint().height());
    auto *resumeMenu = new QMenu(m_resume);
    m_resumeOnHosts = resumeMenu->addAction(tr("Resume on the Cluster page's hosts"));
    m_resumeOnHosts->setToolTip(tr("Finish the run on the hosts of the profile open on the Cluster page; its evaluation must be "
                                   "the run's (a dynamic schedule may resume on any number of ranks)"));
    m_resume->setMenu(resumeMenu);
    m_compare = new QPushButton(tr("&Compare selected"), this);
    m_export = new QPushButton(tr("E&xport report…"), this);
    m_export->setObjectName(u"historyExport"_s);
    m_delete = new QPushButton(tr("&Delete…"), this);
    m_refresh = new QPushButton(tr("Refresh"), this);
    for (QPushButton *b : {m_refresh, m_open, m_rerun})
        buttons->addWidget(b);
    buttons->addWidget(m_resume);
    for (QPushButton *b : {m_compare, m_export, m_delete})
        buttons->addWidget(b);
    outer->addLayout(buttons);
}

void HistoryPage::connectFilters()
{
    connect(m_search, &QLineEdit::textChanged, this, &HistoryPage::applyFilters);
    for (QComboBox *c : {m_modelBox, m_dataBox, m_protocolBox, m_statusBox, m_nodesBox})
        connect(c, &QComboBox::currentIndexChanged, this, &HistoryPage::applyFilters);
    connect(m_from, &QDateEdit::dateChanged, this, &HistoryPage::applyFilters);
    connect(m_to, &QDateEdit::dateChanged, this, &HistoryPage::applyFilters);
    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, &HistoryPage::updateButtons);
    connect(m_view, &QTableView::doubleClicked, this, &HistoryPage::openSelected);
}

void HistoryPage::connectButtons()
{
    connect(m_refresh, &QPushButton::clicked, this, &HistoryPage::refresh);
    connect(m_open, &QPushButton::clicked, this, &HistoryPage::openSelected);
    connect(m_compare, &QPushButton::clicked, this, [this] { Q_EMIT compareRequested(selectedRunIds()); });
    connect(m_export, &QPushButton::clicked, this, [this] { askExport(selectedRunIds()); });
    connect(m_rerun, &QPushButton::clicked, this, [this] {
        const QStringList ids = selectedRunIds();
        if (ids.size() == 1)
            Q_EMIT rerunRequested(m_model->runAt(m_model->rowOf(ids.front())));
    });
    const auto resume = [this](bool onProfileHosts) {
        const QStringList ids = selectedRunIds();
        if (ids.size() == 1)
            Q_EMIT resumeRequested(m_model->runAt(m_model->rowOf(ids.front())), onProfileHosts);
    };
    connect(m_resume, &QToolButton::clicked, this, [resume] { resume(false); });
    connect(m_resumeOnHosts, &QAction::triggered, this, [resume] { resume(true); });
    connect(m_delete, &QPushButton::clicked, this, &HistoryPage::confirmDelete);
}

void HistoryPage::confirmDelete()
{
    const QStringList ids = selectedRunIds();
    if (ids.isEmpty())
        return;
    const auto answer = QMessageBox::question(
        this, tr("Delete runs"),
        (ids.size() == 1 ? tr("Delete run %1 from the history? Its samples, logs and alerts go too; this cannot be undone.")
                         : tr("Delete %n runs from the history (%1)? Their samples, logs and alerts go too; this cannot be undone.", nullptr,
                              int(ids.size())))
            .arg(ids.join(u", "_s)));
    if (answer == QMessageBox::Yes)
        deleteRuns(ids);
}

void HistoryPage::setHistory(cppl::core::history::RunHistory *history, const QString &unavailableReason)
{
    m_history = history;
    if (!history)
        m_count->setText(unavailableReason.isEmpty() ? tr("No run history.") : tr("No run history: %1").arg(unavailableReason));
    refresh();
}

void HistoryPage::refresh()
{
    if (!m_history) {
        m_model->setRuns({});
        updateButtons();
        return;
    }
    const QStringList selected = selectedRunIds();
    try {
        m_history->flush(); // a run that just ended is on disk
        m_model->setRuns(m_history->list());
    } catch (const cppl::Error &e) {
        Q_EMIT failed(tr("Reading the run history %1: %2").arg(m_history->path(), QString::fromUtf8(e.what())));
    }
    fillChoices();
    selectRuns(selected);
    applyFilters();
}

void HistoryPage::fillChoices()
{
    // Keep the user's choice across refreshes; the lists are the values the history holds.
    std::set<QString> models, datas, protocols;
    std::set<int> nodes;
    for (int i = 0; i < m_model->rowCount(); ++i) {
        const RunRecord &r = m_model->runAt(i);
        if (!r.model.isEmpty())
            models.insert(r.model);
        if (!r.data.isEmpty())
            datas.insert(r.data);
        if (!r.protocol.isEmpty())
            protocols.insert(r.protocol);
        if (r.nodeCount > 0)
            nodes.insert(r.nodeCount);
    }
    auto fill = [](QComboBox *box, const QList<std::pair<QString, QVariant>> &items) {
        const QVariant keep = box->currentData();
        const QSignalBlocker block(box);
        box->clear();
        box->addItem(tr("any"), QVariant());
        for (const auto &[text, value] : items)
            box->addItem(text, value);
        const int at = box->findData(keep);
        box->setCurrentIndex(at < 0 ? 0 : at);
    };
    QList<std::pair<QString, QVariant>> m, d, p, n;
    for (const QString &s : models)
        m.append({shortPath(s), s});
    for (const QString &s : datas)
        d.append({shortPath(s), s});
    for (const QString &s : protocols)
        p.append({s, s});
    for (int k : nodes)
        n.append({QString::number(k), k});
    fill(m_modelBox, m);
    fill(m_dataBox, d);
    fill(m_protocolBox, p);
    fill(m_nodesBox, n);
    for (int i = 0; i < m_modelBox->count(); ++i)
        m_modelBox->setItemData(i, m_modelBox->itemData(i), Qt::ToolTipRole);
}

void HistoryPage::applyFilters()
{
    m_filter->setSearch(m_search->text());
    m_filter->setModelFilter(m_modelBox->currentData().toString());
    m_filter->setDataFilter(m_dataBox->currentData().toString());
    m_filter->setProtocolFilter(m_protocolBox->currentData().toString());
    const int st = m_statusBox->currentData().toInt();
    m_filter->setStatusFilter(st < 0 ? std::nullopt : std::optional<RunStatus>(RunStatus(st)));
    m_filter->setNodeCount(m_nodesBox->currentData().toInt());
    m_filter->setDateRange(m_from->date() == kAnyDate ? QDate() : m_from->date(), m_to->date() == kAnyDate ? QDate() : m_to->date());
    if (m_history) {
        // The history's file name; its whole path (long, and it made the page that wide) in the tooltip.
        m_count->setText((m_model->rowCount() == 1 ? tr("%1 of 1 stored run shown — %2") : tr("%1 of %n stored runs shown — %2", nullptr, m_model->rowCount()))
                             .arg(m_filter->rowCount())
                             .arg(QFileInfo(m_history->path()).fileName()));
        m_count->setToolTip(tr("The run history: %1").arg(m_history->path()));
    }
    m_empty->setText(m_model->rowCount() == 0
                         ? tr("No runs stored yet.\n\nEvery run started with Run (Ctrl+R), Sweep or clusterppl-cli run is recorded here.")
                         : tr("No stored run matches the search and filters above."));
    m_empty->setVisible(m_filter->rowCount() == 0);
    updateButtons();
}

QStringList HistoryPage::selectedRunIds() const
{
    QStringList ids;
    for (const QModelIndex &i : m_view->selectionModel()->selectedRows())
        ids << i.data(HistoryModel::RunIdRole).toString();
    return ids;
}

void HistoryPage::selectRuns(const QStringList &runIds)
{
    QItemSelection sel;
    for (const QString &id : runIds) {
        const int row = m_model->rowOf(id);
        if (row < 0)
            continue;
        const QModelIndex i = m_filter->mapFromSource(m_model->index(row, 0));
        if (i.isValid())
            sel.select(i, i.siblingAtColumn(HistoryModel::ColumnCount - 1));
    }
    m_view->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

bool HistoryPage::deleteRuns(const QStringList &runIds)
{
    if (!m_history)
        return false;
    QStringList missing;
    try {
        m_history->flush();
        for (const QString &id : runIds)
            if (!m_history->remove(id))
                missing << id;
    } catch (const cppl::Error &e) {
        Q_EMIT failed(tr("Deleting from the run history %1: %2").arg(m_history->path(), QString::fromUtf8(e.what())));
        refresh();
        return false;
    }
    refresh();
    if (!missing.isEmpty())
        Q_EMIT failed(tr("Not in the run history %1 (deleted elsewhere?): %2").arg(m_history->path(), missing.join(u", "_s)));
    return missing.isEmpty();
}

void HistoryPage::updateButtons()
{
    const int n = int(m_view->selectionModel()->selectedRows().size());
    m_open->setEnabled(n == 1);
    m_rerun->setEnabled(n == 1);
    m_compare->setEnabled(n >= 1);
    m_export->setEnabled(n >= 1);
    m_delete->setEnabled(n >= 1);
    m_compare->setToolTip(n >= 1 ? QString() : tr("Select the runs to compare (Ctrl+click, Shift+click)"));
    m_export->setToolTip(n == 0   ? tr("Select a run for its report, or several for a comparison report")
                         : n == 1 ? tr("The run's report (PDF, HTML, CSV or JSON), with its deviation from the stored one-rank run")
                                  : tr("A comparison report of the %1 selected runs: scaling, efficiency, comm share, projection").arg(n));
    // Resume: one run that is not running. A run the CLI would refuse keeps the button, and
    // pressing it shows the same refusal; the line above the buttons says it first.
    const QStringList ids = n == 1 ? selectedRunIds() : QStringList();
    const int row = ids.isEmpty() ? -1 : m_model->rowOf(ids.front());
    const bool running = row >= 0 && m_model->runAt(row).status == RunStatus::Running;
    m_resume->setEnabled(row >= 0 && !running);
    const QString text = resumeText();
    m_resumeInfo->setText(text);
    m_resumeInfo->setVisible(!text.isEmpty());
    m_resume->setToolTip(row < 0 ? tr("Select one interrupted run to finish it from its last committed round")
                                 : tr("Finish run %1 from its last committed round, with the profile it ran "
                                      "(clusterppl-cli run --resume %1)").arg(ids.front()));
}

QString HistoryPage::resumeText() const
{
    const QStringList ids = selectedRunIds();
    const int row = ids.size() == 1 ? m_model->rowOf(ids.front()) : -1;
    if (row < 0)
        return {};
    const ResumeState &st = m_model->resumeState(row);
    switch (st.kind) {
    case ResumeState::Kind::None: return {};
    case ResumeState::Kind::Resumable:
        return tr("Run %1 %2: Resume finishes it from there (%3 schedule, %4 ranks then).")
            .arg(ids.front(), st.text, st.source->schedule)
            .arg(st.source->worldSize);
    case ResumeState::Kind::Resumed:
    case ResumeState::Kind::Refused: return tr("Run %1 cannot be resumed: %2").arg(ids.front(), st.text);
    }
    return {};
}

void HistoryPage::openSelected()
{
    const QStringList ids = selectedRunIds();
    if (ids.size() != 1 || !m_history)
        return;
    std::optional<RunRecord> r;
    try {
        r = m_history->get(ids.front());
    } catch (const cppl::Error &e) {
        Q_EMIT failed(QString::fromUtf8(e.what()));
        return;
    }
    if (!r) {
        Q_EMIT failed(tr("Run %1 is no longer in the history %2").arg(ids.front(), m_history->path()));
        refresh();
        return;
    }
    auto *d = new RunDetailDialog(*r, this);
    d->setAttribute(Qt::WA_DeleteOnClose);
    connect(d, &RunDetailDialog::exportRequested, this, [this, d](const QString &runId) { askExport({runId}, d); });
    d->show();
}

QStringList HistoryPage::exportReport(const QStringList &runIds, const QString &path, const QString &format, QString *error) const
{
    if (!m_history) {
        *error = tr("the run history is not open");
        return {};
    }
    // As `clusterppl-cli report` builds it: the runs as stored, against the history's one-rank
    // baselines (a run that just ended is written first).
    m_history->flush();
    return writeReportTo([&] { return cppl::core::report::loadReport(*m_history, runIds); }, path, format, error);
}

void HistoryPage::askExport(const QStringList &runIds, QWidget *dialogParent)
{
    if (runIds.isEmpty())
        return;
    const QString suggested = runIds.size() == 1 ? runIds.front() + u".pdf"_s : u"comparison-%1-runs.pdf"_s.arg(runIds.size());
    const auto target = askReportTarget(dialogParent ? dialogParent : this,
                                        runIds.size() == 1 ? tr("Export the report of run %1").arg(runIds.front())
                                                           : tr("Export a comparison report of %n runs", nullptr, int(runIds.size())),
                                        suggested);
    if (!target)
        return;
    QString error;
    const QStringList files = exportReport(runIds, target->path, target->format, &error);
    if (files.isEmpty())
        Q_EMIT failed(tr("Export report: %1").arg(error));
    else
        Q_EMIT info(tr("Report written: %1").arg(files.join(u", "_s)));
}

} // namespace cppl::app
