// SPDX-License-Identifier: MIT
#include "torch_commands.h"

#include "distributed/c10d.h"
#include "distributed/comm_check.h"
#include "eval/eval_command.h"
#include "preflight.h"

#include "cppl/errors.h"

namespace cppl::agent {

int runTorchCommand(const std::vector<std::string> &args, std::ostream &out, std::ostream &err)
{
    const std::string command = args.empty() ? std::string() : args.front();
    const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
    if (command == "eval")
        return evalCommand(rest, out, err);
    if (command == "comm-check")
        return dist::commCheckCommand(rest, out, err, dist::libtorchC10d());
    if (command == "preflight")
        return preflightCommand(rest, out, err);
    throw Error("runTorchCommand: \"" + command + "\" is not a command that loads LibTorch");
}

} // namespace cppl::agent
