// SPDX-License-Identifier: MIT
#include "distributed_run.h"

#include "fd_limit.h"
#include "rendezvous_store.h"
#include "watchdog.h"
#include "watchdog_mesh.h"

#include "fault_hooks.h"
#include "process_exit.h"

#include "cppl/errors.h"
#include "cppl/host.h"

#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <thread>
#include <utility>

namespace cppl::agent::dist {

namespace {

std::string rankList(const std::vector<int> &ranks)
{
    std::string s;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (i == 8 && ranks.size() > 10) {
            s += " and " + std::to_string(ranks.size() - 8) + " more";
            break;
        }
        s += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return s;
}

/// What rank 0 writes for each rank missing at its rendezvous deadline, to wake the others.
const std::string kRendezvousFailed = "rendezvous-failed";

/// CLUSTERPPL_DEBUG_CONNECT=1: one line per phase of DistributedRun's construction on stderr, with
/// the host's monotonic clock (shared by every rank on a host) and the phase's own duration.
class ConnectLog
{
public:
    explicit ConnectLog(int rank) : m_rank(rank), m_on(std::getenv("CLUSTERPPL_DEBUG_CONNECT") != nullptr), m_last(std::chrono::steady_clock::now())
    {
        mark("entered");
    }
    void mark(const char *phase)
    {
        const auto now = std::chrono::steady_clock::now();
        if (m_on) {
            char line[160];
            const int n = std::snprintf(line, sizeof line, "clusterppl-agent: rank %d: connect %-10s at %.3f ms (monotonic), +%.3f ms\n", m_rank, phase,
                                        1e-6 * static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count()),
                                        1e-6 * static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - m_last).count()));
            if (n > 0)
                (void)!::write(2, line, static_cast<std::size_t>(std::min<int>(n, sizeof line - 1)));
        }
        m_last = now;
    }

private:
    int m_rank;
    bool m_on;
    std::chrono::steady_clock::time_point m_last;
};

} // namespace

const char *topologyName(Topology t) noexcept
{
    return t == Topology::Flat ? "flat" : "hierarchical";
}

DistributedRun::DistributedRun(const DistributedOptions &o)
    : m_rank(o.identity.rank), m_world(o.identity.worldSize), m_topology(o.topology), m_timeout(o.timeout), m_tolerant(o.tolerateRankLoss)
{
    const RankIdentity &id = o.identity;
    ConnectLog log(id.rank);
    const std::string host = o.hostname.empty() ? localHostName() : o.hostname;
    // The tests' fault hooks (fault_hooks.h) that act here.
    const FaultHooks &hooks = faultHooks();
    m_testSlowCollective = hooks.slowCollective;
    m_testDie = hooks.deathPoint(m_rank);
    const std::chrono::milliseconds holdConnect = hooks.holdConnect.forRank(id.rank);
    const std::chrono::milliseconds holdWatchdog = hooks.holdWatchdog.forRank(id.rank);
    const bool holdUntilCollective = hooks.holdConnectUntilCollective >= 0 && hooks.holdConnectUntilCollective == id.rank;
    // Several ranks over Gloo need Gloo in this agent (one built against a pip torch may lack it):
    // said at once by every rank, as the configuration error it is. Found only when the
    // communicators are made, it was a rank's failure, and under --on-rank-loss continue the other
    // ranks went on without it.
    if (const bool gloo = o.backend == "gloo" || (o.backend == "auto" && !o.cudaDevice); gloo && o.identity.worldSize > 1)
        if (const std::string why = glooUnavailableReason(); !why.empty())
            throw ConfigError("backend gloo with " + std::to_string(o.identity.worldSize) + " ranks: " + why);
    // A write to a socket whose peer is gone raises SIGPIPE, and its default action ends the
    // process. Gloo writes its pairs with writev(), without MSG_NOSIGNAL (Python, torch's usual
    // host, ignores SIGPIPE from the start; this C++ process did not): a rank whose Gloo thread
    // wrote to a dead peer after the kernel reset the connection died of "signal 13", a survivor
    // killed by the loss it should have survived; when the dead peer was the watchdog's hub, its
    // death went unseen and the new hub declared it lost after --timeout ("did not reconnect").
    // Ignored, the write fails with EPIPE, which is a collective error like any other.
    std::signal(SIGPIPE, SIG_IGN);
    const bool serve = id.rank == 0 && !o.storeServedElsewhere;
    m_servesStore = serve;
    // Every peer costs this rank a socket or more: a limit too low for the run fails here, clearly,
    // not later with EMFILE in the middle of the connections (fd_limit.h; raised at the start).
    const bool meshed = m_tolerant && o.storeServedElsewhere && id.worldSize >= 3;
    requireFileLimit(id.rank, id.worldSize, serve,
                     meshed ? static_cast<int>(meshPeers(id.rank, id.worldSize, meshCandidates()).size()) : 0);
    // A store at a numeric loopback address is for this host's ranks only: served there, not on
    // every interface ("localhost" may resolve to either family, so it keeps every interface).
    const bool loopbackStore = isLoopbackHost(id.masterAddr) && id.masterAddr != "localhost";
    m_store = openTcpStore(id.masterAddr, id.masterPort, serve, o.timeout, loopbackStore ? id.masterAddr : std::string());
    m_storeAddress = m_store->address();
    log.mark("store");

    // Rank 0's watchdog listens before rank 0 arrives (Watchdog::listenForStar): a rank 0 lost
    // after the rendezvous is then seen at once by the others (refused), not after --timeout.
    const std::string advertise = isLoopbackHost(id.masterAddr) ? "127.0.0.1" : host;
    struct Listener
    {
        int fd = -1;
        ~Listener()
        {
            if (fd >= 0)
                ::close(fd);
        }
    } starListener;
    if (id.rank == 0)
        starListener.fd = Watchdog::listenForStar(*m_store, advertise);

    // 1. Rendezvous: everyone announces itself, then waits for everyone else.
    m_store->set("cppl/arrive/" + std::to_string(id.rank), std::to_string(id.worldSize) + "\t" + host);
    std::vector<std::string> keys;
    for (int r = 0; r < m_world; ++r)
        keys.push_back("cppl/arrive/" + std::to_string(r));
    const std::string verdictKey = "cppl/rendezvous-failed";
    // The store's blocking wait: every rank leaves the moment the last one arrives. (Polling with a
    // backoff up to 50 ms let the early ranks oversleep the last arrival by up to 50 ms each: the
    // largest part of the ranks' start skew in bench_comm, docs/communication.md.)
    if (!m_store->waitBlocking(keys, o.timeout)) {
        // Timed out: this connection still has the wait outstanding, so a fresh one says who is missing.
        std::unique_ptr<RendezvousStore> fresh = openTcpStore(id.masterAddr, m_store->port(), false, std::chrono::seconds(5));
        std::vector<int> missing; // never arrived, or filled in by rank 0's verdict
        for (int r = 0; r < m_world; ++r)
            if (const auto &k = keys[static_cast<std::size_t>(r)]; !fresh->check({k}) || fresh->get(k, o.timeout) == kRendezvousFailed)
                missing.push_back(r);
        // Checked after the keys: rank 0 writes its verdict before it fills them in.
        if (fresh->check({verdictKey})) // rank 0 gave up first and said why
            throw TimeoutError(fresh->get(verdictKey, o.timeout).value_or("rendezvous failed"));
        if (missing.empty())
            throw TimeoutError("rendezvous at " + m_storeAddress + " timed out after " + std::to_string(o.timeout.count() / 1000)
                               + " s just as the last rank arrived; start the run again (or with a longer --timeout)");
        const std::string msg = "rendezvous at " + m_storeAddress + " timed out after " + std::to_string(o.timeout.count() / 1000) + " s: "
                                + std::to_string(missing.size()) + " of " + std::to_string(m_world) + " ranks never arrived (rank"
                                + (missing.size() > 1 ? "s " : " ") + rankList(missing)
                                + "); check that they were started, with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE";
        if (serve) {
            // The store leaves with this process: say why, then fill in the missing ranks' keys so
            // that every rank still waiting wakes now (it finds the verdict before their values).
            fresh->set(verdictKey, msg);
            for (int r : missing)
                fresh->set(keys[static_cast<std::size_t>(r)], kRendezvousFailed);
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
        throw TimeoutError(msg);
    }
    for (int r = 0; r < m_world; ++r) {
        const std::string v = m_store->get(keys[static_cast<std::size_t>(r)], o.timeout).value_or("");
        if (v == kRendezvousFailed) // rank 0 gave up on it as this rank woke
            throw TimeoutError(m_store->get(verdictKey, o.timeout).value_or("rendezvous failed"));
        const auto tab = v.find('\t');
        const std::string theirs = v.substr(0, tab);
        if (theirs != std::to_string(m_world))
            throw CollectiveError("rank " + std::to_string(r) + " joined the rendezvous at " + m_storeAddress + " with WORLD_SIZE " + theirs
                                  + ", this rank has " + std::to_string(m_world) + "; start every rank with the same world size");
        m_hosts.push_back(tab == std::string::npos ? std::string() : v.substr(tab + 1));
    }
    log.mark("rendezvous");
    m_groups = parseRankGroups(o.groups, m_world, m_hosts);
    for (int r = 0; r < m_world; ++r)
        m_members.push_back(r);
    m_epochRank = m_rank;
    std::string backend = o.backend;
    if (backend == "auto")
        backend = o.cudaDevice ? "nccl" : "gloo";

    // 2. Liveness first, so that a rank dying while the communicators connect is noticed too.
    const int me = m_rank;
    // A tolerant run whose store outlives every rank survives rank 0 too: the watchdog's thread
    // then holds a store connection of its own to elect a new hub (watchdog.h).
    std::unique_ptr<RendezvousStore> watchdogStore;
    if (m_tolerant && o.storeServedElsewhere)
        watchdogStore = openTcpStore(id.masterAddr, id.masterPort, false, o.timeout);
    auto leave = [this, me](int exitCode, const std::string &message) {
        // From the watchdog thread: abort the communicators, say why and leave now; the main
        // thread may be deep in a forward pass or blocked in a collective that will never complete.
        abortCommunicators();
        const std::string line = "clusterppl-agent: rank " + std::to_string(me) + ": " + message + "\n";
        std::fflush(stdout);
        std::cerr.flush();
        (void)!::write(2, line.data(), line.size());
        std::_Exit(exitCode);
    };
    if (holdWatchdog.count() > 0) {
        const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before the watchdog's star for "
                                 + std::to_string(holdWatchdog.count()) + " ms (CLUSTERPPL_TEST_HOLD_WATCHDOG)\n";
        (void)!::write(2, line.data(), line.size());
        std::this_thread::sleep_for(holdWatchdog);
    }
    m_watchdog = std::make_unique<Watchdog>(*m_store, m_rank, m_hosts, advertise, o.timeout, [leave](const Watchdog::Fatal &f) {
        leave(f.exitCode, f.message);
    }, m_tolerant ? Watchdog::LossHandler([this, leave](const Watchdog::Loss &loss) {
        // From the watchdog thread: only record it; the main thread regroups at its next collective.
        {
            const std::lock_guard lock(m_lossMutex);
            m_losses.push_back(loss);
            m_lossEpoch.store(loss.epoch);
        }
        // NCCL's rebuild (shrink or init) blocks and cannot be abandoned: a rank lost during it
        // would leave the survivors waiting in it forever. Fail instead (regroup() checks the
        // other order: the flag first, then the epoch).
        if (m_blockingRegroup.load())
            leave(Watchdog::kPeerDied, "rank " + std::to_string(loss.rank) + " was lost (" + loss.cause
                                           + ") while the survivors rebuilt their NCCL communicators; a second loss during that rebuild "
                                             "is not survivable with NCCL (ncclCommShrink / ncclCommInitRankConfig block)");
    }) : Watchdog::LossHandler(), std::move(watchdogStore), std::exchange(starListener.fd, -1));
    log.mark("watchdog");

    // 3. The backend's communicators.
    BackendOptions b;
    b.rank = m_rank;
    b.worldSize = m_world;
    b.localRank = id.localRank;
    b.localWorldSize = id.localWorldSize;
    b.cudaDevice = o.cudaDeviceIndex;
    b.groups = m_groups;
    b.topology = m_topology;
    b.timeout = o.timeout;
    b.glooInterface = o.glooInterface;
    b.glooHost = isLoopbackHost(id.masterAddr) ? "127.0.0.1" : host;
    if (m_tolerant)
        b.lossEpoch = &m_lossEpoch;
    m_backendOptions = b;
    m_backendName = backend;
    if (backend != "nccl" && backend != "gloo") {
        const ConfigError e("--backend \"" + o.backend + "\" is not one of auto, gloo, nccl");
        m_watchdog->reportFailure(Watchdog::kPeerDied, e.what());
        throw e;
    }
    if (backend == "gloo" && o.connectInBackground) {
        // Gloo connects its process groups pair by pair (connectFullMesh, the library's code): the
        // ranks would leave here 40-110 ms apart on a 2-core host even when they left the
        // rendezvous together. Nothing before the first collective needs them (the dynamic
        // schedule claims through the store, static shards are fixed), so they form on a thread
        // of this rank's, over a store connection of its own (a c10d store blocks every caller of
        // a connection while one of them waits for a key), and the first collective waits for
        // them (awaitCommunicators): that wait is in its time, so comm() counts it.
        m_comms.backend = backend;
        if (holdConnect.count() > 0 || holdUntilCollective) { // said here, before the first collective can say it waits
            const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before its process groups "
                                     + (holdUntilCollective ? std::string("until its first collective") : "for " + std::to_string(holdConnect.count()) + " ms")
                                     + " (CLUSTERPPL_TEST_HOLD_CONNECT)\n";
            (void)!::write(2, line.data(), line.size());
        }
        // Tolerant: a rank already lost while the watchdog's star formed (rank 0 announces it as
        // the star stands) would only make Gloo's rendezvous wait --timeout for it: no groups form
        // here; the first collective finds the loss pending and regroups the survivors.
        if (m_tolerant && m_lossEpoch.load() > 0) {
            log.mark("returned");
            return;
        }
        m_connecting = std::make_shared<Connecting>();
        m_connectThread = std::thread([c = m_connecting, b, log, hold = holdConnect, untilCollective = holdUntilCollective, addr = id.masterAddr,
                                       port = m_store->port(), timeout = o.timeout]() mutable {
            Communicators comms;
            std::exception_ptr error;
            try {
                if (hold.count() > 0 || untilCollective) {
                    std::unique_lock lock(c->mutex);
                    if (untilCollective)
                        c->cv.wait(lock, [&] { return c->awaited; });
                    else
                        c->cv.wait_for(lock, hold, [] { return false; });
                }
                std::unique_ptr<RendezvousStore> store = openTcpStore(addr, port, false, timeout);
                log.mark("own store");
                b.connected = [&log](const char *name) { log.mark(name); };
                comms = makeGlooCommunicators(*store, b);
                log.mark("groups");
            } catch (...) {
                error = std::current_exception();
            }
            const std::lock_guard lock(c->mutex);
            c->comms = std::move(comms);
            c->error = error;
            c->done = true;
            c->cv.notify_all();
        });
        log.mark("returned");
        return;
    }
    if (holdConnect.count() > 0) {
        const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before its process groups for "
                                 + std::to_string(holdConnect.count()) + " ms (CLUSTERPPL_TEST_HOLD_CONNECT)\n";
        (void)!::write(2, line.data(), line.size());
        std::this_thread::sleep_for(holdConnect);
    }
    try {
        b.connected = [&log](const char *name) { log.mark(name); };
        // Tolerant, Gloo: a rank already lost while the watchdog's star formed (rank 0 announces it
        // as the star stands) would only make Gloo's rendezvous wait --timeout for it: this rank
        // goes on without communicators at once, as below.
        if (m_tolerant && backend == "gloo" && m_lossEpoch.load() > 0)
            throw CollectiveError("a rank was lost before the process groups formed");
        Communicators comms = makeCommunicators(backend, b);
        b.connected = nullptr;
        log.mark("groups");
        const std::lock_guard lock(m_commsMutex);
        m_comms = std::move(comms);
    } catch (const CollectiveError &e) {
        // Tolerant, Gloo: a rank lost while the process groups form (its address never comes, or
        // its connection closes) makes Gloo's rendezvous fail after --timeout. Once the watchdog's
        // verdict on it is in, this rank goes on without communicators: its first collective finds
        // the loss pending and regroups the survivors (DynamicSchedule::recover), as for a loss
        // in round 0. (NCCL's init blocks and cannot be abandoned: still fatal.)
        if (!(m_tolerant && backend == "gloo" && awaitLossAfter(0))) {
            m_watchdog->reportFailure(dynamic_cast<const TimeoutError *>(&e) ? Watchdog::kPeerTimeout : Watchdog::kPeerDied, e.what());
            throw;
        }
        const std::lock_guard lock(m_commsMutex);
        m_comms = Communicators{};
        m_comms.backend = backend;
    } catch (const Error &e) {
        m_watchdog->reportFailure(Watchdog::kPeerDied, e.what());
        throw;
    }
}

double DistributedRun::awaitCommunicators()
{
    if (!m_connecting)
        return 0;
    const auto t0 = std::chrono::steady_clock::now();
    Connecting &c = *m_connecting;
    {
        std::unique_lock lock(c.mutex);
        if (!c.done && !c.awaited && std::getenv("CLUSTERPPL_DEBUG_CONNECT")) {
            const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank)
                                     + ": connect awaited   (the first collective waits for the process groups)\n";
            (void)!::write(2, line.data(), line.size());
        }
        c.awaited = true;
        c.cv.notify_all();
        while (!c.done) {
            if (!m_tolerant) {
                c.cv.wait(lock);
                continue;
            }
            // Tolerant: a rank lost while the groups form never connects; the survivors regroup
            // without waiting for Gloo's rendezvous to time out (the thread is abandoned).
            if (lossPending()) {
                lock.unlock();
                abandonConnecting();
                throw RankLostError("rank " + std::to_string(m_rank) + ": a rank was lost while the process groups formed");
            }
            c.cv.wait_for(lock, std::chrono::milliseconds(50));
        }
    }
    m_connectThread.join();
    const std::shared_ptr<Connecting> done = std::exchange(m_connecting, nullptr);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (done->error) {
        try {
            std::rethrow_exception(done->error);
        } catch (const CollectiveError &e) {
            // As when they formed in the constructor: a tolerant run whose lost rank is the cause
            // goes on without communicators (the caller regroups), anything else fails the run
            // with Gloo's reason, and the others are told.
            if (m_tolerant && awaitLossAfter(m_epoch))
                throw RankLostError("rank " + std::to_string(m_rank) + ": " + e.what());
            m_watchdog->reportFailure(dynamic_cast<const TimeoutError *>(&e) ? Watchdog::kPeerTimeout : Watchdog::kPeerDied, e.what());
            throw;
        } catch (const Error &e) {
            m_watchdog->reportFailure(Watchdog::kPeerDied, e.what());
            throw;
        }
    }
    const std::lock_guard lock(m_commsMutex); // the pointers only: backend() is read meanwhile
    m_comms.world = std::move(done->comms.world);
    m_comms.group = std::move(done->comms.group);
    m_comms.leaders = std::move(done->comms.leaders);
    return waited;
}

void DistributedRun::abandonConnecting() noexcept
{
    if (!m_connecting)
        return;
    bool done = false;
    {
        const std::lock_guard lock(m_connecting->mutex);
        done = m_connecting->done;
    }
    if (done) {
        m_connectThread.join();
        // Never destroyed: a Gloo thread may still wait in them for a lost rank (as regroup()'s).
        static auto *abandoned = new std::vector<std::shared_ptr<Connecting>>();
        abandoned->push_back(std::move(m_connecting));
    } else {
        m_connectThread.detach(); // it owns what it uses (c10d, its own store connection), and ends with Gloo's timeout
    }
    // Either way Gloo's threads and a store client's run on: the process ends without its static
    // destructors (process_exit.h; one ran LibTorch's under the detached thread's unwinding).
    noteThreadLeftRunning();
    m_connecting.reset();
}

Communicators DistributedRun::makeCommunicators(const std::string &backend, const BackendOptions &b)
{
    return backend == "nccl" ? makeNcclCommunicators(*m_store, b) : makeGlooCommunicators(*m_store, b);
}

std::vector<Watchdog::Loss> DistributedRun::lossesSince(int since)
{
    const std::lock_guard lock(m_lossMutex);
    std::vector<Watchdog::Loss> out;
    for (const auto &l : m_losses)
        if (l.epoch > since)
            out.push_back(l);
    return out;
}

bool DistributedRun::awaitLossAfter(int epoch)
{
    // The deadline alone is not enough when the hub is lost: the election, and the new hub's wait
    // for survivors that do not reconnect, may take --timeout themselves before the verdict comes
    // (a rank lost together with the hub). Failing first would get this live rank declared lost
    // for its own failure report; the election is bounded on its own (watchdog.h).
    const auto until = std::chrono::steady_clock::now() + m_timeout + std::chrono::seconds(2);
    while (m_lossEpoch.load() <= epoch && (hubElection() || std::chrono::steady_clock::now() < until))
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return m_lossEpoch.load() > epoch;
}

void DistributedRun::regroup(int epoch, const std::vector<int> &members)
{
    CPPL_ENFORCE(m_tolerant && epoch > m_epoch && !members.empty(), "regroup without a newer epoch");
    const auto me = std::find(members.begin(), members.end(), m_rank);
    CPPL_ENFORCE(me != members.end(), "regroup without this rank");
    // Node groups as they were, minus the lost ranks, renumbered in the members' order; a group
    // left empty disappears, and each group's lowest member leads it.
    RankGroups g;
    g.groupOf.assign(members.size(), 0);
    for (const auto &old : m_groups.groups) {
        std::vector<int> kept;
        for (int r : old)
            if (const auto it = std::find(members.begin(), members.end(), r); it != members.end())
                kept.push_back(static_cast<int>(it - members.begin()));
        if (kept.empty())
            continue;
        std::sort(kept.begin(), kept.end());
        for (int k : kept)
            g.groupOf[static_cast<std::size_t>(k)] = static_cast<int>(g.groups.size());
        g.groups.push_back(std::move(kept));
    }
    abandonConnecting(); // process groups still forming (or formed, never used) over the old members
    BackendOptions b = m_backendOptions;
    b.rank = static_cast<int>(me - members.begin());
    b.worldSize = static_cast<int>(members.size());
    b.groups = std::move(g);
    b.epoch = epoch;
    b.storePrefix = "cppl/epoch" + std::to_string(epoch) + "/gloo/";
    Communicators fresh;
    if (m_backendName == "nccl") {
        // The old communicators leave m_comms (the watchdog's abort no longer reaches them) for
        // the backend, which aborts or shrinks them on this thread: no concurrent NCCL calls.
        Communicators old;
        {
            const std::lock_guard lock(m_commsMutex);
            old = std::move(m_comms);
            m_comms = Communicators{};
        }
        m_blockingRegroup.store(true);
        if (m_lossEpoch.load() > epoch) {
            m_blockingRegroup.store(false);
            for (Communicator *c : {old.leaders.get(), old.group.get(), old.world.get()})
                if (c)
                    c->abort(); // never finalized: a peer is gone
            throw CollectiveError("rank " + std::to_string(m_rank) + ": another rank was lost before the survivors rebuilt their NCCL "
                                  + "communicators; a second loss during that rebuild is not survivable with NCCL");
        }
        try {
            fresh = regroupNcclCommunicators(*m_store, b, std::move(old), m_members, members);
        } catch (...) {
            m_blockingRegroup.store(false);
            throw;
        }
        m_blockingRegroup.store(false);
        const std::lock_guard lock(m_commsMutex);
        m_comms = std::move(fresh);
    } else {
        fresh = makeCommunicators(m_backendName, b);
        // The old communicators may still have an operation in a Gloo thread that waits for the
        // lost rank until the timeout; destroying them would join that thread. They are kept,
        // unreachable from here, until the process exits.
        static auto *abandoned = new std::vector<Communicators>();
        noteThreadLeftRunning(); // their Gloo threads: the process ends without its static destructors (process_exit.h)
        const std::lock_guard lock(m_commsMutex);
        abandoned->push_back(std::move(m_comms));
        m_comms = std::move(fresh);
    }
    m_members = members;
    m_epochRank = b.rank;
    m_epoch = epoch;
}

DistributedRun::~DistributedRun()
{
    // The communicators go first, while the watchdog still watches (a peer that dies during the
    // finalize ends this process through it). A run that finished finalizes and destroys them
    // (children before the parent); one that failed aborts them, as NCCL asks after an error.
    // Process groups still forming in the background (the run failed before its first collective)
    // are left to their thread.
    abandonConnecting();
    {
        const std::lock_guard lock(m_commsMutex);
        if (!m_finished)
            for (Communicator *c : {m_comms.leaders.get(), m_comms.group.get(), m_comms.world.get()})
                if (c)
                    c->abort();
        m_comms.leaders.reset();
        m_comms.group.reset();
        m_comms.world.reset();
    }
    // The watchdog's thread runs this object's handlers (leave(), the loss handler: m_losses,
    // m_lossMutex, m_lossEpoch): it is joined here, while they exist. As a member it was joined
    // only after the members declared after it were destroyed, and a verdict that reached a rank
    // leaving after its own failure (a tolerant run) pushed into a destroyed m_losses.
    m_watchdog.reset();
}

void DistributedRun::abortCommunicators() noexcept
{
    const std::unique_lock lock(m_commsMutex, std::try_to_lock); // never wait: the process is leaving
    if (!lock.owns_lock())
        return;
    for (Communicator *c : {m_comms.world.get(), m_comms.group.get(), m_comms.leaders.get()})
        if (c)
            c->abort();
}

void DistributedRun::reduceThroughTopology(std::span<std::int64_t> words)
{
    if (m_topology == Topology::Flat) {
        if (m_inGather)
            dieIfTold("gather");
        m_comms.world->allReduceSum(words);
        return;
    }
    m_comms.group->reduceSum(words, 0);
    if (m_inGather)
        dieIfTold("gather");
    if (m_comms.leaders)
        m_comms.leaders->allReduceSum(words);
    m_comms.group->broadcast(words, 0);
}

void DistributedRun::collect(std::span<std::int64_t> words)
{
    try {
        reduceThroughTopology(words);
    } catch (const RankLostError &) {
        throw;
    } catch (const CollectiveError &e) {
        if (!m_tolerant) {
            // Gloo may see a dead peer's closed socket a few milliseconds before rank 0's watchdog
            // tells this rank which rank died and why. Give the watchdog that moment: its verdict
            // ends the process from its own thread with the cause ("rank 2 (host) died: ..."), the
            // same line every other survivor prints, rather than this rank's "gloo reduce failed".
            const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(m_timeout, std::chrono::seconds(2));
            while (std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            throw;
        }
        // Gloo may see the dead peer's closed socket before the watchdog's hub tells this rank,
        // and a stopped peer times out here about when it does there: wait for the verdict.
        if (awaitLossAfter(m_epoch))
            throw RankLostError(std::string("rank ") + std::to_string(m_rank) + ": " + e.what());
        throw;
    }
}

void DistributedRun::allReduce(std::span<std::int64_t> words, CollectiveTiming *timing)
{
    // One collective per round: the words, plus a slot per rank where each writes the time it
    // arrived (on the watchdog hub's clock, through the offset the watchdog measured: rank 0's
    // until it is lost, then the new hub's). After the SUM every
    // rank knows when the last one arrived: its wait is last - mine, the rest of the call transfer.
    // A RoundPipeline calls this on its own thread (never two at once, never beside the gather).
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const std::int64_t arrival = nowOnRank0Ns();
    if (lossPending())
        throw RankLostError("rank " + std::to_string(m_rank) + ": a rank was lost before this collective");
    // The first collective waits for the process groups formed in the background (if they are not
    // ready yet): part of its duration, and this rank arrives for the others only once it can take
    // part, so that wait counts as waiting for the last rank (account()).
    const double connectWait = awaitCommunicators();
    m_buffer.assign(words.size() + m_members.size(), 0);
    std::copy(words.begin(), words.end(), m_buffer.begin());
    m_buffer[words.size() + static_cast<std::size_t>(m_epochRank)] = connectWait > 0 ? nowOnRank0Ns() : arrival;
    collect(m_buffer);
    if (m_testSlowCollective.count() > 0) // CLUSTERPPL_TEST_SLOW_COLLECTIVE: a slow network, for tests of the overlap
        std::this_thread::sleep_for(m_testSlowCollective);
    CollectiveTiming t;
    t.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    std::copy(m_buffer.begin(), m_buffer.begin() + static_cast<std::ptrdiff_t>(words.size()), words.begin());
    t.arrivalNs = arrival;
    t.lastArrivalNs = *std::max_element(m_buffer.begin() + static_cast<std::ptrdiff_t>(words.size()), m_buffer.end());
    t.payloadBytes = static_cast<std::int64_t>(m_buffer.size() * sizeof(std::int64_t));
    t.connectSeconds = connectWait;
    if (timing)
        *timing = t;
    else
        account(t, arrival, t.seconds);
}

void DistributedRun::account(const CollectiveTiming &t, std::int64_t blockedFromNs, double blockedSeconds)
{
    const double wait = std::clamp(static_cast<double>(t.lastArrivalNs - blockedFromNs) * 1e-9, 0.0, blockedSeconds);
    m_comm.waitSeconds += wait;
    m_comm.transferSeconds += blockedSeconds - wait;
    m_comm.collectiveSeconds += t.seconds;
    m_comm.collectives += 1;
    m_comm.connectSeconds += t.connectSeconds;
    m_comm.payloadBytes += t.payloadBytes;
}

std::int64_t DistributedRun::nowOnRank0Ns() const
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count()
           + m_watchdog->clockOffsetNs();
}

std::vector<RankReport> DistributedRun::gather(const RankReport &mine)
{
    constexpr std::size_t K = 12;
    const std::size_t n = m_members.size();
    if (lossPending())
        throw RankLostError("rank " + std::to_string(m_rank) + ": a rank was lost before the closing gather");
    dieIfTold("closing");
    (void)awaitCommunicators(); // a run without rounds: the first collective
    std::vector<std::int64_t> rows(n * K, 0);
    auto ns = [](double s) { return static_cast<std::int64_t>(s * 1e9); };
    std::int64_t *row = rows.data() + static_cast<std::size_t>(m_epochRank) * K;
    row[0] = mine.tokens;
    row[1] = mine.windows;
    row[2] = mine.rounds;
    row[3] = mine.payloadBytes;
    row[4] = ns(mine.computeSeconds);
    row[5] = ns(mine.waitSeconds);
    row[6] = ns(mine.transferSeconds);
    row[7] = ns(mine.wallSeconds);
    row[8] = 1; // present
    row[9] = ns(clockOffsetSeconds());
    row[10] = ns(clockUncertaintySeconds());
    row[11] = ns(mine.collectiveSeconds);
    {
        m_inGather = true;
        const struct Leave { bool &flag; ~Leave() { flag = false; } } leave{m_inGather}; // also when collect() throws
        collect(rows);
    }
    dieIfTold("gathered");
    std::vector<RankReport> out;
    for (std::size_t i = 0; i < n; ++i) {
        const int r = m_members[i];
        const std::int64_t *x = rows.data() + i * K;
        if (x[8] != 1) // each rank writes only its own row: anything else came over the wire broken
            throw ProtocolError("rank " + std::to_string(m_rank) + ": the report of rank " + std::to_string(r) + " ("
                                + m_hosts[static_cast<std::size_t>(r)] + ") arrived malformed in the gather (presence word "
                                + std::to_string(x[8]) + ", expected 1): do all ranks run the same agent version?");
        RankReport rep;
        rep.rank = r;
        rep.host = m_hosts[static_cast<std::size_t>(r)];
        rep.group = m_groups.groupOf[static_cast<std::size_t>(r)];
        rep.tokens = x[0];
        rep.windows = x[1];
        rep.rounds = x[2];
        rep.payloadBytes = x[3];
        rep.computeSeconds = static_cast<double>(x[4]) * 1e-9;
        rep.waitSeconds = static_cast<double>(x[5]) * 1e-9;
        rep.transferSeconds = static_cast<double>(x[6]) * 1e-9;
        rep.wallSeconds = static_cast<double>(x[7]) * 1e-9;
        rep.clockOffsetSeconds = static_cast<double>(x[9]) * 1e-9;
        rep.clockUncertaintySeconds = static_cast<double>(x[10]) * 1e-9;
        rep.collectiveSeconds = static_cast<double>(x[11]) * 1e-9;
        out.push_back(rep);
    }
    return out;
}

double DistributedRun::clockOffsetSeconds() const
{
    return static_cast<double>(m_watchdog->clockOffsetNs()) * 1e-9;
}

double DistributedRun::clockUncertaintySeconds() const
{
    return static_cast<double>(m_watchdog->clockUncertaintyNs()) * 1e-9;
}

void DistributedRun::reportFailure(int exitCode, const std::string &message, bool runWide)
{
    if (m_watchdog)
        m_watchdog->reportFailure(exitCode, message, runWide);
}

void DistributedRun::finish()
{
    m_finished = true;
    holdBeforeFinish();
    if (m_watchdog)
        m_watchdog->finish();
}

void DistributedRun::dieIfTold(std::string_view point) const
{
    if (m_testDie != point)
        return;
    const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": killing itself (SIGKILL) at \"" + std::string(point)
                             + "\" of the closing gather (CLUSTERPPL_TEST_DIE)\n";
    (void)!::write(2, line.data(), line.size());
    ::raise(SIGKILL);
}

void DistributedRun::holdBeforeFinish() const
{
    // CLUSTERPPL_TEST_HOLD_FINISH=R:MS[,R:MS...]: rank R says so and waits MS ms before it tells
    // its watchdog that it finished (the reporting rank: after the result is written and
    // cppl/reported set), where a test kills it; R:hub waits instead (up to 120 s) until its
    // watchdog follows a hub other than rank 0 and no election is under way: a rank slow to see
    // the result written, still watching when the hub is lost.
    for (const FaultHooks::FinishHold &hold : faultHooks().holdFinish) {
        if (hold.rank != m_rank)
            continue;
        sayHook("clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before it finishes "
                + (hold.untilHub ? std::string("until its watchdog has a new hub") : "for " + std::to_string(hold.ms.count()) + " ms")
                + " (CLUSTERPPL_TEST_HOLD_FINISH)");
        if (!hold.untilHub) {
            std::this_thread::sleep_for(hold.ms);
            return;
        }
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
        while (m_watchdog && (m_watchdog->hub() == 0 || m_watchdog->electing()) && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
    }
}

} // namespace cppl::agent::dist
