// SPDX-License-Identifier: MIT
#include "cppl/host.h"

#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

using namespace cppl;

namespace {

/// Listens on 127.0.0.1:@p port; the socket, or -1 when the port is taken.
int listenOn(int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0) {
        if (fd >= 0)
            ::close(fd);
        return -1;
    }
    return fd;
}

} // namespace

class TestHost : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void loopbackHosts()
    {
        QVERIFY(isLoopbackHost("localhost"));
        QVERIFY(isLoopbackHost("127.0.0.1"));
        QVERIFY(isLoopbackHost("127.3.2.1"));
        QVERIFY(isLoopbackHost("::1"));
        QVERIFY(!isLoopbackHost("10.0.0.1"));
        QVERIFY(!isLoopbackHost("node07"));
        QVERIFY(!isLoopbackHost("::2"));
    }

    void freePortIsBelowTheEphemeralRangeAndListenable()
    {
        // Outgoing connections take their source ports from the ephemeral range: a port picked
        // there can be gone before a listener binds it (two tests' runs met on one such port).
        const auto [lo, hi] = ephemeralPortRange();
        QVERIFY2(lo > 0 && hi >= lo && hi <= 65535, qPrintable(QStringLiteral("%1-%2").arg(lo).arg(hi)));
        std::set<int> seen;
        for (int i = 0; i < 50; ++i) {
            const int port = freeLoopbackPort();
            QVERIFY2(port < lo || port > hi, qPrintable(QStringLiteral("port %1 is in the ephemeral range %2-%3").arg(port).arg(lo).arg(hi)));
            const int fd = listenOn(port);
            QVERIFY2(fd >= 0, qPrintable(QStringLiteral("port %1 was not free").arg(port)));
            ::close(fd);
            seen.insert(port);
        }
        // Random, not a fixed sequence two callers at the same moment would share.
        QVERIFY2(seen.size() >= 45, qPrintable(QStringLiteral("%1 distinct ports in 50 calls").arg(seen.size())));
    }

    void freePortSkipsATakenPort()
    {
        // Hold many ports: none is returned while held.
        std::set<int> held;
        std::vector<int> fds;
        for (int i = 0; i < 20; ++i) {
            const int port = freeLoopbackPort();
            const int fd = listenOn(port);
            QVERIFY(fd >= 0);
            fds.push_back(fd);
            held.insert(port);
        }
        for (int i = 0; i < 200; ++i)
            QVERIFY(!held.contains(freeLoopbackPort()));
        for (int fd : fds)
            ::close(fd);
    }
};

QTEST_GUILESS_MAIN(TestHost)
#include "tst_host.moc"
