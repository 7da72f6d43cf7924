// SPDX-License-Identifier: MIT
// Internal to agent/lib/distributed: the TCPStore behind RendezvousStore, shared by the store and Gloo TUs.
#pragma once

#include "c10d.h"
#include "rendezvous_server.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace cppl::agent::dist {

[[nodiscard]] inline std::string firstLine(std::string_view text)
{
    return std::string(text.substr(0, text.find('\n')));
}

class TcpStore final : public RendezvousStore
{
public:
    TcpStore(const std::string &host, int port, bool server, std::chrono::milliseconds timeout, const std::string &bind);
    void set(const std::string &key, const std::string &value) override;
    std::optional<std::string> get(const std::string &key, std::chrono::milliseconds timeout) override;
    bool check(const std::vector<std::string> &keys) override;
    std::int64_t add(const std::string &key, std::int64_t delta) override;
    bool wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) override;
    bool waitBlocking(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) override;
    std::string address() const override { return m_address; }
    int port() const override { return m_store->getPort(); } // the server's, for a server: its client connects there
    c10::intrusive_ptr<c10d::Store> handle() const { return m_store; }

private:
    template<typename F>
    void guard(F &&f);

    std::unique_ptr<RendezvousServer> m_server; ///< when this process serves the store; outlives m_store
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

} // namespace cppl::agent::dist
