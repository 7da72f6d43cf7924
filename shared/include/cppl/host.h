// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace cppl {

/// @brief This machine's host name (gethostname), or "localhost" when it has none.
[[nodiscard]] std::string localHostName();

/// @brief Whether @p host is a loopback address: 127.0.0.0/8, ::1 or "localhost". Any other name
/// may resolve anywhere, so it is not.
[[nodiscard]] bool isLoopbackHost(std::string_view host) noexcept;

} // namespace cppl

namespace cppl {

/// @brief A TCP port on 127.0.0.1 that was free a moment ago (bound, then closed), chosen at
/// random below the kernel's ephemeral range (ephemeralPortRange()), where outgoing connections
/// cannot take it before the caller's listener binds it; the kernel's own choice only when that
/// range leaves no room. Throws IoError naming the failing call when the system refuses a socket.
[[nodiscard]] int freeLoopbackPort();

/// @brief The kernel's range of source ports for outgoing connections
/// (/proc/sys/net/ipv4/ip_local_port_range; Linux's default 32768-60999 when unreadable).
[[nodiscard]] std::pair<int, int> ephemeralPortRange();

} // namespace cppl
