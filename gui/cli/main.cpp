// SPDX-License-Identifier: MIT
#include "cli/cli_commands.h"
#include "cli/cli_report.h"

#include <QCoreApplication>
#include <QGuiApplication>
#include <QTextStream>

#include <cstdio>
#include <cstring>
#include <memory>

int main(int argc, char **argv)
{
    // `report` paints charts and text (QtGui); no display is needed: the offscreen platform
    // unless the user chose one. Every other command stays a plain QCoreApplication.
    const bool gui = argc > 1 && std::strcmp(argv[1], "report") == 0;
    if (gui && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");
    std::unique_ptr<QCoreApplication> app = gui ? std::make_unique<QGuiApplication>(argc, argv) : std::make_unique<QCoreApplication>(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("clusterppl-cli"));
    cppl::core::registerCliCommand(QStringLiteral("report"), &cppl::core::cliReport);
    QTextStream out(stdout);
    QTextStream err(stderr);
    return cppl::core::cliMain(QCoreApplication::arguments().mid(1), out, err);
}
