// SPDX-License-Identifier: MIT
#include "watchdog_wire.h"

#include "fault_hooks.h"
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
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cppl::agent::dist::wire {

const std::string kDiedCause = "died: its connection closed before it finished (killed, crashed or out of memory; see its log)";

std::string seconds(std::chrono::milliseconds ms)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
    return buf;
}

int connectTo(const std::string &host, const std::string &port, std::chrono::milliseconds within)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | (within.count() > 0 ? SOCK_NONBLOCK : 0), ai->ai_protocol);
        if (fd < 0)
            continue;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        if (within.count() > 0 && errno == EINPROGRESS) { // bounded: wait for the handshake, then blocking again
            pollfd p{fd, POLLOUT, 0};
            int err = 0;
            socklen_t len = sizeof err;
            if (::poll(&p, 1, static_cast<int>(within.count())) == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0
                && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0)
                break;
            errno = err != 0 ? err : ETIMEDOUT;
        }
        const int e = errno;
        ::close(fd);
        errno = e;
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        const int one = 1; // heartbeats and failure frames are tiny: no Nagle delay
        if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
            const int e = errno;
            ::close(fd);
            throw CollectiveError(std::string("watchdog: setsockopt(TCP_NODELAY) on a watchdog connection: ") + std::strerror(e));
        }
    }
    return fd;
}

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

void trace(int rank, const std::string &what)
{
    if (!faultHooks().traceWatchdog)
        return;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    char head[64];
    std::snprintf(head, sizeof head, "watchdog trace %.3f rank %d: ", t, rank);
    const std::string line = head + what + "\n";
    (void)!::write(2, line.data(), line.size());
}

std::int64_t realtimeNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int listenAnywhere(int &port, const std::string &who)
{
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
        throw CollectiveError("watchdog: " + who + " cannot listen on a TCP port: " + failed + ": " + std::strerror(e)
                              + " (does this host have IPv6 sockets?)");
    }
    port = ntohs(addr.sin6_port);
    return listener;
}

std::string reportLine(int rank, const std::string &cause)
{
    std::string flat = cause;
    std::replace(flat.begin(), flat.end(), '\n', ' ');
    return "k" + std::to_string(rank) + (flat.empty() ? std::string() : " " + flat) + "\n";
}

bool parseReport(const std::string &line, int world, int &rank, std::string &cause)
{
    int consumed = 0;
    rank = -1;
    if (std::sscanf(line.c_str(), "k%d%n", &rank, &consumed) != 1 || rank < 0 || rank >= world
        || (line.size() > static_cast<std::size_t>(consumed) && line[static_cast<std::size_t>(consumed)] != ' '))
        return false;
    cause = line.size() > static_cast<std::size_t>(consumed) ? line.substr(static_cast<std::size_t>(consumed) + 1) : std::string();
    return true;
}

int acceptHello(int fd, int world, std::chrono::steady_clock::time_point deadline, int &epoch, std::vector<std::pair<int, std::string>> &reports)
{
    std::string hello;
    int r = -1;
    epoch = 0;
    reports.clear();
    if (!readLine(fd, hello, deadline) || std::sscanf(hello.c_str(), "r%d %d", &r, &epoch) < 1 || r < 0 || r >= world)
        return -1;
    for (std::string ping;;) {
        if (!readLine(fd, ping, deadline))
            return -1;
        if (ping.starts_with('k')) { // "k<rank>[ <cause>]": what its mesh links know of a rank
            int q = -1;
            std::string cause;
            if (!parseReport(ping, world, q, cause) || q == r)
                return -1;
            reports.emplace_back(q, std::move(cause));
            continue;
        }
        if (ping != "p" && ping != "e")
            return -1;
        if (ping == "e")
            return r;
        const std::string pong = "P" + std::to_string(realtimeNs()) + "\n";
        if (::send(fd, pong.data(), pong.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(pong.size()))
            return -1;
    }
}

} // namespace cppl::agent::dist::wire
