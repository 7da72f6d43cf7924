// SPDX-License-Identifier: MIT
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {

/// @brief The commands that load LibTorch, run in this process: `eval`, `comm-check` and
/// `preflight` (@p args[0]), with the arguments after it. agentMain()'s TorchCommandRunner in
/// clusterppl-agent-torch and in the tests; only clusterppl_agent_libtorch has it.
int runTorchCommand(const std::vector<std::string> &args, std::ostream &out, std::ostream &err);

} // namespace cppl::agent
