// SPDX-License-Identifier: MIT
// The one translation unit that includes c10d: TCPStore (rendezvous) and ProcessGroupGloo.
#include "communicator.h"
#include "store.h"

#include "cppl/errors.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <string_view>
#include <thread>

namespace cppl::agent::dist {

Store::~Store() = default;
Communicator::~Communicator() = default;

namespace {

std::string firstLine(std::string_view text)
{
    const auto nl = text.find('\n');
    return std::string(text.substr(0, nl));
}

std::vector<std::uint8_t> bytes(const std::string &s)
{
    return {s.begin(), s.end()};
}

class TcpStore final : public Store
{
public:
    TcpStore(const std::string &host, int port, bool server, std::chrono::milliseconds timeout)
    {
        c10d::TCPStoreOptions o;
        o.port = static_cast<std::uint16_t>(port);
        o.isServer = server;
        o.waitWorkers = false;
        o.timeout = timeout;
        try {
            m_store = c10::make_intrusive<c10d::TCPStore>(host, o);
        } catch (const std::exception &e) {
            const std::string where = host + ":" + std::to_string(port);
            if (server)
                throw CollectiveError("cannot serve the rendezvous store on port " + std::to_string(port) + ": " + firstLine(e.what())
                                      + " (is the port in use? pick another MASTER_PORT / --master-port)");
            throw TimeoutError("no rendezvous store answered at " + where + " within " + std::to_string(timeout.count() / 1000)
                               + " s: " + firstLine(e.what())
                               + " (is rank 0 or the launcher running, and are MASTER_ADDR/MASTER_PORT the same on every rank?)");
        }
        m_address = host + ":" + std::to_string(m_store->getPort());
    }

    void set(const std::string &key, const std::string &value) override
    {
        guard([&] { m_store->set(key, bytes(value)); });
    }
    std::optional<std::string> get(const std::string &key, std::chrono::milliseconds timeout) override
    {
        if (!wait({key}, timeout))
            return std::nullopt;
        std::optional<std::string> out;
        guard([&] {
            const auto v = m_store->get(key);
            out = std::string(v.begin(), v.end());
        });
        return out;
    }
    bool check(const std::vector<std::string> &keys) override
    {
        bool ok = false;
        guard([&] { ok = m_store->check(keys); });
        return ok;
    }
    std::int64_t add(const std::string &key, std::int64_t delta) override
    {
        std::int64_t v = 0;
        guard([&] { v = m_store->add(key, delta); });
        return v;
    }
    bool wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) override
    {
        // TCPStore::wait reports a timeout and a lost connection alike, so poll with check(): a
        // broken connection then surfaces as an exception from check, a timeout as false.
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        auto pause = std::chrono::milliseconds(1);
        for (;;) {
            if (check(keys))
                return true;
            if (std::chrono::steady_clock::now() >= deadline)
                return false;
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(50));
        }
    }
    std::string address() const override { return m_address; }
    int port() const override { return m_store->getPort(); }

    c10::intrusive_ptr<c10d::Store> handle() const { return m_store; }

private:
    template<typename F>
    void guard(F &&f)
    {
        try {
            f();
        } catch (const std::exception &e) {
            throw CollectiveError("lost the rendezvous store at " + m_address + ": " + firstLine(e.what())
                                  + " (the process serving it, rank 0 or the launcher, has gone)");
        }
    }

    c10::intrusive_ptr<c10d::TCPStore> m_store;
    std::string m_address;
};

/// A communicator of one member: every operation is the identity.
class SelfCommunicator final : public Communicator
{
public:
    int rank() const override { return 0; }
    int size() const override { return 1; }
    void allReduceSum(std::span<std::int64_t>) override {}
    void reduceSum(std::span<std::int64_t>, int) override {}
    void broadcast(std::span<std::int64_t>, int) override {}
};

class GlooCommunicator final : public Communicator
{
public:
    GlooCommunicator(c10::intrusive_ptr<c10d::Store> store, int rank, int size, const BackendOptions &o, std::string name)
        : m_rank(rank), m_size(size), m_name(std::move(name))
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
            throw translate("connecting", e);
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
        // Gloo reduces CPU tensors in place: the tensor is a view of the caller's words.
        std::vector<at::Tensor> t{at::from_blob(words.data(), {static_cast<std::int64_t>(words.size())}, at::TensorOptions().dtype(at::kLong))};
        try {
            op(t)->wait();
        } catch (const std::exception &e) {
            throw translate(what, e);
        }
    }
    CollectiveError translate(const std::string &what, const std::exception &e) const
    {
        const std::string reason = firstLine(e.what());
        const std::string msg = "gloo " + what + " in the " + m_name + " group (member " + std::to_string(m_rank) + " of "
                                + std::to_string(m_size) + ") failed: " + reason;
        if (reason.find("imed out") != std::string::npos || reason.find("imeout") != std::string::npos)
            return TimeoutError(msg);
        return CollectiveError(msg);
    }

    int m_rank, m_size;
    std::string m_name;
    c10::intrusive_ptr<c10d::ProcessGroupGloo> m_pg;
};

} // namespace

std::unique_ptr<Store> openTcpStore(const std::string &host, int port, bool server, std::chrono::milliseconds timeout)
{
    return std::make_unique<TcpStore>(host, port, server, timeout);
}

Communicators makeGlooCommunicators(Store &store, const BackendOptions &o)
{
    auto *tcp = dynamic_cast<TcpStore *>(&store);
    CPPL_ENFORCE(tcp != nullptr, "gloo needs the TCPStore");
    const auto base = tcp->handle();
    auto make = [&](const std::string &prefix, int rank, int size, const std::string &name) -> std::unique_ptr<Communicator> {
        if (size == 1)
            return std::make_unique<SelfCommunicator>();
        return std::make_unique<GlooCommunicator>(c10::make_intrusive<c10d::PrefixStore>(prefix, base), rank, size, o, name);
    };
    Communicators c;
    c.backend = "gloo";
    if (o.topology == Topology::Flat) {
        c.world = make("cppl/gloo/world/", o.rank, o.worldSize, "world");
        return c;
    }
    const int g = o.groups.groupOf[static_cast<std::size_t>(o.rank)];
    const auto &members = o.groups.groups[static_cast<std::size_t>(g)];
    const int local = static_cast<int>(std::find(members.begin(), members.end(), o.rank) - members.begin());
    c.group = make("cppl/gloo/group" + std::to_string(g) + "/", local, static_cast<int>(members.size()), "node group " + std::to_string(g));
    if (local == 0)
        c.leaders = make("cppl/gloo/leaders/", g, static_cast<int>(o.groups.groups.size()), "leaders");
    return c;
}

} // namespace cppl::agent::dist
