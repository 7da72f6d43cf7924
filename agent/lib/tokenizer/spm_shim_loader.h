// SPDX-License-Identifier: MIT
// Finds and dlopen()s libclusterppl_spm.so (agent/spm_shim/). Internal: SentencePieceTokenizer uses it.
#pragma once

#include "cppl_spm.h"

#include <string>

namespace cppl::agent::spm {

/// The shim's functions, resolved once per shim path; the library is never unloaded (SentencePiece
/// and its protobuf keep static state that must outlive every model).
struct ShimApi
{
#define CPPL_SPM_MEMBER(name, type) type name = nullptr;
    CPPL_SPM_SYMBOLS(CPPL_SPM_MEMBER)
#undef CPPL_SPM_MEMBER
    std::string path; ///< the file that was loaded
};

/// @brief Whether this agent was built with the shim (libsentencepiece-dev present at build time).
[[nodiscard]] bool builtWithSentencePiece();

/// @brief The shim for @p modelPath: $CLUSTERPPL_SPM_SHIM when set, else next to the executable, else
/// the install location relative to it. Throws ConfigError naming every place tried and what to do.
[[nodiscard]] const ShimApi &shimApi(const std::string &modelPath);

} // namespace cppl::agent::spm
