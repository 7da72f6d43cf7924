// SPDX-License-Identifier: MIT
#pragma once

// Torch-free: a failed run's root cause, kept where every rank can read it. When one rank's
// collective times out or fails and it aborts its communicator, its peers fail on the broken
// connection first ("remote process exited"), and the run's messages named that consequence
// instead of the cause (issue 43). The rank that gives up writes its cause to the rendezvous store
// before it aborts; a peer that fails afterwards reads it and names it first.

#include "c10d.h"

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace cppl::agent::dist {

class RunCause
{
public:
    /// @p who names this rank in the cause ("rank 1 (node07)"); @p masterAddr and @p port reach the
    /// store (each write or read opens a connection of its own: the caller's may be in use).
    RunCause(C10d c10d, std::string masterAddr, int port, std::string who);

    /**
     * @brief This rank gives up (@p what: its own error), before it aborts: kept in this process and
     * written to the store unless another rank's cause is there first. Waits at most @p bound for
     * the store; past it the write is left to a thread of its own (never blocks the way out).
     */
    void publish(const std::string &what, std::chrono::milliseconds bound) noexcept;

    /// @brief Another rank's cause from the store (waiting at most @p bound), remembered; nullopt
    /// when none is there, or it is this rank's own.
    std::optional<std::string> fetch(std::chrono::milliseconds bound) noexcept;

    /// @brief @p message with the cause this process knows (its own or a fetched one) in front,
    /// "CAUSE (the cause); then: MESSAGE"; unchanged when none is known or the message has it.
    [[nodiscard]] std::string withCause(const std::string &message) const;

    /// The store's keys (tests and docs name them).
    static constexpr const char *kClaimKey = "cppl/cause/claimed";
    static constexpr const char *kCauseKey = "cppl/cause";

private:
    struct Shared;
    C10d m_c10d;
    std::string m_masterAddr;
    int m_port;
    std::string m_who;
    mutable std::mutex m_mutex;
    std::string m_own;   ///< this rank's own cause, "rank R (host): what"
    std::string m_peer;  ///< another rank's, from the store
};

} // namespace cppl::agent::dist
