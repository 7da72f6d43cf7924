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

/// Aborts @p c's communicators, one with an operation in flight first: an NCCL abort can block
/// while another communicator of the process has a kernel in flight (issue 43, point 4).
void abortBusyFirst(Communicators &c)
{
    std::vector<Communicator *> all;
    for (Communicator *x : {c.leaders.get(), c.group.get(), c.world.get()})
        if (x)
            all.push_back(x);
    std::stable_partition(all.begin(), all.end(), [](Communicator *x) { return x->busy(); });
    for (Communicator *x : all)
        x->abort();
}

} // namespace

const char *topologyName(Topology t) noexcept
{
    return t == Topology::Flat ? "flat" : "hierarchical";
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

RankGroups groupsAmong(const RankGroups &groups, const std::vector<int> &members)
{
    // Node groups as they were, minus the ranks not in members, renumbered in the members' order;
    // a group left empty disappears, and each group's lowest member leads it.
    RankGroups g;
    g.groupOf.assign(members.size(), 0);
    for (const auto &old : groups.groups) {
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
    return g;
}

void DistributedRun::regroup(int epoch, const std::vector<int> &members)
{
    CPPL_ENFORCE(m_tolerant && epoch > m_epoch && !members.empty(), "regroup without a newer epoch");
    const auto me = std::find(members.begin(), members.end(), m_rank);
    CPPL_ENFORCE(me != members.end(), "regroup without this rank");
    RankGroups g = groupsAmong(m_groups, members);
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
            abortBusyFirst(old); // never finalized: a peer is gone
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
        fresh = formCommunicators(m_c10d, m_backendName, *m_store, b);
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
            abortBusyFirst(m_comms);
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
            // An NCCL rank that gave up first (a timeout or an error) wrote why to the store before
            // its abort broke this rank's connection: read it now, while its process (maybe the
            // store's) still waits below. (Gloo has no such race: a rank whose collective times
            // out aborts nothing, and eval reports its failure through the watchdog before it
            // exits and its connections close.)
            const bool timedOut = dynamic_cast<const TimeoutError *>(&e) != nullptr;
            if (m_cause && m_backendName == "nccl")
                (void)m_cause->fetch(causeBound());
            // Gloo may see a dead peer's closed socket a few milliseconds before rank 0's watchdog
            // tells this rank which rank died and why. Give the watchdog that moment: its verdict
            // ends the process from its own thread with the cause ("rank 2 (host) died: ..."), the
            // same line every other survivor prints, rather than this rank's "gloo reduce failed".
            const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(m_timeout, std::chrono::seconds(2));
            while (std::chrono::steady_clock::now() < until)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (const std::string said = m_cause ? m_cause->withCause(e.what()) : std::string(e.what()); said != e.what()) {
                if (timedOut)
                    throw TimeoutError(said);
                throw CollectiveError(said);
            }
            throw;
        }
        // Gloo may see the dead peer's closed socket before the watchdog's hub tells this rank,
        // and a stopped peer times out here about when it does there: wait for the verdict.
        if (awaitLossAfter(m_epoch))
            throw RankLostError(std::string("rank ") + std::to_string(m_rank) + ": " + e.what());
        throw;
    }
}

namespace {

std::string loadingKey(int rank)
{
    return "cppl/load/loading/" + std::to_string(rank);
}

std::string loadedKey(int rank)
{
    return "cppl/load/loaded/" + std::to_string(rank);
}

} // namespace

void DistributedRun::beginLoad(std::chrono::milliseconds bound)
{
    m_loadStart = std::chrono::steady_clock::now();
    m_loadBound = bound;
    m_store->set(loadingKey(m_rank), "1");
}

void DistributedRun::endLoad()
{
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_loadStart).count();
    m_store->set(loadedKey(m_rank), std::to_string(seconds));
}

void DistributedRun::awaitLoaded()
{
    if (m_loadBound.count() <= 0)
        return;
    // Every rank of the run still in it: the members, and with --tensor-parallel their groups'
    // followers (the members are the leaders).
    std::vector<std::string> keys;
    std::vector<int> ranks;
    for (const int m : m_members)
        for (int k = 0; k < m_tensorParallel; ++k) {
            ranks.push_back(m + k);
            keys.push_back(loadedKey(m + k));
        }
    const auto deadline = m_loadStart + m_loadBound;
    while (!m_store->check(keys)) {
        if (lossPending())
            throw RankLostError("rank " + std::to_string(m_rank) + ": a rank was lost while the ranks loaded their models");
        if (std::chrono::steady_clock::now() >= deadline) {
            std::string late;
            for (const int r : ranks)
                if (!m_store->check({loadedKey(r)}))
                    late += (late.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " (" + m_hosts[static_cast<std::size_t>(r)]
                            + (m_store->check({loadingKey(r)}) ? ")" : ", which never began to load)");
            const auto bound = std::to_string(m_loadBound.count() / 1000);
            throw TimeoutError("the load phase: " + late + " still loading after " + bound + " s (--load-timeout " + bound
                               + "); give the load more time (--load-timeout, the profile's evaluation.load_timeout) or put the "
                                 "model where that host reads it faster");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    m_loadBound = std::chrono::milliseconds(0);
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

namespace {

/// The gather's words per row.
constexpr std::size_t kReportWords = 14;

void putReport(std::int64_t *row, const RankReport &r, double clockOffset, double clockUncertainty)
{
    auto ns = [](double s) { return static_cast<std::int64_t>(s * 1e9); };
    row[0] = r.tokens;
    row[1] = r.windows;
    row[2] = r.rounds;
    row[3] = r.payloadBytes;
    row[4] = ns(r.computeSeconds);
    row[5] = ns(r.waitSeconds);
    row[6] = ns(r.transferSeconds);
    row[7] = ns(r.wallSeconds);
    row[8] = 1; // present
    row[9] = ns(clockOffset);
    row[10] = ns(clockUncertainty);
    row[11] = ns(r.collectiveSeconds);
    row[12] = ns(r.tensorParallelSeconds);
    row[13] = r.tpRank;
}

RankReport takeReport(const std::int64_t *x)
{
    auto s = [](std::int64_t ns) { return static_cast<double>(ns) * 1e-9; };
    RankReport rep;
    rep.tokens = x[0];
    rep.windows = x[1];
    rep.rounds = x[2];
    rep.payloadBytes = x[3];
    rep.computeSeconds = s(x[4]);
    rep.waitSeconds = s(x[5]);
    rep.transferSeconds = s(x[6]);
    rep.wallSeconds = s(x[7]);
    rep.clockOffsetSeconds = s(x[9]);
    rep.clockUncertaintySeconds = s(x[10]);
    rep.collectiveSeconds = s(x[11]);
    rep.tensorParallelSeconds = s(x[12]);
    rep.tpRank = static_cast<int>(x[13]);
    return rep;
}

} // namespace

std::vector<RankReport> DistributedRun::gather(const RankReport &mine, const std::vector<RankReport> &followers)
{
    const auto n = m_members.size(), perGroup = static_cast<std::size_t>(m_tensorParallel);
    CPPL_ENFORCE(followers.size() + 1 == perGroup, "the closing gather needs every follower's row");
    if (lossPending())
        throw RankLostError("rank " + std::to_string(m_rank) + ": a rank was lost before the closing gather");
    dieIfTold("closing");
    awaitLoaded();
    (void)awaitCommunicators(); // a run without rounds: the first collective
    // A row per rank: each leader writes its own and its followers' (their clocks are its host's).
    std::vector<std::int64_t> rows(n * perGroup * kReportWords, 0);
    std::int64_t *row = rows.data() + static_cast<std::size_t>(m_epochRank) * perGroup * kReportWords;
    putReport(row, mine, clockOffsetSeconds(), clockUncertaintySeconds());
    for (std::size_t f = 0; f < followers.size(); ++f)
        putReport(row + (f + 1) * kReportWords, followers[f], clockOffsetSeconds(), clockUncertaintySeconds());
    {
        m_inGather = true;
        const struct Leave { bool &flag; ~Leave() { flag = false; } } leave{m_inGather}; // also when collect() throws
        collect(rows);
    }
    dieIfTold("gathered");
    std::vector<RankReport> out;
    for (std::size_t i = 0; i < n * perGroup; ++i) {
        const int r = m_members[i / perGroup] + static_cast<int>(i % perGroup);
        const std::int64_t *x = rows.data() + i * kReportWords;
        if (x[8] != 1) // each rank writes only its own rows: anything else came over the wire broken
            throw ProtocolError("rank " + std::to_string(m_rank) + ": the report of rank " + std::to_string(r) + " ("
                                + m_hosts[static_cast<std::size_t>(r)] + ") arrived malformed in the gather (presence word "
                                + std::to_string(x[8]) + ", expected 1): do all ranks run the same agent version?");
        RankReport rep = takeReport(x);
        rep.rank = r;
        rep.host = m_hosts[static_cast<std::size_t>(r)];
        rep.group = m_groups.groupOf[static_cast<std::size_t>(r)];
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
