// SPDX-License-Identifier: MIT
// Ranks as child processes of this one.
#include "launcher.h"

#include "cppl/child_process.h"

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
        for (const RankCommand &rc : plan.ranks) {
            auto *p = new QProcess(this);
            Rank &r = m_ranks[static_cast<std::size_t>(rc.rank)];
            r.process = p;
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
            // Own process group (stop signals exactly this rank and its children), and death with
            // the launcher even when it is SIGKILLed; stdin stays an open pipe until then.
            p->setChildProcessModifier([] {
                ::setpgid(0, 0);
                ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            });
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
};

} // namespace

std::unique_ptr<Launcher> makeLocalLauncher(LauncherSettings settings, QObject *parent)
{
    return std::make_unique<LocalLauncher>(std::move(settings), parent);
}

} // namespace cppl::core
