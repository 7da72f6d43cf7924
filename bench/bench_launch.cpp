// SPDX-License-Identifier: MIT
// How long the SSH launcher takes to get N ranks running: from start() to each rank's first line
// of output, through a real sshd (bench/launch_speed.sh starts one on 127.0.0.1).
//   bench_launch --ssh-config FILE --known-hosts FILE [--ranks 32] [--hosts 4]
#include "launch/launcher.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QTimer>

#include <algorithm>
#include <cstdio>
#include <vector>

using namespace cppl::core;

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    const QStringList args = app.arguments();
    auto value = [&](const QString &flag, const QString &fallback) {
        const auto i = args.indexOf(flag);
        return i >= 0 && i + 1 < args.size() ? args[i + 1] : fallback;
    };
    const int ranks = value(QStringLiteral("--ranks"), QStringLiteral("32")).toInt();
    const int hosts = std::max(1, value(QStringLiteral("--hosts"), QStringLiteral("4")).toInt());
    LauncherSettings settings;
    settings.sshConfigFile = value(QStringLiteral("--ssh-config"), QString()).toStdString();
    settings.knownHostsFile = value(QStringLiteral("--known-hosts"), QString()).toStdString();
    settings.newHostKeys = NewHostKeys::Accept;
    LaunchPlan plan;
    plan.launcher = "ssh";
    for (int r = 0; r < ranks; ++r) {
        RankCommand c;
        c.rank = r;
        c.hostIndex = r % hosts;
        c.hostName = "node" + std::to_string(c.hostIndex + 1);
        c.address = c.hostName;
        c.ssh.alias = c.hostName;
        c.env = {{"RANK", std::to_string(r)}};
        c.argv = {"/bin/sh", "-c", "echo up; sleep 1"};
        plan.ranks.push_back(c);
    }
    auto launcher = makeSshLauncher(settings);
    std::vector<double> upAt(static_cast<std::size_t>(ranks), -1);
    QElapsedTimer clock;
    QObject::connect(launcher.get(), &Launcher::rankOutput, [&](int rank, bool isStderr, const QString &line) {
        if (rank >= 0 && !isStderr && line == QLatin1String("up") && upAt[static_cast<std::size_t>(rank)] < 0)
            upAt[static_cast<std::size_t>(rank)] = static_cast<double>(clock.nsecsElapsed()) * 1e-9;
    });
    QObject::connect(launcher.get(), &Launcher::hostFailed, [](const QString &h, const QString &m) {
        std::fprintf(stderr, "host %s: %s\n", qPrintable(h), qPrintable(m));
    });
    QObject::connect(launcher.get(), &Launcher::finished, &app, &QCoreApplication::quit);
    QTimer::singleShot(0, [&] {
        clock.start();
        launcher->start(plan);
    });
    app.exec();
    std::vector<double> t;
    for (double x : upAt)
        if (x >= 0)
            t.push_back(x);
    std::sort(t.begin(), t.end());
    if (t.empty()) {
        std::printf("no rank started\n");
        return 1;
    }
    auto q = [&](double p) { return t[std::min(t.size() - 1, static_cast<std::size_t>(p * static_cast<double>(t.size())))]; };
    std::printf("%d ranks over %d SSH hosts (one session and thread per host): %zu running; first %.3f s, median %.3f s, "
                "p90 %.3f s, all %.3f s (goal < 3 s)\n",
                ranks, hosts, t.size(), t.front(), q(0.5), q(0.9), t.back());
    return t.size() == static_cast<std::size_t>(ranks) ? 0 : 1;
}
