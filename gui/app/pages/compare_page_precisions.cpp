// SPDX-License-Identifier: MIT
// The Compare page's precisions: runs of one checkpoint quantized several ways side by side (quality
// against the reference model, speed, memory per rank), as a table and the reports' charts.
#include "compare_page.h"

#include "report/precision_charts.h"

#include "charts/chart_widget.h"
#include "charts/chart_theme.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QTableWidget>
#include <QVBoxLayout>

using namespace Qt::StringLiterals;
using cppl::core::history::PrecisionRow;

namespace cppl::app {

namespace {

QString mebibytes(qint64 bytes)
{
    return bytes > 0 ? ComparePage::tr("%1 MiB").arg(double(bytes) / (1 << 20), 0, 'f', 1) : u"—"_s;
}

QStringList cellsOf(const PrecisionRow &r)
{
    const auto &q = r.quality;
    return {r.precision,
            QString::number(r.worldSize),
            u"%1 ± %2"_s.arg(r.ppl, 0, 'f', 4).arg(r.pplStderr, 0, 'f', 4),
            q ? u"%1 ± %2"_s.arg(q->pplRatio, 0, 'f', 5).arg(q->pplRatioStderr, 0, 'f', 5) : ComparePage::tr("(no reference)"),
            q ? u"%1 ± %2"_s.arg(q->kldMean, 0, 'g', 4).arg(q->kldStderr, 0, 'g', 2) : u"—"_s,
            q ? QString::number(q->kldP99, 'g', 4) : u"—"_s,
            q ? u"%1% ± %2"_s.arg(100 * q->sameTop, 0, 'f', 2).arg(100 * q->sameTopStderr, 0, 'f', 2) : u"—"_s,
            QString::number(r.tokensPerSecond, 'f', 1),
            u"%1×"_s.arg(r.speedup, 0, 'f', 2),
            mebibytes(r.weightBytes),
            mebibytes(r.rssLoadBytes),
            r.runId};
}

} // namespace

QWidget *ComparePage::buildPrecisions(QWidget *parent)
{
    auto *box = new QWidget(parent);
    box->setObjectName(u"precisions"_s);
    auto *v = new QVBoxLayout(box);
    v->setContentsMargins(0, 0, 0, 0);
    auto *row = new QHBoxLayout;
    for (const auto *name : {u"precisionSpeedChart", u"precisionQualityChart", u"precisionMemoryChart"}) {
        auto *view = new charts::ChartWidget(box);
        view->setObjectName(QString::fromUtf16(name));
        view->setMinimumSize(240, 180);
        row->addWidget(view, 1);
        m_precisionViews.push_back(view);
    }
    v->addLayout(row, 2);
    m_precisionTable = new QTableWidget(0, 12, box);
    m_precisionTable->setObjectName(u"precisionTable"_s);
    m_precisionTable->setHorizontalHeaderLabels({tr("Precision"), tr("Ranks"), tr("PPL"), tr("PPL ratio"), tr("KLD mean"), tr("KLD p99"),
                                                 tr("Same top"), tr("tok/s"), tr("× first"), tr("Weights/rank"), tr("Load RSS"), tr("Run")});
    m_precisionTable->setToolTip(tr("Each precision's run against its reference model, token by token (the result's \"reference\"): "
                                    "PPL ratio, KL divergence and top-token agreement; speed over the first row's; the weights one "
                                    "rank holds and what loading added to its resident set."));
    m_precisionTable->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_precisionTable->verticalHeader()->hide();
    m_precisionTable->horizontalHeader()->setStretchLastSection(true);
    v->addWidget(m_precisionTable, 1);
    box->hide();
    return box;
}

void ComparePage::updatePrecisions()
{
    auto rows = cppl::core::history::precisionRows(m_runs);
    m_precisionRows = cppl::core::history::comparesPrecisions(rows) ? std::move(rows) : std::vector<PrecisionRow>{};
    const bool shown = !m_precisionRows.empty();
    m_precisions->setVisible(shown);
    m_scaling->setVisible(!shown);
    m_precisionTable->setRowCount(int(m_precisionRows.size()));
    for (int i = 0; i < int(m_precisionRows.size()); ++i) {
        const QStringList cells = cellsOf(m_precisionRows[size_t(i)]);
        for (int c = 0; c < cells.size(); ++c) {
            auto *item = new QTableWidgetItem(cells[c]);
            if (c > 0 && c < cells.size() - 1)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_precisionTable->setItem(i, c, item);
        }
    }
    m_precisionTable->resizeColumnsToContents();
    // Every precision's row in view (a sweep has a handful), under the charts.
    m_precisionTable->setMinimumHeight(m_precisionTable->horizontalHeader()->sizeHint().height()
                                       + int(m_precisionRows.size()) * m_precisionTable->verticalHeader()->defaultSectionSize()
                                       + 2 * m_precisionTable->frameWidth() + 2);
    // The reports' charts, themed by each view's palette.
    auto made = cppl::core::report::precisionCharts(m_precisionRows, charts::Theme::light());
    for (size_t i = 0; i < m_precisionViews.size(); ++i) {
        charts::Chart *old = m_precisionViews[i]->chart();
        m_precisionViews[i]->setChart(i < made.size() ? made[i].chart.release() : nullptr);
        if (old)
            old->deleteLater();
    }
}

} // namespace cppl::app
