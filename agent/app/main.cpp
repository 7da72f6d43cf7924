// SPDX-License-Identifier: MIT
#include "agent_cli.h"
#include "process_exit.h"

#include <iostream>

int main(int argc, char **argv)
{
    cppl::agent::installTerminateGuard();
    const int code = cppl::agent::agentMain(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
    return cppl::agent::endProcess(code);
}
