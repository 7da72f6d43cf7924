// SPDX-License-Identifier: MIT
// RendezvousServer (agent/lib/distributed/rendezvous_server.h) over real loopback sockets, speaking c10d
// 1.13's and 2.x's wire protocols byte for byte as their clients send them: every request kind
// of each, both on one store, and what c10d's own server could not do: a client stopped in the
// middle of a request, or one that never reads its replies, holds only its own connection. (Real
// c10d 1.13 clients and Gloo meet on it in tst_rendezvous_command and every distributed test.)
#include "distributed/rendezvous_server.h"

#include "cppl/errors.h"

#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <string>
#include <utility>
#include <vector>

using cppl::agent::dist::RendezvousServer;

namespace {

/// One raw client connection; reads wait up to 5 s.
class Client
{
public:
    /// Connects to @p ip (host order; 127.0.0.1 by default) at @p port.
    explicit Client(int port, std::uint32_t ip = INADDR_LOOPBACK)
    {
        m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        a.sin_addr.s_addr = htonl(ip);
        if (::connect(m_fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
            ::close(m_fd);
            m_fd = -1;
        }
        const int one = 1;
        if (m_fd >= 0)
            ::setsockopt(m_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    ~Client()
    {
        if (m_fd >= 0)
            ::close(m_fd);
    }
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;
    bool ok() const { return m_fd >= 0; }
    int fd() const { return m_fd; }
    bool send(const std::string &bytes) const { return ::send(m_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()); }
    /// Exactly @p n bytes, or fewer when the server closed or was silent for @p within.
    std::string read(std::size_t n, std::chrono::milliseconds within = std::chrono::milliseconds(5000)) const
    {
        std::string out;
        const auto deadline = std::chrono::steady_clock::now() + within;
        while (out.size() < n) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            pollfd p{m_fd, POLLIN, 0};
            if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0)
                break;
            char buf[4096];
            const ssize_t got = ::recv(m_fd, buf, std::min(sizeof buf, n - out.size()), 0);
            if (got <= 0)
                break;
            out.append(buf, static_cast<std::size_t>(got));
        }
        return out;
    }
    /// Whether the server closed this connection within @p within.
    bool closedByServer(std::chrono::milliseconds within = std::chrono::milliseconds(5000)) const
    {
        pollfd p{m_fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(within.count())) <= 0)
            return false;
        char c;
        return ::recv(m_fd, &c, 1, MSG_DONTWAIT) == 0;
    }

private:
    int m_fd = -1;
};

template<typename T>
std::string raw(T v)
{
    return std::string(reinterpret_cast<const char *>(&v), sizeof v);
}
std::string str(const std::string &s)
{
    return raw<std::uint64_t>(s.size()) + s;
}
std::string keys(const std::vector<std::string> &ks)
{
    std::string out = raw<std::uint64_t>(ks.size());
    for (const auto &k : ks)
        out += str(k);
    return out;
}
// The requests as c10d 1.13's client writes them (captured from its TCPStore: the query byte, then
// strings and vectors as a uint64 length and the bytes, values in host order).
std::string setReq(const std::string &k, const std::string &v)
{
    return std::string(1, '\0') + str(k) + str(v);
}
std::string casReq(const std::string &k, const std::string &expected, const std::string &desired)
{
    return std::string(1, '\1') + str(k) + str(expected) + str(desired);
}
std::string getReq(const std::string &k)
{
    return std::string(1, '\2') + str(k);
}
std::string addReq(const std::string &k, std::int64_t d)
{
    return std::string(1, '\3') + str(k) + raw(d);
}
std::string checkReq(const std::vector<std::string> &ks)
{
    return std::string(1, '\4') + keys(ks);
}
std::string waitReq(const std::vector<std::string> &ks)
{
    return std::string(1, '\5') + keys(ks);
}
std::string numKeysReq()
{
    return std::string(1, '\6');
}
std::string deleteReq(const std::string &k)
{
    return std::string(1, '\x08') + str(k);
}

// The requests as c10d 2.x's client writes them (torch/csrc/distributed/c10d/TCPStore.cpp of
// LibTorch 2.x: VALIDATE with its magic number, then PING, as the first requests of every
// connection; the 1.x query numbers one higher, DELETE_KEY still 8; APPEND, MULTI_GET, MULTI_SET,
// CANCEL_WAIT, PING after it). No LibTorch 2.x runs here (Debian has 1.13): these bytes are
// what its client sends, read from its source.
constexpr std::uint32_t kMagic = 0x3C85F7CE;
std::string q2(int query)
{
    return std::string(1, static_cast<char>(query));
}
std::string validate2(std::uint32_t magic = kMagic)
{
    return q2(0) + raw(magic);
}
std::string ping2(std::uint32_t nonce)
{
    return q2(13) + raw(nonce);
}
/// What c10d 2.x's TCPStore constructor sends on a new connection.
std::string hello2(std::uint32_t nonce)
{
    return validate2() + ping2(nonce);
}
std::string set2(const std::string &k, const std::string &v)
{
    return q2(1) + str(k) + str(v);
}
std::string cas2(const std::string &k, const std::string &expected, const std::string &desired)
{
    return q2(2) + str(k) + str(expected) + str(desired);
}
std::string get2(const std::string &k)
{
    return q2(3) + str(k);
}
std::string add2(const std::string &k, std::int64_t d)
{
    return q2(4) + str(k) + raw(d);
}
std::string check2(const std::vector<std::string> &ks)
{
    return q2(5) + keys(ks);
}
std::string wait2(const std::vector<std::string> &ks)
{
    return q2(6) + keys(ks);
}
std::string delete2(const std::string &k)
{
    return q2(8) + str(k);
}
std::string append2(const std::string &k, const std::string &v)
{
    return q2(9) + str(k) + str(v);
}
std::string multiGet2(const std::vector<std::string> &ks)
{
    return q2(10) + keys(ks);
}
std::string multiSet2(const std::vector<std::pair<std::string, std::string>> &kvs)
{
    std::string out = q2(11) + raw<std::int64_t>(static_cast<std::int64_t>(kvs.size()));
    for (const auto &[k, v] : kvs)
        out += str(k) + str(v);
    return out;
}
std::string cancelWait2()
{
    return q2(12);
}

std::int64_t asInt(const std::string &bytes)
{
    std::int64_t v = -999;
    if (bytes.size() == sizeof v)
        std::memcpy(&v, bytes.data(), sizeof v);
    return v;
}

/// A reply vector: its length, then that many bytes.
std::string readValue(const Client &c)
{
    const std::string len = c.read(8);
    if (len.size() != 8)
        return "<no reply>";
    return c.read(static_cast<std::size_t>(asInt(len)));
}

} // namespace

class TestRendezvousServer : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyRequestKind()
    {
        RendezvousServer server(0);
        QVERIFY(server.port() > 0);
        Client c(server.port());
        QVERIFY(c.ok());
        QVERIFY(c.send(setReq("/a", "one")));
        QVERIFY(c.send(getReq("/a")));
        QCOMPARE(readValue(c), std::string("one"));
        // ADD creates a counter from nothing, keeps it as decimal text, adds negative deltas.
        QVERIFY(c.send(addReq("/n", 5)));
        QCOMPARE(asInt(c.read(8)), std::int64_t{5});
        QVERIFY(c.send(addReq("/n", -7)));
        QCOMPARE(asInt(c.read(8)), std::int64_t{-2});
        QVERIFY(c.send(getReq("/n")));
        QCOMPARE(readValue(c), std::string("-2"));
        QVERIFY(c.send(checkReq({"/a", "/n"})));
        QCOMPARE(c.read(1), std::string(1, '\0')); // ready
        QVERIFY(c.send(checkReq({"/a", "/missing"})));
        QCOMPARE(c.read(1), std::string(1, '\1')); // not ready
        // COMPARE_SET, c10d's rule: a missing key is created only from an empty expectation.
        QVERIFY(c.send(casReq("/c", "x", "y")));
        QCOMPARE(readValue(c), std::string("x"));
        QVERIFY(c.send(casReq("/c", "", "first")));
        QCOMPARE(readValue(c), std::string("first"));
        QVERIFY(c.send(casReq("/c", "first", "second")));
        QCOMPARE(readValue(c), std::string("second"));
        QVERIFY(c.send(casReq("/c", "stale", "third")));
        QCOMPARE(readValue(c), std::string("second"));
        QVERIFY(c.send(numKeysReq()));
        QCOMPARE(asInt(c.read(8)), std::int64_t{3});
        QVERIFY(c.send(deleteReq("/a")));
        QCOMPARE(asInt(c.read(8)), std::int64_t{1});
        QVERIFY(c.send(deleteReq("/a")));
        QCOMPARE(asInt(c.read(8)), std::int64_t{0});
        // Several requests in one segment are answered in order.
        QVERIFY(c.send(addReq("/m", 1) + addReq("/m", 1) + getReq("/m")));
        QCOMPARE(asInt(c.read(8)), std::int64_t{1});
        QCOMPARE(asInt(c.read(8)), std::int64_t{2});
        QCOMPARE(readValue(c), std::string("2"));
        // A value with every byte value, and an empty one.
        std::string binary;
        for (int i = 0; i < 256; ++i)
            binary += static_cast<char>(i);
        QVERIFY(c.send(setReq("/bin", binary) + setReq("/empty", "") + getReq("/bin") + getReq("/empty")));
        QCOMPARE(readValue(c), binary);
        QCOMPARE(readValue(c), std::string());
    }

    void waitAnswersWhenTheLastKeyIsSet()
    {
        RendezvousServer server(0);
        Client waiter(server.port()), setter(server.port());
        QVERIFY(waiter.ok() && setter.ok());
        QVERIFY(waiter.send(waitReq({"/w1", "/w2", "/w1"})));
        QVERIFY(setter.send(setReq("/w1", "1")));
        QCOMPARE(waiter.read(1, std::chrono::milliseconds(300)), std::string()); // w2 is still missing
        QVERIFY(setter.send(addReq("/w2", 1)));                                  // created by ADD
        QCOMPARE(asInt(setter.read(8)), std::int64_t{1});
        QCOMPARE(waiter.read(1), std::string(1, '\0')); // STOP_WAITING
        // Keys already there: answered at once.
        QVERIFY(waiter.send(waitReq({"/w1", "/w2"})));
        QCOMPARE(waiter.read(1), std::string(1, '\0'));
        // A waiter that leaves is forgotten; the key set later wakes only the one still there.
        {
            Client gone(server.port());
            QVERIFY(gone.send(waitReq({"/later"})));
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        QVERIFY(waiter.send(waitReq({"/later"})));
        QVERIFY(setter.send(setReq("/later", "x")));
        QCOMPARE(waiter.read(1), std::string(1, '\0'));
        // A wait the client gave up on (its timeout) is answered later on the same connection,
        // after which that connection serves requests as before (c10d's client behaves so).
        QVERIFY(waiter.send(waitReq({"/late"}) + getReq("/w1")));
        QCOMPARE(readValue(waiter), std::string("1"));
        QVERIFY(setter.send(setReq("/late", "y")));
        QCOMPARE(waiter.read(1), std::string(1, '\0'));
    }

    /// c10d 2.x's client, byte for byte as its TCPStore sends (its doGet: WAIT, then GET).
    void c10d2xEveryRequestKind()
    {
        RendezvousServer server(0);
        Client c(server.port());
        QVERIFY(c.ok());
        QVERIFY(c.send(hello2(4242)));
        QCOMPARE(c.read(4), raw<std::uint32_t>(4242)); // PING's nonce back
        QVERIFY(c.send(set2("/a", "one") + wait2({"/a"}) + get2("/a")));
        QCOMPARE(c.read(1), std::string(1, '\0')); // STOP_WAITING
        QCOMPARE(readValue(c), std::string("one"));
        QVERIFY(c.send(add2("/n", 5) + add2("/n", -7)));
        QCOMPARE(asInt(c.read(8)), std::int64_t{5});
        QCOMPARE(asInt(c.read(8)), std::int64_t{-2});
        QVERIFY(c.send(check2({"/a", "/n"}) + check2({"/a", "/missing"})));
        QCOMPARE(c.read(1), std::string(1, '\0')); // ready
        QCOMPARE(c.read(1), std::string(1, '\1')); // not ready
        QVERIFY(c.send(cas2("/c", "x", "y") + cas2("/c", "", "first") + cas2("/c", "first", "second") + cas2("/c", "stale", "third")));
        QCOMPARE(readValue(c), std::string("x"));
        QCOMPARE(readValue(c), std::string("first"));
        QCOMPARE(readValue(c), std::string("second"));
        QCOMPARE(readValue(c), std::string("second"));
        // APPEND makes a key or extends it; it wakes a waiter like SET.
        Client waiter(server.port());
        QVERIFY(waiter.send(hello2(7) + wait2({"/log"})));
        QCOMPARE(waiter.read(4), raw<std::uint32_t>(7));
        QCOMPARE(waiter.read(1, std::chrono::milliseconds(200)), std::string());
        QVERIFY(c.send(append2("/log", "ab") + append2("/log", "cd")));
        QCOMPARE(waiter.read(1), std::string(1, '\0'));
        // MULTI_SET, then MULTI_GET in the order asked (an empty value too).
        QVERIFY(c.send(multiSet2({{"/m1", "v1"}, {"/m2", ""}, {"/a", "uno"}})));
        QVERIFY(c.send(wait2({"/m2", "/log", "/m1"}) + multiGet2({"/m2", "/log", "/m1", "/a"})));
        QCOMPARE(c.read(1), std::string(1, '\0'));
        QCOMPARE(readValue(c), std::string());
        QCOMPARE(readValue(c), std::string("abcd"));
        QCOMPARE(readValue(c), std::string("v1"));
        QCOMPARE(readValue(c), std::string("uno"));
        // /a /n /c /log /m1 /m2
        QVERIFY(c.send(q2(7) + delete2("/a") + delete2("/a")));
        QCOMPARE(asInt(c.read(8)), std::int64_t{6});
        QCOMPARE(asInt(c.read(8)), std::int64_t{1});
        QCOMPARE(asInt(c.read(8)), std::int64_t{0});
        // The connection's requests may arrive a byte at a time, the first ones too.
        Client slow(server.port());
        for (const char ch : hello2(99) + get2("/log"))
            QVERIFY(slow.send(std::string(1, ch)));
        QCOMPARE(slow.read(4), raw<std::uint32_t>(99));
        QCOMPARE(readValue(slow), std::string("abcd"));
    }

    /// c10d 2.x's wait with a timeout: when it ends, its client sends CANCEL_WAIT and reads
    /// WAIT_CANCELED (after a STOP_WAITING, when the key came first); the connection goes on.
    void c10d2xCancelledWait()
    {
        RendezvousServer server(0);
        Client waiter(server.port()), setter(server.port());
        QVERIFY(waiter.send(hello2(1)) && setter.send(hello2(2)));
        QCOMPARE(waiter.read(4), raw<std::uint32_t>(1));
        QCOMPARE(setter.read(4), raw<std::uint32_t>(2));
        QVERIFY(waiter.send(wait2({"/never", "/late"})));
        QCOMPARE(waiter.read(1, std::chrono::milliseconds(200)), std::string());
        QVERIFY(waiter.send(cancelWait2()));
        QCOMPARE(waiter.read(1), std::string(1, '\1')); // WAIT_CANCELED
        // The cancelled wait is forgotten: the keys set later answer nothing on this connection.
        QVERIFY(setter.send(set2("/never", "1") + set2("/late", "2")));
        QCOMPARE(waiter.read(1, std::chrono::milliseconds(300)), std::string());
        // A key that came before the cancel: STOP_WAITING, then WAIT_CANCELED, as the client expects.
        QVERIFY(waiter.send(wait2({"/race"})));
        QVERIFY(setter.send(set2("/race", "3")));
        QCOMPARE(waiter.read(1), std::string(1, '\0'));
        QVERIFY(waiter.send(cancelWait2()));
        QCOMPARE(waiter.read(1), std::string(1, '\1'));
        QVERIFY(waiter.send(get2("/race")));
        QCOMPARE(readValue(waiter), std::string("3"));
    }

    /// One store, both clients: a launcher built against one LibTorch, ranks against another.
    void bothDialectsShareTheKeys()
    {
        RendezvousServer server(0);
        Client old(server.port()), recent(server.port());
        QVERIFY(recent.send(hello2(5)));
        QCOMPARE(recent.read(4), raw<std::uint32_t>(5));
        QVERIFY(recent.send(wait2({"/from-1x"})));
        QVERIFY(old.send(setReq("/from-1x", "a") + waitReq({"/from-2x"})));
        QCOMPARE(recent.read(1), std::string(1, '\0'));
        QVERIFY(recent.send(add2("/from-2x", 3) + get2("/from-1x")));
        QCOMPARE(asInt(recent.read(8)), std::int64_t{3});
        QCOMPARE(readValue(recent), std::string("a"));
        QCOMPARE(old.read(1), std::string(1, '\0'));
        QVERIFY(old.send(getReq("/from-2x")));
        QCOMPARE(readValue(old), std::string("3"));
    }

    void aClientStoppedInARequestHoldsOnlyItself_data()
    {
        QTest::addColumn<QByteArray>("request");
        QTest::addColumn<QByteArray>("reply"); // what the held request gets once it is whole
        QTest::addRow("add") << QByteArray::fromStdString(addReq("/cppl/epoch1/sched/next", 3)) << QByteArray::fromStdString(raw<std::int64_t>(3));
        QTest::addRow("set") << QByteArray::fromStdString(setReq("/cppl/lost/0", "stopped responding")) << QByteArray();
        QTest::addRow("wait") << QByteArray::fromStdString(waitReq({"/cppl/held"})) << QByteArray();
        QTest::addRow("compare_set") << QByteArray::fromStdString(casReq("/k", "", "v")) << QByteArray::fromStdString(str("v"));
    }
    void aClientStoppedInARequestHoldsOnlyItself()
    {
        // c10d 1.13's server read the rest of a request with blocking reads once its first byte
        // came: a rank stopped between its send() calls held every other rank's store calls (the
        // survivors' election timed out; docs/communication.md). Here the request is cut after
        // every byte in turn, and another client's requests are answered meanwhile.
        QFETCH(QByteArray, request);
        QFETCH(QByteArray, reply);
        RendezvousServer server(0);
        Client other(server.port());
        QVERIFY(other.ok());
        for (qsizetype cut = 1; cut < request.size(); ++cut) {
            Client stopped(server.port());
            QVERIFY(stopped.ok());
            QVERIFY(stopped.send(request.left(cut).toStdString()));
            QVERIFY(other.send(addReq("/counter", 1)));
            const std::string got = other.read(8, std::chrono::milliseconds(2000));
            QVERIFY2(got.size() == 8, qPrintable(QStringLiteral("no answer while another client holds %1 of %2 bytes").arg(cut).arg(request.size())));
            QCOMPARE(asInt(got), cut);
            // The rest arrives: the held request is served as if sent at once.
            QVERIFY(stopped.send(request.mid(cut).toStdString()));
            if (!reply.isEmpty())
                QCOMPARE(QByteArray::fromStdString(stopped.read(static_cast<std::size_t>(reply.size()))), reply);
            QVERIFY(other.send(deleteReq("/k") + deleteReq("/cppl/epoch1/sched/next")));
            (void)other.read(16);
        }
        // Byte by byte, interleaved with another client's requests.
        Client slow(server.port());
        for (qsizetype i = 0; i < request.size(); ++i) {
            QVERIFY(slow.send(request.mid(i, 1).toStdString()));
            QVERIFY(other.send(checkReq({"/counter"})));
            QCOMPARE(other.read(1), std::string(1, '\0'));
        }
        if (!reply.isEmpty())
            QCOMPARE(QByteArray::fromStdString(slow.read(static_cast<std::size_t>(reply.size()))), reply);
    }

    void aClientThatDoesNotReadHoldsOnlyItself()
    {
        // A stopped client does not read its replies: once its socket buffers are full the server
        // must keep the rest, not block in send().
        RendezvousServer server(0);
        Client writer(server.port()), deaf(server.port()), other(server.port());
        QVERIFY(writer.ok() && deaf.ok() && other.ok());
        const std::string big(1 << 20, 'v');
        QVERIFY(writer.send(setReq("/big", big)));
        QVERIFY(writer.send(checkReq({"/big"})));
        QCOMPARE(writer.read(1), std::string(1, '\0'));
        std::string many;
        for (int i = 0; i < 32; ++i) // 32 MiB of replies, far beyond the socket buffers
            many += getReq("/big");
        QVERIFY(deaf.send(many));
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        QVERIFY(other.send(addReq("/alive", 1)));
        QCOMPARE(asInt(other.read(8, std::chrono::milliseconds(2000))), std::int64_t{1});
        // Reading now, the deaf client gets every reply whole.
        for (int i = 0; i < 32; ++i)
            QCOMPARE(readValue(deaf).size(), big.size());
    }

    void refusedRequestsCloseOnlyTheirConnection_data()
    {
        QTest::addColumn<QByteArray>("request");
        QTest::addRow("unknown query") << QByteArray("\x42", 1);
        QTest::addRow("watch_key (c10d's callback client)") << QByteArray::fromStdString(std::string(1, '\x07') + str("/k"));
        QTest::addRow("get of a missing key") << QByteArray::fromStdString(getReq("/missing"));
        QTest::addRow("add to a value that is not a number") << QByteArray::fromStdString(addReq("/text", 1));
        QTest::addRow("add past int64 (found by fuzz_rendezvous_server)")
            << QByteArray::fromStdString(setReq("/big", "9223372036854775807") + addReq("/big", 1));
        QTest::addRow("add below int64") << QByteArray::fromStdString(setReq("/low", "-9223372036854775807") + addReq("/low", -2));
        QTest::addRow("a string longer than 64 MiB") << QByteArray::fromStdString(std::string(1, '\0') + raw<std::uint64_t>(RendezvousServer::kMaxBytes + 1));
        QTest::addRow("more than 2^20 keys") << QByteArray::fromStdString(std::string(1, '\4') + raw<std::uint64_t>(RendezvousServer::kMaxKeys + 1));
        QTest::addRow("2.x: unknown query") << QByteArray::fromStdString(validate2() + q2(0x42));
        QTest::addRow("2.x: queue push (libuv's server only)") << QByteArray::fromStdString(validate2() + q2(14) + str("/q") + str("x"));
        QTest::addRow("2.x: validate with another number") << QByteArray::fromStdString(validate2() + validate2(0xDEADBEEF));
        QTest::addRow("2.x: multi_get of a missing key") << QByteArray::fromStdString(validate2() + multiGet2({"/text", "/missing"}));
        QTest::addRow("2.x: more than 2^20 pairs") << QByteArray::fromStdString(validate2() + q2(11) + raw<std::uint64_t>(RendezvousServer::kMaxKeys + 1));
        QTest::addRow("2.x: a string longer than 64 MiB") << QByteArray::fromStdString(validate2() + q2(9) + raw<std::uint64_t>(RendezvousServer::kMaxBytes + 1));
    }
    void refusedRequestsCloseOnlyTheirConnection()
    {
        QFETCH(QByteArray, request);
        RendezvousServer server(0);
        Client other(server.port()), bad(server.port());
        QVERIFY(other.send(setReq("/text", "abc")));
        QVERIFY(bad.send(request.toStdString()));
        QVERIFY(bad.closedByServer());
        QVERIFY(other.send(getReq("/text")));
        QCOMPARE(readValue(other), std::string("abc"));
        Client later(server.port());
        QVERIFY(later.send(getReq("/text")));
        QCOMPARE(readValue(later), std::string("abc"));
    }

    void portInUseSaysSo()
    {
        RendezvousServer first(0);
        try {
            RendezvousServer second(first.port());
            QFAIL("a second server bound the same port");
        } catch (const cppl::CollectiveError &e) {
            const QString what = QString::fromUtf8(e.what());
            QVERIFY2(what.contains(QStringLiteral("port %1").arg(first.port())) && what.contains(QStringLiteral("is the port in use?")), e.what());
        }
    }

    void listensOnlyWhereItIsTold()
    {
        // Linux routes all of 127.0.0.0/8 to the loopback device: a server on every interface
        // answers at 127.0.0.2 too, one bound to 127.0.0.1 (a local run's store) does not.
        constexpr std::uint32_t kOtherLoopback = (127u << 24) | 2u;
        {
            RendezvousServer everywhere(0);
            Client c(everywhere.port(), kOtherLoopback);
            QVERIFY(c.ok() && c.send(addReq("/n", 5)));
            QCOMPARE(asInt(c.read(8)), std::int64_t{5});
        }
        for (const std::string bind : {"0.0.0.0", "::"}) {
            RendezvousServer everywhere(0, bind);
            QVERIFY2(Client(everywhere.port(), kOtherLoopback).ok(), bind.c_str());
        }
        RendezvousServer loopback(0, "127.0.0.1");
        Client here(loopback.port());
        QVERIFY(here.ok() && here.send(addReq("/n", 7)));
        QCOMPARE(asInt(here.read(8)), std::int64_t{7});
        QVERIFY(!Client(loopback.port(), kOtherLoopback).ok());
        // An address not of this host, and a name that does not resolve: said so, with the fix.
        const std::pair<std::string, QString> refused[] = {
            {"192.0.2.1", QStringLiteral("not an address of this host")},
            {"no-such-host.invalid", QStringLiteral("cannot resolve no-such-host.invalid")}};
        for (const auto &[bind, says] : refused) {
            try {
                RendezvousServer server(0, bind);
                QFAIL(qPrintable(QStringLiteral("a server listened on %1").arg(QString::fromStdString(bind))));
            } catch (const cppl::CollectiveError &e) {
                const QString what = QString::fromUtf8(e.what());
                QVERIFY2(what.contains(QString::fromStdString(bind)) && what.contains(says) && what.contains(QStringLiteral("0.0.0.0 for all of them")),
                         e.what());
            }
        }
    }

    void manyClients()
    {
        // 300 connections at once (a launcher's store sees several per rank); each gets its own
        // answers in order.
        RendezvousServer server(0);
        std::vector<std::unique_ptr<Client>> clients;
        for (int i = 0; i < 300; ++i) {
            clients.push_back(std::make_unique<Client>(server.port()));
            QVERIFY(clients.back()->ok());
        }
        for (std::size_t i = 0; i < clients.size(); ++i)
            QVERIFY(clients[i]->send(setReq("/r" + std::to_string(i), std::to_string(i)) + addReq("/joined", 1)));
        std::vector<std::int64_t> seen;
        for (auto &c : clients)
            seen.push_back(asInt(c->read(8)));
        std::sort(seen.begin(), seen.end());
        for (std::size_t i = 0; i < seen.size(); ++i)
            QCOMPARE(seen[i], static_cast<std::int64_t>(i + 1));
        QVERIFY(clients[7]->send(getReq("/r299")));
        QCOMPARE(readValue(*clients[7]), std::string("299"));
    }
};

QTEST_APPLESS_MAIN(TestRendezvousServer)
#include "tst_rendezvous_server.moc"
