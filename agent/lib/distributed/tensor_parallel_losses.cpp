// SPDX-License-Identifier: MIT
// A lost rank under --tensor-parallel and --on-rank-loss continue: it takes its whole group out.
// The data-parallel side (the leaders) sees the loss of the group's leader and regroups as for any
// lost rank; the group's survivors leave at once (docs/communication.md, "Tensor-parallel groups").
#include "distributed_run.h"

#include "eval/tensor_parallel.h"

#include "cppl/errors.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace cppl::agent::dist {

std::optional<Watchdog::Loss> DistributedRun::dataParallelLoss(const Watchdog::Loss &raw)
{
    if (m_tensorParallel == 1)
        return raw;
    const int n = m_tensorParallel;
    const auto alive = [&](int r) { return std::find(raw.members.begin(), raw.members.end(), r) != raw.members.end(); };
    std::vector<int> whole; // the leaders whose every member is still in the run
    for (int leader : m_dataParallelMembers) {
        bool all = true;
        for (int m = 0; m < n && all; ++m)
            all = alive(leader + m);
        if (all)
            whole.push_back(leader);
    }
    if (whole == m_dataParallelMembers)
        return std::nullopt; // a member of a group already out (its survivors leave after it)
    m_dataParallelMembers = whole;
    Watchdog::Loss seen = raw;
    seen.rank = raw.rank - raw.rank % n;
    seen.members = std::move(whole);
    if (raw.rank != seen.rank)
        seen.cause = "its tensor-parallel group lost rank " + std::to_string(raw.rank) + ", which " + raw.cause;
    return seen;
}

std::string DistributedRun::tensorParallelGroupLost(const Watchdog::Loss &raw) const
{
    const int g = raw.rank / m_tensorParallel;
    return "tensor-parallel group " + std::to_string(g) + " lost rank " + std::to_string(raw.rank) + " (" + raw.cause
           + "): its other members leave (--on-rank-loss continue: the other groups redo its batches)";
}

void DistributedRun::awaitGroupVerdict()
{
    // The watchdog's handler ends this process if the loss is in this rank's group; a loss
    // elsewhere, or none, returns here and the caller fails as it would have.
    const int before = m_lossEpoch.load();
    const auto until = std::chrono::steady_clock::now() + m_timeout + std::chrono::seconds(2);
    while (m_lossEpoch.load() == before && (hubElection() || std::chrono::steady_clock::now() < until))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

namespace {

class WatchedTensorParallelGroup final : public TensorParallelGroup
{
public:
    WatchedTensorParallelGroup(std::unique_ptr<TensorParallelGroup> inner, DistributedRun &run) : m_inner(std::move(inner)), m_run(run) {}
    int rank() const override { return m_inner->rank(); }
    int size() const override { return m_inner->size(); }
    void allReduceSum(float *data, std::int64_t n) override
    {
        guarded([&] { m_inner->allReduceSum(data, n); });
    }
    void allReduceSum(double *data, std::int64_t n) override
    {
        guarded([&] { m_inner->allReduceSum(data, n); });
    }
    void allReduceMax(float *data, std::int64_t n) override
    {
        guarded([&] { m_inner->allReduceMax(data, n); });
    }
    bool gathersOnDevice() const override { return m_inner->gathersOnDevice(); }
    void allGatherOnDevice(const float *in, float *out, std::int64_t n) override
    {
        guarded([&] { m_inner->allGatherOnDevice(in, out, n); });
    }
    void broadcastCommand(std::int64_t *words, std::int64_t n) override
    {
        guarded([&] { m_inner->broadcastCommand(words, n); });
    }
    double collectiveSeconds() const override { return m_inner->collectiveSeconds(); }

private:
    template<typename Op> void guarded(Op &&op)
    {
        try {
            op();
        } catch (const CollectiveError &) {
            m_run.awaitGroupVerdict();
            throw;
        }
    }

    std::unique_ptr<TensorParallelGroup> m_inner;
    DistributedRun &m_run;
};

} // namespace

std::unique_ptr<TensorParallelGroup> watchTensorParallelGroup(std::unique_ptr<TensorParallelGroup> group, DistributedRun &run)
{
    return std::make_unique<WatchedTensorParallelGroup>(std::move(group), run);
}

} // namespace cppl::agent::dist
