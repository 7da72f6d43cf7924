// SPDX-License-Identifier: MIT
// The rendezvous store: c10d's TCPStore (torchrun's), behind the torch-free RendezvousStore interface.
#include "c10d_store.h"

#include "cppl/errors.h"

#include <torch/csrc/api/include/torch/version.h>

#include <algorithm>
#include <thread>

namespace cppl::agent::dist {

TcpStore::TcpStore(const std::string &host, int port, bool server, std::chrono::milliseconds timeout, const std::string &bind)
{
    // A server is this project's (rendezvous_server.h): c10d 1.13's own waits for a client that stopped
    // in the middle of a request, and with it every other client. This process then talks to it
    // through c10d's client, as every other rank does.
    if (server) {
        m_server = std::make_unique<RendezvousServer>(port, bind); // throws CollectiveError: port in use, ...
        port = m_server->port();
    }
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(port);
    o.isServer = false;
    o.waitWorkers = false;
    o.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    o.useLibUV = false; // a client needs no libuv (the default would refuse a LibTorch built without it)
#endif
    try {
        m_store = c10::make_intrusive<c10d::TCPStore>(host, o);
    } catch (const std::exception &e) {
        const std::string where = host + ":" + std::to_string(port);
        if (server)
            throw CollectiveError("serving the rendezvous store on port " + std::to_string(port) + ", but cannot connect to it at " + where
                                  + ": " + firstLine(e.what()));
        throw TimeoutError("no rendezvous store answered at " + where + " within " + std::to_string(timeout.count() / 1000) + " s: "
                           + firstLine(e.what())
                           + " (is rank 0 or the launcher running, and are MASTER_ADDR/MASTER_PORT the same on every rank?)");
    }
    m_address = host + ":" + std::to_string(port);
}

template<typename F>
void TcpStore::guard(F &&f)
{
    try {
        f();
    } catch (const std::exception &e) {
        throw CollectiveError("lost the rendezvous store at " + m_address + ": " + firstLine(e.what())
                              + " (the process serving it, rank 0 or the launcher, has gone)");
    }
}

void TcpStore::set(const std::string &key, const std::string &value)
{
    guard([&] { m_store->set(key, std::vector<std::uint8_t>(value.begin(), value.end())); });
}

std::optional<std::string> TcpStore::get(const std::string &key, std::chrono::milliseconds timeout)
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

bool TcpStore::check(const std::vector<std::string> &keys)
{
    bool ok = false;
    guard([&] { ok = m_store->check(keys); });
    return ok;
}

std::int64_t TcpStore::add(const std::string &key, std::int64_t delta)
{
    std::int64_t v = 0;
    guard([&] { v = m_store->add(key, delta); });
    return v;
}

bool TcpStore::wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout)
{
    // TCPStore::wait reports a timeout and a lost connection alike, so poll with check(): a broken
    // connection then surfaces as an exception from check, a timeout as false.
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

bool TcpStore::waitBlocking(const std::vector<std::string> &keys, std::chrono::milliseconds timeout)
{
    // c10d's WAIT: the server keeps the request and answers when the last key is set. Its timeout
    // (the socket's receive timeout) and a lost connection both throw: told apart by the clock.
    const auto start = std::chrono::steady_clock::now();
    try {
        m_store->wait(keys, std::max(timeout, std::chrono::milliseconds(1)));
        return true;
    } catch (const std::exception &e) {
        const bool timedOut = std::chrono::steady_clock::now() - start >= timeout - std::chrono::milliseconds(20)
                              || std::string_view(e.what()).find("imeout") != std::string_view::npos
                              || std::string_view(e.what()).find("imed out") != std::string_view::npos;
        if (timedOut)
            return false;
        throw CollectiveError("lost the rendezvous store at " + m_address + ": " + firstLine(e.what())
                              + " (the process serving it, rank 0 or the launcher, has gone)");
    }
}

std::unique_ptr<RendezvousStore> openTcpStore(const std::string &host, int port, bool server, std::chrono::milliseconds timeout,
                                              const std::string &bind)
{
    return std::make_unique<TcpStore>(host, port, server, timeout, bind);
}

const C10d &libtorchC10d()
{
    static const C10d c10d{openTcpStore, makeGlooCommunicators, glooUnavailableReason};
    return c10d;
}

} // namespace cppl::agent::dist
