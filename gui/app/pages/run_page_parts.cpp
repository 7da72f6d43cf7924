// SPDX-License-Identifier: MIT
// The Run page's parts, built once by its constructor (run_page.cpp): the headline, the notice
// lines, the rank table with its filter, and the Alerts and Logs tabs. run_page_layout.cpp
// arranges them by the page's width; run_page.cpp fills them.
#include "run_page.h"

#include "alert_model.h"
#include "rank_table_model.h"

#include <QAction>
#include <QClipboard>
#include <QComboBox>
#include <QFontDatabase>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStyle>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>

using namespace Qt::StringLiterals;
using cppl::core::run::AlertKind;

namespace cppl::app {

namespace {

/// A headline figure: on one line when there is room, wrapped at its spaces when the window is
/// narrow. Its minimum width is fixed (a few words), so the page's minimum width does not follow
/// the figures: a 1024-rank run's counts ("3,501,727,834 tokens scored · windows 13,678,096 /
/// 22,080,000") and badge ("✓ Recovered · rank 777 lost") made the Run page 1,277 px wide at the
/// least, a 4-rank run's 728.
class FigureLabel : public QLabel
{
public:
    FigureLabel(QWidget *parent, const QString &widestWord)
        : QLabel(parent)
        , m_widestWord(widestWord)
    {
        setWordWrap(true);
    }
    QSize sizeHint() const override
    {
        // One line: QLabel's own hint for wrapped text is a guess (about 40 characters a line).
        const int w = oneLineWidth();
        return {w, heightForWidth(w)};
    }
    QSize minimumSizeHint() const override
    {
        // The same whatever the text (also when it is shorter or hidden), so the page's minimum
        // width is the same in every state and for any number of ranks.
        ensurePolished();
        const int w = fontMetrics().horizontalAdvance(m_widestWord) + marginsWidth();
        return {w, heightForWidth(w)};
    }

private:
    int marginsWidth() const
    {
        const QMargins m = contentsMargins();
        return m.left() + m.right() + 2 * margin() + 2;
    }
    int oneLineWidth() const
    {
        ensurePolished(); // the badge's style sheet sets a bold font and padding
        return fontMetrics().horizontalAdvance(text()) + marginsWidth();
    }
    QString m_widestWord;
};


QLabel *headline(QWidget *parent, const QString &name, double scale = 1.0, const QString &widestWord = {})
{
    QLabel *l = widestWord.isEmpty() ? new QLabel(parent) : new FigureLabel(parent, widestWord);
    l->setObjectName(name);
    QFont f = l->font();
    f.setPointSizeF(f.pointSizeF() * scale);
    if (scale > 1.0)
        f.setBold(true);
    l->setFont(f);
    l->setTextInteractionFlags(Qt::TextSelectableByMouse);
    return l;
}
} // namespace

QHBoxLayout *RunPage::buildHeadline()
{
    m_head = new QHBoxLayout;
    m_run = new QPushButton(tr("Run"), this);
    m_run->setToolTip(tr("Start the evaluation on the cluster (Ctrl+R)"));
    m_stop = new QPushButton(tr("Stop"), this);
    m_stop->setToolTip(tr("End every rank of this run (Ctrl+.)"));
    m_stop->setEnabled(false);
    // The badge and the figures wrap when the page is narrower still than the headline's two rows.
    m_phase = headline(this, u"phase"_s, 1.0, u"✓ Recovered ·"_s);
    m_ppl = headline(this, u"ppl"_s, 1.6);
    m_tokens = headline(this, u"tokens"_s, 1.0, u"000,000,000,000 tokens"_s);
    m_rate = headline(this, u"rate"_s, 1.0, u"000,000,000,000 tokens"_s);
    m_eta = headline(this, u"eta"_s, 1.0, u"elapsed 00:00:00"_s);
    m_telemetry = headline(this, u"telemetry"_s, 1.0, u"elapsed 00:00:00"_s);
    m_telemetry->setToolTip(tr("Lost: messages the ranks sent that never arrived (their seq numbers are missing; a "
                               "sender drops when its queue is full). Skipped: progress and heartbeats received "
                               "while the collector was behind and superseded by a newer one of the same rank, "
                               "so not decoded. Neither changes the exact PPL: progress carries cumulative "
                               "sums and each rank's last one always counts."));
    m_head->addWidget(m_run);
    m_head->addWidget(m_stop);
    m_head->addSpacing(12);
    // Centred at its own height: stretched to a row of wrapped figures (a 1024 px window), the
    // orange badge was a block three lines tall.
    m_head->addWidget(m_phase, 0, Qt::AlignVCenter);
    m_head->addSpacing(12);
    m_head->addWidget(m_ppl);
    m_head->addSpacing(12);
    m_figures = new QVBoxLayout;
    m_figures->addWidget(m_tokens);
    m_figures->addWidget(m_rate);
    m_head->addLayout(m_figures);
    // Time and telemetry one above the other, as tokens and rate are: side by side, a 1024-rank
    // run's headline ("✓ Recovered · rank 777 lost", 22,054,752 windows) was wider than a 1500 px
    // window and widened it.
    m_times = new QVBoxLayout;
    m_times->addWidget(m_eta);
    m_times->addWidget(m_telemetry);
    m_head->addLayout(m_times);
    m_head->addStretch(1);
    return m_head;
}

void RunPage::buildNotices(QVBoxLayout *layout)
{
    m_deviation = new QLabel(this);
    m_deviation->setObjectName(u"deviation"_s);
    m_deviation->setWordWrap(true);
    m_resumed = new QLabel(this);
    m_resumed->setObjectName(u"resumed"_s);
    m_resumed->setWordWrap(true);
    m_resumed->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_resumed);
    m_resumed->hide();
    m_notice = new QLabel(this);
    m_notice->setObjectName(u"notice"_s);
    m_notice->setWordWrap(true);
    m_notice->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(m_deviation);
    layout->addWidget(m_notice);
    m_deviation->hide(); // shown when there is something to say
    m_notice->hide();
}

QWidget *RunPage::buildRankTable(QWidget *parent)
{
    m_tableBox = new QWidget(parent);
    auto *tableLayout = new QVBoxLayout(m_tableBox);
    tableLayout->setContentsMargins(0, 0, 0, 0);
    m_rankFilter = new QLineEdit(m_tableBox);
    m_rankFilter->setPlaceholderText(tr("Filter ranks (host, group, state…)"));
    m_rankFilter->setClearButtonEnabled(true);
    tableLayout->addWidget(m_rankFilter);
    m_proxy->setSourceModel(m_ranks);
    m_proxy->setSortRole(RankTableModel::SortRole);
    m_proxy->setFilterKeyColumn(-1);
    m_proxy->setFilterCaseSensitivity(Qt::CaseInsensitive);
    m_table = new QTableView(m_tableBox);
    m_table->setObjectName(u"rankTable"_s);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(RankTableModel::ColRank, Qt::AscendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 6);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false); // one line per cell: no text layout per cell and paint
    // Widths from the header and typical content, once: resizing to contents would measure every
    // row of a 1024-rank table on every update. Sized so that every column, memory last, fits the
    // table's share of a 1500-pixel window.
    const QFontMetrics fm = m_table->fontMetrics();
    const QStringList samples{u"0000"_s, u"node-000.c"_s, u"group-00"_s, u"✗ failed (signal 9)"_s, u"00,000,000"_s,
                              u"00,000"_s, u"00.0 %"_s, u"000"_s, u"00.0 s"_s, u"00.0/00 GiB · 100%"_s};
    m_tableWidth = 2 * m_table->frameWidth() + m_table->style()->pixelMetric(QStyle::PM_ScrollBarExtent) + 4;
    for (int c = 0; c < RankTableModel::ColumnCount; ++c) {
        const int header = fm.horizontalAdvance(m_ranks->headerData(c, Qt::Horizontal).toString()) + 28;
        m_table->setColumnWidth(c, std::max(header, fm.horizontalAdvance(samples[c]) + 14));
        m_tableWidth += m_table->columnWidth(c);
    }
    tableLayout->addWidget(m_table);
    return m_tableBox;
}

QTabWidget *RunPage::buildTabs(QWidget *parent)
{
    m_tabs = new QTabWidget(parent);
    m_tabs->addTab(buildAlertView(m_tabs), tr("Alerts"));
    m_tabs->addTab(buildLogTab(m_tabs), tr("Logs"));
    return m_tabs;
}

QTableView *RunPage::buildAlertView(QWidget *parent)
{
    m_alertView = new QTableView(parent);
    m_alertView->setObjectName(u"alertView"_s);
    m_alertView->setModel(m_alerts);
    m_alertView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_alertView->verticalHeader()->hide();
    m_alertView->horizontalHeader()->setStretchLastSection(true);
    m_alertView->setWordWrap(true);
    // Rows of one fixed height (two lines; the whole message in the tooltip): the view never
    // measures rows, however many alerts a storm brings.
    m_alertView->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    m_alertView->verticalHeader()->setDefaultSectionSize(2 * m_alertView->fontMetrics().lineSpacing() + 6);
    m_alertView->setTextElideMode(Qt::ElideRight);
    m_alertView->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto *copyAlerts = new QAction(tr("Copy all alerts"), m_alertView);
    copyAlerts->setToolTip(tr("Every alert of this run, one per line (tab-separated), also those the list coalesces"));
    connect(copyAlerts, &QAction::triggered, this, [this] { QGuiApplication::clipboard()->setText(m_alerts->allAlertsAsText()); });
    m_alertView->addAction(copyAlerts);
    const QFontMetrics fm = m_alertView->fontMetrics();
    m_alertView->setColumnWidth(AlertModel::ColTime, fm.horizontalAdvance(u"00:00:00"_s) + 12);
    m_alertView->setColumnWidth(AlertModel::ColRank, fm.horizontalAdvance(u"Rank 0000"_s));
    // The widest kind on one line ("⚠ comm share" was the measure: "⚠ lost telemetry" wrapped onto
    // two); a count ("×12") may take the row's second line. The delegate keeps a margin of the
    // focus frame's plus one on either side of the text.
    int kind = 0;
    for (AlertKind k : {AlertKind::Stalled, AlertKind::Failed, AlertKind::CommShare, AlertKind::LostMessages,
                        AlertKind::ResultMismatch, AlertKind::Deviation, AlertKind::RankLost})
        for (const QString &symbol : {u"⚠ "_s, u"✗ "_s})
            kind = std::max(kind, fm.horizontalAdvance(symbol + cppl::core::run::alertKindName(k)));
    const int margin = m_alertView->style()->pixelMetric(QStyle::PM_FocusFrameHMargin, nullptr, m_alertView) + 1;
    m_alertView->setColumnWidth(AlertModel::ColKind, kind + 2 * margin + 4);
    return m_alertView;
}

QWidget *RunPage::buildLogTab(QWidget *parent)
{
    auto *logBox = new QWidget(parent);
    auto *logLayout = new QVBoxLayout(logBox);
    logLayout->setContentsMargins(2, 2, 2, 2);
    auto *logBar = new QHBoxLayout;
    m_logRank = new QComboBox(logBox);
    m_logRank->setToolTip(tr("Whose output to show; follows the selected rank"));
    m_logSearch = new QLineEdit(logBox);
    m_logSearch->setPlaceholderText(tr("Search the log"));
    m_logSearch->setClearButtonEnabled(true);
    logBar->addWidget(m_logRank);
    logBar->addWidget(m_logSearch, 1);
    logLayout->addLayout(logBar);
    m_log = new QPlainTextEdit(logBox);
    m_log->setObjectName(u"rankLog"_s);
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(int(kLogLinesAll));
    m_log->setLineWrapMode(QPlainTextEdit::NoWrap);
    m_log->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    logLayout->addWidget(m_log);
    return logBox;
}

} // namespace cppl::app
