// SPDX-License-Identifier: MIT
#include "telemetry/stdin_keys.h"

#include "cppl/errors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <poll.h>
#include <unistd.h>

namespace cppl::agent::telemetry {

cppl::telemetry::Credentials readKeyLine(int fd, std::chrono::milliseconds timeout)
{
    using Clock = std::chrono::steady_clock;
    // Far more than a key line (~160 bytes): a launcher that writes something else is caught here
    // instead of making us read a whole stream.
    constexpr std::size_t kMaxLine = 1024;
    const std::string what = "--telemetry-keys-stdin: ";
    const auto deadline = Clock::now() + timeout;
    std::string line;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            char seconds[32];
            std::snprintf(seconds, sizeof seconds, "%.1f", static_cast<double>(timeout.count()) / 1000.0);
            throw ConfigError(what + "no key line on stdin within " + seconds
                              + " s; the launcher (clusterppl-cli, the dashboard) writes it as the first line. Started by hand, "
                                "use --telemetry-keys FILE (mode 0600) instead");
        }
        pollfd p{fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, static_cast<int>(left));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready < 0)
            throw ConfigError(what + "cannot wait for stdin: " + std::strerror(errno));
        if (ready == 0)
            continue; // the deadline check above reports it
        char c = 0;
        const auto n = ::read(fd, &c, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0)
            throw ConfigError(what + "cannot read stdin: " + std::strerror(errno));
        if (n == 0)
            throw ConfigError(what + "stdin ended " + (line.empty() ? std::string("before") : std::string("in the middle of"))
                              + " the key line; the launcher must write `" + std::string(cppl::telemetry::kKeyLineTag)
                              + " SERVER_PUBLIC CLIENT_PUBLIC CLIENT_SECRET` first");
        if (c == '\n')
            break;
        line += c;
        if (line.size() > kMaxLine)
            throw ConfigError(what + "the first line on stdin is longer than " + std::to_string(kMaxLine)
                              + " bytes; it is not a key line");
    }
    try {
        return cppl::telemetry::parseKeyLine(line);
    } catch (const ConfigError &e) {
        throw ConfigError(what + e.what());
    }
}

} // namespace cppl::agent::telemetry
