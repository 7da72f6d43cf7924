// SPDX-License-Identifier: MIT
#pragma once

// Torch-free and CUDA-free: which GPU a rank uses is decided here once, from counts and the
// environment, so the rules run (and are tested) on hosts without a GPU.

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cppl::agent {

/// What `--device` asks for: the CPU, or CUDA with or without an index.
struct DeviceRequest
{
    bool cuda = false;
    std::optional<int> index; ///< cuda:N only: cuda and auto leave the choice to chooseCudaDevice()
};

/**
 * `--device` cpu, cuda, cuda:N or auto (CUDA when this LibTorch has it and a GPU is visible, else
 * the CPU). auto on CUDA names no index, as cuda does: each rank takes its own GPU
 * (cuda:LOCAL_RANK), never all of them cuda:0. Throws ConfigError for cuda without CUDA and for
 * any other text.
 */
[[nodiscard]] DeviceRequest parseDeviceText(const std::string &text, bool cudaAvailable);

struct DevicePlacement
{
    int localRank = 0;
    int localWorldSize = 1;  ///< ranks on this host (LOCAL_WORLD_SIZE)
    int visibleDevices = 0;  ///< devices the CUDA runtime counts, CUDA_VISIBLE_DEVICES already applied
    /// The variable as this process has it (nullopt: unset). One entry with several local ranks
    /// means the launcher gave every rank its own GPU (Slurm --gpu-bind, per-rank wrappers).
    std::optional<std::string> cudaVisibleDevices;
    std::optional<int> requested; ///< --device cuda:N; nullopt for cuda / auto
    /// --devices: this host's GPUs for its ranks, local rank L takes the L-th (the profile's
    /// "devices"); empty: cuda:LOCAL_RANK as below.
    std::vector<int> hostDevices;
    bool nccl = false;            ///< NCCL refuses two ranks of one communicator on one GPU
    /// CLUSTERPPL_NCCL_SHARE_GPU=1 (a test mode): NCCL ranks of this host may share GPUs round
    /// robin as Gloo's do, each its own NCCL "host" (prepareNcclGpuSharing).
    bool shareGpu = false;
    std::string host;             ///< for messages
};

/// `--devices 4,5,6,7`: distinct device indices. Throws ConfigError naming the option otherwise.
[[nodiscard]] std::vector<int> parseDeviceList(const std::string &text);

/**
 * The CUDA device index (as this process numbers them) a rank uses for the model and for NCCL.
 * With hostDevices (--devices): its LOCAL_RANK-th entry. cuda / auto: LOCAL_RANK when enough GPUs are visible, 0 when each rank sees exactly one; with
 * gloo, more ranks than GPUs share them round robin. Throws ConfigError saying which host, which
 * counts and what to do when no GPU is visible, cuda:N is out of range, or NCCL would put two of
 * this host's ranks on one GPU.
 */
[[nodiscard]] int chooseCudaDevice(const DevicePlacement &p);

/// How many of this host's ranks use the same GPU as this one (they share its memory): 1 with NCCL
/// or one GPU per rank, up to LOCAL_WORLD_SIZE when gloo ranks share GPUs round robin or all take cuda:N.
[[nodiscard]] int ranksPerCudaDevice(const DevicePlacement &p);

/// The switch of the test mode in which several NCCL ranks share one GPU (docs/communication.md,
/// "Several NCCL ranks on one GPU").
inline constexpr const char *kNcclShareGpuVariable = "CLUSTERPPL_NCCL_SHARE_GPU";

/// Whether this process's environment has CLUSTERPPL_NCCL_SHARE_GPU=1.
[[nodiscard]] bool ncclShareGpuRequested();

/// The host as NCCL tells its ranks apart: NCCL_HOSTID when set, else the host name.
[[nodiscard]] std::string ncclHostId();

/**
 * The test mode's environment, before NCCL starts: with CLUSTERPPL_NCCL_SHARE_GPU=1 and
 * NCCL_HOSTID unset, sets NCCL_HOSTID=<host name>-rank<@p rank> (NCCL then sees each rank as a host
 * of its own and allows them one GPU) and NCCL_NET=Socket where unset (no shared memory or P2P
 * between those "hosts"). Returns the line to log, once: empty when nothing was set.
 */
[[nodiscard]] std::string prepareNcclGpuSharing(int rank);

/// One rank's GPU as NCCL sees it: its host (ncclHostId()) and the device's PCI bus id.
struct RankGpu
{
    std::string host;
    std::string busId;
};

/// The first two ranks that share a GPU (same host, same bus id), or nullopt.
[[nodiscard]] std::optional<std::pair<int, int>> findSharedGpu(const std::vector<RankGpu> &ranks);

} // namespace cppl::agent
