// SPDX-License-Identifier: MIT
#pragma once

// The dashboard's exit codes: the one table (docs/exit-codes.md, "clusterppl"). A run started in
// the window never decides them: its outcome is shown, with the CLI's codes (cli/exit_codes.h).

namespace cppl::app {

enum AppExit : int {
    kAppOk = 0,            ///< the window was closed; --screenshot wrote its files; --help, --version
    kAppCaptureFailed = 1, ///< --screenshot --run: the run could not be captured
    kAppBadArguments = 2,  ///< a flag value out of range, or no display to open the window on
    kAppIoError = 3,       ///< --screenshot: a profile or the temporary run history not opened, or a file not written
};

} // namespace cppl::app
