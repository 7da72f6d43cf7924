// SPDX-License-Identifier: MIT
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {

/// @brief `clusterppl-agent eval ...` (arguments after "eval"); returns an ExitCode.
int evalCommand(const std::vector<std::string> &args, std::ostream &out, std::ostream &err);

} // namespace cppl::agent
