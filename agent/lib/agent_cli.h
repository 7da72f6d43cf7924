// SPDX-License-Identifier: MIT
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {

/// @brief The whole agent command line (everything after argv[0]); returns an ExitCode.
int agentMain(const std::vector<std::string> &args, std::ostream &out, std::ostream &err);

} // namespace cppl::agent
