// SPDX-License-Identifier: MIT
// A real OpenSSH sshd on 127.0.0.1 with its own config, host key and authorized_keys in a directory
// the test owns, and an ssh_config naming it by aliases. Tests reach it through the launchers'
// libssh code exactly as they would reach a cluster's host.
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

inline bool writeTextFile(const QString &path, const QByteArray &data)
{
    QFile f(path);
    return f.open(QIODevice::WriteOnly | QIODevice::Truncate) && f.write(data) == data.size();
}

class TestSshd
{
public:
    ~TestSshd() { stop(); }

    /// Starts sshd with its files in @p dir; hosts @p aliases lead to it. Empty on success, else why not.
    QString start(const QString &dir, const QStringList &aliases)
    {
        m_dir = dir;
        if (!QFile::exists(QStringLiteral("/usr/sbin/sshd")))
            return QStringLiteral("no /usr/sbin/sshd (install openssh-server: scripts/install-deps.sh)");
        if (!QDir().mkpath(QStringLiteral("/run/sshd")))
            return QStringLiteral("cannot create /run/sshd (sshd's privilege-separation directory; run as root once)");
        for (const char *k : {"host_key", "client_key"}) {
            const QString p = path(QString::fromLatin1(k));
            QFile::remove(p);
            QFile::remove(p + QStringLiteral(".pub"));
            if (runProcess(QStringLiteral("ssh-keygen"), {QStringLiteral("-q"), QStringLiteral("-t"), QStringLiteral("ed25519"), QStringLiteral("-N"),
                                                           QString(), QStringLiteral("-f"), p},
                           30000)
                    .exitCode
                != 0)
                return QStringLiteral("ssh-keygen failed");
        }
        QFile::remove(path(QStringLiteral("authorized_keys")));
        if (!QFile::copy(path(QStringLiteral("client_key.pub")), path(QStringLiteral("authorized_keys"))))
            return QStringLiteral("cannot write authorized_keys");
        m_port = freeLoopbackPort();
        const QString config = QStringLiteral("Port %1\nListenAddress 127.0.0.1\nHostKey %2\nAuthorizedKeysFile %3\nPidFile %4\n"
                                              "UsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                                              "PermitRootLogin prohibit-password\nMaxSessions 128\nMaxStartups 128\nLogLevel ERROR\n")
                                   .arg(m_port)
                                   .arg(path(QStringLiteral("host_key")), path(QStringLiteral("authorized_keys")), path(QStringLiteral("sshd.pid")));
        if (!writeTextFile(path(QStringLiteral("sshd_config")), config.toUtf8()))
            return QStringLiteral("cannot write sshd_config");
        m_sshd.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        m_sshd.start(QStringLiteral("/usr/sbin/sshd"), {QStringLiteral("-D"), QStringLiteral("-e"), QStringLiteral("-f"), path(QStringLiteral("sshd_config"))});
        if (!m_sshd.waitForStarted())
            return QStringLiteral("sshd did not start: ") + m_sshd.errorString();
        QElapsedTimer t;
        t.start();
        while (!loopbackPortOpen(m_port) && t.elapsed() < 10000)
            QThread::msleep(50);
        if (!loopbackPortOpen(m_port))
            return QStringLiteral("sshd did not start listening on port %1").arg(m_port);
        const QString user = qEnvironmentVariable("USER", QStringLiteral("root"));
        const QString sshConfig = QStringLiteral("Host %1\n  HostName 127.0.0.1\n  Port %2\n  User %3\n  IdentityFile %4\n")
                                      .arg(aliases.join(QLatin1Char(' ')))
                                      .arg(m_port)
                                      .arg(user.isEmpty() ? QStringLiteral("root") : user, path(QStringLiteral("client_key")));
        if (!writeTextFile(path(QStringLiteral("ssh_config")), sshConfig.toUtf8()))
            return QStringLiteral("cannot write ssh_config");
        // The host key, as known_hosts records it for [127.0.0.1]:PORT.
        QFile pub(path(QStringLiteral("host_key.pub")));
        if (!pub.open(QIODevice::ReadOnly))
            return QStringLiteral("cannot read the host key");
        const QList<QByteArray> words = pub.readAll().split(' ');
        if (!writeTextFile(path(QStringLiteral("known_hosts")),
                           QStringLiteral("[127.0.0.1]:%1 ").arg(m_port).toUtf8() + words.value(0) + ' ' + words.value(1).trimmed() + '\n'))
            return QStringLiteral("cannot write known_hosts");
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

    [[nodiscard]] QString path(const QString &name) const { return m_dir + QLatin1Char('/') + name; }
    [[nodiscard]] QString sshConfig() const { return path(QStringLiteral("ssh_config")); }
    [[nodiscard]] QString knownHosts() const { return path(QStringLiteral("known_hosts")); }
    [[nodiscard]] int port() const { return m_port; }

private:
    QString m_dir;
    QProcess m_sshd;
    int m_port = 0;
};

} // namespace cppl::test
