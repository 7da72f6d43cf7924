// SPDX-License-Identifier: MIT
// Runs the Python reference tools (tests/agent/reference, Debian's PyTorch) and the agent binary.
#pragma once

#include "test_paths.h"
#include "test_process.h"

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>
#include <QStringList>

namespace cppl::test {

/// How long one reference or agent process may take: the float64 reference loops over a
/// 50257-word vocabulary take minutes when the 2 cores are shared; the test's CTest TIMEOUT still
/// bounds the whole test.
inline constexpr int kProcessTimeoutMs = 600000;

/// Debian's /usr/bin/python3 with python3-torch (scripts/install-deps.sh installs it).
inline ProcessResult runReference(const QString &script, const QStringList &args)
{
    return runProcess(QStringLiteral("/usr/bin/python3"),
                      QStringList{QStringLiteral(CPPL_SOURCE_DIR "/tests/agent/reference/") + script} + args, kProcessTimeoutMs);
}

inline ProcessResult runAgent(const QStringList &args)
{
    return runProcess(cppl::test::kAgent, args, kProcessTimeoutMs);
}

} // namespace cppl::test
