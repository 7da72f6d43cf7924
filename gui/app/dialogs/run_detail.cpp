// SPDX-License-Identifier: MIT
#include "run_detail.h"

#include "history_model.h"
#include "resume_state.h"

#include "charts/chart_widget.h"
#include "charts/time_series_chart.h"

#include <QDialogButtonBox>
#include <QGuiApplication>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLocale>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScreen>
#include <QTabWidget>
#include <QTableWidget>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <map>

using namespace Qt::StringLiterals;
using cppl::charts::AxisSpec;
using cppl::charts::SeriesData;
using cppl::charts::ValueFormat;
using cppl::core::history::RunRecord;

namespace cppl::app {

namespace {

QString summaryHtml(const RunRecord &r)
{
    auto row = [](const QString &k, const QString &v) { return u"<tr><td><b>%1</b></td><td>%2</td></tr>"_s.arg(k.toHtmlEscaped(), v.toHtmlEscaped()); };
    const QLocale loc;
    QString h = u"<table cellspacing=4>"_s;
    h += row(QObject::tr("Run"), r.runId);
    h += row(QObject::tr("Status"), statusLabel(r.status) + (r.firstCause.isEmpty() ? QString() : u": "_s + r.firstCause));
    // --on-rank-loss continue: finished without these ranks, same bits (history_model.h).
    for (const QString &l : lostRanksDetail(r.lostRanks))
        h += row(QObject::tr("Recovered"), l);
    // As the History page and `run --resume` see it: progress, or why it cannot be resumed.
    if (const ResumeState st = resumeStateOf(r); st.kind == ResumeState::Kind::Resumable)
        h += row(QObject::tr("Resume"), st.text + QObject::tr(" (%1 schedule, %2 ranks then): History › Resume finishes it")
                                                       .arg(st.source->schedule)
                                                       .arg(st.source->worldSize));
    else if (st.kind != ResumeState::Kind::None)
        h += row(QObject::tr("Resume"), QObject::tr("not possible: %1").arg(st.text));
    const QString fmt = u"yyyy-MM-dd HH:mm:ss"_s;
    h += row(QObject::tr("Started / ended"),
             r.started.toLocalTime().toString(fmt) + u" / "_s + (r.ended.isValid() ? r.ended.toLocalTime().toString(fmt) : u"—"_s));
    h += row(QObject::tr("Source, profile"), r.source + u", "_s + r.profileName);
    h += row(QObject::tr("Model"), r.model);
    h += row(QObject::tr("Data"), r.data);
    h += row(QObject::tr("Protocol"), r.protocol);
    h += row(QObject::tr("Ranks, groups, nodes"), u"%1, %2, %3 (%4)"_s.arg(r.worldSize).arg(r.groupsCount).arg(r.nodeCount).arg(r.launcher));
    if (r.ppl)
        h += row(QObject::tr("PPL ± stderr"), u"%1 ± %2"_s.arg(*r.ppl, 0, 'f', 6).arg(r.pplStderr.value_or(0), 0, 'f', 6));
    h += row(QObject::tr("Tokens scored"), loc.toString(qlonglong(r.tokensScored)));
    if (r.tokensPerSecond)
        h += row(QObject::tr("tok/s"), loc.toString(*r.tokensPerSecond, 'f', 0)); // whole and grouped, as History writes it
    if (!r.nllSumExact.isEmpty())
        h += row(QObject::tr("Exact NLL sum"), r.nllSumExact);
    for (auto it = r.versions.begin(); it != r.versions.end(); ++it)
        h += row(QObject::tr("Version: %1").arg(it.key()),
                 it.value().toVariant().toString().isEmpty() ? QObject::tr("not reported") : it.value().toVariant().toString());
    for (const auto &host : r.hosts) {
        const auto o = host.toObject();
        h += row(QObject::tr("Host"), u"%1 (%2), %3 slots"_s.arg(o.value(u"name"_s).toString(), o.value(u"address"_s).toString())
                                          .arg(o.value(u"slots"_s).toInt()));
    }
    for (auto it = r.settings.begin(); it != r.settings.end(); ++it)
        h += row(QObject::tr("Setting: %1").arg(it.key()), it.value().toVariant().toString());
    return h + u"</table>"_s;
}

QTableWidget *rankTable(const RunRecord &r, QWidget *parent)
{
    const QStringList head{QObject::tr("Rank"), QObject::tr("Host"), QObject::tr("Group"), QObject::tr("Tokens"), QObject::tr("tok/s"),
                           QObject::tr("Compute s"), QObject::tr("Wait s"), QObject::tr("Transfer s"), QObject::tr("Exit")};
    auto *t = new QTableWidget(int(r.ranks.size()), int(head.size()), parent);
    t->setHorizontalHeaderLabels(head);
    t->verticalHeader()->hide();
    t->setEditTriggers(QAbstractItemView::NoEditTriggers);
    const QLocale loc;
    for (int i = 0; i < int(r.ranks.size()); ++i) {
        const auto &k = r.ranks[std::size_t(i)];
        const QStringList cells{QString::number(k.rank),
                                k.host,
                                QString::number(k.group),
                                loc.toString(qlonglong(k.tokens)),
                                loc.toString(k.tokensPerSecond, 'f', 0),
                                QString::number(k.computeSeconds, 'f', 2),
                                QString::number(k.waitSeconds, 'f', 2),
                                QString::number(k.transferSeconds, 'f', 2),
                                k.exitCode ? QString::number(*k.exitCode) : u"—"_s};
        for (int c = 0; c < cells.size(); ++c)
            t->setItem(i, c, new QTableWidgetItem(cells[c]));
    }
    t->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    return t;
}

QWidget *sampleCharts(const RunRecord &r, QWidget *parent)
{
    auto *w = new QWidget(parent);
    auto *l = new QVBoxLayout(w);
    std::map<int, SeriesData> rate, comm;
    for (const auto &s : r.samples) {
        auto &a = rate[s.rank];
        a.name = QObject::tr("rank %1").arg(s.rank);
        a.x.push_back(s.t);
        a.y.push_back(s.tokensPerSecond);
        auto &b = comm[s.rank];
        b.name = a.name;
        b.x.push_back(s.t);
        b.y.push_back(s.waitShare + s.transferShare);
    }
    auto add = [&](const QString &title, const AxisSpec &y, std::map<int, SeriesData> &series) {
        auto *c = new charts::TimeSeriesChart(w);
        c->setTitle(title);
        c->setYAxis(y);
        std::vector<SeriesData> v;
        for (auto &[rank, s] : series)
            v.push_back(std::move(s));
        c->setSeries(std::move(v));
        l->addWidget(new charts::ChartWidget(c, w), 1);
    };
    add(QObject::tr("Throughput per rank (stored samples)"), AxisSpec{QObject::tr("tok/s"), ValueFormat::Si, {}, {}, true}, rate);
    add(QObject::tr("Communication share per rank"), AxisSpec{QObject::tr("share"), ValueFormat::Percent, 0.0, {}, true}, comm);
    return w;
}

} // namespace

RunDetailDialog::RunDetailDialog(const RunRecord &r, QWidget *parent)
    : QDialog(parent)
{
    setWindowTitle(tr("Run %1 (stored, read-only)").arg(r.runId));
    auto *l = new QVBoxLayout(this);
    m_tabs = new QTabWidget(this);
    auto *summary = new QTextBrowser(m_tabs);
    summary->setHtml(summaryHtml(r));
    m_tabs->addTab(summary, tr("Summary"));
    m_tabs->addTab(rankTable(r, m_tabs), tr("Ranks (%1)").arg(r.ranks.size()));
    m_tabs->addTab(sampleCharts(r, m_tabs), tr("Charts (%1 samples)").arg(r.samples.size()));
    auto *logs = new QPlainTextEdit(m_tabs);
    logs->setReadOnly(true);
    logs->setLineWrapMode(QPlainTextEdit::NoWrap);
    QStringList lines;
    for (const auto &g : r.logs)
        lines << u"[%1%2] %3"_s.arg(g.rank < 0 ? u"launcher"_s : u"rank %1"_s.arg(g.rank), g.isStderr ? u" err"_s : QString(), g.line);
    for (const auto &[rank, n] : r.logsDropped)
        lines << tr("(rank %1: %2 lines in the middle were not kept)").arg(rank).arg(n);
    logs->setPlainText(lines.join(u'\n'));
    m_tabs->addTab(logs, tr("Logs (%1)").arg(r.logs.size()));
    auto *alerts = new QTableWidget(int(r.alerts.size()), 4, m_tabs);
    alerts->setHorizontalHeaderLabels({tr("Time"), tr("Rank"), tr("Kind"), tr("Message")});
    alerts->verticalHeader()->hide();
    alerts->setEditTriggers(QAbstractItemView::NoEditTriggers);
    for (int i = 0; i < int(r.alerts.size()); ++i) {
        const auto &a = r.alerts[std::size_t(i)];
        alerts->setItem(i, 0, new QTableWidgetItem(u"%1 s"_s.arg(a.t, 0, 'f', 1)));
        alerts->setItem(i, 1, new QTableWidgetItem(a.rank < 0 ? u"—"_s : QString::number(a.rank)));
        alerts->setItem(i, 2, new QTableWidgetItem(a.kind));
        alerts->setItem(i, 3, new QTableWidgetItem(a.message));
    }
    alerts->horizontalHeader()->setStretchLastSection(true);
    m_tabs->addTab(alerts, tr("Alerts (%1)").arg(r.alerts.size()));
    l->addWidget(m_tabs, 1);
    auto *box = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(box, &QDialogButtonBox::rejected, this, &QDialog::reject);
    QPushButton *exportButton = box->addButton(tr("E&xport report…"), QDialogButtonBox::ActionRole);
    exportButton->setObjectName(u"detailExport"_s);
    exportButton->setToolTip(tr("This run's report as PDF, HTML, CSV or JSON (as clusterppl-cli report %1 writes it)").arg(r.runId));
    connect(exportButton, &QPushButton::clicked, this, [this, id = r.runId] { Q_EMIT exportRequested(id); });
    l->addWidget(box);
    // 1000 x 700, or nine tenths of a smaller screen: on a 1024 x 700 laptop screen the dialog
    // took its whole height, the buttons at its bottom edge under the panel.
    QSize size(1000, 700);
    if (const QScreen *screen = parent ? parent->screen() : QGuiApplication::primaryScreen())
        size = size.boundedTo(screen->availableGeometry().size() * 0.9);
    resize(size);
}

} // namespace cppl::app
