// SPDX-License-Identifier: MIT
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {

/// `clusterppl-agent tokenize --tokenizer PATH --text FILE --out FILE.u32 [--bos auto|always|never]`:
/// writes the ids as little-endian uint32 and prints ids/s and MB/s. Returns an ExitCode.
int tokenizeCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err);

} // namespace cppl::agent
