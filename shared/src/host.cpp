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

int freeLoopbackPort()
{
    auto fail = [](const char *call) {
        throw IoError(std::string("cannot find a free TCP port on 127.0.0.1: ") + call + " failed: " + std::strerror(errno));
    };
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        fail("socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        fail("bind/getsockname");
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

} // namespace cppl
