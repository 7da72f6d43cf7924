// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <string_view>

namespace cppl {

/// @brief This machine's host name (gethostname), or "localhost" when it has none.
[[nodiscard]] std::string localHostName();

/// @brief Whether @p host is a loopback address: 127.0.0.0/8, ::1 or "localhost". Any other name
/// may resolve anywhere, so it is not.
[[nodiscard]] bool isLoopbackHost(std::string_view host) noexcept;

} // namespace cppl

namespace cppl {

/// @brief A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read, closed).
/// Throws IoError naming the failing call when the system refuses a socket.
[[nodiscard]] int freeLoopbackPort();

} // namespace cppl
