// SPDX-License-Identifier: MIT
#pragma once

// Whether a stored run can be resumed (docs/communication.md, "Resuming a run"), read from its run
// directory as `clusterppl-cli run --resume` reads it: the History page's status and Resume button,
// and the run detail, say what the CLI would.

#include "run/run_directory.h"
#include "history/run_record.h"

#include <QString>

#include <optional>

namespace cppl::app {

/// The run directory a stored run used: the recorder's settings.run_directory, else (runs recorded
/// before it was kept) the default place of its run id.
[[nodiscard]] QString runDirectoryOf(const cppl::core::history::RunRecord &run);

struct ResumeState
{
    enum class Kind {
        None,      ///< nothing to say: running, finished in the history, or an imported run without a directory
        Resumable, ///< a committed round, no result: Resume finishes it
        Resumed,   ///< the directory holds a result: finished later by a resume
        Refused,   ///< stopped, failed or interrupted, but the CLI would refuse (text says why)
    };
    Kind kind = Kind::None;
    /// Resumable: "stopped after round 3 (12 of 40 global batches), resumable"; Refused and
    /// Resumed: the CLI's refusal without its "--resume RUN: " prefix.
    QString text;
    std::optional<cppl::core::run::ResumeSource> source; ///< Resumable only
};

/// Reads the run directory of @p run (status Interrupted, Stopped or Failed; None otherwise).
[[nodiscard]] ResumeState resumeStateOf(const cppl::core::history::RunRecord &run);

/// loadResumeSource() of @p directory, with its error as the CLI words it minus the "--resume DIR: " prefix.
[[nodiscard]] std::optional<cppl::core::run::ResumeSource> loadResumeFrom(const QString &directory, QString *error);

/// "stopped after round N (B of M global batches), resumable".
[[nodiscard]] QString resumeProgressText(const cppl::core::run::ResumeSource &source);

} // namespace cppl::app
