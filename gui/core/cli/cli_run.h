// SPDX-License-Identifier: MIT
#pragma once

#include <QStringList>

class QTextStream;

namespace cppl::core {

namespace telemetry {
struct Snapshot;
}

/// @brief The run's live view as `run` prints it to stderr: one line per rank while they are at
/// most 16, then the global line (windows done of the run's). Empty before any token is scored.
[[nodiscard]] QStringList liveLines(const telemetry::Snapshot &snap);

/// @brief `clusterppl-cli run ...` (arguments after "run"): a text view of run::RunEngine. Returns
/// CliExit (cli/exit_codes.h, docs/exit-codes.md).
int cliRun(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
