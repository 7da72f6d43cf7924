// SPDX-License-Identifier: MIT
#include "watchdog.h"

#include "exit_codes.h"
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

using wire::kBeat;
using wire::kDiedCause;
using wire::seconds;
using wire::trace;

/// Why a tolerant run still ends when its hub (rank 0) is lost: rank 0 serves the store.
constexpr const char *kHubHoldsStore = "; the run cannot go on without it: its process serves the rendezvous store (a launcher that serves "
                                       "the store itself, such as run --standalone or torchrun, lets the others go on)";
/// finish(): "cppl/finished/<rank>" for each rank that finished, then this key (the run is over).
const std::string kFinishedKey = "cppl/finished";

} // namespace

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
    runWide = runWide && m_onLoss && exitCode >= 1 && exitCode <= kExitTimeout;
    const int code = runWide ? exitCode : exitCode == kExitTimeout ? kExitTimeout : kExitCollective;
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
        fire(kExitCollective, who(p.rank) + " sent an unexpected frame \"" + frame.substr(0, 80) + "\" (do all ranks run the same agent version and --on-rank-loss?)", p.rank);
        break;
    case 'f':
    case 'F': { // F: a failure that holds for the whole run (reportFailure): it ends a tolerant run too
        const bool runWide = frame[0] == 'F';
        int code = kExitCollective, origin = p.rank;
        int consumed = 0;
        if (std::sscanf(frame.c_str() + 1, "%d %d %n", &code, &origin, &consumed) < 2
            || (runWide ? code < 1 || code > kExitTimeout : code != kExitCollective && code != kExitTimeout)) {
            // A peer's frame decides this rank's exit code: only documented ones are taken.
            fire(kExitCollective, who(p.rank) + " sent a malformed failure report \"" + frame.substr(0, 80) + "\"", p.rank);
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
            hubLost(text.starts_with(prefix) ? text.substr(prefix.size()) : text, kExitCollective);
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
            fire(kExitCollective, who(m_rank) + " was replaced as the watchdog's hub while it was not responding (stopped or hung past --timeout "
                                + seconds(m_timeout) + "); it stops, the others went on without it",
                 m_rank);
            return true;
        }
    } catch (const Error &e) {
        fire(kExitCollective, std::string("watchdog: the rendezvous store is unreachable: ") + e.what(), m_rank);
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

void Watchdog::handleLoss(const std::string &frame)
{
    // "l<epoch> <rank> <member,member,...> <cause>"
    Loss loss;
    const int hub = m_hubRank.load();
    const auto bad = [&] {
        fire(kExitCollective, who(hub) + " sent a malformed lost-rank notice \"" + frame.substr(0, 80) + "\" (do all ranks run the same agent version?)", hub);
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
        if (readPeers(fds, polled)) // a non-hub that elected a new hub replaced m_peers: the scan starts over
            continue;
        if (m_mesh) { // what the mesh saw (after an election, above, its links may differ from those polled: next turn)
            m_mesh->handle(fds.data() + 1 + polled, fds.size() - 1 - polled);
            m_mesh->beat(*m_store);
            reportMeshNews();
        }
        checkHeartbeats();
    }
}

bool Watchdog::readPeers(const std::vector<pollfd> &fds, std::size_t polled)
{
    for (std::size_t i = 0; i < polled; ++i) {
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
            if (m_hubIndex != hubBefore)
                return true;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (peerClosed(p))
            return true;
    }
    return false;
}

bool Watchdog::peerClosed(Peer &p)
{
    const std::string &cause = kDiedCause;
    if (!p.done && !m_finished && m_onLoss) {
        if (isHub()) {
            lose(p, cause);
            return false;
        }
        if (m_store) {
            hubLost(cause, kExitCollective);
            return true;
        }
    }
    closePeer(p);
    if (!p.done && !m_finished)
        fire(kExitCollective, who(p.rank) + " " + cause + (m_onLoss ? std::string(kHubHoldsStore) : std::string()), p.rank);
    return false;
}

void Watchdog::checkHeartbeats()
{
    const auto t = std::chrono::steady_clock::now();
    for (Peer &p : m_peers)
        if (p.fd >= 0 && !p.done && t - p.lastSeen > m_timeout) {
            const std::string cause = "stopped responding: no heartbeat for "
                                      + seconds(std::chrono::duration_cast<std::chrono::milliseconds>(t - p.lastSeen))
                                      + " (stopped, hung, or its host is unreachable; --timeout " + seconds(m_timeout) + ")";
            if (isHub() && m_onLoss) {
                lose(p, cause);
            } else if (m_onLoss && m_store) {
                hubLost(cause, kExitTimeout);
                break;
            } else {
                fire(kExitTimeout, who(p.rank) + " " + cause + (m_onLoss ? std::string(kHubHoldsStore) : std::string()), p.rank);
            }
        }
}

} // namespace cppl::agent::dist
