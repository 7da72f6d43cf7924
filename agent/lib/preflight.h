// SPDX-License-Identifier: MIT
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace cppl::agent {

/**
 * @brief `clusterppl-agent preflight [--json] [--model P] [--data P]... [--master-addr A
 * --master-port P] [--backend nccl --slots N]`: what a launcher must know about a host before it
 * starts ranks there — agent and LibTorch versions, CUDA devices, NCCL, free memory, hostname,
 * whether the paths are readable and the master reachable. Exit 0 when nothing is wrong, 1 with
 * the problems listed otherwise (they are in the JSON too).
 */
int preflightCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err);

} // namespace cppl::agent
