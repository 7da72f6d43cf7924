// SPDX-License-Identifier: MIT
#pragma once

#include <QStringList>

class QTextStream;

namespace cppl::core {

/// Exit codes of clusterppl-cli (docs/exit-codes.md).
enum CliExit : int {
    kCliOk = 0,
    kCliFailed = 1,       ///< the operation ran and failed (a run, a check with findings)
    kCliBadArguments = 2, ///< unknown command/flag, invalid profile or hostfile
    kCliIoError = 3,      ///< a file could not be read or written
};

/// A command linked into the executable beyond clusterppl_core (`report` needs QtGui); the
/// arguments start with the command's name.
using CliCommand = int (*)(const QStringList &arguments, QTextStream &out, QTextStream &err);
/// Makes cliMain() dispatch @p name to @p handler (main() registers `report`).
void registerCliCommand(const QString &name, CliCommand handler);

/// @brief Runs `clusterppl-cli ARGS...` (arguments without the program name).
int cliMain(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
