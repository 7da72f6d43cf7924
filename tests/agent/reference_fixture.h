// SPDX-License-Identifier: MIT
// Runs the Python reference tools (tests/agent/reference, Debian's PyTorch) and the agent binary.
#pragma once

#include "test_process.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <QStringList>

namespace cppl::test {

/// Debian's /usr/bin/python3 with python3-torch (scripts/install-deps.sh installs it).
inline ProcessResult runReference(const QString &script, const QStringList &args)
{
    return runProcess(QStringLiteral("/usr/bin/python3"),
                      QStringList{QStringLiteral(CPPL_SOURCE_DIR "/tests/agent/reference/") + script} + args);
}

inline ProcessResult runAgent(const QStringList &args)
{
    return runProcess(QStringLiteral(CPPL_AGENT_EXE), args);
}

inline QJsonObject readJson(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

} // namespace cppl::test
