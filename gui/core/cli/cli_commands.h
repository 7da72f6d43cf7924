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

/// @brief Runs `clusterppl-cli ARGS...` (arguments without the program name).
int cliMain(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
