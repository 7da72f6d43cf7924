// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {

/// @brief Runs one of the commands that load LibTorch (isTorchCommand()): @p args is the whole
/// command line after argv[0], its first element the command; returns an ExitCode. The torch half
/// (clusterppl-agent-torch, the tests) runs the command itself (torch_commands.h); the torch-free
/// front (clusterppl-agent) execs the torch half with the same command line (torch_exec.h).
using TorchCommandRunner = std::function<int(const std::vector<std::string> &args, std::ostream &out, std::ostream &err)>;

/// @brief Whether @p command loads LibTorch: eval, comm-check and preflight. Every other command
/// (run, store, plan, merge, tokenize, relay, --version, --help) is torch-free.
[[nodiscard]] bool isTorchCommand(const std::string &command) noexcept;

/// @brief The whole agent command line (everything after argv[0]); returns an ExitCode.
/// @p torchCommand runs the commands isTorchCommand() names, after their `--help`.
int agentMain(const std::vector<std::string> &args, std::ostream &out, std::ostream &err, const TorchCommandRunner &torchCommand);

} // namespace cppl::agent
