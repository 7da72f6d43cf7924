// SPDX-License-Identifier: MIT
// Joining a run: DistributedRun's constructor as its four steps (connect the store, rendezvous,
// start the watchdog, make the communicators), and the process groups formed in the background.
// The collectives, regrouping and the closing gather are in distributed_run.cpp.
#include "distributed_run.h"

#include "fd_limit.h"
#include "rendezvous_store.h"
#include "watchdog.h"
#include "watchdog_mesh.h"

#include "eval/tensor_parallel.h"
#include "tensor_parallel_nccl.h"

#include "exit_codes.h"
#include "fault_hooks.h"
#include "process_exit.h"

#include "cppl/cluster_profile.h"
#include "cppl/errors.h"
#include "cppl/host.h"

#include <csignal>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
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
const std::string kRendezvousVerdictKey = "cppl/rendezvous-failed";
/// Counts the ranks that have read every arrival (awaitArrivalsRead).
const std::string kArrivalsReadKey = "cppl/arrivals-read";

/// Several ranks over Gloo need Gloo in this agent (one built against a pip torch may lack it):
/// said at once by every rank, as the configuration error it is. Found only when the communicators
/// are made, it was a rank's failure, and under --on-rank-loss continue the other ranks went on
/// without it.
void requireGloo(const DistributedOptions &o, const C10d &c10d)
{
    if (const bool gloo = o.backend == "gloo" || (o.backend == "auto" && !o.cudaDevice); gloo && o.identity.worldSize > 1)
        if (const std::string why = c10d.glooUnavailableReason(); !why.empty())
            throw ConfigError("backend gloo with " + std::to_string(o.identity.worldSize) + " ranks: " + why);
}

/// --tensor-parallel @p n: the node groups of the leaders alone (original numbering; a group left
/// without a leader disappears); a follower's group is its leader's.
RankGroups leadersOnly(const RankGroups &all, int n)
{
    if (n == 1)
        return all;
    RankGroups g;
    g.groupOf.assign(all.groupOf.size(), 0);
    for (const auto &old : all.groups) {
        std::vector<int> leaders;
        for (int r : old)
            if (r % n == 0)
                leaders.push_back(r);
        if (leaders.empty())
            continue;
        for (int leader : leaders)
            for (int m = 0; m < n; ++m)
                g.groupOf[static_cast<std::size_t>(leader + m)] = static_cast<int>(g.groups.size());
        g.groups.push_back(std::move(leaders));
    }
    return g;
}

/// Rank 0's watchdog listener between the store and the star: closed unless the watchdog took it.
struct StarListener
{
    int fd = -1;
    StarListener() = default;
    StarListener(const StarListener &) = delete;
    StarListener &operator=(const StarListener &) = delete;
    ~StarListener()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

} // namespace

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

struct DistributedRun::StoreStep
{
    /// MASTER_ADDR and MASTER_PORT: where every rank reaches the store. A numeric loopback address
    /// also keeps a served store to this host's ranks (bound there, not on every interface).
    std::string masterAddr;
    int masterPort = 0;
    /// Rank 0 without TORCHELASTIC_USE_AGENT_STORE: this process serves the store, which leaves with it.
    bool serve = false;
    /// The watchdog mesh's links this rank will hold (0 without a mesh): with the sockets every
    /// peer costs, checked against the open-file limit now, not met as EMFILE half-way through
    /// the connections (fd_limit.h).
    int meshPeers = 0;
};

struct DistributedRun::RendezvousStep
{
    /// This rank's host name, announced with its arrival: node groups (by-host) and messages name it.
    std::string host;
    /// A rank whose wait timed out asks a fresh connection there who is missing: its own still waits.
    std::string masterAddr;
    /// Where this rank's model runs, "cuda" or "cpu", announced with its arrival: --backend auto
    /// follows it, so every rank must say the same (deviceKindProblem).
    std::string kind;
};

struct DistributedRun::WatchdogStep
{
    /// Where the other ranks reach this rank's watchdog, should it be or become the hub.
    std::string advertise;
    /// A tolerant run whose store outlives every rank (a launcher serves it) survives rank 0 too:
    /// the watchdog's thread then holds a store connection of its own to elect a new hub
    /// (watchdog.h), at masterAddr:masterPort.
    bool electsHubs = false;
    std::string masterAddr;
    int masterPort = 0;
    /// CLUSTERPPL_TEST_HOLD_WATCHDOG (tests): join the star this much later, a rank slow to get there.
    std::chrono::milliseconds hold{0};
};

struct DistributedRun::CommunicatorStep
{
    /// "gloo" or "nccl" (auto resolved: nccl when the model is on a GPU). Anything else is refused
    /// here, after the watchdog started, so that every rank hears of it.
    std::string backend;
    /// The data-parallel communicators: the int64 SUM of the exact words over every rank, through
    /// the topology (world, or node group and leaders). Its rank, groups and store prefix change
    /// when a rank is lost (regroup()).
    BackendOptions dataParallel;
    // The tensor-parallel group (formTensorParallelGroup(), made later by the evaluation) uses the
    // same options (Gloo's, or NCCL's GPU and timeout) under a prefix of its own; it reduces
    // activations inside a forward pass, never the exact words: those stay here, one rank per
    // group contributing.
    /// Gloo: form them on a thread of this rank's while the caller goes on (loads, computes round
    /// 0); the first collective waits for them. False: here (comm-check: its groups' errors at
    /// once). NCCL's always form here.
    bool inBackground = true;
    /// The background thread connects to the store there on its own: a c10d client blocks every
    /// caller of a connection while one of them waits for a key.
    std::string masterAddr;
    /// CLUSTERPPL_TEST_HOLD_CONNECT (tests): form them this much later, or (holdUntilCollective)
    /// only once the first collective asks for them.
    std::chrono::milliseconds hold{0};
    bool holdUntilCollective = false;
};

DistributedRun::DistributedRun(const DistributedOptions &o, const C10d &c10d)
    : m_rank(o.identity.rank), m_world(o.identity.worldSize), m_tensorParallel(o.tensorParallel), m_topology(o.topology), m_c10d(c10d),
      m_timeout(o.timeout), m_tolerant(o.tolerateRankLoss)
{
    if (m_tensorParallel < 1 || m_world % m_tensorParallel != 0)
        throw ConfigError("--tensor-parallel " + std::to_string(m_tensorParallel) + " does not divide the world of " + std::to_string(m_world)
                          + " ranks: give a world size that is a multiple of it");
    const RankIdentity &id = o.identity;
    ConnectLog log(id.rank);
    const std::string host = o.hostname.empty() ? localHostName() : o.hostname;
    const FaultHooks &hooks = faultHooks(); // the tests' fault hooks (fault_hooks.h) that act here
    m_testSlowCollective = hooks.slowCollective;
    m_testDie = hooks.deathPoint(m_rank);
    requireGloo(o, c10d);
    // A write to a socket whose peer is gone raises SIGPIPE, and its default action ends the
    // process. Gloo writes its pairs with writev(), without MSG_NOSIGNAL (Python, torch's usual
    // host, ignores SIGPIPE from the start; this C++ process did not): a rank whose Gloo thread
    // wrote to a dead peer after the kernel reset the connection died of "signal 13", a survivor
    // killed by the loss it should have survived; when the dead peer was the watchdog's hub, its
    // death went unseen and the new hub declared it lost after --timeout ("did not reconnect").
    // Ignored, the write fails with EPIPE, which is a collective error like any other.
    std::signal(SIGPIPE, SIG_IGN);
    m_servesStore = id.rank == 0 && !o.storeServedElsewhere;
    const bool meshed = m_tolerant && o.storeServedElsewhere && id.worldSize >= 3;
    connectStore({.masterAddr = id.masterAddr,
                  .masterPort = id.masterPort,
                  .serve = m_servesStore,
                  .meshPeers = meshed ? static_cast<int>(meshPeers(id.rank, id.worldSize, meshCandidates()).size()) : 0});
    log.mark("store");
    // Rank 0's watchdog listens before rank 0 arrives (Watchdog::listenForStar): a rank 0 lost
    // after the rendezvous is then seen at once by the others (refused), not after --timeout.
    const std::string advertise = isLoopbackHost(id.masterAddr) ? "127.0.0.1" : host;
    StarListener star;
    if (id.rank == 0)
        star.fd = Watchdog::listenForStar(*m_store, advertise);
    // CLUSTERPPL_TEST_DEVICE_KIND: the tests' stand-in for a rank that sees a GPU (this LibTorch may have no CUDA).
    const bool cuda = o.cudaDevice || hooks.cudaKindRank == id.rank;
    rendezvous({.host = host, .masterAddr = id.masterAddr, .kind = cuda ? "cuda" : "cpu"});
    log.mark("rendezvous");
    // Refused on every rank at once, before any communicator: a node that sees no GPU would pick
    // Gloo under --backend auto while the others pick NCCL, and both would wait out --timeout.
    if (const std::string problem = deviceKindProblem(m_kinds, m_hosts, o.backend); !problem.empty()) {
        // Every rank reads the same arrivals and refuses alike; the store leaves with rank 0, so it
        // waits (bounded) until each has read them, or the others would see a lost store instead.
        if (m_servesStore)
            awaitArrivalsRead(std::chrono::seconds(10));
        throw ConfigError(problem);
    }
    // --tensor-parallel: the data-parallel side is the groups' leaders (their followers follow
    // them: tensor_parallel_driver.h); without it, every rank.
    m_groups = leadersOnly(parseRankGroups(o.groups, m_world, m_hosts), m_tensorParallel);
    for (int r = 0; r < m_world; r += m_tensorParallel)
        m_members.push_back(r);
    m_epochRank = m_rank / m_tensorParallel;
    startWatchdog({.advertise = advertise,
                   .electsHubs = m_tolerant && o.storeServedElsewhere,
                   .masterAddr = id.masterAddr,
                   .masterPort = id.masterPort,
                   .hold = hooks.holdWatchdog.forRank(id.rank)},
                  star.fd);
    log.mark("watchdog");
    makeCommunicators({.backend = o.backend == "auto" ? std::string(o.cudaDevice ? "nccl" : "gloo") : o.backend,
                       .dataParallel = dataParallelOptions(o, host),
                       .inBackground = o.connectInBackground,
                       .masterAddr = id.masterAddr,
                       .hold = hooks.holdConnect.forRank(id.rank),
                       .holdUntilCollective = hooks.holdConnectUntilCollective >= 0 && hooks.holdConnectUntilCollective == id.rank},
                      log);
}

void DistributedRun::connectStore(const StoreStep &step)
{
    // Every peer costs this rank a socket or more: a limit too low for the run fails here, clearly,
    // not later with EMFILE in the middle of the connections (fd_limit.h; raised at the start).
    requireFileLimit(m_rank, m_world, step.serve, step.meshPeers);
    // A store at a numeric loopback address is for this host's ranks only: served there, not on
    // every interface ("localhost" may resolve to either family, so it keeps every interface).
    const bool loopbackStore = isLoopbackHost(step.masterAddr) && step.masterAddr != "localhost";
    m_store = m_c10d.openStore(step.masterAddr, step.masterPort, step.serve, m_timeout, loopbackStore ? step.masterAddr : std::string());
    m_storeAddress = m_store->address();
}

void DistributedRun::rendezvous(const RendezvousStep &step)
{
    m_store->set("cppl/arrive/" + std::to_string(m_rank), std::to_string(m_world) + "\t" + step.host + "\t" + step.kind);
    std::vector<std::string> keys;
    for (int r = 0; r < m_world; ++r)
        keys.push_back("cppl/arrive/" + std::to_string(r));
    // The store's blocking wait: every rank leaves the moment the last one arrives. (Polling with a
    // backoff up to 50 ms let the early ranks oversleep the last arrival by up to 50 ms each: the
    // largest part of the ranks' start skew in bench_comm, docs/communication.md.)
    if (!m_store->waitBlocking(keys, m_timeout))
        failRendezvous(step, keys);
    for (int r = 0; r < m_world; ++r) {
        const std::string v = m_store->get(keys[static_cast<std::size_t>(r)], m_timeout).value_or("");
        if (v == kRendezvousFailed) // rank 0 gave up on it as this rank woke
            throw TimeoutError(m_store->get(kRendezvousVerdictKey, m_timeout).value_or("rendezvous failed"));
        const auto tab = v.find('\t');
        const std::string theirs = v.substr(0, tab);
        if (theirs != std::to_string(m_world))
            throw CollectiveError("rank " + std::to_string(r) + " joined the rendezvous at " + m_storeAddress + " with WORLD_SIZE " + theirs
                                  + ", this rank has " + std::to_string(m_world) + "; start every rank with the same world size");
        const std::string rest = tab == std::string::npos ? std::string() : v.substr(tab + 1);
        const auto kindTab = rest.find('\t');
        m_hosts.push_back(rest.substr(0, kindTab));
        m_kinds.push_back(kindTab == std::string::npos ? std::string() : rest.substr(kindTab + 1));
    }
    (void)m_store->add(kArrivalsReadKey, 1);
}

void DistributedRun::awaitArrivalsRead(std::chrono::milliseconds bound)
{
    const auto until = std::chrono::steady_clock::now() + bound;
    while (m_store->add(kArrivalsReadKey, 0) < m_world && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void DistributedRun::failRendezvous(const RendezvousStep &step, const std::vector<std::string> &keys)
{
    // This connection still has the wait outstanding, so a fresh one says who is missing.
    std::unique_ptr<RendezvousStore> fresh = m_c10d.openStore(step.masterAddr, m_store->port(), false, std::chrono::seconds(5), {});
    std::vector<int> missing; // never arrived, or filled in by rank 0's verdict
    for (int r = 0; r < m_world; ++r)
        if (const auto &k = keys[static_cast<std::size_t>(r)]; !fresh->check({k}) || fresh->get(k, m_timeout) == kRendezvousFailed)
            missing.push_back(r);
    // Checked after the keys: rank 0 writes its verdict before it fills them in.
    if (fresh->check({kRendezvousVerdictKey})) // rank 0 gave up first and said why
        throw TimeoutError(fresh->get(kRendezvousVerdictKey, m_timeout).value_or("rendezvous failed"));
    const std::string waited = "rendezvous at " + m_storeAddress + " timed out after " + std::to_string(m_timeout.count() / 1000) + " s";
    if (missing.empty())
        throw TimeoutError(waited + " just as the last rank arrived; start the run again (or with a longer --timeout)");
    const std::string msg = waited + ": " + std::to_string(missing.size()) + " of " + std::to_string(m_world) + " ranks never arrived (rank"
                            + (missing.size() > 1 ? "s " : " ") + rankList(missing)
                            + "); check that they were started, with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE";
    if (m_servesStore) {
        // The store leaves with this process: say why, then fill in the missing ranks' keys so
        // that every rank still waiting wakes now (it finds the verdict before their values).
        fresh->set(kRendezvousVerdictKey, msg);
        for (int r : missing)
            fresh->set(keys[static_cast<std::size_t>(r)], kRendezvousFailed);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    throw TimeoutError(msg);
}

void DistributedRun::startWatchdog(const WatchdogStep &step, int &starListener)
{
    std::unique_ptr<RendezvousStore> watchdogStore;
    if (step.electsHubs)
        watchdogStore = m_c10d.openStore(step.masterAddr, step.masterPort, false, m_timeout, {});
    const int me = m_rank;
    auto leave = [this, me](int exitCode, const std::string &message) {
        // From the watchdog thread: say why and leave now; the main thread may be deep in a forward
        // pass or blocked in a collective that will never complete. No NCCL call on the way out:
        // ncclCommAbort of one communicator can block while another's kernel is in flight (the
        // stuck one may be the node group's or the leaders'), and the process's exit tears the
        // CUDA context down, kernels and communicators with it (issue 43, point 4).
        const std::string line = "clusterppl-agent: rank " + std::to_string(me) + ": " + message + "\n";
        std::fflush(stdout);
        std::cerr.flush();
        (void)!::write(2, line.data(), line.size());
        std::_Exit(exitCode);
    };
    Watchdog::LossHandler onLoss;
    m_dataParallelMembers = m_members;
    if (m_tolerant)
        onLoss = [this, leave](const Watchdog::Loss &raw) {
            // --tensor-parallel: a lost rank takes its whole group out, this rank's included.
            if (m_tensorParallel > 1 && raw.rank / m_tensorParallel == m_rank / m_tensorParallel)
                leave(kExitCollective, tensorParallelGroupLost(raw));
            const std::optional<Watchdog::Loss> seen = dataParallelLoss(raw);
            if (!seen)
                return;
            const Watchdog::Loss &loss = *seen;
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
                leave(kExitCollective, "rank " + std::to_string(loss.rank) + " was lost (" + loss.cause
                                               + ") while the survivors rebuilt their NCCL communicators; a second loss during that rebuild "
                                                 "is not survivable with NCCL (ncclCommShrink / ncclCommInitRankConfig block)");
        };
    if (step.hold.count() > 0) {
        const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before the watchdog's star for "
                                 + std::to_string(step.hold.count()) + " ms (CLUSTERPPL_TEST_HOLD_WATCHDOG)\n";
        (void)!::write(2, line.data(), line.size());
        std::this_thread::sleep_for(step.hold);
    }
    m_watchdog = std::make_unique<Watchdog>(*m_store, m_rank, m_hosts, step.advertise, m_timeout,
                                            [leave](const Watchdog::Fatal &f) { leave(f.exitCode, f.message); }, std::move(onLoss),
                                            std::move(watchdogStore), std::exchange(starListener, -1));
}

BackendOptions DistributedRun::dataParallelOptions(const DistributedOptions &o, const std::string &host)
{
    BackendOptions b;
    b.rank = m_epochRank;
    b.worldSize = static_cast<int>(m_members.size());
    b.localRank = o.identity.localRank;
    b.localWorldSize = o.identity.localWorldSize;
    b.cudaDevice = o.cudaDeviceIndex;
    b.hostDevices = o.hostDevices;
    b.groups = m_tensorParallel == 1 ? m_groups : groupsAmong(m_groups, m_members);
    b.topology = m_topology;
    b.timeout = m_timeout;
    b.glooInterface = o.glooInterface;
    b.glooHost = isLoopbackHost(o.identity.masterAddr) ? "127.0.0.1" : host;
    if (m_tolerant)
        b.lossEpoch = &m_lossEpoch;
    return b;
}

void DistributedRun::makeCommunicators(const CommunicatorStep &step, ConnectLog &log)
{
    m_backendOptions = step.dataParallel;
    m_backendName = step.backend;
    if (step.backend != "nccl" && step.backend != "gloo") {
        const ConfigError e("--backend \"" + step.backend + "\" is not one of auto, gloo, nccl");
        m_watchdog->reportFailure(kExitCollective, e.what());
        throw e;
    }
    if (follower()) { // in no data-parallel communicator: its leader speaks for the group
        m_comms.backend = step.backend;
        log.mark("returned");
        return;
    }
    if (step.backend == "gloo" && step.inBackground)
        formInBackground(step, log);
    else
        formNow(step, log);
}

Communicators DistributedRun::formCommunicators(const C10d &c10d, const std::string &backend, RendezvousStore &store,
                                                const BackendOptions &dataParallel)
{
    // The tensor-parallel group is formed apart, by its evaluation (formTensorParallelGroup()).
    return backend == "nccl" ? makeNcclCommunicators(store, dataParallel) : c10d.makeGloo(store, dataParallel);
}

std::string deviceKindProblem(const std::vector<std::string> &kinds, const std::vector<std::string> &hosts, const std::string &backend)
{
    std::map<std::string, std::vector<int>> byKind;
    for (std::size_t r = 0; r < kinds.size(); ++r)
        byKind[kinds[r]].push_back(static_cast<int>(r));
    if (byKind.size() <= 1)
        return {};
    auto who = [&](const std::vector<int> &ranks) {
        std::set<std::string> names;
        for (const int r : ranks)
            names.insert(r < static_cast<int>(hosts.size()) ? hosts[static_cast<std::size_t>(r)] : std::string("?"));
        std::string h;
        for (const auto &n : names)
            h += (h.empty() ? "" : ", ") + n;
        return std::string(ranks.size() > 1 ? "ranks " : "rank ") + rankListText(ranks) + " (" + h + ")";
    };
    std::string said;
    for (const auto &[kind, ranks] : byKind)
        said += (said.empty() ? "" : "; ") + who(ranks) + (kind == "cuda" ? ": the model on a GPU" : kind == "cpu" ? ": the model on the CPU"
                                                                                                           : ": an agent that does not say");
    const bool autoPick = backend == "auto";
    return std::string(autoPick ? "--backend auto: the ranks would not pick the same backend (nccl where the model is on a GPU, gloo "
                                  "where it is on the CPU): "
                                : "the ranks' models are on different kinds of device (their bits would differ): ")
           + said + "; make every host's GPUs visible to its ranks (driver, CUDA_VISIBLE_DEVICES, Slurm's GPU request), or set the "
           + "profile's device (and backend) for every host";
}

std::string tensorParallelHostProblem(const std::vector<std::string> &hosts, int group, int size)
{
    const auto first = hosts.begin() + static_cast<std::ptrdiff_t>(group) * size;
    if (std::all_of(first, first + size, [&](const std::string &h) { return h == *first; }))
        return {};
    std::string where;
    for (int r = group * size; r < (group + 1) * size; ++r)
        where += (where.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " on " + hosts[static_cast<std::size_t>(r)];
    return "tensor-parallel group " + std::to_string(group) + " spans hosts (" + where
           + "): its ranks must be on one host; start a multiple of --tensor-parallel ranks per host (--nproc-per-node)";
}

std::unique_ptr<TensorParallelGroup> DistributedRun::formTensorParallelGroup(int size)
{
    if (size < 1 || m_world % size != 0)
        throw ConfigError("--tensor-parallel " + std::to_string(size) + " does not divide the world of " + std::to_string(m_world)
                          + " ranks: give a world size that is a multiple of it");
    const int g = m_rank / size;
    if (const std::string problem = tensorParallelHostProblem(m_hosts, g, size); !problem.empty())
        throw ConfigError(problem);
    // NCCL: a communicator of the group's own, on the GPUs the data-parallel ones use (the
    // model's, or cuda:LOCAL_RANK when the model is on the CPU); Gloo: host memory only.
    const std::string prefix = "cppl/tp/" + std::to_string(g) + "/", name = "tensor-parallel group " + std::to_string(g);
    auto group = m_backendName == "nccl" ? makeNcclTensorParallelGroup(*m_store, m_backendOptions, prefix, m_rank % size, size, name)
                                         : m_c10d.makeTensorParallel(*m_store, m_backendOptions, prefix, m_rank % size, size, name);
    return m_tolerant ? watchTensorParallelGroup(std::move(group), *this) : std::move(group);
}

void DistributedRun::formInBackground(const CommunicatorStep &step, ConnectLog &log)
{
    // Gloo connects its process groups pair by pair (connectFullMesh, the library's code): the
    // ranks would leave here 40-110 ms apart on a 2-core host even when they left the rendezvous
    // together. Nothing before the first collective needs them (the dynamic schedule claims
    // through the store, static shards are fixed), so they form on a thread of this rank's, over a
    // store connection of its own, and the first collective waits for them (awaitCommunicators):
    // that wait is in its time, so comm() counts it.
    m_comms.backend = step.backend;
    if (step.hold.count() > 0 || step.holdUntilCollective) { // said here, before the first collective can say it waits
        const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before its process groups "
                                 + (step.holdUntilCollective ? std::string("until its first collective") : "for " + std::to_string(step.hold.count()) + " ms")
                                 + " (CLUSTERPPL_TEST_HOLD_CONNECT)\n";
        (void)!::write(2, line.data(), line.size());
    }
    // Tolerant: a rank already lost while the watchdog's star formed (rank 0 announces it as the
    // star stands) would only make Gloo's rendezvous wait --timeout for it: no groups form here;
    // the first collective finds the loss pending and regroups the survivors.
    if (m_tolerant && m_lossEpoch.load() > 0) {
        log.mark("returned");
        return;
    }
    m_connecting = std::make_shared<Connecting>();
    // Nothing of this object's: the thread is left running (abandonConnecting) if the run ends or regroups first.
    m_connectThread = std::thread([c = m_connecting, c10d = m_c10d, step, log, port = m_store->port(), timeout = m_timeout]() mutable {
        Communicators comms;
        std::exception_ptr error;
        try {
            if (step.hold.count() > 0 || step.holdUntilCollective) {
                std::unique_lock lock(c->mutex);
                if (step.holdUntilCollective)
                    c->cv.wait(lock, [&] { return c->awaited; });
                else
                    c->cv.wait_for(lock, step.hold, [] { return false; });
            }
            std::unique_ptr<RendezvousStore> store = c10d.openStore(step.masterAddr, port, false, timeout, {});
            log.mark("own store");
            BackendOptions b = step.dataParallel;
            b.connected = [&log](const char *name) { log.mark(name); };
            comms = formCommunicators(c10d, step.backend, *store, b);
            log.mark("groups");
        } catch (...) { // rethrown on the main thread, by the first collective (awaitCommunicators)
            error = std::current_exception();
        }
        const std::lock_guard lock(c->mutex);
        c->comms = std::move(comms);
        c->error = error;
        c->done = true;
        c->cv.notify_all();
    });
    log.mark("returned");
}

void DistributedRun::formNow(const CommunicatorStep &step, ConnectLog &log)
{
    if (step.hold.count() > 0) {
        const std::string line = "clusterppl-agent: rank " + std::to_string(m_rank) + ": holding before its process groups for "
                                 + std::to_string(step.hold.count()) + " ms (CLUSTERPPL_TEST_HOLD_CONNECT)\n";
        (void)!::write(2, line.data(), line.size());
        std::this_thread::sleep_for(step.hold);
    }
    try {
        BackendOptions b = step.dataParallel;
        b.connected = [&log](const char *name) { log.mark(name); };
        // Tolerant, Gloo: a rank already lost while the watchdog's star formed (rank 0 announces it
        // as the star stands) would only make Gloo's rendezvous wait --timeout for it: this rank
        // goes on without communicators at once, as below.
        if (m_tolerant && step.backend == "gloo" && m_lossEpoch.load() > 0)
            throw CollectiveError("a rank was lost before the process groups formed");
        Communicators comms = formCommunicators(m_c10d, step.backend, *m_store, b);
        log.mark("groups");
        const std::lock_guard lock(m_commsMutex);
        m_comms = std::move(comms);
    } catch (const CollectiveError &e) {
        // Tolerant, Gloo: a rank lost while the process groups form (its address never comes, or
        // its connection closes) makes Gloo's rendezvous fail after --timeout. Once the watchdog's
        // verdict on it is in, this rank goes on without communicators: its first collective finds
        // the loss pending and regroups the survivors (DynamicSchedule::recover), as for a loss
        // in round 0. (NCCL's init blocks and cannot be abandoned: still fatal.)
        if (!(m_tolerant && step.backend == "gloo" && awaitLossAfter(0))) {
            m_watchdog->reportFailure(dynamic_cast<const TimeoutError *>(&e) ? kExitTimeout : kExitCollective, e.what());
            throw;
        }
        const std::lock_guard lock(m_commsMutex);
        m_comms = Communicators{};
        m_comms.backend = step.backend;
    } catch (const Error &e) {
        m_watchdog->reportFailure(kExitCollective, e.what());
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
            m_watchdog->reportFailure(dynamic_cast<const TimeoutError *>(&e) ? kExitTimeout : kExitCollective, e.what());
            throw;
        } catch (const Error &e) {
            m_watchdog->reportFailure(kExitCollective, e.what());
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

} // namespace cppl::agent::dist
