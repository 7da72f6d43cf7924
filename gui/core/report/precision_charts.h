// SPDX-License-Identifier: MIT
#pragma once

// The precisions of one checkpoint side by side as charts (history/precision.h's rows): speed
// (tokens/s), quality (mean KL divergence to the reference) and memory (weights per rank), a bar
// per precision. The Compare page shows these very charts; reports render them.

#include "report/report_charts.h"

#include "history/precision.h"

namespace cppl::core::report {

/// Empty when @p rows compare no precisions (history::comparesPrecisions).
[[nodiscard]] std::vector<ReportChart> precisionCharts(const std::vector<history::PrecisionRow> &rows, const charts::Theme &theme);

} // namespace cppl::core::report
