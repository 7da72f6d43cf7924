// SPDX-License-Identifier: MIT
#include "watchdog.h"

#include "fault_hooks.h"
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
#include <string>
#include <cstdlib>
#include <cstring>

namespace cppl::agent::dist {

namespace {

using wire::acceptHello;
using wire::connectTo;
using wire::kBeat;
using wire::kDiedCause;
using wire::listenAnywhere;
using wire::parseReport;
using wire::readLine;
using wire::realtimeNs;
using wire::reportLine;
using wire::seconds;
using wire::trace;

/// Why a tolerant run still ends when its hub (rank 0) is lost: rank 0 serves the store.
constexpr const char *kHubHoldsStore = "; the run cannot go on without it: its process serves the rendezvous store (a launcher that serves "
                                       "the store itself, such as run --standalone or torchrun, lets the others go on)";
const std::string kKey = "cppl/watchdog";
/// finish(): "cppl/finished/<rank>" for each rank that finished, then this key (the run is over).
const std::string kFinishedKey = "cppl/finished";
constexpr int kClockSamples = 8;

} // namespace

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
    if (rank == 0) {
        const int listener = hubListener >= 0 ? hubListener : listenForStar(store, advertise);
        std::vector<bool> seen(static_cast<std::size_t>(world), false);
        auto timedOut = [&] {
            std::string missing;
            for (int r = 1; r < world; ++r)
                if (!seen[static_cast<std::size_t>(r)])
                    missing += (missing.empty() ? "" : ", ") + who(r);
            ::close(listener);
            return TimeoutError("watchdog: " + missing + " did not connect to rank 0's watchdog within " + seconds(timeout)
                                + " after the rendezvous (killed or stopped since, or a firewall between the hosts?); the run never started");
        };
        // Every rank's hello and clock pings at once (poll over all connections): one after the
        // other, 9 round trips per rank made the star the longest step after the rendezvous on a
        // loaded host (36 ms for 8 ranks at load 21), and a silent connection held up the rest.
        struct Joining
        {
            int fd;
            std::string in;
            int rank = -1;
        };
        std::vector<Joining> joining;
        auto closeAll = [&] {
            for (auto &j : joining)
                ::close(j.fd);
        };
        // Tolerant runs: a rank lost before it joined (its connection closed after its hello, or it
        // never connected within the timeout) is lost like any other, announced once the star stands.
        std::vector<std::string> lostEarly(static_cast<std::size_t>(world));
        for (int accepted = 1; accepted < world;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
            if (left <= 0 && m_onLoss) {
                for (int r = 1; r < world; ++r)
                    if (!seen[static_cast<std::size_t>(r)] && lostEarly[static_cast<std::size_t>(r)].empty())
                        lostEarly[static_cast<std::size_t>(r)] = "did not connect to the watchdog within " + seconds(timeout)
                                                                 + " after the rendezvous (killed, crashed or stopped before its first batch)";
                break;
            }
            if (left <= 0) {
                closeAll();
                throw timedOut();
            }
            std::vector<pollfd> fds{{listener, POLLIN, 0}};
            for (const auto &j : joining)
                fds.push_back(pollfd{j.fd, POLLIN, 0});
            if (::poll(fds.data(), fds.size(), static_cast<int>(left)) <= 0)
                continue;
            for (std::size_t i = 1; i < fds.size(); ++i) {
                Joining &j = joining[i - 1];
                if (fds[i].revents == 0)
                    continue;
                char buf[512];
                const ssize_t n = ::read(j.fd, buf, sizeof buf);
                bool drop = n <= 0, joined = false;
                if (n > 0)
                    j.in.append(buf, static_cast<std::size_t>(n));
                for (std::size_t nl = 0; !drop && !joined && (nl = j.in.find('\n')) != std::string::npos;) {
                    const std::string line = j.in.substr(0, nl);
                    j.in.erase(0, nl + 1);
                    int r = -1, epoch = 0;
                    if (j.rank < 0) { // the hello: "r<rank>[ <epoch>]"
                        drop = std::sscanf(line.c_str(), "r%d %d", &r, &epoch) < 1 || r <= 0 || r >= world || seen[static_cast<std::size_t>(r)];
                        j.rank = r;
                    } else if (line == "p") { // a clock ping: answered with this clock
                        const std::string pong = "P" + std::to_string(realtimeNs()) + "\n";
                        drop = ::send(j.fd, pong.data(), pong.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(pong.size());
                    } else if (line == "e" && !seen[static_cast<std::size_t>(j.rank)]) {
                        joined = true;
                    } else {
                        drop = true;
                    }
                }
                if (joined) {
                    seen[static_cast<std::size_t>(j.rank)] = true;
                    m_peers.push_back(Peer{j.fd, j.rank, std::chrono::steady_clock::now(), j.in, false});
                    ++accepted;
                } else if (drop) {
                    ::close(j.fd);
                    if (n <= 0 && m_onLoss && j.rank > 0 && j.rank < world && !seen[static_cast<std::size_t>(j.rank)]
                        && lostEarly[static_cast<std::size_t>(j.rank)].empty()) {
                        lostEarly[static_cast<std::size_t>(j.rank)] = kDiedCause; // after its hello: it is not coming
                        ++accepted;
                    }
                }
                if (joined || drop)
                    j.fd = -1;
            }
            std::erase_if(joining, [](const Joining &j) { return j.fd < 0; });
            if (fds[0].revents != 0) {
                const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
                if (fd < 0)
                    continue;
                const int one = 1;
                if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
                    const int e = errno;
                    ::close(fd);
                    closeAll();
                    ::close(listener);
                    throw CollectiveError(std::string("watchdog: setsockopt(TCP_NODELAY) on a rank's connection to rank 0: ") + std::strerror(e));
                }
                joining.push_back(Joining{fd, {}, -1});
            }
        }
        closeAll();
        ::close(listener);
        for (int r = 1; r < world; ++r)
            if (const std::string &why = lostEarly[static_cast<std::size_t>(r)]; !why.empty() && !seen[static_cast<std::size_t>(r)]) {
                trace(m_rank, "rank " + std::to_string(r) + " lost while the star formed: " + why);
                store.set("cppl/lost/" + std::to_string(r), why); // fenced: should it run again, it stops
                announceLoss(r, why);
            }
    } else {
        // The store's blocking wait: rank 0 publishes its address just after the rendezvous, and
        // polling (backoff up to 50 ms) overslept that by a few ms per rank.
        const auto where = store.waitBlocking({kKey}, timeout) ? store.get(kKey, timeout) : std::nullopt;
        if (!where)
            throw TimeoutError("watchdog: rank 0 did not publish its watchdog address within " + seconds(timeout)
                               + " after the rendezvous (killed, crashed or stopped since?); the run never started (a loss of rank 0 "
                                 "before the watchdog's star stands ends the run: docs/communication.md, \"Losing a rank\")");
        if (!connectToHub(0, *where, deadline))
            throw CollectiveError("watchdog: " + who(0) + " at " + *where
                                  + " closed the connection while this rank joined its watchdog (killed or crashed?); the run never started");
    }
    // The mesh's links (watchdog_mesh.h) are made by the watchdog thread, at its first beat and as
    // the lower ranks publish: off the path to the first batch.
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0)
        throw CollectiveError(std::string("watchdog: pipe: ") + std::strerror(errno));
    m_wakeRead = pipefd[0];
    m_wakeWrite = pipefd[1];
    m_thread = std::thread([this] { loop(); });
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

Watchdog::~Watchdog()
{
    // CLUSTERPPL_TEST_HOLD_WATCHDOG_STOP=R:MS: rank R, leaving without having finished (a failure
    // of its own), says so and waits MS ms before it stops this thread, which handles what arrives
    // meanwhile as ever (a verdict on another rank: tst_batch_schedule, failingRankHearsALoss).
    if (const RankHold &hold = faultHooks().holdWatchdogStop; !m_finished && hold.appliesTo(m_rank)) {
        sayHook("clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before its watchdog stops for " + std::to_string(hold.ms.count())
                + " ms (CLUSTERPPL_TEST_HOLD_WATCHDOG_STOP)");
        std::this_thread::sleep_for(hold.ms);
    }
    m_stop = true;
    if (m_wakeWrite >= 0)
        (void)!::write(m_wakeWrite, "x", 1);
    if (m_thread.joinable())
        m_thread.join();
    for (auto &p : m_peers)
        if (p.fd >= 0)
            ::close(p.fd);
    m_mesh.reset();
    if (m_wakeRead >= 0)
        ::close(m_wakeRead);
    if (m_wakeWrite >= 0)
        ::close(m_wakeWrite);
}

std::string Watchdog::who(int rank) const
{
    const auto &host = m_hosts[static_cast<std::size_t>(rank)];
    return "rank " + std::to_string(rank) + (host.empty() ? std::string() : " (" + host + ")");
}

void Watchdog::sendAll(const std::string &frame)
{
    // The main thread sends too (finish, reportFailure) while the watchdog's thread may replace the
    // peers (a new hub): both hold the lock around m_peers' changes and this loop.
    const std::lock_guard lock(m_sendMutex);
    for (auto &p : m_peers)
        if (p.fd >= 0)
            (void)!::send(p.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Watchdog::closePeer(Peer &p)
{
    const std::lock_guard lock(m_sendMutex);
    if (p.fd >= 0)
        ::close(p.fd);
    p.fd = -1;
}

void Watchdog::reportFailure(int exitCode, const std::string &message, bool runWide)
{
    // Tolerant runs: a failure every rank would hit ends the run ("F": every rank exits with its
    // code) instead of being survived as this rank's loss ("f": the others exit 5 or 6 only when
    // the run fails fast).
    runWide = runWide && m_onLoss && exitCode >= 1 && exitCode <= kPeerTimeout;
    const int code = runWide ? exitCode : exitCode == kPeerTimeout ? kPeerTimeout : kPeerDied;
    std::string flat = message;
    for (char &c : flat)
        if (c == '\n')
            c = ' ';
    trace(m_rank, "reports its own failure: " + flat);
    m_fired = true; // this rank exits on its own; ignore what follows
    sendAll((runWide ? "F" : "f") + std::to_string(code) + " " + std::to_string(m_rank) + " " + who(m_rank) + " failed: " + flat + "\n");
}

void Watchdog::finish()
{
    m_finished = true;
    sendAll("d\n");
    m_stop = true;
    (void)!::write(m_wakeWrite, "x", 1);
    if (m_thread.joinable())
        m_thread.join();
    // On record for a hub elected from now on (the old one lost before it finished: killed after
    // the result was written): it knows this rank finished, so it neither waits --timeout for it
    // to reconnect nor declares it lost. After the thread: the store connection is its otherwise.
    if (m_store && m_onLoss)
        try {
            m_store->set(kFinishedKey + "/" + std::to_string(m_rank), "1");
            m_store->set(kFinishedKey, "1");
        } catch (const Error &) { // the store is gone: nobody is left to elect a hub
        }
    sendAll("d\n"); // the thread may have reconnected to a new hub since the first
    if (m_mesh) // after the thread: its links close from now on without alarm too
        m_mesh->finish();
}

bool Watchdog::runOver()
{
    return m_store && m_onLoss && m_store->check({kFinishedKey});
}

bool Watchdog::finishedRank(int r, bool over)
{
    if (m_mesh && m_mesh->finished(r))
        return true;
    return over && m_store && m_store->check({kFinishedKey + "/" + std::to_string(r)});
}

void Watchdog::fire(int code, const std::string &message, int origin, bool runWide)
{
    trace(m_rank, "fire " + std::to_string(code) + " (origin " + std::to_string(origin) + "): " + message);
    if (m_fired.exchange(true) || m_finished)
        return;
    if (isHub())
        sendAll((runWide ? "F" : "f") + std::to_string(code) + " " + std::to_string(origin) + " " + message + "\n");
    m_onFatal(Fatal{code, message});
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

void Watchdog::handleFrame(Peer &p, const std::string &frame)
{
    if (frame.empty())
        return;
    switch (frame[0]) {
    case 'h':
        break;
    case 'd':
        p.done = true;
        break;
    case 'l':
        if (!isHub() && m_onLoss && p.rank == m_hubRank.load()) {
            handleLoss(frame);
            break;
        }
        fire(kPeerDied, who(p.rank) + " sent an unexpected frame \"" + frame.substr(0, 80) + "\" (do all ranks run the same agent version and --on-rank-loss?)", p.rank);
        break;
    case 'f':
    case 'F': { // F: a failure that holds for the whole run (reportFailure): it ends a tolerant run too
        const bool runWide = frame[0] == 'F';
        int code = kPeerDied, origin = p.rank;
        int consumed = 0;
        if (std::sscanf(frame.c_str() + 1, "%d %d %n", &code, &origin, &consumed) < 2
            || (runWide ? code < 1 || code > kPeerTimeout : code != kPeerDied && code != kPeerTimeout)) {
            // A peer's frame decides this rank's exit code: only documented ones are taken.
            fire(kPeerDied, who(p.rank) + " sent a malformed failure report \"" + frame.substr(0, 80) + "\"", p.rank);
            break;
        }
        std::string text = frame.substr(static_cast<std::size_t>(consumed) + 1);
        if (runWide) {
            fire(code, text, origin, true);
            break;
        }
        const std::string prefix = who(p.rank) + " ";
        if (isHub() && m_onLoss) {
            // A rank that failed on its own (its model, its data, its memory) is lost like a dead one.
            lose(p, text.starts_with(prefix) ? text.substr(prefix.size()) : text);
            break;
        }
        if (m_onLoss && m_store && origin == p.rank) { // the hub itself failed: the others elect a new one
            hubLost(text.starts_with(prefix) ? text.substr(prefix.size()) : text, kPeerDied);
            break;
        }
        fire(code, text, origin);
        break;
    }
    default:
        break;
    }
}

bool Watchdog::fenced()
{
    if (!m_store)
        return false;
    try {
        // The others elect a new hub only after voting for it: a hub that finds votes was stopped
        // or hung past the timeout and replaced. It must not go on alone (it would see every peer
        // gone and count the whole run by itself).
        if (m_store->add("cppl/hub" + std::to_string(m_hubIndex + 1) + "/votes", 0) > 0) {
            fire(kPeerDied, who(m_rank) + " was replaced as the watchdog's hub while it was not responding (stopped or hung past --timeout "
                                + seconds(m_timeout) + "); it stops, the others went on without it",
                 m_rank);
            return true;
        }
    } catch (const Error &e) {
        fire(kPeerDied, std::string("watchdog: the rendezvous store is unreachable: ") + e.what(), m_rank);
        return true;
    }
    return false;
}

void Watchdog::lose(Peer &p, const std::string &cause)
{
    trace(m_rank, "lose rank " + std::to_string(p.rank) + ": " + cause);
    if (m_fired || m_finished || p.fd < 0)
        return;
    if (fenced())
        return;
    // Fenced in the store before its connection closes: a stopped rank that runs again finds it
    // there (and its connection gone) and exits instead of electing a hub or claiming batches.
    if (m_store)
        try {
            m_store->set("cppl/lost/" + std::to_string(p.rank), cause);
        } catch (const Error &) {
        }
    closePeer(p);
    announceLoss(p.rank, cause);
}

void Watchdog::announceLoss(int rank, const std::string &cause)
{
    std::erase(m_members, rank);
    ++m_epoch;
    std::string members;
    for (int r : m_members)
        members += (members.empty() ? "" : ",") + std::to_string(r);
    std::string flat = cause;
    for (char &c : flat)
        if (c == '\n')
            c = ' ';
    trace(m_rank, "announce epoch " + std::to_string(m_epoch) + " rank " + std::to_string(rank) + " members " + members);
    sendAll("l" + std::to_string(m_epoch) + " " + std::to_string(rank) + " " + members + " " + flat + "\n");
    m_onLoss(Loss{m_epoch, rank, flat, m_members});
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
                break;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (m_mesh)
                m_mesh->drain();
        }
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

void Watchdog::becomeHub(int old, const std::string &cause, const std::vector<int> &candidates, const std::string &prefix)
{
    int port = 0;
    const int listener = listenAnywhere(port, who(m_rank));
    m_store->set(prefix + "addr", std::to_string(m_rank) + " " + m_advertise + ":" + std::to_string(port));
    std::vector<int> expected = candidates;
    std::erase(expected, m_rank);
    std::vector<int> seen;
    const int world = static_cast<int>(m_hosts.size());
    const auto deadline = std::chrono::steady_clock::now() + m_timeout;
    auto nextBeat = std::chrono::steady_clock::now();
    // The mesh saw which of them died or fell silent with the old hub (their links to this rank):
    // it waits only for the others, and keeps watching them meanwhile. A rank that finished (the
    // old hub lost after the result was written) is not waited for and not lost: its "d" on the
    // mesh, or its key in the store (finish()), checked once per heartbeat.
    std::vector<std::string> meshCause(static_cast<std::size_t>(world));
    std::vector<char> finished(static_cast<std::size_t>(world), 0);
    const auto unseen = [&](int r) { return std::find(seen.begin(), seen.end(), r) == seen.end(); };
    const auto judged = [&](int r) {
        std::string &why = meshCause[static_cast<std::size_t>(r)];
        if (why.empty() && m_mesh)
            why = m_mesh->lost(r);
        char &done = finished[static_cast<std::size_t>(r)];
        if (!done && why.empty() && m_mesh && m_mesh->finished(r)) {
            done = 1;
            trace(m_rank, "new hub: rank " + std::to_string(r) + " finished (its mesh link said so)");
        }
        return !why.empty() || done;
    };
    const auto awaited = [&] { return std::any_of(expected.begin(), expected.end(), [&](int r) { return unseen(r) && !judged(r); }); };
    bool over = false;
    const auto checkFinished = [&] { // the store's record, for ranks the mesh says nothing of
        over = over || runOver();
        if (over)
            for (int r : expected)
                if (unseen(r) && !judged(r) && finishedRank(r, true)) {
                    finished[static_cast<std::size_t>(r)] = 1;
                    trace(m_rank, "new hub: rank " + std::to_string(r) + " finished");
                }
    };
    // What a survivor's mesh links know: a rank this hub has no link to (every candidate lost) is
    // announced at once when a survivor linked to it saw it die, stop or finish.
    const auto take = [&](int from, int q, const std::string &why) {
        if (std::find(expected.begin(), expected.end(), q) == expected.end() || !unseen(q) || judged(q))
            return;
        trace(m_rank, "new hub: rank " + std::to_string(from) + " says rank " + std::to_string(q) + (why.empty() ? std::string(" finished") : " " + why));
        if (why.empty())
            finished[static_cast<std::size_t>(q)] = 1;
        else
            meshCause[static_cast<std::size_t>(q)] = why;
    };
    // Reports that come after a survivor's hello (its link to a rank killed with the old hub closed
    // a few ms after the hub's: reportMeshNews). The other frames stay in the inbox for loop().
    std::vector<char> quiet; // by index in m_peers: its connection closed meanwhile (loop() reads that)
    const auto readReports = [&](std::size_t i) {
        Peer &p = m_peers[i];
        char buf[4096];
        const ssize_t n = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EINTR))
                quiet[i] = 1;
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
            if (line.starts_with('k') && parseReport(line, world, q, why) && q != p.rank)
                take(p.rank, q, why);
            else if (line != "h") // a heartbeat's only news is lastSeen
                keep += line + "\n";
        }
        p.inbox = keep + p.inbox.substr(start);
    };
    if (m_mesh)
        m_mesh->drain();
    std::vector<pollfd> pfs;
    std::vector<std::pair<int, std::string>> reports;
    while (awaited()) {
        const auto now = std::chrono::steady_clock::now();
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
        if (left <= 0)
            break;
        if (now >= nextBeat) { // those already here must not find this hub silent while it waits for the others
            sendAll("h\n");
            nextBeat = now + kBeat;
            checkFinished();
            if (!awaited())
                break;
        }
        if (m_mesh)
            m_mesh->beat(*m_store);
        pfs.assign(1, pollfd{listener, POLLIN, 0});
        quiet.resize(m_peers.size(), 0);
        for (std::size_t i = 0; i < m_peers.size(); ++i)
            pfs.push_back(pollfd{m_peers[i].fd, static_cast<short>(quiet[i] ? 0 : POLLIN), 0});
        const std::size_t meshAt = pfs.size();
        if (m_mesh)
            m_mesh->pollFds(pfs);
        if (::poll(pfs.data(), pfs.size(), static_cast<int>(std::min<long long>(left, kBeat.count()))) <= 0)
            continue;
        if (m_mesh)
            m_mesh->handle(pfs.data() + meshAt, pfs.size() - meshAt);
        for (std::size_t i = 0; i + 1 < meshAt; ++i)
            if (pfs[i + 1].revents & (POLLIN | POLLHUP | POLLERR))
                readReports(i);
        if (!(pfs[0].revents & POLLIN))
            continue;
        const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        const int one = 1;
        int epoch = 0;
        const int r = ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0 ? acceptHello(fd, world, deadline, epoch, reports) : -1;
        if (r < 0 || std::find(expected.begin(), expected.end(), r) == expected.end() || std::find(seen.begin(), seen.end(), r) != seen.end()) {
            ::close(fd);
            continue;
        }
        seen.push_back(r);
        trace(m_rank, "new hub: rank " + std::to_string(r) + " reconnected (epoch " + std::to_string(epoch) + ")");
        for (const auto &[q, why] : reports)
            take(r, q, why);
        m_epoch = std::max(m_epoch, epoch); // a verdict the old hub sent some ranks and not this one
        const std::lock_guard lock(m_sendMutex);
        m_peers.push_back(Peer{fd, r, std::chrono::steady_clock::now(), {}, false});
    }
    ::close(listener);
    m_hubRank = m_rank;
    m_clockOffsetNs = 0;
    m_clockUncertaintyNs = 0;
    if (awaited()) // the deadline passed: a rank that finished meanwhile is not lost
        checkFinished();
    announceLoss(old, cause);
    for (int r : expected)
        if (unseen(r) && !finished[static_cast<std::size_t>(r)]) {
            const std::string &mesh = meshCause[static_cast<std::size_t>(r)];
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

void Watchdog::handleLoss(const std::string &frame)
{
    // "l<epoch> <rank> <member,member,...> <cause>"
    Loss loss;
    const int hub = m_hubRank.load();
    const auto bad = [&] {
        fire(kPeerDied, who(hub) + " sent a malformed lost-rank notice \"" + frame.substr(0, 80) + "\" (do all ranks run the same agent version?)", hub);
    };
    std::size_t pos = 1;
    auto number = [&](int &v) {
        const auto [end, ec] = std::from_chars(frame.data() + pos, frame.data() + frame.size(), v);
        if (ec != std::errc() || end == frame.data() + pos)
            return false;
        pos = static_cast<std::size_t>(end - frame.data());
        return true;
    };
    const int world = static_cast<int>(m_hosts.size());
    if (!number(loss.epoch) || loss.epoch <= m_epoch || pos >= frame.size() || frame[pos++] != ' ' || !number(loss.rank) || loss.rank < 0
        || loss.rank >= world || pos >= frame.size() || frame[pos++] != ' ')
        return bad();
    for (;;) {
        int r = -1;
        if (!number(r) || r < 0 || r >= world || (!loss.members.empty() && r <= loss.members.back()))
            return bad();
        loss.members.push_back(r);
        if (pos < frame.size() && frame[pos] == ',') {
            ++pos;
            continue;
        }
        break;
    }
    if (std::find(loss.members.begin(), loss.members.end(), hub) == loss.members.end()
        || std::find(loss.members.begin(), loss.members.end(), loss.rank) != loss.members.end())
        return bad();
    loss.cause = pos < frame.size() ? frame.substr(pos + 1) : std::string();
    trace(m_rank, "verdict: " + frame.substr(0, 120));
    m_epoch = loss.epoch;
    m_members = loss.members;
    m_onLoss(loss);
    m_electing = false; // after onLoss: whoever sees the election over sees its verdict
}

void Watchdog::loop()
{
    auto nextBeat = std::chrono::steady_clock::now();
    std::vector<pollfd> fds;
    while (!m_stop) {
        const auto now = std::chrono::steady_clock::now();
        if (now >= nextBeat) {
            sendAll("h\n");
            nextBeat = now + kBeat;
        }
        fds.clear();
        fds.push_back(pollfd{m_wakeRead, POLLIN, 0});
        for (const auto &p : m_peers)
            fds.push_back(pollfd{p.fd, static_cast<short>(p.fd >= 0 ? POLLIN : 0), 0});
        const std::size_t polled = fds.size() - 1;
        if (m_mesh)
            m_mesh->pollFds(fds);
        ::poll(fds.data(), fds.size(), static_cast<int>(kBeat.count()));
        if (m_stop)
            break;
        // A non-hub that elects a new hub replaces m_peers: the scan starts over.
        bool replaced = false;
        for (std::size_t i = 0; i < polled && !replaced; ++i) {
            Peer &p = m_peers[i];
            if (p.fd < 0 || !(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            const ssize_t n = ::recv(p.fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0) {
                p.lastSeen = std::chrono::steady_clock::now();
                p.inbox.append(buf, static_cast<std::size_t>(n));
                const int hubBefore = m_hubIndex;
                for (std::size_t nl; m_hubIndex == hubBefore && p.fd >= 0 && (nl = p.inbox.find('\n')) != std::string::npos;) {
                    const std::string frame = p.inbox.substr(0, nl);
                    p.inbox.erase(0, nl + 1);
                    handleFrame(p, frame);
                }
                replaced = m_hubIndex != hubBefore;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            const std::string &cause = kDiedCause;
            if (!p.done && !m_finished && m_onLoss) {
                if (isHub()) {
                    lose(p, cause);
                    continue;
                }
                if (m_store) {
                    hubLost(cause, kPeerDied);
                    replaced = true;
                    continue;
                }
            }
            closePeer(p);
            if (!p.done && !m_finished)
                fire(kPeerDied, who(p.rank) + " " + cause + (m_onLoss ? std::string(kHubHoldsStore) : std::string()), p.rank);
        }
        if (replaced)
            continue;
        if (m_mesh) { // what the mesh saw (after an election, above, its links may differ from those polled: next turn)
            m_mesh->handle(fds.data() + 1 + polled, fds.size() - 1 - polled);
            m_mesh->beat(*m_store);
            reportMeshNews();
        }
        const auto t = std::chrono::steady_clock::now();
        for (Peer &p : m_peers)
            if (p.fd >= 0 && !p.done && t - p.lastSeen > m_timeout) {
                const std::string cause = "stopped responding: no heartbeat for "
                                          + seconds(std::chrono::duration_cast<std::chrono::milliseconds>(t - p.lastSeen))
                                          + " (stopped, hung, or its host is unreachable; --timeout " + seconds(m_timeout) + ")";
                if (isHub() && m_onLoss) {
                    lose(p, cause);
                } else if (m_onLoss && m_store) {
                    hubLost(cause, kPeerTimeout);
                    break;
                } else {
                    fire(kPeerTimeout, who(p.rank) + " " + cause + (m_onLoss ? std::string(kHubHoldsStore) : std::string()), p.rank);
                }
            }
    }
}

} // namespace cppl::agent::dist
