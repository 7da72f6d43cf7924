// SPDX-License-Identifier: MIT
#pragma once

// The decisions of NCCL's regrouping after a lost rank (docs/communication.md, "Losing a rank",
// NCCL), as pure functions: no CUDA, no NCCL, so they are tested on any machine (tst_nccl_recovery).

#include <optional>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/// ncclCommShrink and NCCL_SHRINK_ABORT arrived in NCCL 2.27.0 (NCCL_VERSION(2, 27, 0)).
inline constexpr int kNcclShrinkVersion = 22700;
/// The oldest NCCL the agent uses: 2.18 has ncclCommSplit, which every hierarchical run needs.
inline constexpr int kNcclMinVersion = 21800;

/// @brief "2.28.9" for NCCL's version code 22809 (major * 10000 + minor * 100 + patch).
[[nodiscard]] std::string ncclVersionText(int code);

/// @brief The store prefix of NCCL's keys at @p epoch: "cppl/nccl/" as the run starts, then
/// "cppl/epoch<E>/nccl/", so a regrouping never reads an older epoch's unique id.
[[nodiscard]] std::string ncclKeyPrefix(int epoch);

/// @brief What one survivor can do with its old world communicator; every survivor publishes its
/// own and all decide from the same list, so that they never diverge (shrink is collective over
/// the survivors, a new communicator too, and the two do not meet).
struct ShrinkAbility
{
    int ncclVersion = 0;       ///< ncclGetVersion of the library this process loaded
    bool hasShrink = false;    ///< dlsym found ncclCommShrink
    bool parentUsable = false; ///< the old world communicator exists and was not aborted
    friend bool operator==(const ShrinkAbility &, const ShrinkAbility &) = default;
};
/// @brief "v<version> s<0|1> p<0|1>", the store's text.
[[nodiscard]] std::string formatShrinkAbility(const ShrinkAbility &a);
/// @brief The inverse of formatShrinkAbility; nothing when @p text is malformed.
[[nodiscard]] std::optional<ShrinkAbility> parseShrinkAbility(const std::string &text);

/// @brief The places in @p oldMembers (the old communicator's ranks) of the ranks missing from
/// @p newMembers, ascending: ncclCommShrink's exclude list. Throws ProtocolError when
/// @p newMembers holds a rank @p oldMembers lacks, or repeats one.
[[nodiscard]] std::vector<int> excludedRanks(const std::vector<int> &oldMembers, const std::vector<int> &newMembers);

/// @brief True when @p newMembers lists its ranks in the order they have in @p oldMembers:
/// ncclCommShrink keeps the parent's order, so only then is a survivor's rank in the shrunk
/// communicator its place in @p newMembers.
[[nodiscard]] bool keepsOrder(const std::vector<int> &oldMembers, const std::vector<int> &newMembers);

struct NcclRebuildPlan
{
    bool shrink = false;       ///< ncclCommShrink(NCCL_SHRINK_ABORT) of the old world; else a new unique id and ncclCommInitRankConfig
    std::vector<int> exclude;  ///< for the shrink: old world ranks that are gone
    std::string reason;        ///< why this way, for the log ("rank 2's NCCL 2.26.5 has no ncclCommShrink ...")
};

/**
 * @brief Shrink when every survivor can (NCCL >= 2.27 with the symbol, its old world
 * communicator intact) and the order is kept; otherwise a new communicator from a fresh unique id.
 * @p abilities: one per survivor, in @p newMembers' order (their new ranks).
 */
[[nodiscard]] NcclRebuildPlan planNcclRebuild(const std::vector<int> &oldMembers, const std::vector<int> &newMembers,
                                              const std::vector<ShrinkAbility> &abilities);

} // namespace cppl::agent::dist
