// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace cppl::agent {

/// The process's limit on open files (RLIMIT_NOFILE) before and after raiseFileLimit().
struct FileLimit
{
    std::uint64_t soft = 0;
    std::uint64_t hard = 0;
    std::uint64_t before = 0; ///< the soft limit found
};

/// Raises the soft limit on open files to the hard limit (a rank of a big run holds a socket per
/// peer several times over: docs/launching.md, "Open files"). Never fails: a limit it cannot
/// raise stays as it was. CLUSTERPPL_DEBUG_CONNECT=1: one line on stderr saying what it found and set.
FileLimit raiseFileLimit();

/// The open files that rank @p rank of @p world needs at least (a lower bound: Gloo's connections,
/// the watchdog's star and mesh, the store's clients when it serves the store, and a margin).
[[nodiscard]] std::uint64_t filesNeeded(int rank, int world, bool servesStore, int meshLinks);

/// Throws ConfigError naming the rank, the limit, the need and what to do when the soft limit on
/// open files is below filesNeeded(): a run that could not even connect fails here, at once, and clearly.
void requireFileLimit(int rank, int world, bool servesStore, int meshLinks);

} // namespace cppl::agent
