// SPDX-License-Identifier: MIT
#include "watchdog.h"

#include "store.h"

#include "cppl/errors.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <string>
#include <cstring>

namespace cppl::agent::dist {

namespace {

constexpr auto kBeat = std::chrono::milliseconds(250);
const std::string kKey = "cppl/watchdog";

std::string seconds(std::chrono::milliseconds ms)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
    return buf;
}

int connectTo(const std::string &host, const std::string &port)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        ::close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        const int one = 1; // heartbeats and failure frames are tiny: no Nagle delay
        if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
            const int e = errno;
            ::close(fd);
            throw CollectiveError(std::string("watchdog: setsockopt(TCP_NODELAY) on the connection to rank 0: ") + std::strerror(e));
        }
    }
    return fd;
}

/// Reads one '\n'-terminated line with a deadline (the hello).
bool readLine(int fd, std::string &line, std::chrono::steady_clock::time_point deadline)
{
    line.clear();
    char c = 0;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0)
            return false;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0)
            continue;
        if (::read(fd, &c, 1) != 1)
            return false;
        if (c == '\n')
            return true;
        line += c;
    }
}

std::int64_t realtimeNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

constexpr int kClockSamples = 8;

} // namespace

Watchdog::Watchdog(Store &store, int rank, std::vector<std::string> hosts, const std::string &advertise, std::chrono::milliseconds timeout,
                   FatalHandler onFatal, LossHandler onLoss)
    : m_rank(rank), m_hosts(std::move(hosts)), m_timeout(timeout), m_onFatal(std::move(onFatal)), m_onLoss(std::move(onLoss))
{
    const int world = static_cast<int>(m_hosts.size());
    for (int r = 0; r < world; ++r)
        m_members.push_back(r);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (rank == 0) {
        const int listener = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int zero = 0, one = 1;
        sockaddr_in6 addr{};
        addr.sin6_family = AF_INET6;
        addr.sin6_addr = in6addr_any;
        socklen_t len = sizeof addr;
        const char *failed = listener < 0                                                                          ? "socket"
                             : ::setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) != 0 ? "setsockopt(IPV6_V6ONLY)" // IPv4 and IPv6 peers
                             : ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0    ? "setsockopt(SO_REUSEADDR)"
                             : ::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0     ? "bind"
                             : ::listen(listener, 128) != 0                                                 ? "listen"
                             : ::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len) != 0      ? "getsockname"
                                                                                                            : nullptr;
        if (failed) {
            const int e = errno;
            if (listener >= 0)
                ::close(listener);
            throw CollectiveError(std::string("watchdog: rank 0 cannot listen on a TCP port: ") + failed + ": " + std::strerror(e)
                                  + " (does this host have IPv6 sockets?)");
        }
        store.set(kKey, advertise + ":" + std::to_string(ntohs(addr.sin6_port)));
        std::vector<bool> seen(static_cast<std::size_t>(world), false);
        for (int accepted = 1; accepted < world;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            pollfd p{listener, POLLIN, 0};
            if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
                if (std::chrono::steady_clock::now() < deadline)
                    continue;
                std::string missing;
                for (int r = 1; r < world; ++r)
                    if (!seen[static_cast<std::size_t>(r)])
                        missing += (missing.empty() ? "" : ", ") + who(r);
                ::close(listener);
                throw TimeoutError("watchdog: ranks " + missing + " did not connect to rank 0 within " + seconds(timeout)
                                   + " (a firewall between the hosts?)");
            }
            const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            std::string hello;
            int r = -1;
            if (!readLine(fd, hello, deadline) || std::sscanf(hello.c_str(), "r%d", &r) != 1 || r <= 0 || r >= world
                || seen[static_cast<std::size_t>(r)]) {
                ::close(fd);
                continue;
            }
            if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
                const int e = errno;
                ::close(fd);
                ::close(listener);
                throw CollectiveError("watchdog: setsockopt(TCP_NODELAY) on the connection of " + who(r) + ": " + std::strerror(e));
            }
            // Clock pings: answer each "p" with this clock until the peer says "e".
            bool pingsOk = true;
            for (std::string ping; pingsOk;) {
                if (!readLine(fd, ping, deadline) || (ping != "p" && ping != "e")) {
                    pingsOk = false;
                    break;
                }
                if (ping == "e")
                    break;
                const std::string pong = "P" + std::to_string(realtimeNs()) + "\n";
                pingsOk = ::send(fd, pong.data(), pong.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(pong.size());
            }
            if (!pingsOk) {
                ::close(fd);
                continue;
            }
            seen[static_cast<std::size_t>(r)] = true;
            m_peers.push_back(Peer{fd, r, std::chrono::steady_clock::now(), {}, false});
            ++accepted;
        }
        ::close(listener);
    } else {
        const auto where = store.get(kKey, timeout);
        if (!where)
            throw TimeoutError("watchdog: rank 0 did not publish its address within " + seconds(timeout));
        const auto colon = where->rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == where->size())
            throw ProtocolError("watchdog: rank " + std::to_string(rank) + ": the store holds \"" + where->substr(0, 80)
                                + "\" as rank 0's watchdog address, not HOST:PORT; is another program using the same MASTER_ADDR:MASTER_PORT?");
        int fd = -1;
        while (fd < 0) {
            fd = connectTo(where->substr(0, colon), where->substr(colon + 1));
            if (fd >= 0)
                break;
            if (std::chrono::steady_clock::now() > deadline)
                throw TimeoutError("watchdog: cannot connect to rank 0 at " + *where + " (" + std::strerror(errno) + ")");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        const std::string hello = "r" + std::to_string(rank) + "\n";
        auto lost = [&] {
            ::close(fd);
            return CollectiveError("watchdog: rank 0 at " + *where + " closed the connection");
        };
        if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size()))
            throw lost();
        // Clock offset to rank 0 from the fastest round trip: offset = remote - (sent + received) / 2.
        std::int64_t bestRtt = INT64_MAX;
        for (int i = 0; i < kClockSamples; ++i) {
            const std::int64_t sent = realtimeNs();
            std::string pong;
            if (::send(fd, "p\n", 2, MSG_NOSIGNAL) != 2 || !readLine(fd, pong, deadline) || pong.size() < 2 || pong[0] != 'P')
                throw lost();
            const std::int64_t received = realtimeNs();
            std::int64_t remote = 0;
            const auto [end, ec] = std::from_chars(pong.data() + 1, pong.data() + pong.size(), remote);
            if (ec != std::errc() || end != pong.data() + pong.size())
                throw ProtocolError("watchdog: rank " + std::to_string(rank) + ": rank 0 at " + *where + " sent a malformed clock reply \""
                                    + pong.substr(0, 40) + "\" (expected P<nanoseconds>); is something else listening there?");
            if (received - sent < bestRtt) {
                bestRtt = received - sent;
                m_clockOffsetNs = remote - (sent + (received - sent) / 2);
                m_clockUncertaintyNs = bestRtt / 2;
            }
        }
        if (::send(fd, "e\n", 2, MSG_NOSIGNAL) != 2)
            throw lost();
        m_peers.push_back(Peer{fd, 0, std::chrono::steady_clock::now(), {}, false});
    }
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0)
        throw CollectiveError(std::string("watchdog: pipe: ") + std::strerror(errno));
    m_wakeRead = pipefd[0];
    m_wakeWrite = pipefd[1];
    m_thread = std::thread([this] { loop(); });
}

Watchdog::~Watchdog()
{
    m_stop = true;
    if (m_wakeWrite >= 0)
        (void)!::write(m_wakeWrite, "x", 1);
    if (m_thread.joinable())
        m_thread.join();
    for (auto &p : m_peers)
        if (p.fd >= 0)
            ::close(p.fd);
    if (m_wakeRead >= 0)
        ::close(m_wakeRead);
    if (m_wakeWrite >= 0)
        ::close(m_wakeWrite);
}

std::string Watchdog::who(int rank) const
{
    const auto &host = m_hosts[static_cast<std::size_t>(rank)];
    return "rank " + std::to_string(rank) + (host.empty() ? std::string() : " (" + host + ")");
}

bool Watchdog::sendTo(Peer &p, const std::string &frame)
{
    if (p.fd < 0)
        return false;
    const std::lock_guard lock(m_sendMutex);
    return ::send(p.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(frame.size());
}

void Watchdog::sendAll(const std::string &frame)
{
    for (auto &p : m_peers)
        sendTo(p, frame);
}

void Watchdog::reportFailure(int exitCode, const std::string &message)
{
    const int code = exitCode == kPeerTimeout ? kPeerTimeout : kPeerDied;
    std::string flat = message;
    for (char &c : flat)
        if (c == '\n')
            c = ' ';
    m_fired = true; // this rank exits on its own; ignore what follows
    sendAll("f" + std::to_string(code) + " " + std::to_string(m_rank) + " " + who(m_rank) + " failed: " + flat + "\n");
}

void Watchdog::finish()
{
    m_finished = true;
    sendAll("d\n");
    m_stop = true;
    (void)!::write(m_wakeWrite, "x", 1);
    if (m_thread.joinable())
        m_thread.join();
}

void Watchdog::fire(int code, const std::string &message, int origin)
{
    if (m_fired.exchange(true) || m_finished)
        return;
    if (m_rank == 0)
        sendAll("f" + std::to_string(code) + " " + std::to_string(origin) + " " + message + "\n");
    m_onFatal(Fatal{code, message});
}

void Watchdog::handleFrame(Peer &p, const std::string &frame)
{
    if (frame.empty())
        return;
    switch (frame[0]) {
    case 'h':
        break;
    case 'd':
        p.done = true;
        break;
    case 'l':
        if (m_rank != 0 && m_onLoss) {
            handleLoss(frame);
            break;
        }
        fire(kPeerDied, who(p.rank) + " sent an unexpected frame \"" + frame.substr(0, 80) + "\" (do all ranks run the same agent version and --on-rank-loss?)", p.rank);
        break;
    case 'f': {
        int code = kPeerDied, origin = p.rank;
        int consumed = 0;
        if (std::sscanf(frame.c_str(), "f%d %d %n", &code, &origin, &consumed) < 2 || (code != kPeerDied && code != kPeerTimeout)) {
            // A peer's frame decides this rank's exit code: only the two documented ones are taken.
            fire(kPeerDied, who(p.rank) + " sent a malformed failure report \"" + frame.substr(0, 80) + "\"", p.rank);
            break;
        }
        std::string text = frame.substr(static_cast<std::size_t>(consumed));
        if (m_rank == 0 && m_onLoss && p.rank != 0) {
            // A rank that failed on its own (its model, its data, its memory) is lost like a dead one.
            const std::string prefix = who(p.rank) + " ";
            lose(p, text.starts_with(prefix) ? text.substr(prefix.size()) : text);
            break;
        }
        fire(code, text, origin);
        break;
    }
    default:
        break;
    }
}

void Watchdog::lose(Peer &p, const std::string &cause)
{
    if (m_fired || m_finished || p.fd < 0)
        return;
    // Closing its connection also fences a stopped rank: once it runs again, it finds rank 0 gone
    // and exits instead of claiming batches the survivors already took over.
    ::close(p.fd);
    p.fd = -1;
    std::erase(m_members, p.rank);
    ++m_epoch;
    std::string members;
    for (int r : m_members)
        members += (members.empty() ? "" : ",") + std::to_string(r);
    std::string flat = cause;
    for (char &c : flat)
        if (c == '\n')
            c = ' ';
    sendAll("l" + std::to_string(m_epoch) + " " + std::to_string(p.rank) + " " + members + " " + flat + "\n");
    m_onLoss(Loss{m_epoch, p.rank, flat, m_members});
}

void Watchdog::handleLoss(const std::string &frame)
{
    // "l<epoch> <rank> <member,member,...> <cause>"
    Loss loss;
    const auto bad = [&] {
        fire(kPeerDied, "rank 0 sent a malformed lost-rank notice \"" + frame.substr(0, 80) + "\" (do all ranks run the same agent version?)", 0);
    };
    std::size_t pos = 1;
    auto number = [&](int &v) {
        const auto [end, ec] = std::from_chars(frame.data() + pos, frame.data() + frame.size(), v);
        if (ec != std::errc() || end == frame.data() + pos)
            return false;
        pos = static_cast<std::size_t>(end - frame.data());
        return true;
    };
    const int world = static_cast<int>(m_hosts.size());
    if (!number(loss.epoch) || loss.epoch < 1 || pos >= frame.size() || frame[pos++] != ' ' || !number(loss.rank) || loss.rank <= 0
        || loss.rank >= world || pos >= frame.size() || frame[pos++] != ' ')
        return bad();
    for (;;) {
        int r = -1;
        if (!number(r) || r < 0 || r >= world || (!loss.members.empty() && r <= loss.members.back()))
            return bad();
        loss.members.push_back(r);
        if (pos < frame.size() && frame[pos] == ',') {
            ++pos;
            continue;
        }
        break;
    }
    if (loss.members.empty() || loss.members.front() != 0 || std::find(loss.members.begin(), loss.members.end(), loss.rank) != loss.members.end())
        return bad();
    loss.cause = pos < frame.size() ? frame.substr(pos + 1) : std::string();
    m_onLoss(loss);
}

void Watchdog::loop()
{
    auto nextBeat = std::chrono::steady_clock::now();
    std::vector<pollfd> fds;
    while (!m_stop) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= nextBeat) {
            sendAll("h\n");
            nextBeat = now + kBeat;
        }
        fds.clear();
        fds.push_back(pollfd{m_wakeRead, POLLIN, 0});
        for (const auto &p : m_peers)
            fds.push_back(pollfd{p.fd, static_cast<short>(p.fd >= 0 ? POLLIN : 0), 0});
        ::poll(fds.data(), fds.size(), static_cast<int>(kBeat.count()));
        if (m_stop)
            break;
        for (std::size_t i = 0; i < m_peers.size(); ++i) {
            Peer &p = m_peers[i];
            if (p.fd < 0 || !(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            const ssize_t n = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                p.lastSeen = std::chrono::steady_clock::now();
                p.inbox.append(buf, static_cast<std::size_t>(n));
                for (std::size_t nl; (nl = p.inbox.find('\n')) != std::string::npos;) {
                    const std::string frame = p.inbox.substr(0, nl);
                    p.inbox.erase(0, nl + 1);
                    handleFrame(p, frame);
                }
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            const std::string cause = "died: its connection closed before it finished (killed, crashed or out of memory; see its log)";
            if (!p.done && !m_finished && m_rank == 0 && m_onLoss) {
                lose(p, cause);
                continue;
            }
            ::close(p.fd);
            p.fd = -1;
            if (!p.done && !m_finished)
                fire(kPeerDied, who(p.rank) + " " + cause, p.rank);
        }
        const auto t = std::chrono::steady_clock::now();
        for (Peer &p : m_peers)
            if (p.fd >= 0 && !p.done && t - p.lastSeen > m_timeout) {
                const std::string cause = "stopped responding: no heartbeat for "
                                          + seconds(std::chrono::duration_cast<std::chrono::milliseconds>(t - p.lastSeen))
                                          + " (stopped, hung, or its host is unreachable; --timeout " + seconds(m_timeout) + ")";
                if (m_rank == 0 && m_onLoss)
                    lose(p, cause);
                else
                    fire(kPeerTimeout, who(p.rank) + " " + cause, p.rank);
            }
    }
}

} // namespace cppl::agent::dist
