// SPDX-License-Identifier: MIT
#include "cppl/host.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

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

} // namespace cppl
