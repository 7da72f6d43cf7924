// SPDX-License-Identifier: MIT
// Runs the Python reference tools (tests/agent/reference, Debian's PyTorch) and the agent binary.
#pragma once

#include "test_paths.h"
#include "test_process.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>

#include <memory>
#include <optional>

namespace cppl::test {

/// How long one reference or agent process may take: the float64 reference loops over a
/// 50257-word vocabulary take minutes when the 2 cores are shared; the test's CTest TIMEOUT still
/// bounds the whole test.
inline constexpr int kProcessTimeoutMs = 600000;

namespace detail {

/// tests/agent/reference/fork_server.py for this test process: the reference tools run in forks
/// of one Python that imported PyTorch once (the import is nearly all of each tool's time). Null
/// when it could not start; runReference then starts each tool itself.
class ReferenceServer
{
public:
    static ReferenceServer *instance()
    {
        static std::unique_ptr<ReferenceServer> server = start();
        return server && server->m_process.state() == QProcess::Running ? server.get() : nullptr;
    }

    /// The tool's run, or nothing when the server failed (it is then closed, and the caller runs the tool itself).
    std::optional<ProcessResult> run(const QStringList &argv, int timeoutMs)
    {
        const QString out = m_dir.filePath(QStringLiteral("out")), err = m_dir.filePath(QStringLiteral("err"));
        QJsonObject env;
        const QProcessEnvironment system = QProcessEnvironment::systemEnvironment();
        for (const QString &name : system.keys())
            env.insert(name, system.value(name));
        const QJsonObject request{{QStringLiteral("argv"), QJsonArray::fromStringList(argv)}, {QStringLiteral("cwd"), QDir::currentPath()},
                                  {QStringLiteral("env"), env}, {QStringLiteral("out"), out}, {QStringLiteral("err"), err}};
        m_process.write(QJsonDocument(request).toJson(QJsonDocument::Compact) + '\n');
        QElapsedTimer clock;
        clock.start();
        while (!m_process.canReadLine()) {
            if (m_process.state() != QProcess::Running || clock.elapsed() > timeoutMs) {
                m_process.kill(); // its fork dies with it (PR_SET_PDEATHSIG)
                m_process.waitForFinished(5000);
                if (clock.elapsed() > timeoutMs)
                    return ProcessResult{-1, readAll(out), readAll(err)};
                return std::nullopt;
            }
            m_process.waitForReadyRead(100);
        }
        const QJsonObject reply = QJsonDocument::fromJson(m_process.readLine()).object();
        const int rc = reply.value(QStringLiteral("rc")).toInt(-2);
        return ProcessResult{rc < 0 ? -2 : rc, readAll(out), readAll(err)};
    }

private:
    static std::unique_ptr<ReferenceServer> start()
    {
        auto s = std::make_unique<ReferenceServer>();
        s->m_process.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        s->m_process.start(QStringLiteral("/usr/bin/python3"), {QStringLiteral("-u"), QStringLiteral(CPPL_SOURCE_DIR "/tests/agent/reference/fork_server.py")});
        if (!s->m_dir.isValid() || !s->m_process.waitForStarted(30000))
            return nullptr;
        // Closed before QCoreApplication goes: EOF on its stdin ends the server.
        qAddPostRoutine([] {
            if (ReferenceServer *server = instance()) {
                server->m_process.closeWriteChannel();
                if (!server->m_process.waitForFinished(10000))
                    server->m_process.kill();
                server->m_process.waitForFinished(5000);
            }
        });
        return s;
    }

    static QString readAll(const QString &path)
    {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
    }

    QProcess m_process;
    QTemporaryDir m_dir;
};

} // namespace detail

/// Debian's /usr/bin/python3 with python3-torch (scripts/install-deps.sh installs it): the tool
/// as `python3 SCRIPT ARGS` runs it, through the test process's ReferenceServer where it runs.
inline ProcessResult runReference(const QString &script, const QStringList &args)
{
    const QStringList argv = QStringList{QStringLiteral(CPPL_SOURCE_DIR "/tests/agent/reference/") + script} + args;
    if (detail::ReferenceServer *server = detail::ReferenceServer::instance())
        if (std::optional<ProcessResult> r = server->run(argv, kProcessTimeoutMs))
            return *r;
    return runProcess(QStringLiteral("/usr/bin/python3"), argv, kProcessTimeoutMs);
}

inline ProcessResult runAgent(const QStringList &args)
{
    return runProcess(cppl::test::kAgent, args, kProcessTimeoutMs);
}

} // namespace cppl::test
