// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/**
 * @brief `clusterppl-agent run --standalone --nproc-per-node N [--groups SPEC] [--master-port P]
 * -- <eval args>`: torchrun's standalone mode for ClusterPPL. Serves the rendezvous store itself
 * (TORCHELASTIC_USE_AGENT_STORE=True, as torchrun's agent does), starts N ranks of `eval` with
 * torchrun's environment, prefixes the other ranks' stderr lines with "[rank R]", forwards SIGINT
 * and SIGTERM, stops every rank when one fails, and returns rank 0's exit code (or, when rank 0 had
 * to be stopped, the first failing rank's).
 */
int standaloneCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err);

} // namespace cppl::agent::dist
