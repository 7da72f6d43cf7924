// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent::dist {

struct C10d;

/// @brief Word @p i of rank @p rank in a world of @p worldSize: large (about 2^62 / worldSize, above
/// 2^53 up to 256 ranks, so a float64 path would lose bits), alternating in sign across ranks and
/// words, with distinct low bits; every partial sum over ranks stays within int64.
[[nodiscard]] std::int64_t commCheckWord(int rank, int worldSize, std::int64_t i) noexcept;

/// @brief The exact SUM of word @p i over every rank, computed on this host alone.
[[nodiscard]] std::int64_t commCheckExpected(int worldSize, std::int64_t i) noexcept;

/**
 * @brief `comm-check`: one rank of a collective self-test. Forms the communicators of `eval`
 * (same identity, rendezvous, backend, topology), all-reduces the words above for each size, and
 * compares every word with its known exact sum. Exit 0 only when every word on every rank matched.
 * @p c10d: LibTorch's (libtorchC10d()), as eval's.
 */
int commCheckCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err, const C10d &c10d);

} // namespace cppl::agent::dist
