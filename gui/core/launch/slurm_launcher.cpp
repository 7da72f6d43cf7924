// SPDX-License-Identifier: MIT
// Ranks as the tasks of one Slurm job. The job is submitted and watched by a driver script on the
// login node, started through the SSH launcher (so the login node is reached with the same host-key
// checks, authentication and reverse tunnel as any SSH host); this class turns the driver's lines
// into the Launcher's per-rank signals (docs/launching.md, "Slurm").
#include "launcher.h"
#include "slurm_job.h"

#include "cppl/agent_lines.h"
#include "cppl/counted.h"

#include <QStringList>

#include <map>
#include <utility>
#include <set>

namespace cppl::core {

namespace {

class SlurmLauncher final : public Launcher
{
public:
    SlurmLauncher(LauncherSettings settings, ClusterProfile profile, SlurmJob job, QObject *parent)
        : Launcher(std::move(settings), parent), m_profile(std::move(profile)), m_job(std::move(job))
    {
    }

    void start(const LaunchPlan &plan) override
    {
        setPlan(plan);
        m_login = QString::fromStdString(m_profile.hosts.front().name);
        LauncherSettings inner = m_settings;
        inner.stopAllOnFailure = false;
        m_driver = makeSshLauncher(inner);
        LaunchPlan dp;
        dp.launcher = "ssh";
        dp.ranks = {slurmDriverCommand(m_profile, m_job, !plan.keyLine.empty() && m_settings.telemetryTunnelPort > 0)};
        dp.keyLine = plan.keyLine;
        connect(m_driver.get(), &Launcher::rankOutput, this, [this](int, bool isStderr, const QString &line) {
            if (isStderr)
                return note(QStringLiteral("%1 (driver): %2").arg(m_login, line), true);
            onDriverLine(line.toStdString());
        });
        connect(m_driver.get(), &Launcher::hostFailed, this, [this](const QString &, const QString &message) {
            m_cause = QStringLiteral("cannot reach the login node %1: %2").arg(m_login, message);
            Q_EMIT hostFailed(m_login, message);
        });
        connect(m_driver.get(), &Launcher::rankFinished, this, [this](int, int) { onDriverEnded(); });
        m_driver->start(dp);
    }

    void stop() override
    {
        if (m_finishedDriver)
            return;
        m_stopping = true;
        // EOF on the driver's stdin: it cancels the job (scancel), which ends every task; it then
        // reports the final state and exits.
        if (m_driver)
            m_driver->stop();
    }

    [[nodiscard]] QString jobId() const { return m_jobId; }

private:
    void note(const QString &text, bool isStderr = false) { Q_EMIT rankOutput(-1, isStderr, text); }

    void onDriverLine(const std::string &raw)
    {
        const SlurmEvent e = parseDriverLine(raw);
        const QString text = QString::fromStdString(e.text);
        const int world = static_cast<int>(m_plan.ranks.size());
        switch (e.kind) {
        case SlurmEvent::Kind::Other: note(QStringLiteral("%1: %2").arg(m_login, text)); break;
        case SlurmEvent::Kind::Saved:
            m_scriptPath = text;
            note(QStringLiteral("batch script saved on %1: %2").arg(m_login, text));
            break;
        case SlurmEvent::Kind::Submitted:
            m_jobId = text;
            note(QStringLiteral("submitted Slurm job %1 on %2").arg(text, m_login));
            Q_EMIT jobState(m_jobId, QStringLiteral("SUBMITTED"), QString(), QString());
            break;
        case SlurmEvent::Kind::SubmitFailed: m_cause = QStringLiteral("sbatch on %1 refused the job: %2").arg(m_login, text); break;
        case SlurmEvent::Kind::State: onJobState(e); break;
        case SlurmEvent::Kind::Nodes: onNodes(text); break;
        case SlurmEvent::Kind::PreflightLine: onPreflightLine(e); break;
        case SlurmEvent::Kind::PreflightDone: decide(text); break;
        case SlurmEvent::Kind::EvalStarted:
            for (const auto &r : m_plan.ranks)
                if (m_started.insert(r.rank).second)
                    onStarted(r.rank);
            break;
        case SlurmEvent::Kind::RankStdout:
            if (e.rank < world)
                for (const std::string &line : m_joiner.add(e.rank, e.text))
                    onOutput(e.rank, false, QString::fromStdString(line));
            break;
        case SlurmEvent::Kind::RankStderr:
            if (e.rank < world)
                onOutput(e.rank, true, text);
            break;
        case SlurmEvent::Kind::RankExit: onRankExit(e); break;
        case SlurmEvent::Kind::Result: onResult(e.text); break;
        case SlurmEvent::Kind::JobLine: onJobLine(e.text); break;
        case SlurmEvent::Kind::Relay: note(QStringLiteral("telemetry relay on %1: %2").arg(m_login, text)); break;
        case SlurmEvent::Kind::Done: m_doneWhy = text; break;
        }
    }

    void onJobState(const SlurmEvent &e)
    {
        m_state = QString::fromStdString(e.state);
        m_reason = QString::fromStdString(e.reason);
        m_exit = QString::fromStdString(e.text);
        if (!e.nodes.empty())
            m_nodeList = QString::fromStdString(e.nodes);
        QString line = QStringLiteral("job %1: %2").arg(m_jobId, m_state);
        if (!m_reason.isEmpty() && m_reason != QLatin1String("None"))
            line += QStringLiteral(" (reason: %1)").arg(m_reason);
        if (!m_nodeList.isEmpty())
            line += QStringLiteral(" on %1").arg(m_nodeList);
        note(line);
        Q_EMIT jobState(m_jobId, m_state, m_reason, m_nodeList);
    }

    /// The allocated nodes, in SLURM_JOB_NODELIST order: each rank's host from now on.
    void onNodes(const QString &text)
    {
        m_nodes.clear();
        for (const auto &n : text.split(QLatin1Char(','), Qt::SkipEmptyParts))
            m_nodes.push_back(n.toStdString());
        // Block distribution: ranks r*T .. r*T+T-1 run on the r-th allocated node.
        for (auto &r : m_plan.ranks) {
            const auto node = static_cast<std::size_t>(r.rank / std::max(1, m_job.ranksPerNode));
            if (node < m_nodes.size())
                r.hostName = m_nodes[node];
        }
        if (!m_nodes.empty()) // the batch step's node, MASTER_ADDR: where the store (if any) serves
            m_plan.masterAddr = m_nodes.front();
    }

    void onPreflightLine(const SlurmEvent &e)
    {
        const QString text = QString::fromStdString(e.text);
        if (e.exitCode == 0 && e.text.starts_with('{'))
            m_preflightJson[e.rank] = text;
        else if (e.rank >= 0)
            m_preflightErr[e.rank].append(text);
        else
            note(QStringLiteral("pre-flight: %1").arg(text), true);
    }

    /// A rank's stdout piece still waiting for the rest of its line when the job ended: as it came.
    /// Not at the rank's exit: its "@exit" comes through job.err, which the driver follows apart
    /// from job.out, so the rest of a line may come after it.
    void flushJoiner(int rank)
    {
        if (const auto rest = m_joiner.flush(rank))
            onOutput(rank, false, QString::fromStdString(*rest));
    }

    void onRankExit(const SlurmEvent &e)
    {
        // The reporting rank's result comes with the driver's "result" line, at the job's end:
        // its exit waits for it. That is rank 0, or in a tolerant run any rank that finishes
        // (the lowest survivor reports when rank 0 was lost).
        if (e.rank >= static_cast<int>(m_plan.ranks.size()))
            return;
        if (e.exitCode == 0 && !m_resultSeen && (e.rank == 0 || m_settings.tolerateRankLoss))
            m_finishedPending.insert(e.rank);
        else
            onRankEnded(e.rank, e.exitCode, m_stopping && e.exitCode != 0 ? QStringLiteral("stopped by the launcher (scancel)") : QString());
    }

    /// The job's result.json, relayed as the reporting rank's result line (docs/agent-lines.md).
    void onResult(const std::string &json)
    {
        m_resultSeen = true;
        onOutput(m_finishedPending.empty() ? 0 : *m_finishedPending.begin(), false,
                 QString::fromStdString(cppl::lines::encode(cppl::lines::Result{json})));
        flushFinished();
    }

    /// The batch script's own lines ("@fail ...", the store's "@store ...").
    void onJobLine(const std::string &line)
    {
        const QString text = QString::fromStdString(line);
        if (line.starts_with("@fail ")) {
            m_cause = QStringLiteral("job %1: %2").arg(m_jobId, text.mid(6));
        } else if (line == "@store-closing") {
            m_storeClosing = true;
        } else if (line.starts_with("@store-exit ")) {
            if (m_storeClosing)
                return;
            const QString rest = text.mid(12);
            const int code = rest.section(QLatin1Char(' '), 0, 0).toInt();
            const QString last = rest.section(QLatin1Char(' '), 1);
            QString how = code > 128 ? QStringLiteral("killed by signal %1").arg(code - 128) : QStringLiteral("exit code %1").arg(code);
            if (!last.isEmpty())
                how += QStringLiteral(": ") + last;
            onStoreFailed(how);
        } else if (line.starts_with("@store ")) {
            note(QStringLiteral("job %1: the rendezvous store serves on %2").arg(m_jobId, text.mid(7)));
        } else if (!line.starts_with("@step") && !line.starts_with("@nodes")) {
            note(QStringLiteral("job %1: %2").arg(m_jobId, text), true);
        }
    }

    void flushFinished()
    {
        const std::set<int> pending = std::exchange(m_finishedPending, {});
        for (const int rank : pending)
            onRankEnded(rank, 0);
    }

    /// Pre-flight finished on every node: the same refusals as for SSH hosts, then go or refuse.
    void decide(const QString &stepCode)
    {
        QStringList refusals;
        if (m_settings.judgeAllocation) {
            std::map<int, RankEnd> ends;
            for (std::size_t n = 0; n < std::max<std::size_t>(m_nodes.size(), 1); ++n) {
                RankEnd end;
                end.exitCode = m_preflightJson.count(static_cast<int>(n)) ? 0 : stepCode.toInt();
                end.lastLines = m_preflightErr[static_cast<int>(n)];
                ends[static_cast<int>(n)] = end;
            }
            refusals = m_settings.judgeAllocation(m_nodes, m_preflightJson, ends);
        }
        if (!refusals.isEmpty()) {
            m_refusals = refusals;
            m_cause = QStringLiteral("pre-flight on the allocation refused the launch:\n  %1").arg(refusals.join(QStringLiteral("\n  ")));
        }
        note(refusals.isEmpty() ? QStringLiteral("pre-flight ok on %1 of job %2").arg(QString::fromStdString(cppl::counted(m_nodes.size(), "node", "nodes"))).arg(m_jobId)
                                : m_cause,
             !refusals.isEmpty());
        if (!m_driver->sendInput(0, refusals.isEmpty() ? "go\n" : "refuse\n"))
            note(QStringLiteral("cannot send the decision to the driver on %1; the job waits 600 s, then ends").arg(m_login), true);
    }

    void onDriverEnded()
    {
        m_finishedDriver = true;
        const RankEnd &d = m_driver->ends().at(0);
        QString why;
        int code = -1;
        if (m_stopping) {
            why = m_jobId.isEmpty() ? QStringLiteral("stopped before the job was submitted")
                                    : QStringLiteral("stopped by the launcher (job %1 cancelled)").arg(m_jobId);
            code = 128 + 15;
        } else if (!m_cause.isEmpty()) {
            why = m_cause;
        } else if (m_jobId.isEmpty()) {
            why = QStringLiteral("the driver on %1 ended before submitting (%2)")
                      .arg(m_login, !d.reason.isEmpty() ? d.reason : !m_doneWhy.isEmpty() ? m_doneWhy : QStringLiteral("exit %1").arg(d.exitCode));
        } else {
            why = QStringLiteral("job %1 ended %2 (reason %3, exit %4) before this task reported its end")
                      .arg(m_jobId, m_state.isEmpty() ? QStringLiteral("?") : m_state, m_reason.isEmpty() ? QStringLiteral("none") : m_reason,
                           m_exit.isEmpty() ? QStringLiteral("?") : m_exit);
        }
        for (const int rank : m_joiner.waiting())
            flushJoiner(rank);
        flushFinished();
        for (const auto &r : m_plan.ranks)
            onRankEnded(r.rank, code, why); // ignored for ranks that reported their end
    }

    ClusterProfile m_profile;
    SlurmJob m_job;
    std::unique_ptr<Launcher> m_driver;
    QString m_login, m_jobId, m_scriptPath, m_state, m_reason, m_exit, m_nodeList, m_cause, m_doneWhy;
    QStringList m_refusals;
    std::vector<std::string> m_nodes;
    std::map<int, QString> m_preflightJson;
    std::map<int, QStringList> m_preflightErr;
    SrunLineJoiner m_joiner; // the ranks' protocol lines that srun -l cut
    std::set<int> m_started;
    bool m_finishedDriver = false;
    std::set<int> m_finishedPending; // ranks that exited 0, reported once the result came (or the driver ended)
    bool m_resultSeen = false;
    bool m_storeClosing = false; // the batch script is ending the store: its exit is no failure
};

} // namespace

std::unique_ptr<Launcher> makeSlurmLauncher(LauncherSettings settings, const ClusterProfile &profile, const SlurmJob &job, QObject *parent)
{
    return std::make_unique<SlurmLauncher>(std::move(settings), profile, job, parent);
}

} // namespace cppl::core
