// SPDX-License-Identifier: MIT
#pragma once

// `clusterppl-cli report RUN... --format pdf|html|csv|json -o PATH` (docs/reports.md). Lives in
// clusterppl_report (QtGui): clusterppl-cli's main() registers it with cliMain().

#include <QStringList>

class QTextStream;

namespace cppl::core {

/// @p arguments start with "report". Rendering formats need a QGuiApplication (offscreen is fine).
int cliReport(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
