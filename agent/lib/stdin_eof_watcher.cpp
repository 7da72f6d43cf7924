// SPDX-License-Identifier: MIT
#include "stdin_eof_watcher.h"

#include <cstdlib>
#include <thread>

#include <unistd.h>

namespace cppl::agent {

void StdinEofWatcher::start() const
{
    std::thread([fd = m_fd, code = m_exitCode] {
        char buf[256];
        while (::read(fd, buf, sizeof buf) > 0) {
        }
        // No stdio and no exit handlers: the other threads run on, and one may hold a stream's lock.
        static const char msg[] = "clusterppl-agent: the launcher went away (stdin closed); stopping\n";
        (void)!::write(2, msg, sizeof msg - 1);
        std::_Exit(code);
    }).detach();
}

} // namespace cppl::agent
