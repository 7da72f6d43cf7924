// SPDX-License-Identifier: MIT
#include "cppl/child_process.h"

#include <sys/wait.h>

#include <cstring>

namespace cppl {

int exitCodeFromWaitStatus(int status) noexcept
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

std::string describeWaitStatus(int status)
{
    if (WIFEXITED(status))
        return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    return "ended with wait status " + std::to_string(status);
}

} // namespace cppl
