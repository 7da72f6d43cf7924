// SPDX-License-Identifier: MIT
#pragma once

#include "exit_codes.h"

namespace cppl::agent {

/**
 * @brief `--exit-on-stdin-eof`: no rank outlives its launcher. Launchers keep an agent's stdin open
 * for as long as they live (an SSH channel, a pipe), so its end means the launcher or its
 * connection is gone: the watcher then says so on stderr and ends the process at once with
 * kExitRuntime (docs/exit-codes.md), whatever the rank is doing.
 *
 * Started by the command once its options are parsed: a launcher's key line
 * (`--telemetry-keys-stdin`) is stdin's first line and must be read before the watcher reads the rest.
 */
class StdinEofWatcher
{
public:
    explicit StdinEofWatcher(int fd = 0, int exitCode = kExitRuntime) : m_fd(fd), m_exitCode(exitCode) {}

    /// Reads @p fd to its end on a thread of its own, then ends the process. The thread is
    /// detached: it blocks in read() for the whole run, and only ever ends by ending the process.
    void start() const;

private:
    int m_fd;
    int m_exitCode;
};

} // namespace cppl::agent
