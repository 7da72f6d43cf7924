// SPDX-License-Identifier: MIT
// The tensor-parallel group over NCCL (GPUs): every sum is an all-gather of the members' partials
// followed by a sum in tp_rank order, so every member of every group gets the same bits whatever
// NCCL's algorithm (its own SUM promises no order for N > 2); the maximum is NCCL's MAX, exact in
// any order. docs/communication.md, "Tensor-parallel groups". Torch-free.
#include "nccl_device.h"
#include "tensor_parallel_nccl.h"

#include "eval/tensor_parallel.h"

#include <chrono>
#include <span>
#include <vector>

namespace cppl::agent::dist {

namespace {

/// Adds the scope's duration to a member's seconds.
class Timed
{
public:
    explicit Timed(double &into) : m_seconds(into) {}
    Timed(const Timed &) = delete;
    Timed &operator=(const Timed &) = delete;
    ~Timed() { m_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count(); }

private:
    double &m_seconds;
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
};

class NcclTensorParallelGroup final : public TensorParallelGroup
{
public:
    explicit NcclTensorParallelGroup(std::unique_ptr<DeviceCommunicator> comm) : m_comm(std::move(comm)) {}
    int rank() const override { return m_comm->rank(); }
    int size() const override { return m_comm->size(); }
    void allReduceSum(float *data, std::int64_t n) override { orderedSum(data, n, DeviceElement::Float32); }
    void allReduceSum(double *data, std::int64_t n) override { orderedSum(data, n, DeviceElement::Float64); }
    void allReduceMax(float *data, std::int64_t n) override
    {
        if (n == 0)
            return;
        const Timed timed(m_seconds);
        m_comm->allReduceMaxHost(data, static_cast<std::size_t>(n));
    }
    bool gathersOnDevice() const override { return true; }
    void allGatherOnDevice(const float *in, float *out, std::int64_t n) override
    {
        if (n == 0)
            return;
        const Timed timed(m_seconds);
        m_comm->allGatherOnDevice(in, out, static_cast<std::size_t>(n), DeviceElement::Float32);
    }
    void broadcastCommand(std::int64_t *words, std::int64_t n) override
    {
        m_comm->broadcastWaiting(std::span<std::int64_t>(words, static_cast<std::size_t>(n)), 0, kCommandWait);
    }
    double collectiveSeconds() const override { return m_seconds; }

private:
    /// Longer than any run: the leader's liveness is the watchdog's to judge, not this wait's.
    static constexpr std::chrono::milliseconds kCommandWait{std::chrono::hours(24 * 30)};

    /// Host data (the vocabulary's sums, the members' figures): gathered through the device, then
    /// member 0's value plus member 1's ..., as the Gloo group sums.
    template<typename T> void orderedSum(T *data, std::int64_t n, DeviceElement type)
    {
        if (n == 0)
            return;
        const Timed timed(m_seconds);
        const auto count = static_cast<std::size_t>(n);
        std::vector<T> all(count * static_cast<std::size_t>(size()));
        m_comm->allGatherHost(data, all.data(), count, type);
        for (std::size_t j = 0; j < count; ++j)
            data[j] = all[j];
        for (std::size_t m = 1; m < static_cast<std::size_t>(size()); ++m)
            for (std::size_t j = 0; j < count; ++j)
                data[j] += all[m * count + j];
    }

    std::unique_ptr<DeviceCommunicator> m_comm;
    double m_seconds = 0;
};

} // namespace

std::unique_ptr<TensorParallelGroup> makeNcclTensorParallelGroup(RendezvousStore &store, const BackendOptions &options, const std::string &prefix,
                                                                 int rank, int size, const std::string &name)
{
    return std::make_unique<NcclTensorParallelGroup>(makeNcclTensorParallelCommunicator(store, options, prefix, rank, size, name));
}

} // namespace cppl::agent::dist
