// SPDX-License-Identifier: MIT
#pragma once

// The run history on the command line: list, show, compare, delete, export, import, sweep
// (docs/run-history.md), and the hook that makes `run` record into the history.

#include <QString>
#include <QStringList>

#include <memory>

class QTextStream;

namespace cppl::core::run {
class RunEngine;
struct RunRequest;
} // namespace cppl::core::run

namespace cppl::core {

/// True for the commands cliHistory() handles.
[[nodiscard]] bool isHistoryCommand(const QString &command);
/// `clusterppl-cli COMMAND ARGS...` for the history commands (arguments start with the command).
int cliHistory(const QStringList &arguments, QTextStream &out, QTextStream &err);

/// RunHistory::defaultPath(), after RunHistory::adoptEarlierStores() (its lines on @p err).
[[nodiscard]] QString defaultHistoryPath(QTextStream &err);

/// What `run` keeps alive while it records: the history and the recorder attached to the engine.
struct RunRecording;
struct RunRecordingDeleter
{
    void operator()(RunRecording *r) const;
};
using RunRecordingPtr = std::unique_ptr<RunRecording, RunRecordingDeleter>;

/// For `run`: opens the history (a run id it already holds is recorded as ID.2, ID.3, ...), attaches
/// a recorder to @p engine, gives @p request a run id and, when it has none, the stored one-rank
/// baseline of the same settings. A store that cannot be opened is a warning on @p err, not a
/// refusal: the run goes ahead unrecorded.
RunRecordingPtr recordRun(run::RunEngine &engine, run::RunRequest &request, QTextStream &err, QString *refusal);

} // namespace cppl::core
