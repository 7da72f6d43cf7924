// SPDX-License-Identifier: MIT
// The gloo backend: c10d's ProcessGroupGloo, one process group per communicator, subgroups through
// PrefixStore. Built only where Gloo's headers exist (libgloo-dev, or a pip wheel's own).
#include "fault_hooks.h"
#include "c10d_store.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#if CLUSTERPPL_HAVE_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <ATen/ATen.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace cppl::agent::dist {

#if CLUSTERPPL_HAVE_GLOO

namespace {

class GlooCommunicator final : public Communicator
{
public:
    GlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size, const BackendOptions &o, std::string name)
        : m_rank(rank), m_size(size), m_name(std::move(name)), m_lossEpoch(o.lossEpoch), m_epoch(o.epoch)
    {
        auto options = c10d::ProcessGroupGloo::Options::create(o.timeout);
        try {
            options->devices.push_back(o.glooInterface.empty() ? c10d::ProcessGroupGloo::createDeviceForHostname(o.glooHost)
                                                               : c10d::ProcessGroupGloo::createDeviceForInterface(o.glooInterface));
        } catch (const std::exception &e) {
            throw CollectiveError("gloo: cannot bind to " + (o.glooInterface.empty() ? "address " + o.glooHost : "interface " + o.glooInterface)
                                  + ": " + firstLine(e.what()) + " (set GLOO_SOCKET_IFNAME to the interface the ranks share)");
        }
        options->threads = 1;
        try {
            m_pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
        } catch (const std::exception &e) {
            raise("connecting", e);
        }
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    void allReduceSum(std::span<std::int64_t> words) override
    {
        run("all-reduce", words, [&](std::vector<at::Tensor> &t) { return m_pg->allreduce(t); });
    }
    void reduceSum(std::span<std::int64_t> words, int root) override
    {
        c10d::ReduceOptions o;
        o.rootRank = root;
        o.reduceOp = c10d::ReduceOp::SUM;
        run("reduce", words, [&](std::vector<at::Tensor> &t) { return m_pg->reduce(t, o); });
    }
    void broadcast(std::span<std::int64_t> words, int root) override
    {
        c10d::BroadcastOptions o;
        o.rootRank = root;
        run("broadcast", words, [&](std::vector<at::Tensor> &t) { return m_pg->broadcast(t, o); });
    }

private:
    template<typename Op>
    void run(const char *what, std::span<std::int64_t> words, Op &&op)
    {
        if (!m_lossEpoch) {
            // Gloo reduces CPU tensors in place: the tensor is a view of the caller's words.
            std::vector<at::Tensor> t{at::from_blob(words.data(), {static_cast<std::int64_t>(words.size())}, at::TensorOptions().dtype(at::kLong))};
            try {
                op(t)->wait();
            } catch (const std::exception &e) {
                raise(what, e);
            }
            return;
        }
        // Tolerant: the operation may be abandoned while Gloo's thread still works on it, so it
        // gets a tensor of its own (kept alive by the work), and the wait comes in slices that end
        // without side effects (Work::wait(timeout) throws when the slice is over and the work is
        // not completed); between slices, a lost rank reported by the watchdog ends the wait.
        std::vector<at::Tensor> t{at::empty({static_cast<std::int64_t>(words.size())}, at::TensorOptions().dtype(at::kLong))};
        std::copy(words.begin(), words.end(), t[0].data_ptr<std::int64_t>());
        c10::intrusive_ptr<c10d::Work> work;
        try {
            work = op(t);
        } catch (const std::exception &e) {
            raise(what, e);
        }
        for (;;) {
            if (m_lossEpoch->load() > m_epoch)
                throw RankLostError("gloo " + std::string(what) + " in the " + m_name + " group abandoned: a rank was lost");
            try {
                if (work->wait(std::chrono::milliseconds(50)))
                    break;
            } catch (const std::exception &e) {
                if (!work->isCompleted())
                    continue; // the slice ended
                if (work->isSuccess())
                    break; // the slice ended just as the work completed
                raise(what, e);
            }
        }
        const std::int64_t *out = t[0].data_ptr<std::int64_t>();
        std::copy(out, out + words.size(), words.begin());
    }
    /// Throws Gloo's error @p e of @p what as this project's: a TimeoutError for Gloo's timeouts
    /// (exit code 6, kExitTimeout), a CollectiveError otherwise. Thrown here, not
    /// returned: a TimeoutError returned as CollectiveError was sliced to one, and every Gloo
    /// timeout read as a plain collective failure (exit 5).
    [[noreturn]] void raise(const std::string &what, const std::exception &e) const
    {
        const std::string reason = firstLine(e.what());
        const std::string msg = "gloo " + what + " in the " + m_name + " group (member " + std::to_string(m_rank) + " of "
                                + std::to_string(m_size) + ") failed: " + reason;
        if (reason.find("imed out") != std::string::npos || reason.find("imeout") != std::string::npos)
            throw TimeoutError(msg);
        throw CollectiveError(msg);
    }

    int m_rank, m_size;
    std::string m_name;
    const std::atomic<int> *m_lossEpoch;
    int m_epoch;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> m_pg;
};

} // namespace

#endif

std::string glooUnavailableReason()
{
#if CLUSTERPPL_HAVE_GLOO
    // CLUSTERPPL_TEST_NO_GLOO=1: the tests' stand-in for an agent built without Gloo (a pip torch's),
    // for everything that asks this function (pre-flight, the check before the rendezvous).
    if (!faultHooks().noGloo)
        return {};
#endif
    // pip's torch wheels carry no gloo/ headers (2.11 does not); Debian's libtorch has libgloo-dev.
    return "this agent was built without Gloo's headers, so CPU ranks cannot be combined (rebuild with "
           "scripts/build-agent.sh --gloo-include DIR, DIR an installed Gloo's include directory: libgloo-dev's "
           "/usr/include, or a Gloo source's cmake --install); use --backend nccl on GPUs";
}

Communicators makeGlooCommunicators(RendezvousStore &store, const BackendOptions &o)
{
    auto make = [&](const std::string &prefix, int rank, int size, const std::string &name) -> std::unique_ptr<Communicator> {
        if (size == 1)
            return std::make_unique<SelfCommunicator>(); // no peer: nothing for Gloo to do, with or without it
#if CLUSTERPPL_HAVE_GLOO
        auto *tcp = dynamic_cast<TcpStore *>(&store);
        CPPL_ENFORCE(tcp != nullptr, "gloo needs the TCPStore");
        auto c = std::make_unique<GlooCommunicator>(c10::make_intrusive<c10d::PrefixStore>(prefix, tcp->handle()), rank, size, o, name);
        if (o.connected)
            o.connected(name.c_str());
        return c;
#else
        (void)store;
        (void)prefix;
        (void)rank;
        throw CollectiveError("the gloo backend is unavailable for the " + name + " group of " + std::to_string(size) + " ranks: "
                              + glooUnavailableReason());
#endif
    };
    Communicators c;
    c.backend = "gloo";
    if (o.topology == Topology::Flat) {
        c.world = make(o.storePrefix + "world/", o.rank, o.worldSize, "world");
        return c;
    }
    const int g = o.groups.groupOf[static_cast<std::size_t>(o.rank)];
    const auto &members = o.groups.groups[static_cast<std::size_t>(g)];
    const int local = static_cast<int>(std::find(members.begin(), members.end(), o.rank) - members.begin());
    c.group = make(o.storePrefix + "group" + std::to_string(g) + "/", local, static_cast<int>(members.size()), "node group " + std::to_string(g));
    if (local == 0)
        c.leaders = make(o.storePrefix + "leaders/", g, static_cast<int>(o.groups.groups.size()), "leaders");
    return c;
}

} // namespace cppl::agent::dist
