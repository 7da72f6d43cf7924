// SPDX-License-Identifier: MIT
#include "netns_cluster.h"

#include "test_sshd.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QProcessEnvironment>
#include <QStandardPaths>
#include <QThread>

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cppl::test {

namespace {

bool tcpOpen(const QString &address, int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.toLatin1().constData(), &a.sin_addr);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

template<typename F>
bool waitFor(F &&ready, int ms)
{
    QElapsedTimer t;
    t.start();
    while (!ready()) {
        if (t.elapsed() > ms)
            return false;
        QThread::msleep(100);
    }
    return true;
}

/// The network namespace of @p pid, as /proc shows it ("net:[4026532...]").
QString netnsOf(qint64 pid)
{
    return QFileInfo(QStringLiteral("/proc/%1/ns/net").arg(pid)).symLinkTarget().section(QLatin1Char('/'), -1);
}

} // namespace

QString NetnsCluster::script()
{
    return QStringLiteral(CPPL_SOURCE_DIR "/tests/common/netns_cluster.sh");
}

ProcessResult NetnsCluster::run(const QStringList &args, int timeoutMs) const
{
    return runProcess(QStringLiteral("bash"), QStringList{script()} + args, timeoutMs);
}

QString NetnsCluster::start(const QString &dir, int nodes, int racks)
{
    if (::geteuid() != 0)
        return QStringLiteral("network namespaces need root (run the test as root, as CI does)");
    for (const char *tool : {"ip", "tc", "unshare", "nsenter"})
        if (QStandardPaths::findExecutable(QString::fromLatin1(tool), {QStringLiteral("/usr/sbin"), QStringLiteral("/usr/bin"), QStringLiteral("/sbin"), QStringLiteral("/bin")}).isEmpty())
            return QStringLiteral("%1 is missing (scripts/install-deps.sh installs iproute2 and util-linux)").arg(QString::fromLatin1(tool));
    m_dir = dir;
    m_nodes = nodes;
    static int s_count = 0;
    m_tag = QString::number(QCoreApplication::applicationPid()) + QLatin1Char(static_cast<char>('a' + s_count++ % 26));
    const ProcessResult sweep = run({QStringLiteral("sweep")});
    if (sweep.exitCode != 0)
        return QStringLiteral("netns_cluster.sh sweep failed: ") + sweep.describe();
    const ProcessResult up = run({QStringLiteral("up"), dir, m_tag, QString::number(nodes), QString::number(QCoreApplication::applicationPid()),
                                  QString::number(racks)});
    m_up = true; // whatever `up` made is removed by stop(), also after a failure half-way
    if (up.exitCode != 0)
        return QStringLiteral("netns_cluster.sh up failed: ") + up.describe();
    m_net = up.out.trimmed();
    for (int n = 1; n <= nodes; ++n) { // the nodes reach this host and each other, and know their names
        const ProcessResult ping = exec(n, {QStringLiteral("sh"), QStringLiteral("-c"), QStringLiteral("hostname; getent hosts node1 head")});
        if (ping.exitCode != 0 || !ping.out.startsWith(QStringLiteral("node%1\n").arg(n)) || !ping.out.contains(address(1)))
            return QStringLiteral("node %1 is not set up: %2").arg(n).arg(ping.describe());
    }
    return {};
}

QString NetnsCluster::daemon(const QString &name, const QStringList &command, int node)
{
    auto p = std::make_unique<QProcess>();
    // Dies with this process, whatever ends it (the sweep removes what its children left).
    p->setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
    QDir().mkpath(path(QStringLiteral("log")));
    p->setStandardOutputFile(path(QStringLiteral("log/%1.out").arg(name)));
    p->setStandardErrorFile(path(QStringLiteral("log/%1.err").arg(name)));
    if (node > 0)
        p->start(QStringLiteral("bash"), QStringList{script(), QStringLiteral("exec"), m_tag, QString::number(node)} + command);
    else
        p->start(command.front(), command.mid(1));
    if (!p->waitForStarted())
        return QStringLiteral("%1 did not start: %2").arg(name, p->errorString());
    m_daemons.push_back(std::move(p));
    return {};
}

QString NetnsCluster::startSshd()
{
    if (!QFile::exists(QStringLiteral("/usr/sbin/sshd")))
        return QStringLiteral("no /usr/sbin/sshd (install openssh-server: scripts/install-deps.sh)");
    if (!QDir().mkpath(QStringLiteral("/run/sshd")) || !QDir().mkpath(path(QStringLiteral("ssh"))))
        return QStringLiteral("cannot create /run/sshd or %1").arg(path(QStringLiteral("ssh")));
    const QString client = path(QStringLiteral("ssh/client_key"));
    if (!TestSshd::keygen(client) || !QFile::copy(client + QStringLiteral(".pub"), path(QStringLiteral("ssh/authorized_keys"))))
        return QStringLiteral("ssh-keygen failed in %1").arg(path(QStringLiteral("ssh")));
    QString sshConfigText, knownHostsText;
    for (int n = 1; n <= m_nodes; ++n) {
        const QString key = path(QStringLiteral("ssh/node%1_host_key").arg(n));
        if (!TestSshd::keygen(key))
            return QStringLiteral("ssh-keygen failed for %1").arg(key);
        const QString conf = QStringLiteral("Port 22\nListenAddress %1\nHostKey %2\nAuthorizedKeysFile %3\nPidFile %4\n"
                                            "UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                                            "PermitRootLogin prohibit-password\nMaxSessions 128\nMaxStartups 128\nLogLevel ERROR\n")
                                 .arg(address(n), key, path(QStringLiteral("ssh/authorized_keys")), path(QStringLiteral("ssh/node%1.pid").arg(n)));
        if (!writeFile(path(QStringLiteral("ssh/node%1_sshd_config").arg(n)), conf.toUtf8()))
            return QStringLiteral("cannot write the sshd config of node %1").arg(n);
        if (const QString why = daemon(QStringLiteral("sshd-node%1").arg(n),
                                       {QStringLiteral("/usr/sbin/sshd"), QStringLiteral("-D"), QStringLiteral("-e"), QStringLiteral("-f"),
                                        path(QStringLiteral("ssh/node%1_sshd_config").arg(n))},
                                       n);
            !why.isEmpty())
            return why;
        const QList<QByteArray> pub = readFile(key + QStringLiteral(".pub")).split(' ');
        knownHostsText += address(n) + QLatin1Char(' ') + QString::fromUtf8(pub.value(0)) + QLatin1Char(' ') + QString::fromUtf8(pub.value(1).trimmed()) + QLatin1Char('\n');
        sshConfigText += QStringLiteral("Host node%1%2\n  HostName %3\n  Port 22\n  User root\n  IdentityFile %4\n")
                         .arg(n)
                         .arg(n == 1 ? QStringLiteral(" login") : QString(), address(n), client);
    }
    if (!writeFile(sshConfigFile(), sshConfigText.toUtf8()) || !writeFile(knownHosts(), knownHostsText.toUtf8()))
        return QStringLiteral("cannot write %1 or %2").arg(sshConfigFile(), knownHosts());
    for (int n = 1; n <= m_nodes; ++n)
        if (!waitFor([&] { return tcpOpen(address(n), 22); }, 20000))
            return QStringLiteral("node %1's sshd does not listen on %2:22: %3").arg(n).arg(address(n), tail(QStringLiteral("log/sshd-node%1.err").arg(n)));
    qunsetenv("SSH_AUTH_SOCK");
    return {};
}

QString NetnsCluster::writeSlurmConf()
{
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    const long long memMb = static_cast<long long>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / (1024 * 1024);
    QString conf = QStringLiteral("ClusterName=cpplnetns\nSlurmctldHost=head(%1)\nSlurmctldPort=%2\nSlurmdPort=6818\n"
                                  "AuthType=auth/munge\nAuthInfo=socket=%3\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n"
                                  "StateSaveLocation=%4\nSlurmdSpoolDir=%5/%n\nSlurmctldPidFile=%6\nSlurmdPidFile=%7/slurmd.%n.pid\n"
                                  "SlurmctldLogFile=%8\nSlurmdLogFile=%9/slurmd.%n.log\n")
                       .arg(hostAddress())
                       .arg(freeLoopbackPort())
                       .arg(path(QStringLiteral("slurm/munge/sock")), path(QStringLiteral("slurm/state")), path(QStringLiteral("slurm/spool")),
                            path(QStringLiteral("slurm/slurmctld.pid")), path(QStringLiteral("slurm")), path(QStringLiteral("log/slurmctld.log")),
                            path(QStringLiteral("log")));
    conf += QStringLiteral("ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
                           "SelectTypeParameters=CR_Core\nSchedulerType=sched/builtin\nReturnToService=2\nMpiDefault=none\n"
                           "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
                           "SlurmctldTimeout=30\nSlurmdTimeout=30\nInactiveLimit=0\nKillWait=2\nMinJobAge=600\n");
    // Every slurmd sees this machine's CPUs and memory; each node says so.
    for (int n = 1; n <= m_nodes; ++n)
        conf += QStringLiteral("NodeName=node%1 NodeAddr=%2 CPUs=%3 RealMemory=%4 State=UNKNOWN\n")
                    .arg(n)
                    .arg(address(n))
                    .arg(cpus)
                    .arg(std::max<long long>(1, memMb * 9 / 10));
    conf += QStringLiteral("PartitionName=debug Nodes=node[1-%1] Default=YES MaxTime=INFINITE State=UP\n").arg(m_nodes);
    if (!writeFile(slurmConf(), conf.toUtf8()) || !writeFile(slurmEnvScript(), "export SLURM_CONF=" + slurmConf().toUtf8() + "\n"))
        return QStringLiteral("cannot write %1").arg(slurmConf());
    return {};
}

QString NetnsCluster::startSlurm()
{
    for (const char *exe : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/bin/sinfo"})
        if (!QFile::exists(QString::fromLatin1(exe)))
            return QStringLiteral("%1 is missing (scripts/install-deps.sh installs munge, slurmctld, slurmd, slurm-client)").arg(QString::fromLatin1(exe));
    for (const char *sub : {"slurm/munge", "slurm/state", "log"})
        if (!QDir().mkpath(path(QString::fromLatin1(sub))))
            return QStringLiteral("cannot create %1").arg(path(QString::fromLatin1(sub)));
    for (int n = 1; n <= m_nodes; ++n)
        QDir().mkpath(path(QStringLiteral("slurm/spool/node%1").arg(n)));
    QFile key(path(QStringLiteral("slurm/munge/munge.key")));
    QFile random(QStringLiteral("/dev/urandom"));
    if (!key.open(QIODevice::WriteOnly) || !random.open(QIODevice::ReadOnly) || key.write(random.read(1024)) != 1024)
        return QStringLiteral("cannot write the munge key");
    key.close();
    key.setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    if (const QString why = writeSlurmConf(); !why.isEmpty())
        return why;
    qputenv("SLURM_CONF", slurmConf().toUtf8()); // the daemons and clients started from here read it
    const QString sock = path(QStringLiteral("slurm/munge/sock"));
    QString why = daemon(QStringLiteral("munged"),
                         {QStringLiteral("/usr/sbin/munged"), QStringLiteral("-F"), QStringLiteral("--force"), QStringLiteral("--socket=") + sock,
                          QStringLiteral("--key-file=") + key.fileName(), QStringLiteral("--log-file=") + path(QStringLiteral("log/munged.log")),
                          QStringLiteral("--pid-file=") + path(QStringLiteral("slurm/munge/munged.pid")),
                          QStringLiteral("--seed-file=") + path(QStringLiteral("slurm/munge/seed"))},
                         0);
    if (why.isEmpty() && !waitFor([&] { return QFile::exists(sock); }, 10000))
        why = QStringLiteral("munged did not create its socket: ") + tail(QStringLiteral("log/munged.log"));
    // The controller runs on this host under the name "head" (its own UTS namespace).
    if (why.isEmpty())
        why = daemon(QStringLiteral("slurmctld"),
                     {QStringLiteral("/usr/bin/unshare"), QStringLiteral("--uts"), QStringLiteral("--"), QStringLiteral("sh"), QStringLiteral("-c"),
                      QStringLiteral("hostname head && exec /usr/sbin/slurmctld -D -i -f \"$0\""), slurmConf()},
                     0);
    for (int n = 1; n <= m_nodes && why.isEmpty(); ++n)
        why = daemon(QStringLiteral("slurmd-node%1").arg(n),
                     {QStringLiteral("/usr/sbin/slurmd"), QStringLiteral("-D"), QStringLiteral("-f"), slurmConf(), QStringLiteral("-N"), QStringLiteral("node%1").arg(n)},
                     n);
    if (!why.isEmpty())
        return why;
    QString last;
    const bool idle = waitFor(
        [&] {
            const ProcessResult r = runProcess(QStringLiteral("sinfo"), {QStringLiteral("-h"), QStringLiteral("-N"), QStringLiteral("-o"), QStringLiteral("%N %T")}, 30000);
            last = r.out + r.err;
            return r.exitCode == 0 && r.out.count(QStringLiteral(" idle\n")) == m_nodes;
        },
        90000);
    if (!idle)
        return QStringLiteral("the nodes did not become idle in 90 s (sinfo: %1); slurmctld: %2; slurmd of node1: %3")
            .arg(last, tail(QStringLiteral("log/slurmctld.log")), tail(QStringLiteral("log/slurmd.node1.log")));
    return {};
}

void NetnsCluster::stop()
{
    if (!qEnvironmentVariableIsEmpty("SLURM_CONF") && qgetenv("SLURM_CONF") == slurmConf().toUtf8()) {
        (void)runProcess(QStringLiteral("scancel"), {QStringLiteral("--full"), QStringLiteral("--user=root")}, 20000);
        qunsetenv("SLURM_CONF");
    }
    for (auto it = m_daemons.rbegin(); it != m_daemons.rend(); ++it) {
        (*it)->terminate();
        if (!(*it)->waitForFinished(5000)) {
            (*it)->kill();
            (*it)->waitForFinished(5000);
        }
    }
    m_daemons.clear();
    if (m_up)
        (void)run({QStringLiteral("down"), m_tag});
    m_up = false;
}

ProcessResult NetnsCluster::exec(int node, const QStringList &command, int timeoutMs) const
{
    return run(QStringList{QStringLiteral("exec"), m_tag, QString::number(node)} + command, timeoutMs);
}

QString NetnsCluster::setLink(int node, bool up) const
{
    const ProcessResult r = run({QStringLiteral("link"), m_tag, QString::number(node), up ? QStringLiteral("up") : QStringLiteral("down")});
    return r.exitCode == 0 ? QString() : r.describe();
}

QString NetnsCluster::limitRacks(const QString &rate, const QString &burst) const
{
    const ProcessResult r = run({QStringLiteral("rate"), m_tag, rate, burst});
    return r.exitCode == 0 ? QString() : r.describe();
}

QList<qint64> NetnsCluster::processesOn(int node) const
{
    QList<qint64> out;
    const ProcessResult r = runProcess(QStringLiteral("ip"), {QStringLiteral("netns"), QStringLiteral("pids"), QStringLiteral("cppl-%1-node%2").arg(m_tag).arg(node)}, 30000);
    for (const QString &line : r.out.split(QLatin1Char('\n'), Qt::SkipEmptyParts))
        if (const qint64 pid = line.trimmed().toLongLong(); pid > 0 && isRunning(pid))
            out << pid;
    return out;
}

int NetnsCluster::nodeOf(qint64 pid) const
{
    const QString ns = netnsOf(pid);
    for (int n = 1; n <= m_nodes && !ns.isEmpty(); ++n)
        for (const qint64 p : processesOn(n))
            if (netnsOf(p) == ns)
                return n;
    return 0;
}

QString NetnsCluster::tail(const QString &file) const
{
    const QByteArray all = readFile(path(file));
    return all.isEmpty() ? QStringLiteral("(no %1)").arg(file) : QString::fromUtf8(all.right(1500));
}

} // namespace cppl::test
