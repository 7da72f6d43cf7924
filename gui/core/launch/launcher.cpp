// SPDX-License-Identifier: MIT
#include "launcher.h"

#include <QTimer>

namespace cppl::core {

Launcher::Launcher(LauncherSettings settings, QObject *parent) : QObject(parent), m_settings(std::move(settings)) {}

Launcher::~Launcher() = default;

void Launcher::setPlan(const LaunchPlan &plan)
{
    m_plan = plan;
    m_ends.clear();
    m_done.clear();
    for (const auto &r : plan.ranks) {
        m_ends[r.rank] = RankEnd{};
        m_done[r.rank] = false;
    }
    m_firstFailure = -1;
    m_finished = plan.ranks.empty();
}

void Launcher::onStarted(int rank)
{
    const auto &r = m_plan.ranks[static_cast<std::size_t>(rank)];
    Q_EMIT rankStarted(rank, QString::fromStdString(r.hostName));
}

void Launcher::onOutput(int rank, bool isStderr, const QString &line)
{
    if (isStderr) {
        auto &last = m_ends[rank].lastLines;
        last.append(line);
        while (last.size() > 5)
            last.removeFirst();
    }
    Q_EMIT rankOutput(rank, isStderr, line);
}

void Launcher::onRankEnded(int rank, int exitCode, const QString &reason)
{
    if (m_done[rank])
        return;
    m_done[rank] = true;
    m_ends[rank].exitCode = exitCode;
    m_ends[rank].reason = reason;
    Q_EMIT rankFinished(rank, exitCode);
    if (m_settings.tolerateRankLoss && !m_stopping && (rank != 0 ? exitCode != 0 : exitCode == 0)) {
        if (rank == 0) // the run is over: stop what the survivors left behind (a stopped rank)
            QTimer::singleShot(m_settings.graceSeconds * 1000, this, [this] {
                if (!m_finished)
                    stop();
            });
        maybeFinish();
        return;
    }
    if (exitCode != 0 && m_firstFailure < 0 && !m_stopping) {
        m_firstFailure = rank;
        if (m_settings.stopAllOnFailure) // the others' watchdogs usually end them first, with their reasons
            QTimer::singleShot(m_settings.graceSeconds * 1000, this, [this] {
                if (!m_finished)
                    stop();
            });
    }
    maybeFinish();
}

void Launcher::onHostFailed(int hostIndex, const QString &host, const QString &message)
{
    Q_EMIT hostFailed(host, message);
    for (const auto &r : m_plan.ranks)
        if (r.hostIndex == hostIndex && !m_done[r.rank]) {
            m_ends[r.rank].lastLines.append(message);
            onRankEnded(r.rank, -1, message);
        }
}

void Launcher::maybeFinish()
{
    for (const auto &[rank, done] : m_done)
        if (!done)
            return;
    if (!m_finished) {
        m_finished = true;
        Q_EMIT finished();
    }
}

int Launcher::exitCode() const
{
    const auto zero = m_ends.find(0);
    if (m_firstFailure < 0)
        return zero == m_ends.end() ? 0 : zero->second.exitCode;
    const RankEnd &first = m_ends.at(m_firstFailure);
    const int firstCode = first.exitCode < 0 ? 1 : first.exitCode;
    if (zero == m_ends.end() || !zero->second.reason.isEmpty() || zero->second.exitCode < 0)
        return firstCode;
    return zero->second.exitCode == 0 ? firstCode : zero->second.exitCode;
}

QString Launcher::summary() const
{
    if (m_firstFailure < 0)
        return {};
    auto describe = [&](int rank) {
        const RankEnd &e = m_ends.at(rank);
        const auto &r = m_plan.ranks[static_cast<std::size_t>(rank)];
        QString s = QStringLiteral("rank %1 on %2: ").arg(rank).arg(QString::fromStdString(r.hostName));
        if (!e.reason.isEmpty())
            s += e.reason;
        else if (e.exitCode > 128)
            s += QStringLiteral("killed by signal %1").arg(e.exitCode - 128);
        else
            s += QStringLiteral("exit code %1").arg(e.exitCode);
        return s;
    };
    QString s = QStringLiteral("run failed: %1 first").arg(describe(m_firstFailure));
    const RankEnd &first = m_ends.at(m_firstFailure);
    if (!first.lastLines.isEmpty())
        s += QStringLiteral("\n  its last lines:\n    ") + first.lastLines.join(QStringLiteral("\n    "));
    for (const auto &[rank, e] : m_ends)
        if (rank != m_firstFailure && e.exitCode != 0)
            s += QStringLiteral("\n  then ") + describe(rank);
    return s;
}

} // namespace cppl::core
