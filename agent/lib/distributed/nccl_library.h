// SPDX-License-Identifier: MIT
// NCCL and the CUDA runtime's entry points, resolved at run time (dlopen/dlsym), and the checks
// every NCCL call goes through. Internal to nccl_library.cpp (which loads them and serves the GPU
// queries and device buffers) and nccl_backend.cpp (the communicators); only with NCCL support.
#pragma once

#include "communicator.h"

#include "cppl/config.h"

#if CLUSTERPPL_HAVE_NCCL
#include <nccl.h>

#include <string>

namespace cppl::agent::dist::nccl_lib {

/// The entry points we use, resolved with dlsym from whichever libcudart / libnccl the host has.
struct Api
{
    GpuLibraries info;
    void *cudart = nullptr;
    void *nccl = nullptr;

    cudaError_t (*getDeviceCount)(int *) = nullptr;
    cudaError_t (*setDevice)(int) = nullptr;
    cudaError_t (*malloc)(void **, size_t) = nullptr;
    cudaError_t (*free)(void *) = nullptr;
    cudaError_t (*memcpyAsync)(void *, const void *, size_t, cudaMemcpyKind, cudaStream_t) = nullptr;
    cudaError_t (*streamCreateWithFlags)(cudaStream_t *, unsigned int) = nullptr;
    cudaError_t (*streamDestroy)(cudaStream_t) = nullptr;
    cudaError_t (*streamQuery)(cudaStream_t) = nullptr;
    cudaError_t (*streamSynchronize)(cudaStream_t) = nullptr;
    cudaError_t (*pciBusId)(char *, int, int) = nullptr;
    cudaError_t (*memGetInfo)(size_t *, size_t *) = nullptr;
    cudaError_t (*runtimeVersion)(int *) = nullptr;
    cudaError_t (*driverVersion)(int *) = nullptr;
    const char *(*cudaErrorString)(cudaError_t) = nullptr;

    ncclResult_t (*getVersion)(int *) = nullptr;
    ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
    ncclResult_t (*commInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *) = nullptr;
    ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *) = nullptr;
    ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*getAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
    ncclResult_t (*commFinalize)(ncclComm_t) = nullptr;
    ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
    ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
    const char *(*ncclErrorString)(ncclResult_t) = nullptr;
    const char *(*lastError)(ncclComm_t) = nullptr;
    ncclResult_t (*userRank)(const ncclComm_t, int *) = nullptr;
    ncclResult_t (*commCount)(const ncclComm_t, int *) = nullptr;
    /// NCCL >= 2.27 only (null before): the survivors' communicator after a lost rank. Declared
    /// here rather than taken from nccl.h, so that an agent built against an older header still
    /// uses it where the runtime library has it.
    ncclResult_t (*commShrink)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int) = nullptr;
};

#ifdef NCCL_SHRINK_ABORT
constexpr int kShrinkAbort = NCCL_SHRINK_ABORT;
#else
constexpr int kShrinkAbort = 0x01; // nccl.h 2.27: first end the parent's operations in flight, then shrink
#endif

/// The libraries, loaded once per process (the first call), their versions and what is missing.
[[nodiscard]] const Api &api();
/// Why NCCL cannot run here (libraries, driver, no GPU visible), empty when it can.
[[nodiscard]] std::string deviceProblem();
/// NCCL's code says little ("unhandled system error"); ncclGetLastError says which call and why.
[[noreturn]] void fail(ncclResult_t rc, const std::string &what, ncclComm_t comm);
/// Throws CollectiveError (fail()) unless @p rc is ncclSuccess.
void check(ncclResult_t rc, const std::string &what, ncclComm_t comm = nullptr);
/// Throws CollectiveError naming @p what unless @p rc is cudaSuccess.
void checkCuda(cudaError_t rc, const char *what);
/// How many channels (CTAs, one SM each, with their own buffers) a communicator may use.
enum class Channels
{
    One,       ///< the sums' communicators (world, node group, leaders): a few hundred bytes a round
    NcclsOwn,  ///< tensor parallelism's group: activations every layer, NCCL's choice for bandwidth
};
/// blocking = 1 explicitly: NCCL_COMM_BLOCKING=0 in a user's environment would otherwise make
/// init and split return ncclInProgress, which this code (blocking calls, polled streams) never expects.
/// Channels::One sets minCTAs = maxCTAs = 1 (docs/communication.md, "Memory").
[[nodiscard]] ncclConfig_t blockingConfig(const char *name, Channels channels);

} // namespace cppl::agent::dist::nccl_lib

#endif
