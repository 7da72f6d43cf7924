// SPDX-License-Identifier: MIT
// Ranks that share a host share its cores: each local rank's default thread count is the CPUs this
// process may use divided by the local ranks, and, where the OS allows it, the rank is pinned to its
// own slice of those CPUs (so 4 ranks on 8 cores do not each start 8 threads and fight). On a host
// of several NUMA nodes the slices follow the topology (sysfs): a GPU rank gets CPUs of its GPU's
// node, shared with the other local ranks whose GPUs are there; CPU-only ranks are spread over the
// nodes in order. Where the topology cannot be read, the plain split, with a note saying why.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

struct CpuPlan
{
    int threads = 1;         ///< intra-op threads for this rank
    int allowedCpus = 1;     ///< CPUs in this process's affinity mask (sched_getaffinity)
    int localRanks = 1;      ///< ranks on this host
    std::vector<int> pinned; ///< CPUs this rank is pinned to (empty: not pinned)
    std::string why;         ///< how `threads` was chosen, for the log and the result
    std::string note;        ///< one line when the NUMA topology was wanted but not used (why), else empty
};

/// What pinning near memory needs to know of this host: where sysfs is (tests give a tree of their
/// own) and, per local rank, its GPU's PCI bus id ("0000:18:00.0"; all empty: CPU-only ranks).
struct CpuPlacement
{
    std::string sysfsRoot = "/"; ///< holds sys/devices/system/node and sys/bus/pci/devices
    std::vector<std::string> gpuBusIds;
};

/// The host's NUMA nodes and their CPUs (sys/devices/system/node/node*/cpulist under @p root);
/// empty with @p why set where they cannot be read.
[[nodiscard]] std::map<int, std::vector<int>> readNumaNodes(const std::string &root, std::string *why);
/// The NUMA node of a PCI device (sys/bus/pci/devices/<bus id>/numa_node), nullopt where unknown
/// (no file, or -1: the firmware does not say).
[[nodiscard]] std::optional<int> pciNumaNode(const std::string &root, const std::string &busId);
/// "0-3,8" -> {0,1,2,3,8}; nullopt when malformed.
[[nodiscard]] std::optional<std::vector<int>> parseCpuList(std::string_view text);

/// The CPUs this process may run on (its affinity mask; all online CPUs where that is unknown).
[[nodiscard]] std::vector<int> allowedCpus();
/// Plans threads and pinning for local rank `localRank` of `localRanks`; `threadsFlag` > 0 is --threads.
/// Pins only when several ranks share the host and each gets at least one CPU of its own; with
/// several NUMA nodes in @p placement's topology, to CPUs of its node (see above).
[[nodiscard]] CpuPlan planCpus(int localRank, int localRanks, int threadsFlag, const CpuPlacement &placement = {});
/// planCpus() over the CPUs @p allowed (ascending) instead of this process's affinity mask.
[[nodiscard]] CpuPlan planCpusOn(const std::vector<int> &allowed, int localRank, int localRanks, int threadsFlag, const CpuPlacement &placement);
/// Applies plan.pinned to the calling thread, which threads started later inherit (call it before
/// LibTorch's pool starts). Returns false (and clears plan.pinned) where the OS refuses.
bool applyPinning(CpuPlan &plan);
/// "0-3,8" for the log.
[[nodiscard]] std::string cpuListText(const std::vector<int> &cpus);

} // namespace cppl::agent
