// SPDX-License-Identifier: MIT
#include "run_cause.h"

#include "process_exit.h"

#include "cppl/errors.h"

#include <functional>
#include <system_error>

namespace cppl::agent::dist {

namespace {

/// Runs @p work (which talks to the store) for at most @p bound (finishesWithin): a store that is
/// gone or slow must not hold a rank that is leaving. True when @p work finished in time.
bool bounded(std::function<void()> work, std::chrono::milliseconds bound) noexcept
{
    try {
        return finishesWithin(
            [work = std::move(work)] {
                try {
                    work();
                } catch (const std::exception &) { // the store is unreachable: the cause is this process's alone
                }
            },
            bound);
    } catch (const std::system_error &) { // no thread could start: the cause stays this process's
    }
    return false;
}

} // namespace

RunCause::RunCause(C10d c10d, std::string masterAddr, int port, std::string who)
    : m_c10d(c10d), m_masterAddr(std::move(masterAddr)), m_port(port), m_who(std::move(who))
{
}

void RunCause::publish(const std::string &what, std::chrono::milliseconds bound) noexcept
{
    std::string text;
    {
        const std::lock_guard lock(m_mutex);
        if (!m_own.empty())
            return; // the first is the cause; what follows in this process is its consequence
        m_own = text = m_who + ": " + what;
    }
    if (!m_c10d.openStore)
        return;
    (void)bounded(
        [c10d = m_c10d, addr = m_masterAddr, port = m_port, text, bound] {
            const std::unique_ptr<RendezvousStore> store = c10d.openStore(addr, port, false, bound, {});
            if (store->add(kClaimKey, 1) == 1) // the first rank to give up names the cause
                store->set(kCauseKey, text);
        },
        bound);
}

std::optional<std::string> RunCause::fetch(std::chrono::milliseconds bound) noexcept
{
    {
        const std::lock_guard lock(m_mutex);
        if (!m_peer.empty())
            return m_peer;
    }
    if (!m_c10d.openStore)
        return std::nullopt;
    const auto found = std::make_shared<std::string>();
    const bool done = bounded(
        [c10d = m_c10d, addr = m_masterAddr, port = m_port, found, bound] {
            const std::unique_ptr<RendezvousStore> store = c10d.openStore(addr, port, false, bound, {});
            if (store->check({kCauseKey}))
                *found = store->get(kCauseKey, bound).value_or("");
        },
        bound);
    const std::lock_guard lock(m_mutex);
    if (!done || found->empty() || *found == m_own)
        return std::nullopt;
    m_peer = *found;
    return m_peer;
}

std::string RunCause::withCause(const std::string &message) const
{
    const std::lock_guard lock(m_mutex);
    const std::string &cause = !m_peer.empty() ? m_peer : m_own;
    if (cause.empty())
        return message;
    // "rank R (host): what": a message that has the what (a relayed failure report) names it already.
    const std::size_t colon = cause.find(": ");
    const std::string what = colon == std::string::npos ? cause : cause.substr(colon + 2);
    if (message.find(what) != std::string::npos)
        return message;
    return cause + " (the cause); then: " + message;
}

} // namespace cppl::agent::dist
