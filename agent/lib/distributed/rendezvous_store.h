// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/**
 * @brief The rendezvous key-value store of a run: c10d's TCPStore, as torchrun uses it, behind a
 * torch-free interface. Rank 0 (or the launcher, when TORCHELASTIC_USE_AGENT_STORE=True) serves it
 * at MASTER_ADDR:MASTER_PORT; everyone else is a client. Every failure throws CollectiveError with
 * the address and what to check.
 */
class RendezvousStore
{
public:
    virtual ~RendezvousStore() = default;
    virtual void set(const std::string &key, const std::string &value) = 0;
    /// @brief Waits for the key up to @p timeout; nullopt when it never appeared.
    [[nodiscard]] virtual std::optional<std::string> get(const std::string &key, std::chrono::milliseconds timeout) = 0;
    /// @brief Whether every key exists now (never blocks).
    [[nodiscard]] virtual bool check(const std::vector<std::string> &keys) = 0;
    /// @brief Atomic add; returns the new value.
    virtual std::int64_t add(const std::string &key, std::int64_t delta) = 0;
    /// @brief Waits until every key exists; false on timeout. Polls (check() with a backoff up to
    /// 50 ms), so it may return up to that long after the keys appeared, and a lost store throws.
    [[nodiscard]] virtual bool wait(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) = 0;
    /**
     * @brief Waits until every key exists in the store's own blocking wait: the server answers the
     * moment the last key is set, no polling. False on timeout; this connection then still has the
     * wait outstanding (the server may answer it later), so use a fresh connection for anything
     * after a false. Throws CollectiveError when the store is lost.
     */
    [[nodiscard]] virtual bool waitBlocking(const std::vector<std::string> &keys, std::chrono::milliseconds timeout) = 0;
    /// @brief "host:port", for messages.
    [[nodiscard]] virtual std::string address() const = 0;
    /// @brief The port actually bound (a server asked for port 0 picks one).
    [[nodiscard]] virtual int port() const = 0;
};

} // namespace cppl::agent::dist
