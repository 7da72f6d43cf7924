// SPDX-License-Identifier: MIT
#pragma once

#include "cli/exit_codes.h"

#include <QStringList>

class QTextStream;

namespace cppl::core {

/// A command linked into the executable beyond clusterppl_core (`report` needs QtGui); the
/// arguments start with the command's name.
using CliCommand = int (*)(const QStringList &arguments, QTextStream &out, QTextStream &err);
/// Makes cliMain() dispatch @p name to @p handler (main() registers `report`).
void registerCliCommand(const QString &name, CliCommand handler);

/// @brief Runs `clusterppl-cli ARGS...` (arguments without the program name).
int cliMain(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
