// SPDX-License-Identifier: MIT
// clusterppl-agent: the torch-free front. It runs every command that needs no LibTorch itself and
// execs clusterppl-agent-torch for the ones that do (eval, comm-check, preflight), so a launcher, a
// store or a plan never pays LibTorch's start (docs/ARCHITECTURE.md, "The agent's two halves").
#include "agent_cli.h"
#include "process_exit.h"
#include "torch_exec.h"

#include <iostream>

int main(int argc, char **argv)
{
    cppl::agent::installTerminateGuard();
    const std::string argv0 = argc > 0 ? argv[0] : "clusterppl-agent";
    const int code = cppl::agent::agentMain(
        std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr,
        [&argv0](const std::vector<std::string> &args, std::ostream &out, std::ostream &err) { return cppl::agent::execTorchAgent(argv0, args, out, err); });
    return cppl::agent::endProcess(code);
}
