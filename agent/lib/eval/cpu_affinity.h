// SPDX-License-Identifier: MIT
// Ranks that share a host share its cores: each local rank's default thread count is the CPUs this
// process may use divided by the local ranks, and, where the OS allows it, the rank is pinned to its
// own slice of those CPUs (so 4 ranks on 8 cores do not each start 8 threads and fight).
#pragma once

#include <string>
#include <vector>

namespace cppl::agent {

struct CpuPlan
{
    int threads = 1;         ///< intra-op threads for this rank
    int allowedCpus = 1;     ///< CPUs in this process's affinity mask (sched_getaffinity)
    int localRanks = 1;      ///< ranks on this host
    std::vector<int> pinned; ///< CPUs this rank is pinned to (empty: not pinned)
    std::string why;         ///< how `threads` was chosen, for the log and the result
};

/// The CPUs this process may run on (its affinity mask; all online CPUs where that is unknown).
[[nodiscard]] std::vector<int> allowedCpus();
/// Plans threads and pinning for local rank `localRank` of `localRanks`; `threadsFlag` > 0 is --threads.
/// Pins only when several ranks share the host and each gets at least one CPU of its own.
[[nodiscard]] CpuPlan planCpus(int localRank, int localRanks, int threadsFlag);
/// Applies plan.pinned to the calling thread, which threads started later inherit (call it before
/// LibTorch's pool starts). Returns false (and clears plan.pinned) where the OS refuses.
bool applyPinning(CpuPlan &plan);
/// "0-3,8" for the log.
[[nodiscard]] std::string cpuListText(const std::vector<int> &cpus);

} // namespace cppl::agent
