// SPDX-License-Identifier: MIT
// `clusterppl-agent store` as real processes: ranks meet on it instead of on rank 0 (also while a
// client holds half a request), it stops on its stdin's EOF and on SIGTERM, and a port in use or
// an address of another host is refused with what to do (docs/communication.md, "The store
// outside rank 0").
#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QScopeGuard>
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

using namespace Qt::StringLiterals;
using cppl::test::ProcessResult;
using cppl::test::runProcess;

using cppl::test::kAgent;
using cppl::test::startStore;

namespace {

/// Whether a TCP connection to 127.0.0.2:@p port is accepted: Linux routes all of 127.0.0.0/8 to
/// the loopback device, so a store on every interface answers there and one on 127.0.0.1 does not.
bool answersAtOtherLoopback(int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl((127u << 24) | 2u);
    const bool ok = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0;
    if (fd >= 0)
        ::close(fd);
    return ok;
}

} // namespace

class TestRendezvousCommand : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void ranksMeetOnItAndItEndsOnStdinEof()
    {
        QProcess store;
        QByteArray out;
        const int port = startStore(store, kAgent, {u"--port"_s, u"0"_s, u"--bind"_s, u"127.0.0.1"_s}, out);
        CPPL_VERIFY2(port > 0, out.constData());
        CPPL_VERIFY2(QJsonDocument::fromJson(out.mid(17, out.indexOf('\n') - 17)).object().value(u"addr"_s).toString() == u"127.0.0.1"_s,
                 out.constData());
        // --bind 127.0.0.1 (a local run's store) is served there only.
        QVERIFY(!answersAtOtherLoopback(port));
        // A client stopped right after the first byte of a request (an ADD's query byte: a rank
        // stopped between the send() calls of a batch claim). c10d 1.13's own server then waited
        // for the rest and answered nobody else (rendezvous_server.h); the ranks below must still meet.
        const int held = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(static_cast<std::uint16_t>(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        QVERIFY(held >= 0 && ::connect(held, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
        const char add = 3;
        QCOMPARE(::send(held, &add, 1, MSG_NOSIGNAL), ssize_t{1});
        const auto closeHeld = qScopeGuard([held] { ::close(held); });
        // Two ranks of the collective self-test meet on it, rank 0 serving nothing
        // (TORCHELASTIC_USE_AGENT_STORE=True, as torchrun's agent and the CLI's launchers set it).
        std::vector<std::unique_ptr<QProcess>> ranks;
        for (int r = 0; r < 2; ++r) {
            auto p = std::make_unique<QProcess>();
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            env.insert(u"TORCHELASTIC_USE_AGENT_STORE"_s, u"True"_s);
            p->setProcessEnvironment(env);
            p->start(kAgent, {u"comm-check"_s, u"--backend"_s, u"gloo"_s, u"--words"_s, u"1,7"_s, u"--timeout"_s, u"30"_s, u"--rank"_s,
                              QString::number(r), u"--world-size"_s, u"2"_s, u"--master-addr"_s, u"127.0.0.1"_s, u"--master-port"_s,
                              QString::number(port)});
            ranks.push_back(std::move(p));
        }
        for (auto &p : ranks) {
            QVERIFY(p->waitForFinished(60000));
            CPPL_VERIFY2(p->exitStatus() == QProcess::NormalExit && p->exitCode() == 0, p->readAllStandardError().constData());
        }
        // It outlived both ranks, and its stdin's EOF (an SSH session's end) stops it, exit 0.
        QCOMPARE(store.state(), QProcess::Running);
        store.closeWriteChannel();
        QVERIFY(store.waitForFinished(10000));
        QCOMPARE(store.exitStatus(), QProcess::NormalExit);
        QCOMPARE(store.exitCode(), 0);
        QVERIFY(store.readAllStandardError().contains("stdin closed"));
    }

    void sigtermEndsIt()
    {
        QProcess store;
        QByteArray out;
        const int port = startStore(store, kAgent, {}, out); // --port 0, --bind 0.0.0.0
        CPPL_VERIFY2(port > 0, out.constData());
        QVERIFY(answersAtOtherLoopback(port)); // every interface
        QCOMPARE(::kill(static_cast<pid_t>(store.processId()), SIGTERM), 0);
        QVERIFY(store.waitForFinished(10000));
        QCOMPARE(store.exitStatus(), QProcess::NormalExit);
        QCOMPARE(store.exitCode(), 0);
    }

    void portInUseAndForeignAddressRefused()
    {
        QProcess first;
        QByteArray out;
        const int port = startStore(first, kAgent, {u"--port"_s, u"0"_s}, out);
        CPPL_VERIFY2(port > 0, out.constData());
        const ProcessResult busy = runProcess(kAgent, {u"store"_s, u"--port"_s, QString::number(port)}, 30000);
        CPPL_VERIFY2(busy.exitCode == 5 && busy.err.contains(u"port %1 is in use on this host"_s.arg(port)) && busy.err.contains(u"--port 0"_s)
                     && busy.out.isEmpty(),
                 qPrintable(busy.describe()));
        first.closeWriteChannel();
        QVERIFY(first.waitForFinished(10000));
        // 192.0.2.1 (TEST-NET-1) is nobody's address.
        const ProcessResult foreign = runProcess(kAgent, {u"store"_s, u"--bind"_s, u"192.0.2.1"_s}, 30000);
        CPPL_VERIFY2(foreign.exitCode == 2 && foreign.err.contains(u"--bind 192.0.2.1: not an address of this host"_s), qPrintable(foreign.describe()));
        const ProcessResult badPort = runProcess(kAgent, {u"store"_s, u"--port"_s, u"70000"_s}, 30000);
        CPPL_VERIFY2(badPort.exitCode == 2 && badPort.err.contains(u"--port"_s), qPrintable(badPort.describe()));
        const ProcessResult help = runProcess(kAgent, {u"store"_s, u"--help"_s}, 30000);
        CPPL_VERIFY2(help.exitCode == 0 && help.out.contains(u"--bind ADDR"_s) && help.out.contains(u"CLUSTERPPL_STORE"_s), qPrintable(help.describe()));
    }
};

QTEST_GUILESS_MAIN(TestRendezvousCommand)
#include "tst_rendezvous_command.moc"
