// SPDX-License-Identifier: MIT
#pragma once

// Reports of one stored run or a comparison of several (docs/reports.md): PDF with vector charts,
// one self-contained HTML file, CSV (runs and ranks) and JSON. Every figure comes from the stored
// RunRecord / Comparison unchanged; the formats differ only in how they lay it out.
//
// Rendering (PDF, HTML charts) paints text: it needs a QGuiApplication (the offscreen platform
// will do). CSV and JSON need none.

#include "history/comparison.h"
#include "history/precision.h"
#include "history/run_record.h"

#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace cppl::core::history {
class RunHistory;
}

namespace cppl::core::report {

enum class ReportFormat { Pdf, Html, Csv, Json };
/// pdf, html (or htm), csv or json, in any case; none for anything else.
[[nodiscard]] std::optional<ReportFormat> parseFormat(const QString &name);
[[nodiscard]] QString formatName(ReportFormat format);

/// What a report shows: the runs in full and their comparison (for one run: its deviation from
/// the stored one-rank baseline of the same settings; the scaling parts only with several runs).
struct ReportData
{
    std::vector<history::RunRecord> runs;      ///< in the order asked for
    history::Comparison comparison;            ///< always computed (one run: one point)
    /// The runs' precisions side by side, when they compare precisions (one checkpoint quantized
    /// several ways: history::comparesPrecisions); empty otherwise.
    std::vector<history::PrecisionRow> precisions;
    [[nodiscard]] bool isComparison() const { return runs.size() > 1; }
    /// The comparison's point of a run (nullptr when it has none).
    [[nodiscard]] const history::ScalingPoint *pointOf(const QString &runId) const;
};

/// Loads @p runIds from @p store (throws std::out_of_range naming the unknown id) and compares
/// them against the store's one-rank baselines of the same settings, as `compare` does.
[[nodiscard]] ReportData loadReport(const history::RunHistory &store, const QStringList &runIds, double threshold = 0.75);
/// The same from runs already in memory (baselines: runs of @p extraBaselines).
[[nodiscard]] ReportData makeReport(std::vector<history::RunRecord> runs, const std::vector<history::RunRecord> &extraBaselines = {},
                                    double threshold = 0.75);

/// Writes the report; returns the files written. CSV: @p path is the runs file and the ranks go
/// to the same name with "-ranks" before the extension; an existing directory gets runs.csv and
/// ranks.csv. Throws cppl::IoError naming the path.
QStringList writeReport(const ReportData &data, ReportFormat format, const QString &path);

// The formats one by one (bytes of the file).
[[nodiscard]] QByteArray reportPdf(const ReportData &data);
[[nodiscard]] QByteArray reportHtml(const ReportData &data);
[[nodiscard]] QByteArray reportCsvRuns(const ReportData &data);
[[nodiscard]] QByteArray reportCsvRanks(const ReportData &data);
[[nodiscard]] QJsonObject reportJson(const ReportData &data);

/// A double exactly: the shortest decimal that reads back to the same bits (what the store's JSON
/// export writes). Empty for nullopt.
[[nodiscard]] QString exactNumber(double value);
[[nodiscard]] QString exactNumber(const std::optional<double> &value);
/// A display figure: @p digits significant digits, no exponent for ordinary magnitudes.
[[nodiscard]] QString displayNumber(double value, int digits = 4);

/// Fraction of a rank's own time spent waiting / transferring (0 when it has no time).
[[nodiscard]] double waitShare(const history::RankSummary &r);
[[nodiscard]] double transferShare(const history::RankSummary &r);

} // namespace cppl::core::report
