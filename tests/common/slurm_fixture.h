// SPDX-License-Identifier: MIT
// A real one-host Slurm for tests: munged, slurmctld and slurmd (Debian's slurm-wlm and munge),
// started as root with their own configuration, key, state, spool, logs and pid files in a
// directory the test owns, on ports that were free. The one node is this host with its real CPU
// count and memory. Partitions: "debug" (default, no time limit) and "short" (1 minute at most, so
// a job asking for more pends with reason PartitionTimeLimit). Clients need SLURM_CONF: envScript()
// exports it, for a login node's shell to source.
#pragma once

#include "test_process.h"

#include "cppl/host.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QString>
#include <QStringList>
#include <QThread>

#include <csignal>
#include <unistd.h>

namespace cppl::test {

class TestSlurm
{
public:
    ~TestSlurm() { stop(); }

    /// Starts the three daemons and waits until the node is idle. Empty on success, else why not.
    QString start(const QString &dir)
    {
        m_dir = dir;
        for (const char *exe : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/bin/sinfo"})
            if (!QFile::exists(QString::fromLatin1(exe)))
                return QStringLiteral("%1 is missing (scripts/install-deps.sh installs munge, slurmctld, slurmd, slurm-client)").arg(QString::fromLatin1(exe));
        if (::geteuid() != 0)
            return QStringLiteral("slurmd must run as root to start jobs (run the test as root)");
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        m_node = QString::fromLocal8Bit(host).section(QLatin1Char('.'), 0, 0);
        if (m_node.isEmpty())
            return QStringLiteral("this host has no name (gethostname)");
        QDir d(dir);
        for (const char *sub : {"munge", "state", "spool", "log"})
            if (!d.mkpath(QString::fromLatin1(sub)))
                return QStringLiteral("cannot create %1/%2").arg(dir, QString::fromLatin1(sub));
        QFile::setPermissions(dir, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadGroup | QFile::ExeGroup | QFile::ReadOther
                                       | QFile::ExeOther);
        QFile key(path(QStringLiteral("munge/munge.key")));
        QFile random(QStringLiteral("/dev/urandom"));
        if (!key.open(QIODevice::WriteOnly) || !random.open(QIODevice::ReadOnly) || key.write(random.read(1024)) != 1024)
            return QStringLiteral("cannot write the munge key");
        key.close();
        key.setPermissions(QFile::ReadOwner | QFile::WriteOwner);
        start(m_munged, QStringLiteral("/usr/sbin/munged"),
              {QStringLiteral("-F"), QStringLiteral("--force"), QStringLiteral("--socket=") + path(QStringLiteral("munge/sock")),
               QStringLiteral("--key-file=") + path(QStringLiteral("munge/munge.key")), QStringLiteral("--log-file=") + path(QStringLiteral("log/munged.log")),
               QStringLiteral("--pid-file=") + path(QStringLiteral("munge/munged.pid")),
               QStringLiteral("--seed-file=") + path(QStringLiteral("munge/seed"))});
        if (!waitFor([&] { return QFile::exists(path(QStringLiteral("munge/sock"))); }, 10000))
            return QStringLiteral("munged did not create its socket: %1").arg(tail(QStringLiteral("log/munged.log")));

        const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
        const long long memMb = static_cast<long long>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / (1024 * 1024);
        const int ctldPort = freeLoopbackPort();
        int slurmdPort = freeLoopbackPort();
        while (slurmdPort == ctldPort)
            slurmdPort = freeLoopbackPort();
        const QString conf = QStringLiteral(
                                 "ClusterName=cppltest\nSlurmctldHost=%1(127.0.0.1)\nSlurmctldPort=%2\nSlurmdPort=%3\n"
                                 "AuthType=auth/munge\nAuthInfo=socket=%4\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n"
                                 "StateSaveLocation=%5\nSlurmdSpoolDir=%6\nSlurmctldPidFile=%7\nSlurmdPidFile=%8\n"
                                 "SlurmctldLogFile=%9\nSlurmdLogFile=%10\n"
                                 "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
                                 "SelectTypeParameters=CR_Core\nSchedulerType=sched/builtin\nReturnToService=2\nMpiDefault=none\n"
                                 "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
                                 "SlurmctldTimeout=30\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=2\nMinJobAge=600\n"
                                 "NodeName=%1 NodeAddr=127.0.0.1 CPUs=%11 RealMemory=%12 State=UNKNOWN\n"
                                 "PartitionName=debug Nodes=%1 Default=YES MaxTime=INFINITE State=UP\n"
                                 "PartitionName=short Nodes=%1 MaxTime=1 State=UP\n")
                                 .arg(m_node)
                                 .arg(ctldPort)
                                 .arg(slurmdPort)
                                 .arg(path(QStringLiteral("munge/sock")), path(QStringLiteral("state")), path(QStringLiteral("spool")),
                                      path(QStringLiteral("slurmctld.pid")), path(QStringLiteral("slurmd.pid")), path(QStringLiteral("log/slurmctld.log")),
                                      path(QStringLiteral("log/slurmd.log")))
                                 .arg(cpus)
                                 .arg(std::max<long long>(1, memMb * 9 / 10));
        if (!write(QStringLiteral("slurm.conf"), conf.toUtf8()) || !write(QStringLiteral("slurm-env.sh"), "export SLURM_CONF=" + conf_().toUtf8() + "\n"))
            return QStringLiteral("cannot write slurm.conf");
        start(m_ctld, QStringLiteral("/usr/sbin/slurmctld"), {QStringLiteral("-D"), QStringLiteral("-i"), QStringLiteral("-f"), conf_()});
        start(m_slurmd, QStringLiteral("/usr/sbin/slurmd"), {QStringLiteral("-D"), QStringLiteral("-f"), conf_(), QStringLiteral("-N"), m_node});
        QString last;
        const bool idle = waitFor(
            [&] {
                const ProcessResult r = client(QStringLiteral("sinfo"), {QStringLiteral("-h"), QStringLiteral("-N"), QStringLiteral("-p"), QStringLiteral("debug"),
                                                                   QStringLiteral("-o"), QStringLiteral("%T")});
                last = r.out.trimmed() + r.err.trimmed();
                return r.exitCode == 0 && r.out.trimmed() == QLatin1String("idle");
            },
            60000);
        if (!idle)
            return QStringLiteral("the node did not become idle in 60 s (sinfo: %1); slurmctld: %2; slurmd: %3")
                .arg(last, tail(QStringLiteral("log/slurmctld.log")), tail(QStringLiteral("log/slurmd.log")));
        return {};
    }

    /// Cancels every job, then stops slurmd, slurmctld and munged; kills any step daemon left.
    void stop()
    {
        if (m_ctld.state() != QProcess::NotRunning) {
            (void)client(QStringLiteral("scancel"), {QStringLiteral("--full"), QStringLiteral("--user=root")});
            waitFor([&] { return client(QStringLiteral("squeue"), {QStringLiteral("-h")}).out.trimmed().isEmpty(); }, 20000);
        }
        for (QProcess *p : {&m_slurmd, &m_ctld, &m_munged})
            if (p->state() != QProcess::NotRunning) {
                p->terminate();
                if (!p->waitForFinished(10000)) {
                    p->kill();
                    p->waitForFinished(5000);
                }
            }
        for (const qint64 pid : leftovers())
            ::kill(static_cast<pid_t>(pid), SIGKILL);
    }

    /// Processes started by this cluster that are still alive (slurmstepd, job shells, tasks): those
    /// whose environment holds this cluster's SLURM_CONF.
    [[nodiscard]] QList<qint64> leftovers() const
    {
        QList<qint64> out;
        if (m_dir.isEmpty())
            return out;
        const QByteArray needle = "SLURM_CONF=" + conf_().toUtf8();
        for (const QString &e : QDir(QStringLiteral("/proc")).entryList(QDir::Dirs)) {
            bool ok = false;
            const qint64 pid = e.toLongLong(&ok);
            if (!ok || pid == ::getpid())
                continue;
            QFile f(QStringLiteral("/proc/%1/environ").arg(pid));
            if (f.open(QIODevice::ReadOnly) && f.readAll().split('\0').contains(needle))
                out << pid;
        }
        return out;
    }

    /// Runs a Slurm client (squeue, scontrol, sbatch...) against this cluster.
    [[nodiscard]] ProcessResult client(const QString &program, const QStringList &args) const
    {
        QProcess p;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SLURM_CONF"), conf_());
        p.setProcessEnvironment(env);
        p.start(program, args);
        if (!p.waitForFinished(30000)) {
            p.kill();
            p.waitForFinished();
            return {-1, QString(), QStringLiteral("timed out: ") + program};
        }
        return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
                QString::fromUtf8(p.readAllStandardError())};
    }

    [[nodiscard]] QString path(const QString &name) const { return m_dir + QLatin1Char('/') + name; }
    [[nodiscard]] QString envScript() const { return path(QStringLiteral("slurm-env.sh")); }
    [[nodiscard]] QString node() const { return m_node; }
    [[nodiscard]] QString tail(const QString &log) const
    {
        QFile f(path(log));
        if (!f.open(QIODevice::ReadOnly))
            return QStringLiteral("(no %1)").arg(log);
        return QString::fromUtf8(f.readAll().right(1500));
    }

private:
    [[nodiscard]] QString conf_() const { return path(QStringLiteral("slurm.conf")); }
    bool write(const QString &name, const QByteArray &data) const
    {
        QFile f(path(name));
        return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(data) == data.size();
    }
    void start(QProcess &p, const QString &program, const QStringList &args)
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("SLURM_CONF"), conf_());
        p.setProcessEnvironment(env);
        p.setStandardOutputFile(path(QStringLiteral("log/") + QFileInfoName(program) + QStringLiteral(".out")));
        p.setStandardErrorFile(path(QStringLiteral("log/") + QFileInfoName(program) + QStringLiteral(".err")));
        p.start(program, args);
        p.waitForStarted();
    }
    static QString QFileInfoName(const QString &program) { return program.section(QLatin1Char('/'), -1); }
    template<typename F>
    static bool waitFor(F &&ready, int ms)
    {
        QElapsedTimer t;
        t.start();
        while (!ready()) {
            if (t.elapsed() > ms)
                return false;
            QThread::msleep(200);
        }
        return true;
    }

    QString m_dir, m_node;
    QProcess m_munged, m_ctld, m_slurmd;
};

} // namespace cppl::test
