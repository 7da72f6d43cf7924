// SPDX-License-Identifier: MIT
#include "launcher.h"

#include "cppl/agent_lines.h"

#include <QRegularExpression>
#include <QTimer>

namespace cppl::core {

QString agentStartHint(const QString &said, int exitCode)
{
    // The shell's "command not found" status, and the launcher's own "exit code 127: ..." text.
    const bool notFound = exitCode == 127 || said.contains(QLatin1String("exit code 127"));
    static const QRegularExpression library(QStringLiteral("error while loading shared libraries: ([^:]+): cannot open shared object file"));
    if (const auto m = library.match(said); m.hasMatch())
        return QStringLiteral("the agent there cannot load %1: it was built against a library at a path this host does not have. "
                              "Every node needs the LibTorch (torch package) it was built with at the same path, or an agent built "
                              "for it (scripts/build-agent.sh; docs/packaging.md, \"The agent on GPU nodes\")")
            .arg(m.captured(1));
    // QProcess's "execve: ...", slurmstepd's "execve(): AGENT: ...", a shell's "AGENT: command not found".
    const bool execFailed = said.contains(QLatin1String("execve: No such file or directory"))
                            || (said.contains(QLatin1String("execve(): ")) && said.contains(QLatin1String("No such file or directory")));
    if (execFailed || said.contains(QLatin1String("command not found"))
        || (notFound && (said.contains(QLatin1String("No such file or directory")) || said.contains(QLatin1String("not found")))))
        return QStringLiteral("there is no agent at that path on this host: install it there (the clusterppl-agent package, or "
                              "scripts/build-agent.sh for GPU nodes) or set the host's \"agent\" in the profile to where it is");
    if (said.contains(QLatin1String("Permission denied")) && (exitCode == 126 || said.contains(QLatin1String("exit code 126"))
                                                               || said.contains(QLatin1String("execve"))))
        return QStringLiteral("the host's \"agent\" is not a file this user may run: make it executable (chmod +x), or name "
                              "the clusterppl-agent executable itself");
    return {};
}

StoreLine readStoreLine(std::string_view line)
{
    const cppl::lines::Decoded d = cppl::lines::decode(line);
    if (d.kind != cppl::lines::Kind::StoreReady)
        return {};
    if (!d.ok())
        return {false, QString::fromStdString(d.reason())};
    return {true, {}};
}

QString noStoreLineText(int seconds)
{
    return QStringLiteral("no %1 line within %2 s").arg(QLatin1StringView(cppl::lines::tagOf(cppl::lines::Kind::StoreReady))).arg(seconds);
}

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
    m_firstLoss = -1;
    m_anyFinished = m_resultSeen = m_runOver = m_endingStore = false;
    m_storeFailure.clear();
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
    // The tag is enough to know the run is over; whether the result reads is the run engine's to say.
    if (!isStderr && rank >= 0 && !m_resultSeen && cppl::lines::peekKind(line.toStdString()) == cppl::lines::Kind::Result) {
        m_resultSeen = true;
        maybeRunOver();
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
    // The agents' codes 5 and 6: a survivor gave up (a collective or the store failed, a timeout),
    // so the run as a whole failed, tolerant or not. Any other end of a tolerant run's rank is a
    // loss the others recover from.
    const bool gaveUp = exitCode == 5 || exitCode == 6;
    if (m_settings.tolerateRankLoss && !m_stopping && m_firstFailure < 0 && (exitCode == 0 || !gaveUp)) {
        if (exitCode == 0)
            m_anyFinished = true;
        else if (m_firstLoss < 0)
            m_firstLoss = rank;
        maybeRunOver();
        maybeFinish();
        return;
    }
    if (exitCode != 0 && !gaveUp && m_firstFailure >= 0 && !m_stopping && !m_settings.tolerateRankLoss
        && (m_ends[m_firstFailure].exitCode == 5 || m_ends[m_firstFailure].exitCode == 6)) {
        // The first rank out only gave up because of a peer (codes 5 and 6), and this one ended for
        // a reason of its own (a refusal, a bad input, a signal): that is the cause to name first.
        m_firstFailure = rank;
    }
    if (exitCode != 0 && m_firstFailure < 0 && !m_stopping) {
        // A tolerant run that gives up after losing a rank: that loss is what went wrong first.
        m_firstFailure = m_settings.tolerateRankLoss && m_firstLoss >= 0 ? m_firstLoss : rank;
        if (m_settings.stopAllOnFailure) // the others' watchdogs usually end them first, with their reasons
            QTimer::singleShot(m_settings.graceSeconds * 1000, this, [this] {
                if (!m_finished)
                    stop();
            });
    }
    maybeFinish();
}

void Launcher::maybeRunOver()
{
    // Tolerant runs end with the rank that reports the result (rank 0, or the lowest survivor when
    // rank 0 was lost): what the survivors left behind (a stopped rank) is stopped after the grace.
    if (!m_settings.tolerateRankLoss || m_runOver || m_stopping || m_firstFailure >= 0)
        return;
    const auto zero = m_ends.find(0);
    const bool zeroDone = zero != m_ends.end() && m_done[0] && zero->second.exitCode == 0;
    if (!zeroDone && !(m_anyFinished && m_resultSeen))
        return;
    m_runOver = true;
    QTimer::singleShot(m_settings.graceSeconds * 1000, this, [this] {
        if (!m_finished && !m_endingStore)
            stop();
    });
}

void Launcher::onStoreFailed(const QString &how)
{
    if (m_stopping || m_endingStore || !m_storeFailure.isEmpty())
        return;
    m_storeFailure = QStringLiteral("the rendezvous store on %1 exited: %2").arg(storeWhere(), how);
    Q_EMIT rankOutput(-1, true, m_storeFailure);
}

QString Launcher::storeWhere() const
{
    return QStringLiteral("%1:%2").arg(QString::fromStdString(m_plan.masterAddr)).arg(m_plan.masterPort);
}

void Launcher::storeStopped()
{
    if (!m_finished) {
        m_finished = true;
        Q_EMIT finished();
    }
}

void Launcher::onHostFailed(int hostIndex, const QString &host, const QString &message)
{
    const QString hint = agentStartHint(message);
    Q_EMIT hostFailed(host, hint.isEmpty() ? message : message + QStringLiteral("; ") + hint);
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
    if (!m_finished && !m_endingStore) {
        m_endingStore = true;
        onAllRanksEnded(); // ends the store process, if any; finished() once it is gone
    }
}

int Launcher::failureRank() const
{
    if (m_firstFailure >= 0)
        return m_firstFailure;
    return m_settings.tolerateRankLoss && !m_anyFinished ? m_firstLoss : -1;
}

int Launcher::exitCode() const
{
    const auto zero = m_ends.find(0);
    if (m_settings.tolerateRankLoss && m_firstFailure < 0) {
        if (m_anyFinished)
            return 0; // the result's rank decides whether there is one (the run engine checks)
        if (m_firstLoss >= 0) {
            const int code = m_ends.at(m_firstLoss).exitCode;
            return code <= 0 ? 1 : code;
        }
    }
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
    const int firstRank = failureRank();
    if (firstRank < 0)
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
    // The store going is the cause of every rank's "lost the rendezvous store": it comes first.
    QString s = m_storeFailure.isEmpty() ? QStringLiteral("run failed: %1 first").arg(describe(firstRank))
                                         : QStringLiteral("run failed: %1; then %2").arg(m_storeFailure, describe(firstRank));
    const RankEnd &first = m_ends.at(firstRank);
    // The agent's own failures (codes 1-4: runtime, arguments, model, data) end with their error
    // line on stderr: the headline carries it, so a one-line view says what went wrong.
    if (first.reason.isEmpty() && first.exitCode >= 1 && first.exitCode <= 4 && !first.lastLines.isEmpty()) {
        const qsizetype eol = s.indexOf(u'\n');
        s.insert(eol < 0 ? s.size() : eol, QStringLiteral(": ") + first.lastLines.back());
    }
    if (!first.lastLines.isEmpty())
        s += QStringLiteral("\n  its last lines:\n    ") + first.lastLines.join(QStringLiteral("\n    "));
    for (const auto &[rank, e] : m_ends)
        if (rank != firstRank && e.exitCode != 0)
            s += QStringLiteral("\n  then ") + describe(rank);
    return s;
}

} // namespace cppl::core
