// SPDX-License-Identifier: MIT
#include "cppl/signal_pipe.h"

#include "cppl/errors.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

namespace cppl {

namespace {

std::atomic<int> g_writeFd{-1};

void onSignal(int sig)
{
    const int saved = errno; // a handler must not change errno under the interrupted code
    const char c = static_cast<char>(sig);
    const int fd = g_writeFd.load();
    if (fd >= 0)
        (void)!::write(fd, &c, 1);
    errno = saved;
}

} // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) : m_signals(signals)
{
    if (g_writeFd.load() >= 0)
        throw IoError("internal: a second SignalPipe while one is active");
    if (::pipe2(m_fds, O_CLOEXEC | O_NONBLOCK) != 0)
        throw IoError(std::string("cannot create the signal pipe: pipe2 failed: ") + std::strerror(errno));
    g_writeFd = m_fds[1];
    for (const int sig : m_signals) {
        struct sigaction sa{};
        sa.sa_handler = onSignal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        struct ::sigaction old{};
        if (::sigaction(sig, &sa, &old) != 0) {
            const std::string why = std::strerror(errno);
            restore();
            throw IoError("cannot handle signal " + std::to_string(sig) + ": sigaction failed: " + why);
        }
        m_old.push_back(old);
    }
}

SignalPipe::~SignalPipe()
{
    restore();
}

void SignalPipe::restore() noexcept
{
    for (std::size_t i = 0; i < m_old.size(); ++i)
        (void)::sigaction(m_signals[i], &m_old[i], nullptr);
    m_old.clear();
    g_writeFd = -1;
    for (int &fd : m_fds)
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
}

int SignalPipe::drain() noexcept
{
    int last = 0;
    char c = 0;
    while (m_fds[0] >= 0 && ::read(m_fds[0], &c, 1) == 1)
        last = static_cast<unsigned char>(c);
    return last;
}

} // namespace cppl
