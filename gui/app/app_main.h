// SPDX-License-Identifier: MIT
#pragma once

#include <QSize>
#include <QString>

class QTextStream;

namespace cppl::app {

class MainWindow;

/// What the dashboard's command line asked for (clusterppl --help lists the options).
struct AppOptions
{
    bool screenshot = false;    ///< --screenshot DIR: render the pages offscreen and exit
    QString screenshotDir;
    int syntheticRanks = 0;     ///< --synthetic-ranks N (with --screenshot); 0: none
    QSize size{1500, 940};      ///< --size WxH (with --screenshot), logical pixels
    QString profile;            ///< --profile FILE; empty: the last one, or the embedded default
    bool run = false;           ///< --run: start the profile's run at once (with --screenshot: capture it)
    QString agent;              ///< --agent PATH for every host; empty: the profile's
    int runTimeoutSeconds = 600; ///< --run-timeout S (with --screenshot --run)
};

/// What `--screenshot` does: the executable passes it in from clusterppl_app_fixtures (synthetic
/// runs and histories, offscreen rendering), so the product library holds none of it. Called with
/// the QApplication made, the theme applied and the options checked; returns an AppExit.
using ScreenshotCommand = int (*)(const AppOptions &options, QTextStream &out, QTextStream &err);

/// The dashboard's main(): options, the application, the window; `--screenshot` through
/// @p screenshots. Returns an AppExit (app_exit_codes.h).
int appMain(int argc, char **argv, ScreenshotCommand screenshots);

/// The window's profile as @p options say: --profile (false, the reason in the window's message
/// bar, when it cannot be opened), else the last one or the embedded default.
bool openStartupProfile(MainWindow &window, const AppOptions &options);

} // namespace cppl::app
