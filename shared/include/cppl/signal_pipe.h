// SPDX-License-Identifier: MIT
#pragma once

#include <signal.h>

#include <initializer_list>
#include <vector>

namespace cppl {

/**
 * @brief The self-pipe trick, once: while an instance lives, the given signals write their number
 * into a non-blocking pipe whose read end an event loop watches (poll, QSocketNotifier). The old
 * handlers come back when it goes. One instance per process at a time (the handler is global).
 * Throws IoError when the pipe or a handler cannot be set up.
 */
class SignalPipe
{
public:
    explicit SignalPipe(std::initializer_list<int> signals);
    ~SignalPipe();
    SignalPipe(const SignalPipe &) = delete;
    SignalPipe &operator=(const SignalPipe &) = delete;

    /// @brief The end to watch for readability.
    [[nodiscard]] int readFd() const noexcept { return m_fds[0]; }
    /// @brief Reads what is pending; the last signal number received, or 0 when none was.
    int drain() noexcept;

private:
    void restore() noexcept;
    int m_fds[2] = {-1, -1};
    std::vector<int> m_signals;
    std::vector<struct ::sigaction> m_old;
};

} // namespace cppl
