// SPDX-License-Identifier: MIT
#include "cli/cli_commands.h"

#include <QCoreApplication>
#include <QTextStream>

#include <cstdio>

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("clusterppl-cli"));
    QTextStream out(stdout);
    QTextStream err(stderr);
    return cppl::core::cliMain(QCoreApplication::arguments().mid(1), out, err);
}
