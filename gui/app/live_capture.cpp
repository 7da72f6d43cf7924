// SPDX-License-Identifier: MIT
#include "live_capture.h"

#include "main_window.h"
#include "run_page.h"

#include <QDir>
#include <QEventLoop>
#include <QPixmap>
#include <QTimer>

using namespace Qt::StringLiterals;
using cppl::core::run::RunEngine;
using cppl::core::run::RunOutcome;

namespace cppl::app {

QStringList captureLiveRun(MainWindow &window, const QString &directory, int timeoutSeconds, QString *error)
{
    auto fail = [error](const QString &why) {
        if (error)
            *error = why;
        return QStringList();
    };
    if (!QDir().mkpath(directory))
        return fail(QObject::tr("%1: cannot create the directory").arg(directory));
    const QDir dir(directory);
    QStringList files;
    QString saveError;
    auto grabTo = [&](MainWindow::Page page, const QString &name) {
        window.showPage(page);
        const QPixmap pm = window.grab();
        const QString path = dir.filePath(name);
        if (pm.isNull() || !pm.save(path, "PNG"))
            saveError = QObject::tr("%1: cannot write the screenshot").arg(path);
        else
            files << path;
    };
    window.show();
    window.showPage(MainWindow::RunPageIndex);
    if (!window.startRun())
        return fail(QObject::tr("the run did not start (the window's message bar says why)"));
    RunEngine *engine = window.engine();
    if (!engine)
        return fail(QObject::tr("the run did not start"));

    QEventLoop loop;
    bool liveTaken = false;
    bool timedOut = false;
    RunOutcome outcome;
    // Mid-run: the first snapshot at or past half of the windows (the page has drawn it by the
    // time the queued grab runs).
    QObject::connect(engine, &RunEngine::snapshotReady, &loop, [&](const cppl::core::telemetry::SnapshotPtr &snap) {
        if (liveTaken || !snap || snap->windowsTotal <= 0 || 2 * snap->windowsDone < snap->windowsTotal)
            return;
        liveTaken = true;
        QTimer::singleShot(0, &loop, [&] { grabTo(MainWindow::RunPageIndex, u"run-live.png"_s); });
    });
    QObject::connect(&window, &MainWindow::runFinished, &loop, [&](const RunOutcome &o) {
        outcome = o;
        loop.quit();
    });
    QTimer::singleShot(timeoutSeconds * 1000, &loop, [&] {
        timedOut = true;
        window.stopRun();
    });
    loop.exec();
    if (timedOut)
        return fail(QObject::tr("the run took longer than %1 s and was stopped").arg(timeoutSeconds));
    grabTo(MainWindow::RunPageIndex, u"run-finished.png"_s);
    grabTo(MainWindow::ClusterPageIndex, u"cluster.png"_s);
    grabTo(MainWindow::EvaluationPageIndex, u"evaluation.png"_s);
    window.showPage(MainWindow::RunPageIndex);
    if (!saveError.isEmpty())
        return fail(saveError);
    if (outcome.exitCode != 0)
        return fail(QObject::tr("the run failed: %1").arg(outcome.firstCause));
    return files;
}

} // namespace cppl::app
