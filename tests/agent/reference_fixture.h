// SPDX-License-Identifier: MIT
// Runs the Python reference tools (tests/agent/reference, Debian's PyTorch) and the agent binary.
#pragma once

#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>
#include <QStringList>

namespace cppl::test {

struct ProcessResult
{
    int exitCode = -1;
    QString out;
    QString err;
    [[nodiscard]] QString describe() const { return QStringLiteral("exit %1\nstdout: %2\nstderr: %3").arg(exitCode).arg(out, err); }
};

inline ProcessResult runProcess(const QString &program, const QStringList &args, int timeoutMs = 180000)
{
    QProcess p;
    p.start(program, args);
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished();
        return {-1, QString(), QStringLiteral("timed out: ") + program + QLatin1Char(' ') + args.join(QLatin1Char(' '))};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

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
