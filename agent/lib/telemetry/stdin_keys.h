// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/telemetry.h"

#include <chrono>

namespace cppl::agent::telemetry {

/// How long `--telemetry-keys-stdin` waits for the launcher's key line.
inline constexpr std::chrono::milliseconds kKeyLineTimeout{10000};

/**
 * Reads the launcher's key line (cppl::telemetry::formatKeyLine) from @p fd: the first line, byte by
 * byte so that nothing after it is consumed (the stdin-EOF watcher reads the rest). Throws
 * ConfigError when no complete line arrives within @p timeout, when the input ends first, or when
 * the line is garbled; the message never repeats the line.
 */
[[nodiscard]] cppl::telemetry::Credentials readKeyLine(int fd, std::chrono::milliseconds timeout = kKeyLineTimeout);

} // namespace cppl::agent::telemetry
