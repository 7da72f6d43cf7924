// SPDX-License-Identifier: MIT
#pragma once

#include <QStringList>

class QTextStream;

namespace cppl::core {

/// @brief `clusterppl-cli run ...` (arguments after "run"): a text view of run::RunEngine. Returns
/// run::RunExit (docs/exit-codes.md).
int cliRun(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
