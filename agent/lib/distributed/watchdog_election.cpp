// SPDX-License-Identifier: MIT
// The watchdog's hub lost (watchdog.h, tolerant runs whose store outlives the ranks): the survivors
// vote through the store, the lowest live rank claims, takes the others' connections and announces
// the old hub's loss; the others connect to it and tell it what their mesh links know.
#include "watchdog.h"

#include "rendezvous_store.h"
#include "watchdog_mesh.h"
#include "watchdog_wire.h"

#include "cppl/errors.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

namespace cppl::agent::dist {

namespace {

using wire::acceptHello;
using wire::kBeat;
using wire::listenAnywhere;
using wire::parseReport;
using wire::reportLine;
using wire::seconds;
using wire::trace;

} // namespace

/// The new hub's wait for the old one's survivors (becomeHub()): who reconnected, and who the mesh
/// or a survivor's links say died, stopped or finished with the old hub, so that it waits only for
/// the others (and keeps watching them meanwhile).
class Watchdog::Takeover
{
public:
    Takeover(Watchdog &w, std::vector<int> expected)
        : m_w(w), m_expected(std::move(expected)), m_meshCause(w.m_hosts.size()), m_finished(w.m_hosts.size(), 0)
    {
    }
    /// Whether a survivor is still awaited: neither reconnected nor known lost or finished.
    [[nodiscard]] bool awaited()
    {
        return std::any_of(m_expected.begin(), m_expected.end(), [&](int r) { return unseen(r) && !judged(r); });
    }
    /// Takes the survivors' connections on @p listener until none is awaited or @p deadline passes.
    void wait(int listener, std::chrono::steady_clock::time_point deadline);
    /// A rank that finished (the old hub lost after the result was written) is not waited for and
    /// not lost: its "d" on the mesh (judged()), or its key in the store, checked once per heartbeat.
    void checkFinished();
    /// The ranks that neither reconnected nor finished, with what the mesh said of them (may be empty).
    [[nodiscard]] std::vector<std::pair<int, std::string>> missing() const
    {
        std::vector<std::pair<int, std::string>> out;
        for (int r : m_expected)
            if (unseen(r) && !m_finished[static_cast<std::size_t>(r)])
                out.emplace_back(r, m_meshCause[static_cast<std::size_t>(r)]);
        return out;
    }

private:
    [[nodiscard]] bool unseen(int r) const { return std::find(m_seen.begin(), m_seen.end(), r) == m_seen.end(); }
    [[nodiscard]] bool expected(int r) const { return std::find(m_expected.begin(), m_expected.end(), r) != m_expected.end(); }
    /// Whether the mesh (its link to @p r) says it died, fell silent or finished.
    bool judged(int r);
    /// What survivor @p from's mesh links know of @p q: a rank this hub has no link to (every
    /// candidate lost) is judged at once when a survivor linked to it saw it die, stop or finish.
    void take(int from, int q, const std::string &why);
    /// Reports that come after a survivor's hello (reportMeshNews()); the other frames stay in its inbox for loop().
    void readReports(std::size_t i);
    void acceptSurvivor(int listener, std::chrono::steady_clock::time_point deadline);

    Watchdog &m_w;
    std::vector<int> m_expected;
    std::vector<int> m_seen;
    std::vector<std::string> m_meshCause; ///< by rank: lost, as the mesh (or a survivor's) said
    std::vector<char> m_finished;         ///< by rank
    std::vector<char> m_quiet;            ///< by index in m_peers: its connection closed meanwhile (loop() reads that)
    bool m_over = false;                  ///< the store says the run is over (a rank finished)
};

bool Watchdog::Takeover::judged(int r)
{
    std::string &why = m_meshCause[static_cast<std::size_t>(r)];
    if (why.empty() && m_w.m_mesh)
        why = m_w.m_mesh->lost(r);
    char &done = m_finished[static_cast<std::size_t>(r)];
    if (!done && why.empty() && m_w.m_mesh && m_w.m_mesh->finished(r)) {
        done = 1;
        trace(m_w.m_rank, "new hub: rank " + std::to_string(r) + " finished (its mesh link said so)");
    }
    return !why.empty() || done;
}

void Watchdog::Takeover::checkFinished()
{
    m_over = m_over || m_w.runOver();
    if (m_over)
        for (int r : m_expected)
            if (unseen(r) && !judged(r) && m_w.finishedRank(r, true)) {
                m_finished[static_cast<std::size_t>(r)] = 1;
                trace(m_w.m_rank, "new hub: rank " + std::to_string(r) + " finished");
            }
}

void Watchdog::Takeover::take(int from, int q, const std::string &why)
{
    if (!expected(q) || !unseen(q) || judged(q))
        return;
    trace(m_w.m_rank, "new hub: rank " + std::to_string(from) + " says rank " + std::to_string(q) + (why.empty() ? std::string(" finished") : " " + why));
    if (why.empty())
        m_finished[static_cast<std::size_t>(q)] = 1;
    else
        m_meshCause[static_cast<std::size_t>(q)] = why;
}

void Watchdog::Takeover::readReports(std::size_t i)
{
    Peer &p = m_w.m_peers[i];
    char buf[4096];
    const ssize_t n = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR))
            m_quiet[i] = 1;
        return;
    }
    p.lastSeen = std::chrono::steady_clock::now();
    p.inbox.append(buf, static_cast<std::size_t>(n));
    std::string keep;
    std::size_t start = 0;
    for (std::size_t nl; (nl = p.inbox.find('\n', start)) != std::string::npos; start = nl + 1) {
        const std::string line = p.inbox.substr(start, nl - start);
        int q = -1;
        std::string why;
        if (line.starts_with('k') && parseReport(line, static_cast<int>(m_w.m_hosts.size()), q, why) && q != p.rank)
            take(p.rank, q, why);
        else if (line != "h") // a heartbeat's only news is lastSeen
            keep += line + "\n";
    }
    p.inbox = keep + p.inbox.substr(start);
}

void Watchdog::Takeover::acceptSurvivor(int listener, std::chrono::steady_clock::time_point deadline)
{
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    const int one = 1;
    int epoch = 0;
    std::vector<std::pair<int, std::string>> reports;
    const int r = ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0
                      ? acceptHello(fd, static_cast<int>(m_w.m_hosts.size()), deadline, epoch, reports)
                      : -1;
    if (r < 0 || !expected(r) || !unseen(r)) {
        ::close(fd);
        return;
    }
    m_seen.push_back(r);
    trace(m_w.m_rank, "new hub: rank " + std::to_string(r) + " reconnected (epoch " + std::to_string(epoch) + ")");
    for (const auto &[q, why] : reports)
        take(r, q, why);
    m_w.m_epoch = std::max(m_w.m_epoch, epoch); // a verdict the old hub sent some ranks and not this one
    const std::lock_guard lock(m_w.m_sendMutex);
    m_w.m_peers.push_back(Peer{fd, r, std::chrono::steady_clock::now(), {}, false});
}

void Watchdog::Takeover::wait(int listener, std::chrono::steady_clock::time_point deadline)
{
    auto nextBeat = std::chrono::steady_clock::now();
    if (m_w.m_mesh)
        m_w.m_mesh->drain();
    std::vector<pollfd> pfs;
    while (awaited()) {
        const auto now = std::chrono::steady_clock::now();
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
        if (left <= 0)
            break;
        if (now >= nextBeat) { // those already here must not find this hub silent while it waits for the others
            m_w.sendAll("h\n");
            nextBeat = now + kBeat;
            checkFinished();
            if (!awaited())
                break;
        }
        if (m_w.m_mesh)
            m_w.m_mesh->beat(*m_w.m_store);
        pfs.assign(1, pollfd{listener, POLLIN, 0});
        m_quiet.resize(m_w.m_peers.size(), 0);
        for (std::size_t i = 0; i < m_w.m_peers.size(); ++i)
            pfs.push_back(pollfd{m_w.m_peers[i].fd, static_cast<short>(m_quiet[i] ? 0 : POLLIN), 0});
        const std::size_t meshAt = pfs.size();
        if (m_w.m_mesh)
            m_w.m_mesh->pollFds(pfs);
        if (::poll(pfs.data(), pfs.size(), static_cast<int>(std::min<long long>(left, kBeat.count()))) <= 0)
            continue;
        if (m_w.m_mesh)
            m_w.m_mesh->handle(pfs.data() + meshAt, pfs.size() - meshAt);
        for (std::size_t i = 0; i + 1 < meshAt; ++i)
            if (pfs[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
                readReports(i);
        if (pfs[0].revents & POLLIN)
            acceptSurvivor(listener, deadline);
    }
}

void Watchdog::reportMeshNews()
{
    if (!m_mesh || isHub() || m_hubIndex == 0 || m_peers.empty() || m_peers.front().fd < 0)
        return;
    std::string lines;
    for (const auto &[q, cause] : m_mesh->known())
        if (q != m_hubRank.load() && q < static_cast<int>(m_reported.size()) && !m_reported[static_cast<std::size_t>(q)]) {
            lines += reportLine(q, cause);
            m_reported[static_cast<std::size_t>(q)] = 1;
        }
    if (lines.empty())
        return;
    trace(m_rank, "tells the new hub: " + lines.substr(0, lines.size() - 1));
    const std::lock_guard lock(m_sendMutex);
    // A failed send is the hub's closed connection, which the loop reads next.
    [[maybe_unused]] const ssize_t n = ::send(m_peers.front().fd, lines.data(), lines.size(), MSG_NOSIGNAL);
}

void Watchdog::hubLost(const std::string &cause, int code)
{
    if (m_fired || m_finished)
        return;
    // From here until the new hub's first verdict (or this process's exit), the main thread waits
    // for that verdict rather than failing on a deadline of its own: electing and reconnecting can
    // take up to --timeout when a survivor of the old hub does not reconnect (lost with it).
    m_electing = true;
    const int old = m_hubRank.load();
    trace(m_rank, "hub " + std::to_string(old) + " lost (" + cause + "); election " + std::to_string(m_hubIndex + 1));
    const std::string me = std::to_string(m_rank);
    try {
        if (m_store->check({"cppl/lost/" + me})) {
            const std::string why = m_store->get("cppl/lost/" + me, m_timeout).value_or("lost");
            for (Peer &p : m_peers)
                closePeer(p);
            fire(code, who(m_rank) + " was declared lost by the hub (" + why + "); it stops, the others went on without it", m_rank);
            return;
        }
        // Vote (which also deposes the old hub, should it run again), then prefer the lowest live
        // rank: wait a moment for a lower one's vote. One claim decides, so there is one hub even
        // when a lower rank votes late.
        const int h = m_hubIndex + 1;
        const std::string prefix = "cppl/hub" + std::to_string(h) + "/";
        m_store->set(prefix + "alive/" + me, "1");
        m_store->add(prefix + "votes", 1);
        m_hubIndex = h;
        {
            const std::lock_guard lock(m_sendMutex);
            for (Peer &p : m_peers)
                if (p.fd >= 0)
                    ::close(p.fd);
            m_peers.clear();
        }
        std::vector<int> candidates = m_members;
        std::erase(candidates, old);
        const bool lower = lowerRankVoted(candidates, prefix);
        trace(m_rank, lower ? std::string("a lower rank voted") : std::string("claims"));
        if (!lower && m_store->add(prefix + "claim", 1) == 1) {
            trace(m_rank, "won the claim");
            becomeHub(old, cause, candidates, prefix);
            return;
        }
        const auto deadline = std::chrono::steady_clock::now() + m_timeout;
        const auto where = m_store->get(prefix + "addr", m_timeout);
        if (!where) {
            fire(code, who(old) + " " + cause + "; no new hub published its address within " + seconds(m_timeout), old);
            return;
        }
        int hub = -1, consumed = 0;
        if (std::sscanf(where->c_str(), "%d %n", &hub, &consumed) < 1 || hub < 0 || hub >= static_cast<int>(m_hosts.size()) || hub == m_rank)
            throw ProtocolError("the store holds \"" + where->substr(0, 80) + "\" as the new hub, not \"RANK HOST:PORT\"");
        trace(m_rank, "connects to the new hub " + *where);
        if (!connectToHub(hub, where->substr(static_cast<std::size_t>(consumed)), deadline))
            fire(code, who(old) + " " + cause + "; the new hub " + who(hub) + " closed the connection", old);
    } catch (const Error &e) {
        for (Peer &p : m_peers)
            closePeer(p);
        fire(code, who(old) + " " + cause + "; electing a new hub failed: " + e.what(), old);
    }
}

bool Watchdog::lowerRankVoted(const std::vector<int> &candidates, const std::string &prefix)
{
    const auto preferUntil = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(m_timeout, std::chrono::seconds(1));
    // A lower rank the mesh saw die (or fall silent), or one that finished, will not vote: not waited for.
    if (m_mesh)
        m_mesh->drain();
    bool lower = false;
    for (;;) { // the lowest candidate claims at once
        bool awaited = false;
        const bool over = runOver();
        for (int r : candidates)
            if (r < m_rank) {
                lower = lower || m_store->check({prefix + "alive/" + std::to_string(r)});
                awaited = awaited || ((!m_mesh || m_mesh->lost(r).empty()) && !finishedRank(r, over));
            }
        if (lower || !awaited || std::chrono::steady_clock::now() >= preferUntil)
            return lower;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (m_mesh)
            m_mesh->drain();
    }
}

void Watchdog::becomeHub(int old, const std::string &cause, const std::vector<int> &candidates, const std::string &prefix)
{
    int port = 0;
    const int listener = listenAnywhere(port, who(m_rank));
    m_store->set(prefix + "addr", std::to_string(m_rank) + " " + m_advertise + ":" + std::to_string(port));
    std::vector<int> expected = candidates;
    std::erase(expected, m_rank);
    Takeover takeover(*this, std::move(expected));
    takeover.wait(listener, std::chrono::steady_clock::now() + m_timeout);
    ::close(listener);
    m_hubRank = m_rank;
    m_clockOffsetNs = 0;
    m_clockUncertaintyNs = 0;
    if (takeover.awaited()) // the deadline passed: a rank that finished meanwhile is not lost
        takeover.checkFinished();
    announceLoss(old, cause);
    for (const auto &[r, mesh] : takeover.missing()) {
        const std::string why = !mesh.empty() ? mesh
                                              : "did not reconnect to the new hub " + who(m_rank) + " within " + seconds(m_timeout) + " after "
                                                    + who(old) + " was lost (dead or stopped too)";
        try {
            m_store->set("cppl/lost/" + std::to_string(r), why);
        } catch (const Error &) {
        }
        announceLoss(r, why);
    }
    m_electing = false;
}

} // namespace cppl::agent::dist
