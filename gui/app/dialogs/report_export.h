// SPDX-License-Identifier: MIT
#pragma once

// Exporting a report from the dashboard (Compare, History, a stored run's detail, the Run menu):
// where to write it, in which format, and writing it as `clusterppl-cli report` does.

#include "report/report.h"

#include <QString>
#include <QStringList>

#include <functional>
#include <optional>

class QWidget;

namespace cppl::app {

struct ReportTarget
{
    QString path;
    QString format; ///< pdf, html, csv or json
};

/// The format of @p path from its suffix (".htm" is html); empty when the suffix names none.
[[nodiscard]] QString reportFormatOf(const QString &path);

/**
 * Asks where to save a report, starting at @p suggestedName in the last folder a report went to.
 * A name without a known suffix gets the one of the file type chosen ("scaling" with PDF chosen
 * becomes "scaling.pdf"). Empty when the user cancels.
 */
[[nodiscard]] std::optional<ReportTarget> askReportTarget(QWidget *parent, const QString &title, const QString &suggestedName);

/**
 * Builds the report with @p make (which may throw cppl::Error, e.g. a run no longer stored) and
 * writes it to @p path in @p format. Returns the files written (CSV: two); empty with *error
 * naming the file and the cause.
 */
QStringList writeReportTo(const std::function<cppl::core::report::ReportData()> &make, const QString &path, const QString &format,
                          QString *error);

} // namespace cppl::app
