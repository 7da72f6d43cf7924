// SPDX-License-Identifier: MIT
#pragma once

// What the run engine checks a finished run's result against, besides the live exact merge of the
// ranks' telemetry (the collector's): a one-rank baseline of the same settings from the history,
// bit for bit or within the profile's tolerance; and which ranks the result says were lost.

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <optional>

namespace cppl::core::run {

/// What a baseline comparison found.
struct BaselineVerdict
{
    std::optional<bool> identical;   ///< the exact sums equal the baseline's; unset: not compared
    double relativeDeviation = 0;    ///< ppl / baseline ppl - 1
    /// Why it was not compared: "it ran in float32, this run in bfloat16" (different precisions
    /// under one settings key, dtype "auto"); empty otherwise.
    QString notCompared;
    /// The Deviation alert's text, when the deviation is beyond the tolerance; empty otherwise.
    QString deviation;
};

/// Compares the result JSON @p mine with the baseline result @p base (docs/result-json.md).
/// Results without exact sums or tokens are not compared (identical unset, nothing said).
[[nodiscard]] BaselineVerdict compareWithBaseline(const QByteArray &mine, const QByteArray &base, double tolerance);

/// --on-rank-loss continue: the ranks the others recovered from, as the result's lost_ranks records
/// them: "rank 2 (node1): died: its connection closed; lost after round 4".
[[nodiscard]] QStringList recoveredRanks(const QByteArray &resultJson);

} // namespace cppl::core::run
