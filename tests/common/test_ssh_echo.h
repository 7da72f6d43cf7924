// SPDX-License-Identifier: MIT
// One rank of `echo ok` on host node1 through the SSH launcher library (launch/launcher.h), for the
// tests that drive it against the test sshd (test_sshd.h): host keys, passphrases, the dashboard's
// prompter.
#pragma once

#include "launch/launch_plan.h"
#include "launch/launcher.h"

#include <QEventLoop>
#include <QStringList>
#include <QTimer>

#include <string>

namespace cppl::test {

struct SshEcho
{
    QStringList out;        // the rank's lines, stdout and stderr
    QStringList notices;    // the launcher's own lines (rank -1)
    QStringList hostErrors; // hostFailed messages
    int exitCode = -99;
};

/// Runs `/bin/sh -c 'echo ok'` as one rank on node1 with @p settings (and @p identity as the
/// host's identity file when given), waiting up to a minute with an event loop running, so that
/// callbacks queued to this thread (the dashboard's prompter) are answered.
inline SshEcho runEchoOnNode1(const cppl::core::LauncherSettings &settings, const std::string &identity = {})
{
    cppl::core::LaunchPlan plan;
    plan.launcher = "ssh";
    cppl::core::RankCommand c;
    c.hostName = "node1";
    c.address = "node1";
    c.ssh.alias = "node1";
    c.ssh.identityFile = identity;
    c.argv = {"/bin/sh", "-c", "echo ok"};
    plan.ranks.push_back(c);
    auto launcher = cppl::core::makeSshLauncher(settings);
    SshEcho o;
    QEventLoop loop;
    QObject::connect(launcher.get(), &cppl::core::Launcher::rankOutput, launcher.get(),
                     [&](int rank, bool, const QString &line) { (rank < 0 ? o.notices : o.out) << line; });
    QObject::connect(launcher.get(), &cppl::core::Launcher::hostFailed, launcher.get(),
                     [&](const QString &, const QString &m) { o.hostErrors << m; });
    QObject::connect(launcher.get(), &cppl::core::Launcher::finished, &loop, &QEventLoop::quit);
    QTimer::singleShot(60000, &loop, &QEventLoop::quit);
    launcher->start(plan);
    if (!launcher->isFinished())
        loop.exec();
    o.exitCode = launcher->exitCode();
    return o;
}

} // namespace cppl::test
