// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>
#include <functional>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cppl/errors.h"
#include "cppl/rank_env.h"

namespace cppl::agent::dist {

class RendezvousStore;

/**
 * @brief A collective gave up because the watchdog reported a lost rank (`--on-rank-loss
 * continue`): the survivors regroup (docs/communication.md, "Losing a rank"). Never a failure of
 * its own; the code that regroups catches it.
 */
class RankLostError : public CollectiveError
{
public:
    using CollectiveError::CollectiveError;
};

/**
 * @brief One communicator (a process group) over int64 words: the only data ClusterPPL ever
 * reduces is exact-accumulator limbs and int64 counts, so SUM over int64 is all it needs, and the
 * result does not depend on the reduction order. Every call blocks until done and throws
 * CollectiveError (peer gone, timeout) with the backend's reason.
 */
class Communicator
{
public:
    virtual ~Communicator() = default;
    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    virtual void allReduceSum(std::span<std::int64_t> words) = 0;
    /// @brief SUM into @p root's buffer (others' buffers are left unspecified).
    virtual void reduceSum(std::span<std::int64_t> words, int root) = 0;
    virtual void broadcast(std::span<std::int64_t> words, int root) = 0;
    /// @brief Make any operation in flight return and never finalize (NCCL: ncclCommAbort): a run
    /// that failed, or the old communicators of a regrouping. Not on the watchdog's way out (the
    /// process's exit ends everything). Gloo needs nothing: closing its sockets ends it.
    virtual void abort() noexcept {}
    /// @brief An operation in flight (or running on another thread): aborted first where several
    /// are, since an NCCL abort can block behind another communicator's kernel.
    [[nodiscard]] virtual bool busy() noexcept { return false; }
};

/// `--topology`: reduce in groups, all-reduce among leaders, broadcast back; or one flat all-reduce.
enum class Topology { Hierarchical, Flat };

/**
 * @brief The communicators one rank takes part in. Hierarchical: `group` (its node group, local
 * rank 0 = the leader) and, on leaders, `leaders` (one member per group, ordered by group). Flat:
 * `world` only.
 */
struct Communicators
{
    std::unique_ptr<Communicator> world;
    std::unique_ptr<Communicator> group;
    std::unique_ptr<Communicator> leaders;
    std::string backend; ///< "gloo" or "nccl"
};

struct BackendOptions
{
    int rank = 0;
    int worldSize = 1;
    /// The rank this process started as (--rank): unlike `rank` (a rank among the communicator's
    /// members: the group's index for a tensor-parallel leader, renumbered by a regroup), unique in
    /// the run, so each process's NCCL_HOSTID in the shared-GPU test mode differs (-1: use `rank`).
    int processRank = -1;
    int localRank = 0;
    int localWorldSize = 1;
    int cudaDevice = -1; ///< the GPU eval chose for this rank (NCCL uses the same); -1: choose here
    std::vector<int> hostDevices; ///< --devices, for choosing here: local rank L takes the L-th
    RankGroups groups;
    Topology topology = Topology::Hierarchical;
    std::chrono::milliseconds timeout{300000};
    std::string glooHost;       ///< address Gloo binds to (empty: resolve this host's name, else loopback)
    std::string glooInterface;  ///< GLOO_SOCKET_IFNAME: bind to this interface instead
    std::string storePrefix = "cppl/gloo/"; ///< each regrouping gets a fresh one: old keys must not be reused
    /// Tolerant runs: a Gloo wait returns in slices, an NCCL one polls, and both throw RankLostError
    /// once *lossEpoch passes `epoch` (the watchdog reported a lost rank). Null: wait until done (or
    /// the timeout), as a plain run does.
    const std::atomic<int> *lossEpoch = nullptr;
    int epoch = 0;
    /// Called with a name as each communicator is connected (CLUSTERPPL_DEBUG_CONNECT's lines); may be empty.
    std::function<void(const char *)> connected;
    /// Fail-fast runs: called with this rank's error before a communicator is aborted on its own
    /// timeout or error, so that the peers, which then fail on the broken connection, can name the
    /// cause (RunCause::publish: run_cause.h); may be empty.
    std::function<void(const std::string &)> givingUp;
};

/**
 * @brief The NCCL C API, loaded at run time (libnccl.so.2, libcudart): an agent built with NCCL
 * still starts where neither exists. Subgroups via ncclCommSplit; unique ids through the store.
 * Throws CollectiveError saying why NCCL is unavailable (not built in, library missing, no driver,
 * no GPU).
 */
[[nodiscard]] Communicators makeNcclCommunicators(RendezvousStore &store, const BackendOptions &options);

/**
 * @brief After a lost rank (`--on-rank-loss continue`): the survivors' NCCL communicators at
 * options.epoch (options: this rank among @p newMembers, their node groups). @p old (this rank's
 * communicators over @p oldMembers, original rank numbers) is consumed: its node group and leaders
 * are aborted; its world communicator is shrunk (ncclCommShrink, NCCL_SHRINK_ABORT) when every
 * survivor's NCCL can (>= 2.27) and then aborted, else aborted and replaced by a new one from a
 * fresh unique id under `cppl/epoch<E>/nccl/` (planNcclRebuild decides, from what each survivor
 * published there). Collective over the survivors and blocking: the caller makes a further loss
 * during it fatal (DistributedRun::regroup).
 */
[[nodiscard]] Communicators regroupNcclCommunicators(RendezvousStore &store, const BackendOptions &options, Communicators old,
                                                     const std::vector<int> &oldMembers, const std::vector<int> &newMembers);

/// @brief The GPU libraries as this process loaded them (dlopen), for logs and pre-flight reports.
struct GpuLibraries
{
    std::string cudartPath; ///< the file actually mapped (dlinfo), empty when none loaded
    std::string cudartHow;  ///< "already loaded (LibTorch's)", "loader search" or "build-time path"
    std::string ncclPath;
    std::string ncclHow;
    int runtimeVersion = 0; ///< cudaRuntimeGetVersion, e.g. 13000
    int driverVersion = 0;  ///< cudaDriverGetVersion (the newest CUDA the driver supports), 0 without a driver
    int ncclVersion = 0;    ///< ncclGetVersion, e.g. 22809
    bool ncclShrink = false; ///< ncclCommShrink resolved (NCCL >= 2.27): after a lost rank the survivors shrink
    std::string error;      ///< why a library or symbol could not be loaded; empty when all loaded
};
/// @brief Loads the libraries once (already loaded ones first: RTLD_NOLOAD) and says what it got.
[[nodiscard]] GpuLibraries gpuLibraries();
/// @brief One line: versions and paths, e.g. for the agent's log.
[[nodiscard]] std::string describe(const GpuLibraries &libraries);
/// @brief Free and total bytes of @p device (cudaMemGetInfo), or nothing without a usable runtime.
[[nodiscard]] bool cudaMemoryInfo(int device, std::int64_t &freeBytes, std::int64_t &totalBytes);

/// @brief CUDA device @p device's PCI bus id ("0000:18:00.0", cudaDeviceGetPCIBusId), or empty
/// without a usable runtime. NVML and sysfs know the device by it, whatever order CUDA counts in.
[[nodiscard]] std::string cudaPciBusId(int device);

/// @brief A CUDA device as the runtime reports it (for pre-flight checks).
struct GpuInfo
{
    std::string name;
    std::int64_t memoryBytes = 0;
    std::string pciBusId; ///< "0000:18:00.0": how NVML, nvidia-smi and sysfs name the same device
};
/// @brief The visible CUDA devices through the dlopen()ed runtime; empty without CUDA or NCCL support.
[[nodiscard]] std::vector<GpuInfo> cudaDevices();

/// @brief Why the nccl backend cannot be used here, or empty when it can (loads libraries, probes devices).
[[nodiscard]] std::string ncclUnavailableReason();

} // namespace cppl::agent::dist
