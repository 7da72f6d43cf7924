// SPDX-License-Identifier: MIT
// A real OpenSSH sshd on 127.0.0.1 for tests: its own config, host key and authorized_keys in a
// directory the test owns, and an ssh_config whose host aliases (node1..node3 unless the test names
// others) point at it with the fixture's client key. Tests reach it through the launchers' libssh
// code exactly as they would reach a cluster's host. Nothing of the user's ~/.ssh is read or
// written: known_hosts too is the fixture's file, absent until something records a key (or the test
// calls recordHostKey()).
#pragma once

#include "test_process.h"

#include "cppl/host.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QThread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cppl::test {

/// Whether something accepts TCP connections on 127.0.0.1:@p port.
inline bool loopbackPortOpen(int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

class TestSshd
{
public:
    ~TestSshd() { stop(); }

    /// Starts sshd with everything under @p dir; the hosts @p aliases lead to it. Empty on success,
    /// else why it cannot run here (a reason to skip with CPPL_SKIP_MISSING, failing under CI).
    /// SSH_AUTH_SOCK is unset: only the fixture's key is offered.
    QString start(const QString &dir,
                  const QStringList &aliases = {QStringLiteral("node1"), QStringLiteral("node2"), QStringLiteral("node3")})
    {
        m_dir = dir;
        if (!QFile::exists(QStringLiteral("/usr/sbin/sshd")))
            return QStringLiteral("no /usr/sbin/sshd (install openssh-server: scripts/install-deps.sh)");
        if (!QDir().mkpath(QStringLiteral("/run/sshd")))
            return QStringLiteral("cannot create /run/sshd (sshd's privilege-separation directory; run as root once)");
        if (!keygen(path("host_key")) || !keygen(path("client_key")))
            return QStringLiteral("ssh-keygen failed in %1").arg(dir);
        QFile::remove(path("authorized_keys"));
        if (!QFile::copy(path("client_key.pub"), path("authorized_keys")))
            return QStringLiteral("cannot write %1").arg(path("authorized_keys"));
        m_port = cppl::freeLoopbackPort();
        const QString config = QStringLiteral("Port %1\nListenAddress 127.0.0.1\nHostKey %2\nAuthorizedKeysFile %3\nPidFile %4\n"
                                              "UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                                              "PermitRootLogin prohibit-password\nMaxSessions 128\nMaxStartups 128\nLogLevel ERROR\n")
                                   .arg(m_port)
                                   .arg(path("host_key"), path("authorized_keys"), path("sshd.pid"));
        if (!writeFile(path("sshd_config"), config.toUtf8()))
            return QStringLiteral("cannot write %1").arg(path("sshd_config"));
        m_sshd.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        m_sshd.start(QStringLiteral("/usr/sbin/sshd"), {QStringLiteral("-D"), QStringLiteral("-e"), QStringLiteral("-f"), path("sshd_config")});
        if (!m_sshd.waitForStarted())
            return QStringLiteral("sshd did not start: %1").arg(m_sshd.errorString());
        QElapsedTimer t;
        t.start();
        while (!loopbackPortOpen(m_port) && t.elapsed() < 10000)
            QThread::msleep(50);
        if (!loopbackPortOpen(m_port))
            return QStringLiteral("sshd did not start listening on 127.0.0.1:%1").arg(m_port);
        QString user = qEnvironmentVariable("USER", QStringLiteral("root"));
        if (user.isEmpty())
            user = QStringLiteral("root");
        const QString sshConfig = QStringLiteral("Host %1\n  HostName 127.0.0.1\n  Port %2\n  User %3\n  IdentityFile %4\n")
                                      .arg(aliases.join(QLatin1Char(' ')))
                                      .arg(m_port)
                                      .arg(user, path("client_key"));
        if (!writeFile(sshConfigFile(), sshConfig.toUtf8()))
            return QStringLiteral("cannot write %1").arg(sshConfigFile());
        qunsetenv("SSH_AUTH_SOCK");
        return {};
    }

    /// Writes known_hosts with the fixture's host key for [127.0.0.1]:PORT, as a host already
    /// trusted. Empty on success, else what failed.
    QString recordHostKey() const
    {
        QFile pub(path("host_key.pub"));
        if (!pub.open(QIODevice::ReadOnly))
            return QStringLiteral("cannot read %1").arg(pub.fileName());
        const QList<QByteArray> words = pub.readAll().split(' ');
        if (!writeFile(knownHosts(),
                           QStringLiteral("[127.0.0.1]:%1 ").arg(m_port).toUtf8() + words.value(0) + ' ' + words.value(1).trimmed() + '\n'))
            return QStringLiteral("cannot write %1").arg(knownHosts());
        return {};
    }

    void stop()
    {
        if (m_sshd.state() != QProcess::NotRunning) {
            m_sshd.terminate();
            if (!m_sshd.waitForFinished(5000)) {
                m_sshd.kill();
                m_sshd.waitForFinished(5000);
            }
        }
    }

    [[nodiscard]] int port() const { return m_port; }
    [[nodiscard]] QString sshConfigFile() const { return path("ssh_config"); }
    [[nodiscard]] QString knownHosts() const { return path("known_hosts"); }
    /// The known_hosts file's content (empty when it does not exist).
    [[nodiscard]] QByteArray knownHostsContent() const
    {
        QFile f(knownHosts());
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }
    /// A file of the fixture's directory (host_key, client_key, authorized_keys, sshd_config, ...).
    [[nodiscard]] QString path(const char *name) const { return m_dir + QLatin1Char('/') + QLatin1String(name); }

    /// A new passphrase-less ed25519 key pair at @p file and @p file.pub (replacing any).
    static bool keygen(const QString &file)
    {
        QFile::remove(file);
        QFile::remove(file + QStringLiteral(".pub"));
        return runProcess(QStringLiteral("ssh-keygen"),
                          {QStringLiteral("-q"), QStringLiteral("-t"), QStringLiteral("ed25519"), QStringLiteral("-N"), QString(),
                           QStringLiteral("-f"), file},
                          30000)
                   .exitCode == 0;
    }

private:
    QString m_dir;
    QProcess m_sshd;
    int m_port = 0;
};

} // namespace cppl::test
