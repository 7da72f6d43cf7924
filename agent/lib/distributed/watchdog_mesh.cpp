// SPDX-License-Identifier: MIT
#include "watchdog_mesh.h"

#include "fault_hooks.h"
#include "rendezvous_store.h"
#include "watchdog_wire.h"

#include "cppl/errors.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace cppl::agent::dist {

namespace {

std::string key(int rank)
{
    return "cppl/watchdog-mesh/" + std::to_string(rank);
}

} // namespace

int meshCandidates()
{
    const int k = faultHooks().meshCandidates;
    return k > 0 ? k : kMeshCandidates;
}

std::vector<int> meshPeers(int rank, int world, int k)
{
    std::vector<int> peers;
    for (int q = 0; q < world; ++q)
        if (meshLinked(rank, q, k, world))
            peers.push_back(q);
    return peers;
}

LivenessMesh::LivenessMesh(int rank, int world, std::chrono::milliseconds timeout, int candidates)
    : m_rank(rank), m_candidates(candidates), m_lower(meshPeers(rank, world, candidates)), m_timeout(timeout), m_connected(static_cast<std::size_t>(world), false), m_done(static_cast<std::size_t>(world), false),
      m_dead(static_cast<std::size_t>(world), false), m_lastSeen(static_cast<std::size_t>(world))
{
    std::erase_if(m_lower, [rank](int q) { return q > rank; });
}

LivenessMesh::~LivenessMesh()
{
    if (m_listener >= 0)
        ::close(m_listener);
    for (Link &l : m_links)
        if (l.fd >= 0)
            ::close(l.fd);
}

void LivenessMesh::publish(RendezvousStore &store, const std::string &advertise, const std::string &who)
{
    const int world = static_cast<int>(m_connected.size());
    wire::trace(m_rank, "mesh: " + std::to_string(meshPeers(m_rank, world, m_candidates).size()) + " links of " + std::to_string(world - 1)
                            + " (" + std::to_string(std::min(m_candidates, world)) + " candidates)");
    const std::vector<int> peers = meshPeers(m_rank, world, m_candidates);
    if (peers.empty() || peers.back() < m_rank) // no higher peer: it connects, nobody connects to it
        return;
    int port = 0;
    m_listener = wire::listenAnywhere(port, who + " (the watchdog's mesh)");
    store.set(key(m_rank), advertise + ":" + std::to_string(port));
}

void LivenessMesh::connectPending(RendezvousStore &store)
{
    for (int q : m_lower) {
        if (m_connected[static_cast<std::size_t>(q)])
            continue;
        try {
            if (!store.check({key(q)}))
                continue;
            const auto where = store.get(key(q), m_timeout);
            m_connected[static_cast<std::size_t>(q)] = true; // one try: a link that cannot be made tells nothing
            const auto colon = where ? where->rfind(':') : std::string::npos;
            if (colon == std::string::npos || colon == 0 || colon + 1 == where->size())
                continue;
            const int fd = wire::connectTo(where->substr(0, colon), where->substr(colon + 1),
                                           std::min<std::chrono::milliseconds>(m_timeout, std::chrono::seconds(2)));
            const std::string hello = "r" + std::to_string(m_rank) + "\n";
            if (fd >= 0 && ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) {
                ::close(fd);
                continue;
            }
            if (fd < 0)
                continue;
            m_links.push_back(Link{fd, q, {}});
            m_lastSeen[static_cast<std::size_t>(q)] = std::chrono::steady_clock::now();
            wire::trace(m_rank, "mesh: linked to rank " + std::to_string(q));
        } catch (const Error &) { // the store is gone: the watchdog's own use of it reports that
            return;
        }
    }
}

void LivenessMesh::beat(RendezvousStore &store)
{
    const auto now = std::chrono::steady_clock::now();
    if (now < m_nextBeat)
        return;
    m_nextBeat = now + wire::kBeat;
    for (const Link &l : m_links)
        if (l.fd >= 0 && l.rank >= 0)
            (void)!::send(l.fd, "h\n", 2, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (!m_finished && std::any_of(m_lower.begin(), m_lower.end(), [&](int q) { return !m_connected[static_cast<std::size_t>(q)]; }))
        connectPending(store);
}

void LivenessMesh::finish()
{
    m_finished = true;
    for (const Link &l : m_links)
        if (l.fd >= 0)
            (void)!::send(l.fd, "d\n", 2, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void LivenessMesh::pollFds(std::vector<pollfd> &fds) const
{
    fds.push_back(pollfd{m_listener, static_cast<short>(m_listener >= 0 ? POLLIN : 0), 0});
    for (const Link &l : m_links)
        fds.push_back(pollfd{l.fd, static_cast<short>(l.fd >= 0 ? POLLIN : 0), 0});
}

void LivenessMesh::handle(const pollfd *fds, std::size_t count)
{
    for (std::size_t i = 1; i < count && i - 1 < m_links.size(); ++i)
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
            read(m_links[i - 1]);
    std::erase_if(m_links, [](const Link &l) { return l.fd < 0; });
    if (count > 0 && (fds[0].revents & POLLIN))
        accept();
}

void LivenessMesh::drain()
{
    std::vector<pollfd> fds;
    pollFds(fds);
    if (::poll(fds.data(), fds.size(), 0) > 0)
        handle(fds.data(), fds.size());
}

void LivenessMesh::accept()
{
    const int fd = ::accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0)
        m_links.push_back(Link{fd, -1, {}});
}

void LivenessMesh::read(Link &l)
{
    char buf[512];
    const ssize_t n = ::recv(l.fd, buf, sizeof buf, MSG_DONTWAIT);
    const int world = static_cast<int>(m_connected.size());
    if (n > 0) {
        l.inbox.append(buf, static_cast<std::size_t>(n));
        for (std::size_t nl; (nl = l.inbox.find('\n')) != std::string::npos;) {
            const std::string line = l.inbox.substr(0, nl);
            l.inbox.erase(0, nl + 1);
            int r = -1;
            if (l.rank < 0 && std::sscanf(line.c_str(), "r%d", &r) == 1 && r > m_rank && meshLinked(m_rank, r, m_candidates, world) && !m_connected[static_cast<std::size_t>(r)]) {
                l.rank = r;
                m_connected[static_cast<std::size_t>(r)] = true;
                wire::trace(m_rank, "mesh: rank " + std::to_string(r) + " linked");
            } else if (line == "d" && l.rank >= 0) {
                m_done[static_cast<std::size_t>(l.rank)] = true;
            }
        }
        if (l.rank >= 0)
            m_lastSeen[static_cast<std::size_t>(l.rank)] = std::chrono::steady_clock::now();
        if (l.inbox.size() > 256) { // no line of this protocol is that long: not a rank of this run
            ::close(l.fd);
            l.fd = -1;
        }
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    ::close(l.fd);
    l.fd = -1;
    if (l.rank >= 0 && !m_done[static_cast<std::size_t>(l.rank)] && !m_finished) {
        wire::trace(m_rank, "mesh: rank " + std::to_string(l.rank) + "'s link closed");
        m_dead[static_cast<std::size_t>(l.rank)] = true;
    }
}

std::string LivenessMesh::lost(int r) const
{
    const auto i = static_cast<std::size_t>(r);
    if (r < 0 || i >= m_dead.size() || r == m_rank || m_done[i])
        return {};
    if (m_dead[i])
        return wire::kDiedCause;
    const bool linked = std::any_of(m_links.begin(), m_links.end(), [&](const Link &l) { return l.rank == r && l.fd >= 0; });
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - m_lastSeen[i]);
    if (!linked || silent <= m_timeout)
        return {};
    return "stopped responding: no heartbeat for " + wire::seconds(silent) + " on its watchdog link to rank " + std::to_string(m_rank)
           + " (stopped, hung, or its host is unreachable; --timeout " + wire::seconds(m_timeout) + ")";
}

bool LivenessMesh::finished(int r) const
{
    const auto i = static_cast<std::size_t>(r);
    return r >= 0 && i < m_done.size() && m_done[i];
}

std::vector<std::pair<int, std::string>> LivenessMesh::known() const
{
    std::vector<std::pair<int, std::string>> out;
    for (int r = 0; r < static_cast<int>(m_connected.size()); ++r) {
        if (!m_connected[static_cast<std::size_t>(r)])
            continue;
        if (finished(r))
            out.emplace_back(r, std::string());
        else if (std::string why = lost(r); !why.empty())
            out.emplace_back(r, std::move(why));
    }
    return out;
}

} // namespace cppl::agent::dist
