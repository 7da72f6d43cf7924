// SPDX-License-Identifier: MIT
// Runs a real program the way a user would, and keeps what it said.
#pragma once

#include "cppl/agent_lines.h"

#include <QByteArray>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QList>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QThread>

#include <algorithm>
#include <cstdint>
#include <random>

#include <signal.h>

namespace cppl::test {

struct ProcessResult
{
    int exitCode = -1; ///< -1: timed out, -2: crashed
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

/// The whole file, or nothing when it cannot be read.
inline QByteArray readFile(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

/// @p n token ids drawn below @p vocab (std::mt19937 seeded with @p seed) written to @p path as a
/// uint32 token file (`--tokens`); returns @p path.
inline QString writeRandomTokens(const QString &path, int n, int vocab, unsigned seed)
{
    std::mt19937 rng(seed);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        return path; // the agent then names the unreadable file
    for (int i = 0; i < n; ++i) {
        const auto id = static_cast<std::uint32_t>(rng() % static_cast<std::uint32_t>(vocab));
        f.write(reinterpret_cast<const char *>(&id), 4);
    }
    return path;
}

/// The JSON object in @p path; empty when it cannot be read or is no object.
inline QJsonObject readJson(const QString &path)
{
    return QJsonDocument::fromJson(readFile(path)).object();
}

/// Replaces @p path with @p data; false when it cannot be written whole.
inline bool writeFile(const QString &path, const QByteArray &data)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(data) == data.size();
}

/// Starts `@p agent store @p args` in @p p and waits up to 30 s for its store line (docs/agent-lines.md); the
/// port it serves, or 0 when it did not start, never said so, or exited. @p out keeps its stdout.
inline int startStore(QProcess &p, const QString &agent, const QStringList &args, QByteArray &out)
{
    p.start(agent, QStringList{QStringLiteral("store")} + args);
    if (!p.waitForStarted())
        return 0;
    QElapsedTimer t;
    t.start();
    while (!out.contains('\n') && p.state() == QProcess::Running && t.elapsed() < 30000)
        if (p.waitForReadyRead(200))
            out += p.readAllStandardOutput();
    const cppl::lines::Decoded d = cppl::lines::decode(out.left(out.indexOf('\n')).toStdString());
    const auto *ready = std::get_if<cppl::lines::StoreReady>(&d.event);
    return d.ok() && ready ? ready->port : 0;
}

/// Whether @p pid is a live process (a zombie has exited already; its parent has not reaped it yet).
inline bool isRunning(qint64 pid)
{
    const QByteArray stat = readFile(QStringLiteral("/proc/%1/stat").arg(pid));
    const qsizetype close = stat.lastIndexOf(')');
    return close > 0 && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

/// The live processes (zombies have exited already) whose environment carries CLUSTERPPL_RUN_ID=@p id,
/// @p extra too when given (e.g. "RANK=2"), and whose argv[1] is @p command when given ("eval",
/// "store"): a run's processes wherever they were started. Ascending.
///
/// /proc is read twice, 5 ms apart, and the two readings united: a process inside execve() (an
/// agent's front becoming its LibTorch half, `clusterppl-agent eval` -> `clusterppl-agent-torch
/// eval`, right after it starts) shows an empty environment and command line for that instant, so
/// a single reading can miss one rank of four it saw a moment before (two CI rehearsals did).
inline QList<qint64> processesOfRun(const QString &id, const QByteArray &command = {}, const QByteArray &extra = {})
{
    const QByteArray needle = "CLUSTERPPL_RUN_ID=" + id.toUtf8();
    QList<qint64> seen;
    for (int reading = 0; reading < 2; ++reading) {
        if (reading > 0)
            QThread::msleep(5);
        for (const QString &e : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
            bool ok = false;
            const qint64 pid = e.toLongLong(&ok);
            if (!ok || seen.contains(pid))
                continue;
            const QList<QByteArray> env = readFile(QStringLiteral("/proc/%1/environ").arg(pid)).split('\0');
            if (!env.contains(needle) || (!extra.isEmpty() && !env.contains(extra)))
                continue;
            if (!command.isEmpty() && readFile(QStringLiteral("/proc/%1/cmdline").arg(pid)).split('\0').value(1) != command)
                continue;
            seen << pid;
        }
    }
    QList<qint64> out;
    for (const qint64 pid : seen)
        if (isRunning(pid)) // one that ended between the readings is gone
            out << pid;
    std::sort(out.begin(), out.end());
    return out;
}

/// Every process of run @p id (processesOfRun), with @p extra in its environment when given.
inline QList<qint64> agentsOfRun(const QString &id, const QByteArray &extra = {})
{
    return processesOfRun(id, {}, extra);
}

/// The ranks among agentsOfRun(@p id, @p extra): the `clusterppl-agent eval` processes. A run that
/// goes on after a lost rank (on_rank_loss continue, the default with the dynamic schedule) also has
/// a `clusterppl-agent store` process carrying the run id, which agentsOfRun counts too.
inline QList<qint64> ranksOfRun(const QString &id, const QByteArray &extra = {})
{
    return processesOfRun(id, "eval", extra);
}

/// Child processes of @p parent (e.g. a launcher's ranks), from /proc/PID/stat. Ascending.
inline QList<qint64> childrenOf(qint64 parent)
{
    QList<qint64> out;
    for (const QString &e : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
        bool ok = false;
        const qint64 pid = e.toLongLong(&ok);
        if (!ok)
            continue;
        const QByteArray stat = readFile(QStringLiteral("/proc/%1/stat").arg(pid));
        const QList<QByteArray> f = stat.mid(stat.lastIndexOf(')') + 2).split(' ');
        if (f.size() > 1 && f[1].toLongLong() == parent)
            out << pid;
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// A launcher's ranks, indexed by rank (the RANK= in each child's /proc/PID/environ): pids are not
/// in rank order once they wrap at pid_max (32768 on some hosts), so sorting them is not enough.
/// Only ranks 0..k-1 that have exec'd; fewer than the world while they start.
inline QList<qint64> ranksOf(qint64 launcher)
{
    QList<qint64> byRank;
    for (const qint64 pid : childrenOf(launcher))
        for (const QByteArray &kv : readFile(QStringLiteral("/proc/%1/environ").arg(pid)).split('\0'))
            if (kv.startsWith("RANK=")) {
                bool ok = false;
                const int r = kv.mid(5).toInt(&ok);
                if (ok && r >= 0 && r < 4096) {
                    while (byRank.size() <= r)
                        byRank << 0;
                    byRank[r] = pid;
                }
            }
    const qsizetype known = std::find(byRank.begin(), byRank.end(), qint64(0)) - byRank.begin();
    return byRank.mid(0, known);
}

/// The agents of run @p runId that this test started through a local launcher: they inherited its
/// XDG_STATE_HOME (a temporary directory of its own). The same test run at the same time from
/// another checkout uses the same run ids; its agents are not this test's to kill.
inline QList<qint64> ownAgentsOfRun(const QString &runId)
{
    const QByteArray state = qgetenv("XDG_STATE_HOME");
    return agentsOfRun(runId, state.isEmpty() ? QByteArray() : "XDG_STATE_HOME=" + state);
}

/// Kills @p cli (a local `clusterppl-cli run`) and every agent of run @p runId it started with
/// SIGKILL at once, as a power loss would, and waits up to 10 s for the agents to be gone: true
/// when none is left.
inline bool killRun(QProcess &cli, const QString &runId)
{
    if (const qint64 pid = cli.processId(); pid > 0) // 0 once it ended: kill(0) would hit this test's process group
        ::kill(static_cast<pid_t>(pid), SIGKILL);
    for (const qint64 pid : ownAgentsOfRun(runId))
        ::kill(static_cast<pid_t>(pid), SIGKILL);
    cli.waitForFinished(10000);
    QElapsedTimer t;
    t.start();
    while (!ownAgentsOfRun(runId).isEmpty() && t.elapsed() < 10000)
        QThread::msleep(50);
    return ownAgentsOfRun(runId).isEmpty();
}

/// ranksOf(@p launcher) once it has @p n ranks, polled every 100 ms for at most @p timeoutMs
/// (fewer when time ran out): a launcher's ranks once it started them all, indexed by rank.
inline QList<qint64> waitForRanks(qint64 launcher, qsizetype n, int timeoutMs = 30000)
{
    QElapsedTimer t;
    t.start();
    QList<qint64> ranks;
    while (ranks.size() < n && t.elapsed() < timeoutMs) {
        QThread::msleep(100);
        ranks = ranksOf(launcher);
    }
    return ranks;
}

} // namespace cppl::test
