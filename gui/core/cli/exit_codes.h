// SPDX-License-Identifier: MIT
#pragma once

// clusterppl-cli's exit codes: the one table (docs/exit-codes.md). Every command returns these, and
// so does the run engine's outcome (run::RunOutcome::exitCode), which `run`, `check` and `sweep`
// return and the dashboard shows. Distinct from the agents' codes (0-6, agent/lib/exit_codes.h),
// so a script can tell "the CLI was called wrongly" (2) from "a rank was called wrongly" (12, with
// the agent's 2 and its message in the summary).

namespace cppl::core {

enum CliExit : int {
    kCliOk = 0,
    kCliFailed = 1,            ///< the operation ran and failed (anything not listed below)
    kCliBadArguments = 2,      ///< unknown command or flag, a value out of range, an invalid profile or hostfile
    kCliIoError = 3,           ///< a file could not be read or written (profile, --json), or the run history not opened
    kCliUnknownRun = 4,        ///< history commands (show, compare, delete, export, report): no run of that id
    kCliPreflightRefused = 10, ///< run, check: pre-flight refused the launch
    kCliLaunchFailed = 11,     ///< run: a host could not be reached, its key refused, auth failed, agent missing
    kCliRankFailed = 12,       ///< run: a rank exited non-zero (its own code and cause are in the message)
    kCliRankTimeout = 13,      ///< run: a rank stopped answering (agent exit 6, or killed after a stall)
    kCliResultMismatch = 14,   ///< run: no result from rank 0, or the live exact merge differs from it
    kCliStopped = 130,         ///< run: stopped (SIGINT, SIGTERM, SIGHUP, or Stop in the dashboard)
};

} // namespace cppl::core
