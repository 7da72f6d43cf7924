// SPDX-License-Identifier: MIT
// clusterppl-agent-torch: the whole agent, LibTorch linked. clusterppl-agent execs it for the
// commands that load LibTorch; run alone, it runs every command in its own process.
#include "agent_cli.h"
#include "process_exit.h"
#include "torch_commands.h"

#include <iostream>

int main(int argc, char **argv)
{
    cppl::agent::installTerminateGuard();
    const int code = cppl::agent::agentMain(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr, cppl::agent::runTorchCommand);
    return cppl::agent::endProcess(code);
}
