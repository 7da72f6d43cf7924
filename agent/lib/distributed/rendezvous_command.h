// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/**
 * @brief `clusterppl-agent store [--port P] [--bind ADDR]`: serves a run's rendezvous store (c10d's
 * TCPStore) in a process of its own, so that it outlives any rank, rank 0 included (the launchers
 * start it for `--on-rank-loss continue` runs and give every rank TORCHELASTIC_USE_AGENT_STORE=True).
 * Prints one `CLUSTERPPL_STORE {"port":P,"addr":"ADDR"}` line on stdout once it listens, and
 * returns 0 when its stdin reaches EOF (the launcher or its SSH session went) or on SIGTERM, SIGINT
 * or SIGHUP.
 */
int rendezvousCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err);

} // namespace cppl::agent::dist
