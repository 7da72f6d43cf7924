// SPDX-License-Identifier: MIT
// The tensor-parallel group over c10d's ProcessGroupGloo (CPUs): the ordered all-reduce as an
// all-to-all of N chunks, a sum in tp_rank order, and an all-gather; the maximum as Gloo's MAX.
// docs/communication.md, "Tensor-parallel groups".
#include "c10d.h"
#include "c10d_store.h"

#include "eval/tensor_parallel.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#if CLUSTERPPL_HAVE_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>

namespace cppl::agent::dist {

#if CLUSTERPPL_HAVE_GLOO

namespace {

/**
 * Every reduction gives the same bits on every member and in every group, whatever Gloo's
 * algorithm: each member sums one chunk of the vector in tp_rank order (member 0's values, plus
 * member 1's, ...) and all-gathers the sums; a maximum is exact in any order. Gloo moves the data
 * only, so the arithmetic is this file's.
 */
class GlooTensorParallelGroup final : public TensorParallelGroup
{
public:
    GlooTensorParallelGroup(c10::intrusive_ptr<c10d::Store> store, int rank, int size, const BackendOptions &o, std::string name)
        : m_rank(rank), m_size(size), m_name(std::move(name))
    {
        try {
            m_pg = connect(store, o, o.timeout);
            // The commands on a process group of their own: Gloo's waits take its context's
            // timeout, and a follower's wait for its leader's next command is not bounded by
            // --timeout (tensor_parallel.h).
            m_commands = connect(c10::make_intrusive<c10d::PrefixStore>("commands/", store), o, kCommandWait);
        } catch (const std::exception &e) {
            raise("connecting", e);
        }
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    void allReduceSum(float *data, std::int64_t n) override
    {
        const Timed timed(m_seconds);
        orderedSum(data, n, at::kFloat);
    }
    void allReduceSum(double *data, std::int64_t n) override
    {
        const Timed timed(m_seconds);
        orderedSum(data, n, at::kDouble);
    }
    void allReduceMax(float *data, std::int64_t n) override
    {
        if (n == 0)
            return;
        const Timed timed(m_seconds);
        const c10::InferenceMode normal(false); // see orderedSum()
        std::vector<at::Tensor> t{at::from_blob(data, {n}, at::TensorOptions().dtype(at::kFloat))};
        c10d::AllreduceOptions o;
        o.reduceOp = c10d::ReduceOp::MAX;
        wait("max all-reduce", [&] { return m_pg->allreduce(t, o); });
    }
    void broadcastCommand(std::int64_t *words, std::int64_t n) override
    {
        const c10::InferenceMode normal(false); // see orderedSum()
        at::Tensor t = at::empty({n}, at::TensorOptions().dtype(at::kLong));
        std::memcpy(t.data_ptr<std::int64_t>(), words, static_cast<std::size_t>(n) * sizeof(std::int64_t));
        std::vector<at::Tensor> tensors{t};
        c10d::BroadcastOptions o;
        o.rootRank = 0;
        wait("command from the leader", [&] { return m_commands->broadcast(tensors, o); });
        std::memcpy(words, t.data_ptr<std::int64_t>(), static_cast<std::size_t>(n) * sizeof(std::int64_t));
    }
    double collectiveSeconds() const override { return m_seconds; }

private:
    /// Longer than any run: the leader's liveness is the watchdog's to judge, not this wait's.
    static constexpr std::chrono::milliseconds kCommandWait{std::chrono::hours(24 * 30)};
    /// Adds the scope's duration to a member's seconds.
    struct Timed
    {
        explicit Timed(double &into) : seconds(into) {}
        Timed(const Timed &) = delete;
        Timed &operator=(const Timed &) = delete;
        ~Timed() { seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
        double &seconds;
        std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    };

    c10::intrusive_ptr<c10d::ProcessGroupGloo> connect(c10::intrusive_ptr<c10d::Store> store, const BackendOptions &o,
                                                       std::chrono::milliseconds timeout) const
    {
        auto options = c10d::ProcessGroupGloo::Options::create(timeout);
        options->devices.push_back(o.glooInterface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(o.glooHost)
                                                           : c10d::ProcessGroupGloo::createDeviceForInterface(o.glooInterface));
        options->threads = 1;
        return c10::make_intrusive<c10d::ProcessGroupGloo>(store, m_rank, m_size, options);
    }

    template<typename T> void orderedSum(T *data, std::int64_t n, at::ScalarType type)
    {
        if (n == 0)
            return;
        // The evaluation runs in inference mode, whose tensors Gloo's thread (outside it) may not
        // write: these are made as normal tensors.
        const c10::InferenceMode normal(false);
        const std::int64_t chunk = (n + m_size - 1) / m_size, padded = chunk * m_size;
        const auto opts = at::TensorOptions().dtype(type);
        at::Tensor in = at::zeros({padded}, opts), out = at::empty({padded}, opts);
        std::memcpy(in.data_ptr<T>(), data, static_cast<std::size_t>(n) * sizeof(T));
        std::vector<std::int64_t> even; // empty split sizes: N equal chunks
        wait("all-to-all", [&] { return m_pg->alltoall_base(out, in, even, even); });
        // out holds this member's chunk from every member, in tp_rank order.
        at::Tensor sum = out.narrow(0, 0, chunk).clone();
        T *s = sum.data_ptr<T>();
        const T *from = out.data_ptr<T>();
        for (int m = 1; m < m_size; ++m)
            for (std::int64_t j = 0; j < chunk; ++j)
                s[j] += from[m * chunk + j];
        std::vector<at::Tensor> inputs{sum};
        std::vector<std::vector<at::Tensor>> outputs(1);
        for (int m = 0; m < m_size; ++m)
            outputs[0].push_back(at::empty({chunk}, opts));
        wait("all-gather", [&] { return m_pg->allgather(outputs, inputs); });
        for (int m = 0; m < m_size; ++m) {
            const std::int64_t begin = m * chunk, count = std::min(chunk, n - begin);
            if (count > 0)
                std::memcpy(data + begin, outputs[0][static_cast<std::size_t>(m)].data_ptr<T>(), static_cast<std::size_t>(count) * sizeof(T));
        }
    }
    template<typename Op> void wait(const char *what, Op &&op)
    {
        try {
            op()->wait();
        } catch (const std::exception &e) {
            raise(what, e);
        }
    }
    /// Gloo's error as this project's: a TimeoutError for its timeouts, a CollectiveError otherwise.
    [[noreturn]] void raise(const std::string &what, const std::exception &e) const
    {
        const std::string reason = firstLine(e.what());
        const std::string msg = "gloo " + what + " in " + m_name + " (member " + std::to_string(m_rank) + " of " + std::to_string(m_size)
                                + ") failed: " + reason;
        if (reason.find("imed out") != std::string::npos || reason.find("imeout") != std::string::npos)
            throw TimeoutError(msg);
        throw CollectiveError(msg);
    }

    int m_rank, m_size;
    double m_seconds = 0;
    std::string m_name;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> m_pg;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> m_commands; ///< the leader's commands (broadcastCommand)
};

} // namespace

#endif

std::unique_ptr<TensorParallelGroup> makeGlooTensorParallelGroup(RendezvousStore &store, const BackendOptions &o, const std::string &prefix,
                                                                 int rank, int size, const std::string &name)
{
#if CLUSTERPPL_HAVE_GLOO
    auto *tcp = dynamic_cast<TcpStore *>(&store);
    CPPL_ENFORCE(tcp != nullptr, "gloo needs the TCPStore");
    return std::make_unique<GlooTensorParallelGroup>(c10::make_intrusive<c10d::PrefixStore>(prefix, tcp->handle()), rank, size, o, name);
#else
    (void)store;
    (void)o;
    (void)prefix;
    (void)rank;
    throw CollectiveError(name + " of " + std::to_string(size) + " ranks needs Gloo: " + glooUnavailableReason());
#endif
}

} // namespace cppl::agent::dist
