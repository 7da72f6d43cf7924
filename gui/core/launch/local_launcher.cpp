// SPDX-License-Identifier: MIT
// Ranks as child processes of this one.
#include "launcher.h"

#include "cppl/child_process.h"

#include <QElapsedTimer>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTimer>

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <vector>

namespace cppl::core {

namespace {

class LocalLauncher final : public Launcher
{
public:
    using Launcher::Launcher;
    ~LocalLauncher() override
    {
        if (m_store && m_store->state() != QProcess::NotRunning) {
            ::kill(-static_cast<pid_t>(m_store->processId()), SIGKILL);
            m_store->waitForFinished(2000);
        }
        for (auto &r : m_ranks)
            if (r.process && r.process->state() != QProcess::NotRunning) {
                ::kill(-static_cast<pid_t>(r.process->processId()), SIGKILL);
                r.process->waitForFinished(2000);
            }
    }

    void start(const LaunchPlan &plan) override
    {
        setPlan(plan);
        m_ranks.resize(plan.ranks.size());
        if (plan.store)
            if (const QString why = startStore(*plan.store); !why.isEmpty()) {
                // Nothing else starts: without the store no rank could meet the others.
                onHostFailed(plan.store->hostIndex, QString::fromStdString(plan.store->hostName), why);
                for (const RankCommand &rc : plan.ranks)
                    onRankEnded(rc.rank, -1, why); // ignored for those onHostFailed ended
                return;
            }
        for (const RankCommand &rc : plan.ranks) {
            QProcess *p = makeProcess(rc);
            Rank &r = m_ranks[static_cast<std::size_t>(rc.rank)];
            r.process = p;
            const int rank = rc.rank;
            connect(p, &QProcess::readyReadStandardOutput, this, [this, rank] { drain(rank, false); });
            connect(p, &QProcess::readyReadStandardError, this, [this, rank] { drain(rank, true); });
            connect(p, &QProcess::errorOccurred, this, [this, rank, p](QProcess::ProcessError e) {
                if (e == QProcess::FailedToStart)
                    onRankEnded(rank, -1, QStringLiteral("cannot start %1: %2").arg(p->program(), p->errorString()));
            });
            connect(p, &QProcess::finished, this, [this, rank](int code, QProcess::ExitStatus status) {
                drain(rank, false, true);
                drain(rank, true, true);
                const Rank &ended = m_ranks[static_cast<std::size_t>(rank)];
                // On a crash QProcess's code is the terminating signal (forkfd's si_status): report
                // that one, whoever sent it, as a shell would (128 + N).
                const int exit = status == QProcess::CrashExit ? 128 + (code > 0 ? code : (ended.signalled ? ended.signalled : SIGKILL)) : code;
                onRankEnded(rank, exit, ended.stoppedByUs ? QStringLiteral("stopped by the launcher") : QString());
            });
            p->start();
            if (p->waitForStarted(10000)) {
                // The run's telemetry keys go through the stdin pipe, which only this process and
                // the child hold; stdin then stays open (its EOF tells the rank we are gone).
                if (readsKeyLine(rc) && !plan.keyLine.empty()) {
                    p->write(plan.keyLine.data(), static_cast<qint64>(plan.keyLine.size()));
                    p->waitForBytesWritten(5000);
                }
                onStarted(rank);
            }
        }
    }

    void stop() override
    {
        // The store stays until every rank has ended (onAllRanksEnded): a rank that is being
        // stopped may still write to it.
        m_stopping = true;
        for (auto &r : m_ranks)
            if (r.process && r.process->state() != QProcess::NotRunning) {
                r.stoppedByUs = true;
                r.signalled = SIGTERM;
                ::kill(-static_cast<pid_t>(r.process->processId()), SIGTERM);
                ::kill(-static_cast<pid_t>(r.process->processId()), SIGCONT);
            }
        QTimer::singleShot(5000, this, [this] {
            for (auto &r : m_ranks)
                if (r.process && r.process->state() != QProcess::NotRunning) {
                    r.signalled = SIGKILL;
                    ::kill(-static_cast<pid_t>(r.process->processId()), SIGKILL);
                }
        });
    }

private:
    /// A process of @p rc in its own process group (stop signals exactly it and its children), that
    /// dies with the launcher even when it is SIGKILLed; stdin stays an open pipe until then.
    QProcess *makeProcess(const RankCommand &rc)
    {
        auto *p = new QProcess(this);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const auto &[k, v] : rc.env)
            env.insert(QString::fromStdString(k), QString::fromStdString(v));
        p->setProcessEnvironment(env);
        if (!rc.workdir.empty())
            p->setWorkingDirectory(QString::fromStdString(rc.workdir));
        QStringList args;
        for (std::size_t i = 1; i < rc.argv.size(); ++i)
            args << QString::fromStdString(rc.argv[i]);
        p->setProgram(QString::fromStdString(rc.argv.front()));
        p->setArguments(args);
        p->setChildProcessModifier([] {
            ::setpgid(0, 0);
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        });
        return p;
    }

    /// Starts `clusterppl-agent store` and waits (30 s at most) for its store line
    /// (docs/agent-lines.md); the reason it did not come, or empty.
    QString startStore(const RankCommand &rc)
    {
        m_store = makeProcess(rc);
        m_store->start();
        cppl::LineSplitter lines;
        StoreLine said;
        QElapsedTimer t;
        t.start();
        while (!said.ready && said.problem.isEmpty() && m_store->state() != QProcess::NotRunning && t.elapsed() < 30000) {
            m_store->waitForReadyRead(100);
            lines.feed(m_store->readAllStandardOutput().toStdString(), [&](std::string_view l) {
                if (!said.ready && said.problem.isEmpty())
                    said = readStoreLine(l);
            });
        }
        if (said.ready) {
            connect(m_store, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
                if (!m_storeEnding)
                    onStoreFailed(describeStoreEnd(code, status));
            });
            return {};
        }
        QString why = m_store->state() == QProcess::NotRunning && m_store->error() == QProcess::FailedToStart
                          ? QStringLiteral("cannot start %1: %2").arg(m_store->program(), m_store->errorString())
                          : QString();
        if (why.isEmpty() && m_store->state() != QProcess::NotRunning) {
            ::kill(-static_cast<pid_t>(m_store->processId()), SIGKILL);
            m_store->waitForFinished(2000);
            why = said.problem.isEmpty() ? noStoreLineText(30) : said.problem;
        }
        if (why.isEmpty())
            why = describeStoreEnd(m_store->exitCode(), m_store->exitStatus());
        return QStringLiteral("the rendezvous store on %1 did not start: %2").arg(storeWhere(), why);
    }

    QString describeStoreEnd(int code, QProcess::ExitStatus status)
    {
        const QStringList lines = QString::fromUtf8(m_store->readAllStandardError()).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QString how = status == QProcess::CrashExit ? QStringLiteral("killed by signal %1").arg(code) : QStringLiteral("exit code %1").arg(code);
        if (!lines.isEmpty())
            how += QStringLiteral(": ") + lines.back();
        return how;
    }

    void onAllRanksEnded() override
    {
        if (!m_store || m_store->state() == QProcess::NotRunning)
            return storeStopped();
        // EOF on its stdin ends it; SIGKILL to its group if it has not gone within 5 s.
        m_storeEnding = true;
        connect(m_store, &QProcess::finished, this, [this] { storeStopped(); });
        m_store->closeWriteChannel();
        QTimer::singleShot(5000, this, [this] {
            if (m_store->state() != QProcess::NotRunning)
                ::kill(-static_cast<pid_t>(m_store->processId()), SIGKILL);
        });
    }

    struct Rank
    {
        QProcess *process = nullptr;
        cppl::LineSplitter lines[2];
        bool stoppedByUs = false;
        int signalled = 0;
    };

    void drain(int rank, bool isStderr, bool flush = false)
    {
        Rank &r = m_ranks[static_cast<std::size_t>(rank)];
        const QByteArray bytes = isStderr ? r.process->readAllStandardError() : r.process->readAllStandardOutput();
        auto emitLine = [&](std::string_view line) {
            onOutput(rank, isStderr, QString::fromUtf8(line.data(), static_cast<qsizetype>(line.size())));
        };
        cppl::LineSplitter &lines = r.lines[isStderr ? 1 : 0];
        lines.feed(std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())), emitLine);
        if (flush)
            lines.flush(emitLine);
    }

    std::vector<Rank> m_ranks;
    QProcess *m_store = nullptr;
    bool m_storeEnding = false;
};

} // namespace

std::unique_ptr<Launcher> makeLocalLauncher(LauncherSettings settings, QObject *parent)
{
    return std::make_unique<LocalLauncher>(std::move(settings), parent);
}

} // namespace cppl::core
