// SPDX-License-Identifier: MIT
#pragma once

#include <QStringList>

namespace cppl::app {

class MainWindow;

/**
 * Runs the window's current profile for real (the same RunEngine the Run button starts) and grabs
 * the Run page once about half the windows are done ("run-live.png") and once the run has ended
 * ("run-finished.png"), plus the Cluster page with its pre-flight and the Evaluation page. Used by
 * `clusterppl --screenshot DIR --run` and scripts/demo.sh without a display. Returns the files;
 * an empty list with @p error set when the run could not start, failed, or took longer than
 * @p timeoutSeconds (the run is stopped then).
 */
QStringList captureLiveRun(MainWindow &window, const QString &directory, int timeoutSeconds, QString *error);

} // namespace cppl::app
