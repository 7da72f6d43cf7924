// SPDX-License-Identifier: MIT
#pragma once

// Runs against node count (comparison.h): throughput with the ideal linear line, scaling
// efficiency with the projection to 16..1024 ranks drawn dashed, the comm share split into wait
// and transfer, PPL ± stderr with the deviation from the one-rank baseline, the same figures as a
// table, the recommendation (editable threshold) and the projection's formula and fit error.
// Runs of one checkpoint at several precisions (a precision sweep, or any such selection) are shown
// side by side instead of the scaling charts: quality against the reference model, speed and
// memory per rank as a table and the reports' precision charts (compare_page_precisions.cpp).

#include "history/comparison.h"
#include "history/precision.h"

#include <QWidget>

class QDoubleSpinBox;
class QHBoxLayout;
class QLabel;
class QPushButton;
class QTableView;
class QTableWidget;

namespace cppl::charts {
class ChartWidget;
class StackedBarChart;
class TimeSeriesChart;
} // namespace cppl::charts

namespace cppl::app {

class CompareModel;

class ComparePage : public QWidget
{
    Q_OBJECT

public:
    explicit ComparePage(QWidget *parent = nullptr);

    /// @p runs as RunHistory::get() returns them; @p baselines: stored one-rank runs of the same
    /// settings, used when the selection has none.
    void setRuns(std::vector<cppl::core::history::RunRecord> runs, std::vector<cppl::core::history::RunRecord> baselines = {});
    void setThreshold(double fraction);
    [[nodiscard]] double threshold() const;
    [[nodiscard]] const cppl::core::history::Comparison &comparison() const noexcept { return m_comparison; }
    [[nodiscard]] CompareModel *model() const noexcept { return m_model; }
    [[nodiscard]] QString recommendationText() const;
    [[nodiscard]] QString projectionText() const;
    /// The runs' precisions side by side; empty when they compare none (then the scaling charts show).
    [[nodiscard]] const std::vector<cppl::core::history::PrecisionRow> &precisions() const noexcept { return m_precisionRows; }
    [[nodiscard]] QTableWidget *precisionTable() const noexcept { return m_precisionTable; }

    /// Writes the comparison as a report (gui/core/report: pdf, html, csv, json) to @p path;
    /// the files written, or empty with @p error set.
    QStringList exportReport(const QString &path, const QString &format, QString *error) const;

Q_SIGNALS:
    void failed(const QString &text);
    void info(const QString &text);

private:
    QHBoxLayout *buildTopRow();
    QWidget *buildCharts(QWidget *parent);
    QWidget *buildTable(QWidget *parent);
    QWidget *buildPrecisions(QWidget *parent);
    void recompute();
    void updateCharts();
    /// The precision table and charts, shown instead of the scaling charts when the runs compare precisions.
    void updatePrecisions();
    void askExport();

    std::vector<cppl::core::history::RunRecord> m_runs, m_baselines;
    cppl::core::history::Comparison m_comparison;
    CompareModel *m_model = nullptr;
    QLabel *m_heading = nullptr;
    QLabel *m_recommendation = nullptr;
    QLabel *m_projection = nullptr;
    QWidget *m_content = nullptr; // charts and table: hidden while nothing is compared
    QLabel *m_empty = nullptr;    // what to do instead, shown in their place
    QDoubleSpinBox *m_threshold = nullptr;
    QPushButton *m_export = nullptr;
    QTableView *m_table = nullptr;
    charts::TimeSeriesChart *m_rate = nullptr;
    charts::TimeSeriesChart *m_efficiency = nullptr;
    charts::StackedBarChart *m_comm = nullptr;
    charts::TimeSeriesChart *m_ppl = nullptr;
    QWidget *m_scaling = nullptr;    // the four scaling charts
    QWidget *m_precisions = nullptr; // the precision table and charts, in their place
    QTableWidget *m_precisionTable = nullptr;
    std::vector<charts::ChartWidget *> m_precisionViews;
    std::vector<cppl::core::history::PrecisionRow> m_precisionRows;
};

} // namespace cppl::app
