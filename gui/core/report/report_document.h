// SPDX-License-Identifier: MIT
#pragma once

// A report as a list of blocks (headings, paragraphs, tables, charts) built once from ReportData;
// the PDF and HTML writers only lay the blocks out, so both show the same figures.

#include "report/report.h"

#include <vector>

namespace cppl::core::report {

struct Cell
{
    QString text;         ///< as displayed (rounded for figures)
    QString exact;        ///< the stored value exactly (exactNumber / integer), empty for text cells
    bool numeric = false; ///< right-aligned
};

struct Table
{
    QStringList header;
    std::vector<std::vector<Cell>> rows;
    std::vector<double> widths; ///< relative column widths (PDF)
};

struct Block
{
    enum class Kind { Title, Heading, Subheading, Paragraph, Note, KeyValues, Table, Chart, Alert };
    Kind kind = Kind::Paragraph;
    QString text;
    QString cssClass;           ///< HTML: "ok", "warn" for highlighted paragraphs
    Table table;                ///< Table; KeyValues as two columns
    int runIndex = -1;          ///< Chart: the run (-1: the comparison)
    QString chartId;            ///< Chart: ReportChart::id
};

/// Per-rank tables list every rank up to this many; beyond, a summary and the slowest and the
/// fastest kRankExtremes ranks.
inline constexpr int kFullRankTable = 128;
inline constexpr int kRankExtremes = 20;

[[nodiscard]] std::vector<Block> buildDocument(const ReportData &data);
/// The report's title line.
[[nodiscard]] QString reportTitle(const ReportData &data);

} // namespace cppl::core::report
