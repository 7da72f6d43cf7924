// SPDX-License-Identifier: MIT
#include "compare_page.h"

#include "column_fit.h"
#include "compare_model.h"
#include "report_export.h"

#include "report/report.h"

#include "charts/chart_widget.h"
#include "charts/stacked_bar_chart.h"
#include "charts/time_series_chart.h"

#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

using namespace Qt::StringLiterals;
using cppl::charts::AxisSpec;
using cppl::charts::SeriesData;
using cppl::charts::ValueFormat;
using cppl::core::history::RunRecord;

namespace cppl::app {

ComparePage::ComparePage(QWidget *parent)
    : QWidget(parent)
{
    auto *outer = new QVBoxLayout(this);
    outer->addLayout(buildTopRow());
    m_recommendation = new QLabel(this);
    m_recommendation->setObjectName(u"recommendation"_s);
    m_recommendation->setWordWrap(true);
    m_recommendation->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont bold = m_recommendation->font();
    bold.setBold(true);
    m_recommendation->setFont(bold);
    outer->addWidget(m_recommendation);

    auto *split = new QSplitter(Qt::Vertical, this);
    auto *upper = new QWidget(split);
    auto *upperLayout = new QVBoxLayout(upper);
    upperLayout->setContentsMargins(0, 0, 0, 0);
    m_scaling = buildCharts(upper);
    m_precisions = buildPrecisions(upper);
    upperLayout->addWidget(m_scaling, 1);
    upperLayout->addWidget(m_precisions, 1);
    split->addWidget(upper);
    split->addWidget(buildTable(split));
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    outer->addWidget(split, 1);
    m_content = split;
    // Empty axes over fractional ranks looked like a broken comparison; say what fills this page.
    m_empty = new QLabel(tr("Nothing to compare yet.\n\nSelect two or more runs on the History page (Ctrl+4) and press "
                            "\u201cCompare selected\u201d, or run the same evaluation at several rank counts with Run \u203a Sweep\u2026"),
                         this);
    m_empty->setObjectName(u"compareEmpty"_s);
    m_empty->setAlignment(Qt::AlignCenter);
    m_empty->setWordWrap(true);
    outer->addWidget(m_empty, 1);

    connect(m_threshold, &QDoubleSpinBox::valueChanged, this, &ComparePage::recompute);
    connect(m_export, &QPushButton::clicked, this, &ComparePage::askExport);
    recompute();
}

QHBoxLayout *ComparePage::buildTopRow()
{
    auto *top = new QHBoxLayout;
    m_heading = new QLabel(this); // what is compared; with nothing, the page's own name (the body says what to do)
    m_heading->setWordWrap(true);
    top->addWidget(m_heading, 1);
    top->addWidget(new QLabel(tr("Efficiency threshold:"), this));
    m_threshold = new QDoubleSpinBox(this);
    m_threshold->setObjectName(u"thresholdSpin"_s);
    m_threshold->setRange(1, 100);
    m_threshold->setDecimals(0);
    m_threshold->setSuffix(u" %"_s);
    m_threshold->setValue(75);
    m_threshold->setToolTip(tr("The recommendation is the largest node count whose scaling efficiency stays at or above this"));
    top->addWidget(m_threshold);
    m_export = new QPushButton(tr("Export report…"), this);
    m_export->setToolTip(tr("The comparison as PDF, self-contained HTML, CSV or JSON (docs/reports.md)"));
    m_export->setEnabled(false);
    top->addWidget(m_export);
    return top;
}

QWidget *ComparePage::buildCharts(QWidget *parent)
{
    auto *grid = new QWidget(parent);
    auto *g = new QGridLayout(grid);
    g->setContentsMargins(0, 0, 0, 0);
    // Rank counts double from run to run (1, 2, 4 … 1024): on a linear axis every run below a
    // tenth of the largest sat in its first pixels, so ranks (and tok/s, which follow them) are
    // drawn on log scales, labelled with the counts and rates themselves.
    m_rate = new charts::TimeSeriesChart(this);
    m_rate->setTitle(tr("Throughput vs ranks, measured and ideal (linear from the smallest run)"));
    m_rate->setXAxis(AxisSpec{tr("ranks (log)"), ValueFormat::Log2Count, {}, {}, false});
    m_rate->setYAxis(AxisSpec{tr("tok/s (log)"), ValueFormat::Log10Si, {}, {}, false});
    m_efficiency = new charts::TimeSeriesChart(this);
    m_efficiency->setTitle(tr("Scaling efficiency, measured and projected (dashed)"));
    m_efficiency->setXAxis(AxisSpec{tr("ranks (log)"), ValueFormat::Log2Count, {}, {}, false});
    m_efficiency->setYAxis(AxisSpec{tr("efficiency"), ValueFormat::Percent, 0.0, {}, true});
    m_comm = new charts::StackedBarChart(this);
    m_comm->setTitle(tr("Communication share of rank time"));
    m_comm->setSegmentNames({tr("waiting"), tr("transfer")});
    m_comm->setXAxis(AxisSpec{tr("ranks"), ValueFormat::Plain, {}, {}, false});
    m_comm->setYAxis(AxisSpec{tr("share of time"), ValueFormat::Percent, 0.0, {}, true});
    m_ppl = new charts::TimeSeriesChart(this);
    m_ppl->setTitle(tr("PPL ± stderr vs ranks"));
    m_ppl->setXAxis(AxisSpec{tr("ranks (log)"), ValueFormat::Log2Count, {}, {}, false});
    m_ppl->setYAxis(AxisSpec{tr("PPL"), ValueFormat::Plain, {}, {}, false});
    int i = 0;
    for (charts::Chart *c : std::initializer_list<charts::Chart *>{m_rate, m_efficiency, m_comm, m_ppl}) {
        auto *w = new charts::ChartWidget(c, grid);
        w->setMinimumHeight(180);
        g->addWidget(w, i / 2, i % 2);
        ++i;
    }
    return grid;
}

QWidget *ComparePage::buildTable(QWidget *parent)
{
    auto *bottom = new QWidget(parent);
    auto *b = new QVBoxLayout(bottom);
    b->setContentsMargins(0, 0, 0, 0);
    m_model = new CompareModel(this);
    auto *proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(m_model);
    proxy->setSortRole(CompareModel::SortRole);
    m_table = new QTableView(bottom);
    m_table->setObjectName(u"compareTable"_s);
    m_table->setModel(proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(CompareModel::ColRanks, Qt::AscendingOrder);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    // In a 1024 px window the twelve columns scrolled sideways: groups, nodes, topology and the
    // ideal rate give way there (the charts and the report have them; the header's menu shows them).
    new ColumnFit(m_table, {{}, 10, 14, 18, {CompareModel::ColGroups, CompareModel::ColNodes, CompareModel::ColTopology, CompareModel::ColIdeal}, {}});
    b->addWidget(m_table, 1);
    m_projection = new QLabel(bottom);
    m_projection->setObjectName(u"projection"_s);
    m_projection->setWordWrap(true);
    m_projection->setTextInteractionFlags(Qt::TextSelectableByMouse);
    b->addWidget(m_projection);
    return bottom;
}

void ComparePage::setRuns(std::vector<RunRecord> runs, std::vector<RunRecord> baselines)
{
    m_runs = std::move(runs);
    m_baselines = std::move(baselines);
    recompute();
}

void ComparePage::setThreshold(double fraction)
{
    m_threshold->setValue(100 * fraction);
}

double ComparePage::threshold() const
{
    return m_threshold->value() / 100;
}

QString ComparePage::recommendationText() const
{
    return m_recommendation->text();
}

QString ComparePage::projectionText() const
{
    return m_projection->text();
}

void ComparePage::recompute()
{
    cppl::core::history::CompareOptions o;
    o.threshold = threshold();
    m_comparison = m_runs.empty() ? cppl::core::history::Comparison{} : cppl::core::history::compareRuns(m_runs, m_baselines, o);
    m_model->setComparison(m_comparison);
    // The table keeps room for a sweep's rows (up to 6 without scrolling) under the charts: the
    // splitter's 3:2 left it one row and a half.
    const int rows = std::clamp(int(m_comparison.points.size()), 3, 6);
    m_table->setMinimumHeight(m_table->horizontalHeader()->sizeHint().height() + rows * m_table->verticalHeader()->defaultSectionSize()
                              + 2 * m_table->frameWidth() + 2);
    m_export->setEnabled(!m_runs.empty());
    m_content->setVisible(!m_runs.empty());
    m_empty->setVisible(m_runs.empty());
    if (m_runs.empty()) {
        m_heading->setText(tr("Runs compared by rank count"));
        m_heading->setToolTip({});
        m_recommendation->setText({});
        m_projection->setText({});
    } else {
        QStringList ids;
        for (const auto &p : m_comparison.points)
            ids << p.runId;
        // A sweep of 11 sizes named every run id over three lines: the first and last, the rest in the tooltip.
        const auto &pts = m_comparison.points;
        m_heading->setText(ids.size() <= 4 ? (ids.size() == 1 ? tr("1 run compared: %1") : tr("%n runs compared: %1", nullptr, int(ids.size()))).arg(ids.join(u", "_s))
                                           : tr("%1 runs compared, %2 to %3 ranks: %4 … %5")
                                                 .arg(ids.size())
                                                 .arg(pts.front().worldSize)
                                                 .arg(pts.back().worldSize)
                                                 .arg(ids.front(), ids.back()));
        m_heading->setToolTip(ids.join(u"\n"_s));
        QString rec = tr("Recommendation: ") + m_comparison.recommendation;
        if (!m_comparison.warnings.isEmpty())
            rec += u"\n⚠ "_s + m_comparison.warnings.join(u"\n⚠ "_s);
        m_recommendation->setText(rec);
        const auto &pr = m_comparison.projection;
        QString text;
        // The formula and its fit errors are in the tooltip: as text they took five lines and left
        // the table one row (and the projection's own figures were cut off at the bottom).
        m_projection->setToolTip({});
        if (!pr.available) {
            text = tr("Projection: not available (%1).").arg(pr.why);
        } else {
            m_projection->setToolTip(tr("%1\nFit error (RMS): compute speed %2, collective %3.")
                                         .arg(pr.formula)
                                         .arg(pr.computeSpeed.rmsError, 0, 'g', 3)
                                         .arg((pr.topology == u"flat"_s ? pr.collectiveFlat : pr.collectiveHierarchical).rmsError, 0, 'g', 3));
            QStringList at;
            for (const auto &p : pr.points)
                at << tr("%1: %2% (comm %3%)").arg(p.ranks).arg(100 * p.efficiency, 0, 'f', 0).arg(100 * p.commShare, 0, 'f', 0);
            text = tr("Projected efficiency (%1 collective, fitted on these runs; dashed in the chart; formula in the tooltip): %2")
                       .arg(pr.topology, at.join(u", "_s));
            if (!pr.excluded.isEmpty())
                text += u"\n"_s + tr("Left out of the fit (⚠: their ranks shared a host's cores or GPUs): %1.").arg(pr.excluded.join(u", "_s));
            if (pr.heldOut.available)
                text += u"\n"_s
                        + tr("Held-out check (fit without %1 ranks, then predict it): efficiency %2% predicted vs %3% measured "
                             "(%4 points), throughput %5% off.")
                              .arg(pr.heldOut.ranks)
                              .arg(100 * pr.heldOut.predictedEfficiency, 0, 'f', 1)
                              .arg(100 * pr.heldOut.measuredEfficiency, 0, 'f', 1)
                              .arg(pr.heldOut.efficiencyErrorPoints(), 0, 'f', 1)
                              .arg(100 * pr.heldOut.throughputRelativeError(), 0, 'f', 1);
            else
                text += u"\n"_s + tr("Held-out check: %1").arg(pr.heldOut.why);
        }
        m_projection->setText(text);
    }
    updateCharts();
    updatePrecisions();
}

void ComparePage::updateCharts()
{
    const auto &pts = m_comparison.points;
    SeriesData rate{tr("measured"), {}, {}}, ideal{tr("ideal (linear)"), {}, {}};
    SeriesData eff{tr("measured"), {}, {}}, proj{tr("projected"), {}, {}};
    SeriesData ppl{tr("PPL"), {}, {}}, hi{tr("PPL + stderr"), {}, {}}, lo{tr("PPL − stderr"), {}, {}};
    std::vector<double> comm;
    QStringList labels;
    // One point per world size (the mean when several runs share it): lines need ascending x.
    for (std::size_t i = 0; i < pts.size();) {
        std::size_t j = i;
        double r = 0, id = 0, e = 0;
        while (j < pts.size() && pts[j].worldSize == pts[i].worldSize) {
            r += pts[j].tokensPerSecond;
            id += pts[j].idealTokensPerSecond;
            e += pts[j].efficiency;
            ++j;
        }
        const double n = double(j - i), x = std::log2(double(std::max(1, pts[i].worldSize)));
        if (r > 0 && id > 0) { // a run without a result has no rate to put on a log scale
            rate.x.push_back(x);
            rate.y.push_back(std::log10(r / n));
            ideal.x.push_back(x);
            ideal.y.push_back(std::log10(id / n));
            eff.x.push_back(x);
            eff.y.push_back(e / n);
        }
        i = j;
    }
    for (const auto &p : pts) {
        comm.push_back(p.waitShare);
        comm.push_back(p.transferShare);
        labels << QString::number(p.worldSize);
        if (p.ppl) {
            const double x = std::log2(double(std::max(1, p.worldSize)));
            ppl.x.push_back(x);
            ppl.y.push_back(*p.ppl);
            hi.x.push_back(x);
            hi.y.push_back(*p.ppl + p.pplStderr.value_or(0));
            lo.x.push_back(x);
            lo.y.push_back(*p.ppl - p.pplStderr.value_or(0));
        }
    }
    if (m_comparison.projection.available && !eff.x.empty()) {
        // The dashed line starts at the largest measured point so the two read as one curve.
        proj.x.push_back(eff.x.back());
        proj.y.push_back(eff.y.back());
        for (const auto &p : m_comparison.projection.points) {
            proj.x.push_back(std::log2(double(p.ranks)));
            proj.y.push_back(p.efficiency);
        }
    }
    m_rate->setSeries({rate, ideal});
    m_efficiency->setSeries({eff, proj});
    // The chart writes the value after the label: "threshold (75.0%)", not "threshold 75% (75.0%)".
    m_efficiency->setReferenceLines({charts::ReferenceLine{threshold(), tr("threshold"), {}, Qt::DotLine}});
    m_comm->setValues(std::move(comm));
    m_comm->setCategoryLabels(labels);
    m_ppl->setSeries({ppl, hi, lo});
}

} // namespace cppl::app

namespace cppl::app {

QStringList ComparePage::exportReport(const QString &path, const QString &format, QString *error) const
{
    return writeReportTo([this] { return cppl::core::report::makeReport(m_runs, m_baselines, threshold()); }, path, format, error);
}

void ComparePage::askExport()
{
    const auto target = askReportTarget(this, tr("Export report"), u"comparison.pdf"_s);
    if (!target)
        return;
    QString error;
    const QStringList files = exportReport(target->path, target->format, &error);
    if (files.isEmpty())
        Q_EMIT failed(tr("Export report: %1").arg(error));
    else
        Q_EMIT info(tr("Report written: %1").arg(files.join(u", "_s)));
}

} // namespace cppl::app
