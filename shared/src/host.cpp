// SPDX-License-Identifier: MIT
#include "cppl/host.h"

#include "cppl/errors.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <array>
#include <cstdint>
#include <fstream>
#include <random>
#include <utility>

namespace cppl {

std::string localHostName()
{
    std::array<char, 256> buf{};
    if (::gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0')
        return "localhost";
    return buf.data();
}

bool isLoopbackHost(std::string_view host) noexcept
{
    if (host == "localhost")
        return true;
    const std::string h(host);
    in_addr v4{};
    if (inet_pton(AF_INET, h.c_str(), &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    in6_addr v6{};
    if (inet_pton(AF_INET6, h.c_str(), &v6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&v6);
    return false;
}

std::pair<int, int> ephemeralPortRange()
{
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int lo = 0, hi = 0;
    if (in >> lo >> hi && lo > 0 && hi >= lo && hi <= 65535)
        return {lo, hi};
    return {32768, 60999}; // Linux's default
}

namespace {

/// Binds a TCP socket to 127.0.0.1:@p port (0: the kernel picks); the bound port, or -1 when it is taken.
int bindLoopback(int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        throw IoError(std::string("cannot find a free TCP port on 127.0.0.1: socket failed: ") + std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    socklen_t len = sizeof a;
    int bound = -1;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0)
        bound = ntohs(a.sin_port);
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return bound;
}

} // namespace

int freeLoopbackPort()
{
    // Not from the ephemeral range: the kernel hands those out as the source ports of outgoing
    // connections (every store client and Gloo pair on this host), so a port found free there can
    // be taken by another process's connect() before our listener binds it. Below the range,
    // only listeners that chose the number take ports; a random start keeps two callers at the
    // same moment apart.
    const auto [lo, hi] = ephemeralPortRange();
    int first = 10000, last = lo - 1;
    if (last - first < 1000) { // an unusual range: above it instead
        first = hi + 1;
        last = 65535;
    }
    if (last - first >= 1000) {
        std::random_device rd;
        const int span = last - first + 1;
        const int start = static_cast<int>(rd() % static_cast<unsigned>(span));
        for (int i = 0; i < 200; ++i) {
            const int port = first + (start + i) % span;
            if (bindLoopback(port) == port)
                return port;
        }
    }
    const int port = bindLoopback(0); // the kernel's choice as the last resort
    if (port < 0)
        throw IoError(std::string("cannot find a free TCP port on 127.0.0.1: bind/getsockname failed: ") + std::strerror(errno));
    return port;
}

} // namespace cppl
