// SPDX-License-Identifier: MIT
#pragma once

// A precision sweep's comparison: the runs of one checkpoint at several precisions (quantized at
// load, bfloat16), their quality against the reference model (the result's "reference"), speed and
// memory side by side (docs/run-history.md, "Precisions of one checkpoint").

#include "history/run_record.h"

#include <QJsonArray>
#include <QString>

#include <optional>
#include <vector>

namespace cppl::core::history {

struct PrecisionRow
{
    QString runId;
    QString precision; ///< "int8", "int4-sym", ... or the dtype ("float32", "bfloat16") when not quantized
    int worldSize = 0;
    double ppl = 0, pplStderr = 0;
    /// From the result's "reference" (the run compared token by token with its reference model).
    struct Quality
    {
        double pplRatio = 0, pplRatioStderr = 0, kldMean = 0, kldStderr = 0, kldP99 = 0, sameTop = 0, sameTopStderr = 0;
    };
    std::optional<Quality> quality;
    double tokensPerSecond = 0;
    double speedup = 0; ///< tokens per second over the sweep's first row (1 for it)
    /// Per rank: the weights as held (with --tensor-parallel, a rank's slices and what every member
    /// replicates: the result's tensor_parallel.weights_bytes_per_rank), and what loading added to
    /// the reporting rank's resident set.
    qint64 weightBytes = 0, rssLoadBytes = 0;
};

/// The precision @p run evaluated in: its quantization method ("int8", "int4-sym", ...), else the
/// dtype its result ran in ("float32", "bfloat16"); empty without a result.
[[nodiscard]] QString precisionOf(const RunRecord &run);
/// One run's row (speedup left 0); none without a result.
[[nodiscard]] std::optional<PrecisionRow> precisionRow(const RunRecord &run);
/// One row per run, in the order given; runs without a result are left out.
[[nodiscard]] std::vector<PrecisionRow> precisionRows(const std::vector<RunRecord> &runs);
/// Whether @p rows compare precisions: two or more of them, not all of one precision (the Compare
/// page and the reports then show the precision table and charts).
[[nodiscard]] bool comparesPrecisions(const std::vector<PrecisionRow> &rows);
/// The rows as a text table (the CLI's sweep --quantize).
[[nodiscard]] QString formatPrecisions(const std::vector<PrecisionRow> &rows);
[[nodiscard]] QJsonArray precisionsToJson(const std::vector<PrecisionRow> &rows);
/// "none,int8,int4" -> {"none", "int8", "int4"}; each one of none, int8, int4, int4-sym, int4-asym,
/// no repeats. Throws ConfigError naming the bad item.
[[nodiscard]] QStringList parsePrecisionList(const QString &list);

} // namespace cppl::core::history
