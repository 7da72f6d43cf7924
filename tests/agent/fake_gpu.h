// SPDX-License-Identifier: MIT
// What the tests that run agents against the fake CUDA runtime and NCCL (tests/fakes/README.md)
// share: the environment that loads them, and runs of agents whose time is measured.
#pragma once

#include "test_paths.h"
#include "test_process.h"

#include "cppl/host.h"

#include <QElapsedTimer>
#include <QList>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>
#include <QThread>

namespace cppl::test {

/// The fakes' directories (tests/fakes/CMakeLists.txt).
inline const QString kFakeLib = QStringLiteral(CPPL_FAKES_LIB);
inline const QString kFakeLibNoShrink = QStringLiteral(CPPL_FAKES_LIB_NOSHRINK);

/// This process's environment with the fakes first in the loader's search: @p shrink picks the
/// NCCL with ncclCommShrink, @p devices the fake GPUs of this "host". Nothing of the caller's
/// fake scripts is inherited: a test sets what it needs.
inline QProcessEnvironment fakeGpuEnvironment(int devices, bool shrink = true)
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const QString &k : env.keys())
        if (k.startsWith(QStringLiteral("CPPL_FAKE_")) || k.startsWith(QStringLiteral("NCCL_")) || k == QStringLiteral("CUDA_VISIBLE_DEVICES"))
            env.remove(k);
    const QString dirs = shrink ? kFakeLib : kFakeLibNoShrink + QLatin1Char(':') + kFakeLib;
    const QString old = env.value(QStringLiteral("LD_LIBRARY_PATH"));
    env.insert(QStringLiteral("LD_LIBRARY_PATH"), old.isEmpty() ? dirs : dirs + QLatin1Char(':') + old);
    env.insert(QStringLiteral("CPPL_FAKE_CUDA_DEVICES"), QString::number(devices));
    env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
    env.insert(QStringLiteral("OPENBLAS_NUM_THREADS"), QStringLiteral("1"));
    return env;
}

/// @p env with the fake NCCL's trace on: its "making communicator 'NAME' ..." lines on stderr,
/// each with the communicator's CTA limit.
inline QProcessEnvironment withNcclTrace(QProcessEnvironment env)
{
    env.insert(QStringLiteral("CPPL_FAKE_NCCL_TRACE"), QStringLiteral("1"));
    return env;
}

struct TimedRun
{
    ProcessResult result;
    qint64 ms = 0;         ///< from start to exit (or to the kill, when it timed out)
    bool timedOut = false; ///< still running after the limit: killed
};

/// Runs @p program with @p args and @p env; kills it after @p limitMs.
inline TimedRun runTimed(const QString &program, const QStringList &args, const QProcessEnvironment &env, int limitMs)
{
    QProcess p;
    p.setProcessEnvironment(env);
    QElapsedTimer t;
    t.start();
    p.start(program, args);
    TimedRun r;
    if (!p.waitForFinished(limitMs)) {
        r.timedOut = true;
        p.kill();
        p.waitForFinished();
    }
    r.ms = t.elapsed();
    r.result = {r.timedOut ? -1 : p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
                QString::fromUtf8(p.readAllStandardError())};
    return r;
}

/// `eval` with the per-rank settings of the one-rank reference (test_profile.h's oneRankEval:
/// llama.cpp, context 128, batch 2, float32 on the CPU, one thread) on at most @p maxWindows
/// windows (0: all); the model stays on the CPU whatever the backend.
inline QStringList fakeEvalArgs(int maxWindows)
{
    return {QStringLiteral("eval"), QStringLiteral("--model"), kModel, QStringLiteral("--text"), kText, QStringLiteral("--tokenizer"),
            QStringLiteral("bytes"), QStringLiteral("--protocol"), QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("128"),
            QStringLiteral("--batch"), QStringLiteral("2"), QStringLiteral("--max-windows"), QString::number(maxWindows), QStringLiteral("--dtype"),
            QStringLiteral("float32"), QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--threads"), QStringLiteral("1"),
            QStringLiteral("--blas-threads"), QStringLiteral("1")};
}

/// `run --standalone --nproc-per-node N -- comm-check --backend B ...`: the collective self-test
/// over N local ranks (the arguments after the command's own).
inline QStringList standaloneCommCheck(int ranks, const QString &backend, const QString &topology, const QString &groups, int timeoutSeconds,
                                       const QString &words = QStringLiteral("1,7,65536,100003"))
{
    QStringList a{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(ranks), QStringLiteral("--"),
                  QStringLiteral("comm-check"), QStringLiteral("--backend"), backend, QStringLiteral("--topology"), topology, QStringLiteral("--words"), words,
                  QStringLiteral("--timeout"), QString::number(timeoutSeconds)};
    if (!groups.isEmpty())
        a << QStringLiteral("--groups") << groups;
    return a;
}

/// How one rank of HandRanks ended.
struct RankEnd
{
    int exitCode = -1;  ///< -1: still running at the limit (then killed), -2: killed by a signal
    qint64 ms = -1;     ///< from the start of all ranks to this one's exit
    QString out, err;
};

/// Ranks started by hand with torchrun's environment (rank 0 serves the store on a free loopback
/// port), so that a test sees how each one ends by itself: `run --standalone` would stop the others
/// 3 s after the first failure and hide a rank that hangs.
class HandRanks
{
public:
    /// @p perRank: arguments appended for rank r (its r-th entry; none past its end).
    HandRanks(int n, const QStringList &args, const QProcessEnvironment &env, const QList<QStringList> &perRank = {})
    {
        const QString port = QString::number(cppl::freeLoopbackPort());
        m_clock.start();
        for (int r = 0; r < n; ++r) {
            auto *p = new QProcess;
            QProcessEnvironment e = env;
            e.insert(QStringLiteral("RANK"), QString::number(r));
            e.insert(QStringLiteral("LOCAL_RANK"), QString::number(r));
            e.insert(QStringLiteral("WORLD_SIZE"), QString::number(n));
            e.insert(QStringLiteral("LOCAL_WORLD_SIZE"), QString::number(n));
            e.insert(QStringLiteral("MASTER_ADDR"), QStringLiteral("127.0.0.1"));
            e.insert(QStringLiteral("MASTER_PORT"), port);
            p->setProcessEnvironment(e);
            p->start(kAgent, r < perRank.size() ? args + perRank[r] : args);
            m_ranks.push_back(p);
            m_ends.push_back({});
        }
    }
    ~HandRanks()
    {
        for (QProcess *p : m_ranks) {
            if (p->state() != QProcess::NotRunning) {
                p->kill();
                p->waitForFinished();
            }
            delete p;
        }
    }
    HandRanks(const HandRanks &) = delete;
    HandRanks &operator=(const HandRanks &) = delete;

    [[nodiscard]] qint64 pid(int rank) const { return m_ranks[rank]->processId(); }
    [[nodiscard]] qint64 elapsed() const { return m_clock.elapsed(); }
    /// What rank @p rank said on stderr so far (read as it comes).
    QString err(int rank)
    {
        poll();
        return m_ends[rank].err;
    }
    /// Waits until every rank ended or @p limitMs passed since the start; kills what is left.
    QList<RankEnd> wait(qint64 limitMs)
    {
        while (m_clock.elapsed() < limitMs && poll())
            QThread::msleep(20);
        for (QProcess *p : m_ranks)
            if (p->state() != QProcess::NotRunning)
                p->kill();
        for (QProcess *p : m_ranks)
            p->waitForFinished();
        poll();
        return m_ends;
    }

private:
    /// Reads what came and records the ranks that ended; true while one still runs.
    bool poll()
    {
        bool running = false;
        for (qsizetype r = 0; r < m_ranks.size(); ++r) {
            QProcess *p = m_ranks[r];
            p->waitForFinished(0);
            m_ends[r].out += QString::fromUtf8(p->readAllStandardOutput());
            m_ends[r].err += QString::fromUtf8(p->readAllStandardError());
            if (p->state() != QProcess::NotRunning) {
                running = true;
            } else if (m_ends[r].ms < 0) {
                m_ends[r].ms = m_clock.elapsed();
                m_ends[r].exitCode = p->exitStatus() == QProcess::NormalExit ? p->exitCode() : -2;
            }
        }
        return running;
    }

    QElapsedTimer m_clock;
    QList<QProcess *> m_ranks;
    QList<RankEnd> m_ends;
};

/// Every rank's end, for a failure message.
inline QString describeEnds(const QList<RankEnd> &ends)
{
    QString s;
    for (qsizetype r = 0; r < ends.size(); ++r)
        s += QStringLiteral("---- rank %1: %2 after %3 ms\n%4%5").arg(r)
                 .arg(ends[r].exitCode == -1 ? QStringLiteral("still running (killed)") : QStringLiteral("exit %1").arg(ends[r].exitCode))
                 .arg(ends[r].ms)
                 .arg(ends[r].out, ends[r].err);
    return s;
}

} // namespace cppl::test
