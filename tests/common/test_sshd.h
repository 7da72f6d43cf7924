// SPDX-License-Identifier: MIT
// A real OpenSSH sshd on 127.0.0.1 for tests: its own config, host key and authorized_keys in a
// directory the test owns, and an ssh_config whose aliases node1..node3 point at it with the
// fixture's client key. Nothing of the user's ~/.ssh is read or written (known_hosts too is the
// fixture's file, absent until something records a key).
#pragma once

#include "test_process.h"

#include "cppl/host.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QString>
#include <QThread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace cppl::test {

class TestSshd
{
public:
    ~TestSshd() { stop(); }

    /// Starts sshd with everything under @p dir. Empty on success, else why it cannot run here
    /// (a reason to skip with CPPL_SKIP_MISSING, or a setup failure the caller reports).
    QString start(const QString &dir)
    {
        m_dir = dir;
        if (!QFile::exists(QStringLiteral("/usr/sbin/sshd")))
            return QStringLiteral("no /usr/sbin/sshd (install openssh-server)");
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
        if (!write(path("sshd_config"), config.toUtf8()))
            return QStringLiteral("cannot write %1").arg(path("sshd_config"));
        m_sshd.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        m_sshd.start(QStringLiteral("/usr/sbin/sshd"), {QStringLiteral("-D"), QStringLiteral("-e"), QStringLiteral("-f"), path("sshd_config")});
        if (!m_sshd.waitForStarted())
            return QStringLiteral("sshd did not start: %1").arg(m_sshd.errorString());
        QElapsedTimer t;
        t.start();
        while (!portOpen(m_port) && t.elapsed() < 10000)
            QThread::msleep(50);
        if (!portOpen(m_port))
            return QStringLiteral("sshd did not start listening on 127.0.0.1:%1").arg(m_port);
        QString user = qEnvironmentVariable("USER", QStringLiteral("root"));
        if (user.isEmpty())
            user = QStringLiteral("root");
        const QString sshConfig = QStringLiteral("Host node1 node2 node3\n  HostName 127.0.0.1\n  Port %1\n  User %2\n  IdentityFile %3\n")
                                      .arg(m_port)
                                      .arg(user, path("client_key"));
        if (!write(sshConfigFile(), sshConfig.toUtf8()))
            return QStringLiteral("cannot write %1").arg(sshConfigFile());
        qunsetenv("SSH_AUTH_SOCK"); // only the fixture's key
        return {};
    }

    void stop()
    {
        if (m_sshd.state() != QProcess::NotRunning) {
            m_sshd.terminate();
            m_sshd.waitForFinished(5000);
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
    [[nodiscard]] QString path(const char *name) const { return m_dir + QLatin1Char('/') + QLatin1String(name); }

    static bool portOpen(int port)
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

private:
    static bool write(const QString &file, const QByteArray &data)
    {
        QFile f(file);
        return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(data) == data.size();
    }
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

    QString m_dir;
    QProcess m_sshd;
    int m_port = 0;
};

} // namespace cppl::test
