// SPDX-License-Identifier: MIT
#pragma once

// The charts of a report, built with the dashboard's chart module (gui/charts) from stored data
// only: per-rank tokens/s over time, comm share per rank (wait vs transfer), and for comparisons
// throughput vs ranks with the ideal line, efficiency, comm share per run and the projection.

#include "report/report.h"

#include "charts/chart.h"

#include <QFont>

#include <memory>
#include <vector>

namespace cppl::core::report {

struct ReportChart
{
    QString id;       ///< stable name ("rank-throughput", "projection", ...)
    QString caption;  ///< one sentence under the chart: what it shows and how to read it
    std::unique_ptr<charts::Chart> chart;
};

/// Ranks drawn as single lines up to this many; beyond, a p5..p95 band with the slowest named.
inline constexpr int kMaxLineRanks = 32;

/// The charts' look in reports: light or dark, DejaVu Sans 8 pt without ligatures (so that a PDF's
/// text extracts as typed: "efficiency", not the "ffi" glyph).
[[nodiscard]] charts::Theme reportTheme(bool dark);
/// The reports' text font at @p pointSize.
[[nodiscard]] QFont reportFont(double pointSize, bool bold = false, bool italic = false);

[[nodiscard]] std::vector<ReportChart> runCharts(const history::RunRecord &run, const charts::Theme &theme);
/// Comparison charts (empty unless data.isComparison()); with data.precisions, the precision charts
/// (precision_charts.h, ids "precision-…") after the scaling ones.
[[nodiscard]] std::vector<ReportChart> comparisonCharts(const ReportData &data, const charts::Theme &theme);

} // namespace cppl::core::report
