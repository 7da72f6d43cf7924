// SPDX-License-Identifier: MIT
// The watchdog's star (watchdog.h): rank 0 forming it (every rank's hello and clock pings at once),
// the others joining it, and connecting to a hub (rank 0, or one elected after it).
#include "watchdog.h"

#include "rendezvous_store.h"
#include "watchdog_mesh.h"
#include "watchdog_wire.h"

#include "cppl/errors.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace cppl::agent::dist {

namespace {

using wire::connectTo;
using wire::kDiedCause;
using wire::listenAnywhere;
using wire::readLine;
using wire::realtimeNs;
using wire::reportLine;
using wire::seconds;
using wire::trace;

/// Where rank 0 publishes its watchdog's address (HOST:PORT).
const std::string kKey = "cppl/watchdog";
constexpr int kClockSamples = 8;

/// What a joining rank's lines so far amount to (Watchdog::readJoining()).
enum class Joined { NotYet, Yes, Drop };

} // namespace

/// Rank 0 forming the star (formStar()): the connections whose hello and clock pings are under
/// way, who joined, and (tolerant runs) who was lost before joining.
struct Watchdog::StarForming
{
    struct Joining
    {
        int fd;
        std::string in;
        int rank = -1;
    };
    int listener;
    std::vector<Joining> joining;
    std::vector<bool> seen;              ///< by rank: joined (its "e" came)
    std::vector<std::string> lostEarly;  ///< by rank: why it was lost before joining (tolerant runs)
    int accepted = 1;                    ///< ranks joined or lost, rank 0 included
    StarForming(int listenerFd, int world) : listener(listenerFd), seen(static_cast<std::size_t>(world)), lostEarly(static_cast<std::size_t>(world)) {}
    void closeAll()
    {
        for (auto &j : joining)
            ::close(j.fd);
        ::close(listener);
    }
};

Watchdog::Watchdog(RendezvousStore &store, int rank, std::vector<std::string> hosts, const std::string &advertise, std::chrono::milliseconds timeout,
                   FatalHandler onFatal, LossHandler onLoss, std::unique_ptr<RendezvousStore> ownStore, int hubListener)
    : m_rank(rank), m_advertise(advertise), m_store(std::move(ownStore)), m_hosts(std::move(hosts)), m_timeout(timeout),
      m_onFatal(std::move(onFatal)), m_onLoss(std::move(onLoss))
{
    const int world = static_cast<int>(m_hosts.size());
    for (int r = 0; r < world; ++r)
        m_members.push_back(r);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    if (m_onLoss && m_store && world >= 3) { // published first: the others link to it while the star forms
        m_mesh = std::make_unique<LivenessMesh>(rank, world, timeout, meshCandidates());
        m_mesh->publish(store, advertise, who(rank));
    }
    if (rank == 0)
        formStar(store, hubListener >= 0 ? hubListener : listenForStar(store, advertise), deadline);
    else
        joinStar(store, deadline);
    // The mesh's links (watchdog_mesh.h) are made by the watchdog thread, at its first beat and as
    // the lower ranks publish: off the path to the first batch.
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0)
        throw CollectiveError(std::string("watchdog: pipe: ") + std::strerror(errno));
    m_wakeRead = pipefd[0];
    m_wakeWrite = pipefd[1];
    m_thread = std::thread([this] { loop(); });
}

void Watchdog::formStar(RendezvousStore &store, int listener, std::chrono::steady_clock::time_point deadline)
{
    const int world = static_cast<int>(m_hosts.size());
    StarForming star(listener, world);
    // Every rank's hello and clock pings at once (poll over all connections): one after the
    // other, 9 round trips per rank made the star the longest step after the rendezvous on a
    // loaded host (36 ms for 8 ranks at load 21), and a silent connection held up the rest.
    while (star.accepted < world) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        if (left <= 0 && m_onLoss) {
            // Tolerant runs: a rank lost before it joined (its connection closed after its hello,
            // or it never connected within the timeout) is lost like any other, announced below.
            for (int r = 1; r < world; ++r)
                if (!star.seen[static_cast<std::size_t>(r)] && star.lostEarly[static_cast<std::size_t>(r)].empty())
                    star.lostEarly[static_cast<std::size_t>(r)] = "did not connect to the watchdog within " + seconds(m_timeout)
                                                                  + " after the rendezvous (killed, crashed or stopped before its first batch)";
            break;
        }
        if (left <= 0)
            starTimedOut(star);
        std::vector<pollfd> fds{{listener, POLLIN, 0}};
        for (const auto &j : star.joining)
            fds.push_back(pollfd{j.fd, POLLIN, 0});
        if (::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0)
            continue;
        for (std::size_t i = 1; i < fds.size(); ++i)
            if (fds[i].revents != 0)
                readJoining(star, i - 1);
        std::erase_if(star.joining, [](const StarForming::Joining &j) { return j.fd < 0; });
        if (fds[0].revents != 0)
            acceptJoining(star);
    }
    star.closeAll();
    for (int r = 1; r < world; ++r)
        if (const std::string &why = star.lostEarly[static_cast<std::size_t>(r)]; !why.empty() && !star.seen[static_cast<std::size_t>(r)]) {
            trace(m_rank, "rank " + std::to_string(r) + " lost while the star formed: " + why);
            store.set("cppl/lost/" + std::to_string(r), why); // fenced: should it run again, it stops
            announceLoss(r, why);
        }
}

void Watchdog::starTimedOut(StarForming &star)
{
    std::string missing;
    for (int r = 1; r < static_cast<int>(m_hosts.size()); ++r)
        if (!star.seen[static_cast<std::size_t>(r)])
            missing += (missing.empty() ? "" : ", ") + who(r);
    star.closeAll();
    throw TimeoutError("watchdog: " + missing + " did not connect to rank 0's watchdog within " + seconds(m_timeout)
                        + " after the rendezvous (killed or stopped since, or a firewall between the hosts?); the run never started");
}

void Watchdog::acceptJoining(StarForming &star)
{
    const int fd = ::accept4(star.listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    const int one = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        const int e = errno;
        ::close(fd);
        star.closeAll();
        throw CollectiveError(std::string("watchdog: setsockopt(TCP_NODELAY) on a rank's connection to rank 0: ") + std::strerror(e));
    }
    star.joining.push_back(StarForming::Joining{fd, {}, -1});
}

void Watchdog::readJoining(StarForming &star, std::size_t i)
{
    StarForming::Joining &j = star.joining[i];
    const int world = static_cast<int>(m_hosts.size());
    char buf[512];
    const ssize_t n = ::read(j.fd, buf, sizeof buf);
    if (n > 0)
        j.in.append(buf, static_cast<std::size_t>(n));
    Joined state = n > 0 ? Joined::NotYet : Joined::Drop;
    for (std::size_t nl; state == Joined::NotYet && (nl = j.in.find('\n')) != std::string::npos;) {
        const std::string line = j.in.substr(0, nl);
        j.in.erase(0, nl + 1);
        int r = -1, epoch = 0;
        if (j.rank < 0) { // the hello: "r<rank>[ <epoch>]"
            const bool bad = std::sscanf(line.c_str(), "r%d %d", &r, &epoch) < 1 || r <= 0 || r >= world || star.seen[static_cast<std::size_t>(r)];
            j.rank = r;
            state = bad ? Joined::Drop : Joined::NotYet;
        } else if (line == "p") { // a clock ping: answered with this clock
            const std::string pong = "P" + std::to_string(realtimeNs()) + "\n";
            if (::send(j.fd, pong.data(), pong.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(pong.size()))
                state = Joined::Drop;
        } else {
            state = line == "e" && !star.seen[static_cast<std::size_t>(j.rank)] ? Joined::Yes : Joined::Drop;
        }
    }
    if (state == Joined::Yes) {
        star.seen[static_cast<std::size_t>(j.rank)] = true;
        m_peers.push_back(Peer{j.fd, j.rank, std::chrono::steady_clock::now(), j.in, false});
        ++star.accepted;
    } else if (state == Joined::Drop) {
        ::close(j.fd);
        if (n <= 0 && m_onLoss && j.rank > 0 && j.rank < world && !star.seen[static_cast<std::size_t>(j.rank)]
            && star.lostEarly[static_cast<std::size_t>(j.rank)].empty()) {
            star.lostEarly[static_cast<std::size_t>(j.rank)] = kDiedCause; // after its hello: it is not coming
            ++star.accepted;
        }
    }
    if (state != Joined::NotYet)
        j.fd = -1;
}

void Watchdog::joinStar(RendezvousStore &store, std::chrono::steady_clock::time_point deadline)
{
    // The store's blocking wait: rank 0 publishes its address just after the rendezvous, and
    // polling (backoff up to 50 ms) overslept that by a few ms per rank.
    const auto where = store.waitBlocking({kKey}, m_timeout) ? store.get(kKey, m_timeout) : std::nullopt;
    if (!where)
        throw TimeoutError("watchdog: rank 0 did not publish its watchdog address within " + seconds(m_timeout)
                           + " after the rendezvous (killed, crashed or stopped since?); the run never started (a loss of rank 0 "
                             "before the watchdog's star stands ends the run: docs/communication.md, \"Losing a rank\")");
    if (!connectToHub(0, *where, deadline))
        throw CollectiveError("watchdog: " + who(0) + " at " + *where
                              + " closed the connection while this rank joined its watchdog (killed or crashed?); the run never started");
}

int Watchdog::listenForStar(RendezvousStore &store, const std::string &advertise)
{
    int port = 0;
    const int listener = listenAnywhere(port, "rank 0");
    try {
        store.set(kKey, advertise + ":" + std::to_string(port));
    } catch (...) {
        ::close(listener);
        throw;
    }
    return listener;
}

bool Watchdog::connectToHub(int hub, const std::string &where, std::chrono::steady_clock::time_point deadline)
{
    const auto colon = where.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == where.size())
        throw ProtocolError("watchdog: rank " + std::to_string(m_rank) + ": the store holds \"" + where.substr(0, 80) + "\" as " + who(hub)
                            + "'s watchdog address, not HOST:PORT; is another program using the same MASTER_ADDR:MASTER_PORT?");
    int fd = -1;
    while (fd < 0) {
        fd = connectTo(where.substr(0, colon), where.substr(colon + 1));
        if (fd >= 0)
            break;
        // The hub listens before it publishes its address and until every rank joined (or its
        // wait ended): a refused connection means its process is gone, or it gave up on this rank.
        if (errno == ECONNREFUSED)
            throw CollectiveError("watchdog: " + who(hub) + " at " + where
                                  + " refused the connection: its watchdog is gone (killed or crashed, or it already went on without this rank)"
                                  + (m_thread.joinable() ? std::string() : std::string("; the run never started")));
        if (std::chrono::steady_clock::now() > deadline)
            throw TimeoutError("watchdog: cannot connect to " + who(hub) + " at " + where + " (" + std::strerror(errno) + ")");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string hello = "r" + std::to_string(m_rank) + " " + std::to_string(m_epoch) + "\n";
    m_reported.assign(m_hosts.size(), 0);
    if (m_mesh && m_hubIndex > 0) { // a new hub: what this rank's mesh links know (lost or finished ranks), so that it need not wait for them
        m_mesh->drain(); // a rank killed together with the hub: its link's close is usually read by now (else reportMeshNews)
        for (const auto &[q, cause] : m_mesh->known())
            if (q != hub) {
                hello += reportLine(q, cause);
                m_reported[static_cast<std::size_t>(q)] = 1;
            }
    }
    auto lost = [&] {
        ::close(fd);
        return false;
    };
    if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size()))
        return lost();
    // Clock offset to the hub from the fastest round trip: offset = remote - (sent + received) / 2.
    std::int64_t bestRtt = INT64_MAX;
    for (int i = 0; i < kClockSamples; ++i) {
        const std::int64_t sent = realtimeNs();
        std::string pong;
        if (::send(fd, "p\n", 2, MSG_NOSIGNAL) != 2 || !readLine(fd, pong, deadline) || pong.size() < 2 || pong[0] != 'P')
            return lost();
        const std::int64_t received = realtimeNs();
        std::int64_t remote = 0;
        const auto [end, ec] = std::from_chars(pong.data() + 1, pong.data() + pong.size(), remote);
        if (ec != std::errc() || end != pong.data() + pong.size()) {
            ::close(fd);
            throw ProtocolError("watchdog: rank " + std::to_string(m_rank) + ": " + who(hub) + " at " + where + " sent a malformed clock reply \""
                                + pong.substr(0, 40) + "\" (expected P<nanoseconds>); is something else listening there?");
        }
        if (received - sent < bestRtt) {
            bestRtt = received - sent;
            m_clockOffsetNs = remote - (sent + (received - sent) / 2);
            m_clockUncertaintyNs = bestRtt / 2;
        }
    }
    if (::send(fd, "e\n", 2, MSG_NOSIGNAL) != 2)
        return lost();
    {
        const std::lock_guard lock(m_sendMutex);
        m_peers.clear();
        m_peers.push_back(Peer{fd, hub, std::chrono::steady_clock::now(), {}, false});
    }
    m_hubRank = hub;
    return true;
}

} // namespace cppl::agent::dist
