// SPDX-License-Identifier: MIT
// NCCL for tensor parallelism on GPUs: a communicator per tensor-parallel group whose collectives
// move float data, on the device or staged from the host (docs/communication.md, "Tensor-parallel
// groups"). Torch-free: nccl_backend.cpp implements it over the dlopen()ed NCCL and CUDA runtime.
#pragma once

#include "communicator.h"

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace cppl::agent::dist {

/// The element types a tensor-parallel group moves.
enum class DeviceElement { Float32, Float64 };

/**
 * @brief One tensor-parallel group's NCCL communicator: polled and bounded by --timeout as the
 * data-parallel ones (its first collective too), aborted on a timeout or an asynchronous error.
 * Never regrouped: a lost member takes its whole group out (the watchdog ends the others).
 */
class DeviceCommunicator : public Communicator
{
public:
    /// @brief Every member's @p count elements at @p in into @p out (size() * count, member
    /// order); both in this rank's GPU memory, whose producers the caller has waited for.
    virtual void allGatherOnDevice(const void *in, void *out, std::size_t count, DeviceElement type) = 0;
    /// @brief The same with host memory, staged through the communicator's device buffer.
    virtual void allGatherHost(const void *in, void *out, std::size_t count, DeviceElement type) = 0;
    /// @brief Element-wise maximum over the members, in place, host memory staged (exact in any order).
    virtual void allReduceMaxHost(float *data, std::size_t count) = 0;
    /// @brief Member @p root's words to every member, waiting at most @p wait (the leader's
    /// commands: longer than --timeout, tensor_parallel.h).
    virtual void broadcastWaiting(std::span<std::int64_t> words, int root, std::chrono::milliseconds wait) = 0;
};

/**
 * @brief The NCCL communicator of this rank's tensor-parallel group (member @p rank of @p size;
 * options: timeout, this rank's GPU), from a unique id member 0 publishes under @p prefix of
 * @p store; its first collective (connecting the members) runs here, bounded by options.timeout.
 * Blocking config as the data-parallel communicators. Throws CollectiveError naming @p name.
 */
[[nodiscard]] std::unique_ptr<DeviceCommunicator> makeNcclTensorParallelCommunicator(RendezvousStore &store, const BackendOptions &options,
                                                                                     const std::string &prefix, int rank, int size,
                                                                                     const std::string &name);

/// @brief A buffer of @p bytes in GPU @p device's memory (cudaMalloc; -1: the thread's current
/// device, which makeNcclTensorParallelCommunicator set), for comm-check's tensor-parallel part,
/// which has no LibTorch tensors on a GPU: freed with it.
class DeviceBuffer
{
public:
    DeviceBuffer(int device, std::size_t bytes);
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer &) = delete;
    DeviceBuffer &operator=(const DeviceBuffer &) = delete;
    [[nodiscard]] void *data() const noexcept { return m_data; }
    void upload(const void *host, std::size_t bytes);
    void download(void *host, std::size_t bytes) const;

private:
    int m_device;
    void *m_data = nullptr;
};

} // namespace cppl::agent::dist
