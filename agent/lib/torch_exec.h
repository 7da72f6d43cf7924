// SPDX-License-Identifier: MIT
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {

/// The file name of the agent's torch half, which clusterppl-agent execs for the commands that load
/// LibTorch (agent_cli.h, isTorchCommand()).
inline constexpr const char *kTorchAgentName = "clusterppl-agent-torch";

/// @brief Where clusterppl-agent looks for its torch half, in order, given its own executable
/// @p self: beside it (a build tree), then in ../lib/clusterppl (an install: /usr/bin and
/// /usr/lib/clusterppl, or any relocated prefix).
[[nodiscard]] std::vector<std::string> torchAgentCandidates(const std::string &self);

/**
 * @brief clusterppl-agent's TorchCommandRunner: replaces this process with the torch half, same
 * command line (@p argv0 kept as argv[0], @p args after it), same PID, environment, descriptors and
 * open-file limit, so a launcher's signals, /proc/PID/cmdline and exit code are the command's.
 * Returns only by throwing: an ExitError (kExitRuntime) naming every place it looked when there is
 * no torch half, or the reason exec failed.
 */
int execTorchAgent(const std::string &argv0, const std::vector<std::string> &args, std::ostream &out, std::ostream &err);

} // namespace cppl::agent
