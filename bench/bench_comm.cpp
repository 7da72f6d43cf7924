// SPDX-License-Identifier: MIT
// Communication cost of distributed evaluation, measured with the agent's real rendezvous, Gloo
// communicators and aggregation on loopback, and compute *simulated* by sleeping.
//
// Why sleep: this machine has 2 cores. Ranks that really computed would time-share them, and the
// collectives would then measure the scheduler (a rank waiting for a core looks like a straggler).
// Sleeping for exactly the time a rank would compute its round's tokens at --rate tokens/s frees
// the cores, so what remains in the wait and transfer columns is the real cost of the sync and
// of the imbalance of the batch-aligned shards. At 16 ranks Gloo's own threads still share 2 cores.
//
// Usage: bench_comm [--ranks 2,4,8,16] [--sync 0,4096,DEFAULT,end] [--rate TOK_PER_S] [--seconds S]
//                   [--schedule static,dynamic] [--topology flat,hierarchical] [--slow RANK:FACTOR]
//                   [--overlap on,off] [--on-rank-loss fail,continue]
//                   (--schedule none: static shards without collectives; --on-rank-loss: default
//                   fail, as the documented figures ran; the agent's default is continue with the
//                   dynamic schedule; continue only with the dynamic schedule)
// Each configuration runs world x rate x S tokens (S seconds of ideal compute per rank).
#include "distributed/batch_schedule.h"
#include "distributed/distributed_run.h"
#include "distributed/round_pipeline.h"
#include "distributed/c10d.h"

#include "cppl/sharding.h"
#include "cppl/statistics.h"
#include "cppl/window_plan.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace cppl;
using namespace cppl::agent::dist;

namespace {

struct Config
{
    int world = 2;
    std::string topology = "hierarchical";
    std::string groups = "size:2";
    std::int64_t sync = 0;
    double rate = 50000;
    double seconds = 2;
    std::string schedule = "static";
    int slowRank = -1;      ///< this rank computes at rate / slowFactor
    double slowFactor = 1;
    bool overlap = true;    ///< the agent's --overlap-sync: a round's aggregation behind the next round's compute
    bool tolerant = false;  ///< the agent's --on-rank-loss continue: collectives that a lost rank can abandon (none is lost here)
};

constexpr std::int64_t kContext = 1024;
constexpr std::int64_t kBatch = 1;

WindowPlan planFor(const Config &c)
{
    PlanOptions o;
    o.protocol = Protocol::HfSliding;
    o.context = kContext;
    o.stride = kContext;
    const auto tokens = static_cast<std::int64_t>(c.rate * c.seconds * c.world);
    return planStream(o, tokens);
}

/// One rank: rendezvous, then rounds of (sleep for the round's compute, exact all-reduce).
int child(const Config &c, int rank, int port, const std::string &out, std::chrono::steady_clock::time_point entered)
{
    DistributedOptions o;
    o.identity.rank = rank;
    o.identity.worldSize = c.world;
    o.identity.masterAddr = "127.0.0.1";
    o.identity.masterPort = port;
    o.groups = c.groups;
    o.topology = c.topology == "flat" ? Topology::Flat : Topology::Hierarchical;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(120);
    o.storeServedElsewhere = true;
    o.tolerateRankLoss = c.tolerant;
    DistributedRun run(o, libtorchC10d());
    const auto constructed = std::chrono::steady_clock::now();
    const WindowPlan plan = planFor(c);
    // As the agent does (agent/lib/eval/round_loop.cpp): round r's collective completes once round r+1 is computed.
    RoundPipeline pipe(run, c.overlap);
    // The dynamic schedule is set up before the ranks start computing, as the agent sets it up
    // before its evaluation starts (after the model's load): with its claim thread.
    const std::vector<std::int64_t> tokensOf = batchTokens(plan, kBatch);
    std::optional<DynamicSchedule> dynamic;
    if (c.schedule == "dynamic")
        dynamic.emplace(run, tokensOf, c.sync);
    const double rate = rank == c.slowRank ? c.rate / c.slowFactor : c.rate;
    NllStats stats;
    using clock = std::chrono::steady_clock;
    const auto start = clock::now(); // CLOCK_MONOTONIC: one clock for all ranks on this host
    std::vector<double> blocked;     // the main thread's blocked time in each wait for a round's result
    double lastWaiting = 0;          // ... the last one's part before the last rank's arrival
    auto waitRound = [&] {
        const double w0 = run.comm().waitSeconds, b0 = w0 + run.comm().transferSeconds;
        std::vector<std::int64_t> r = pipe.wait();
        blocked.push_back(run.comm().waitSeconds + run.comm().transferSeconds - b0);
        lastWaiting = run.comm().waitSeconds - w0;
        return r;
    };
    double claimSeconds = 0;
    double compute = 0;
    std::int64_t myTokens = 0;
    // "Compute" @p tokens: sleep for their time at this rank's rate, and add some real numbers.
    // The batches sleep to one chained target, so the scheduler's oversleep (a millisecond, tens of
    // them on a loaded machine) is not added once per batch where real compute would not add it:
    // a sleep that woke late is caught up by the next ones. The time between two batches (the
    // main thread's claims, waits for collectives, anything else) is added to the target in full:
    // it is not compute, and no later batch makes it up.
    clock::time_point target{}, ended{}; // the first batch: target + (t0 - ended) = t0
    auto work = [&](std::int64_t tokens) {
        const auto t0 = clock::now();
        const auto base = target + (t0 - ended);
        target = base + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(static_cast<double>(tokens) / rate));
        std::this_thread::sleep_until(target);
        ended = clock::now();
        const double took = std::chrono::duration<double>(ended - t0).count();
        compute += took;
        for (std::int64_t t = 0; t < tokens; t += 97)
            stats.addToken(2.5 + 1e-3 * static_cast<double>(t % 1000));
        stats.tokens += tokens - (tokens + 96) / 97;
        myTokens += tokens;
        return took;
    };
    int roundsRun = 0;
    if (c.schedule == "dynamic") {
        DynamicSchedule &schedule = *dynamic;
        const bool verbose = std::getenv("BENCH_COMM_VERBOSE") != nullptr;
        std::string perRound; // verbose: batches / compute / wait / claims / rest (ms) of each round
        double submitting = 0; // verbose: the main thread's time in prepare() and submit()
        for (bool done = false; !done;) {
            const auto round0 = clock::now();
            const double compute0 = compute, blocked0 = run.comm().waitSeconds + run.comm().transferSeconds, wait0 = run.comm().waitSeconds,
                         claim0 = schedule.claimSeconds();
            schedule.beginRound();
            while (const auto b = schedule.next())
                schedule.evaluated(*b, work(tokensOf[static_cast<std::size_t>(*b)]));
            NllStats::Words w = stats.toWords();
            const bool last = pipe.inFlight() && schedule.complete(waitRound(), w);
            if (verbose)
                perRound += " " + std::to_string(schedule.roundBatches()) + "b/" + std::to_string(static_cast<int>(1e3 * (compute - compute0))) + "/"
                            + std::to_string(static_cast<int>(1e3 * (run.comm().waitSeconds - wait0))) + "/"
                            + std::to_string(static_cast<int>(1e3 * (schedule.claimSeconds() - claim0))) + "/"
                            + std::to_string(static_cast<int>(1e3 * (std::chrono::duration<double>(clock::now() - round0).count() - (compute - compute0)
                                                                     - (run.comm().waitSeconds + run.comm().transferSeconds - blocked0)
                                                                     - (schedule.claimSeconds() - claim0))));
            if (last)
                break;
            const auto submit0 = clock::now();
            pipe.submit(schedule.prepare(stats.toWords()));
            submitting += std::chrono::duration<double>(clock::now() - submit0).count();
            if (!pipe.overlapping())
                done = schedule.complete(waitRound(), w);
        }
        if (verbose)
            std::fprintf(stderr, "rank %d rounds (batches/compute ms/wait ms/claims ms/rest ms):%s; prepare and submit %.1f ms\n", rank, perRound.c_str(),
                         1e3 * submitting);
        roundsRun = schedule.rounds();
        claimSeconds = schedule.claimSeconds();
        if (verbose)
            std::fprintf(stderr, "rank %d: %lld claims, %.1f ms claiming, %lld tokens, compute %.3f s, wall %.3f s\n", rank,
                         static_cast<long long>(schedule.claims()), schedule.claimSeconds() * 1e3, static_cast<long long>(myTokens), compute,
                         std::chrono::duration<double>(clock::now() - start).count());
    } else {
        // "none": the static shards computed without any collective (the machine's floor: sleeping,
        // start skew and shard imbalance only).
        const bool collectives = c.schedule != "none";
        const auto shards = shardPlanByBatch(plan, c.world, kBatch);
        const RoundPlan rounds(plan, shards, c.sync, kBatch);
        for (int r = 0; r < rounds.rounds(); ++r) {
            work(rounds.roundOf(rank, r).scoredTokens);
            if (!collectives)
                continue;
            if (pipe.inFlight())
                (void)waitRound();
            const NllStats::Words w = stats.toWords();
            pipe.submit(std::vector<std::int64_t>(w.begin(), w.end()));
            if (!pipe.overlapping())
                (void)waitRound();
        }
        if (pipe.inFlight())
            (void)waitRound();
        roundsRun = collectives ? rounds.rounds() : 0;
    }
    RankReport mine;
    mine.tokens = myTokens;
    mine.rounds = roundsRun;
    mine.computeSeconds = compute;
    mine.waitSeconds = run.comm().waitSeconds;
    mine.transferSeconds = run.comm().transferSeconds;
    mine.collectiveSeconds = run.comm().collectiveSeconds;
    const auto end = clock::now();
    mine.wallSeconds = std::chrono::duration<double>(end - start).count();
    const auto all = run.gather(mine);
    // Where the wall time went, per rank (not in RankReport): start and end on the shared
    // monotonic clock, main-thread claiming, and the blocked time of the first and the last wait.
    std::vector<std::int64_t> phases{std::chrono::duration_cast<std::chrono::microseconds>(start.time_since_epoch()).count(),
                                     std::chrono::duration_cast<std::chrono::microseconds>(end.time_since_epoch()).count(),
                                     std::llround(1e6 * claimSeconds), std::llround(1e6 * (blocked.empty() ? 0 : blocked.front())),
                                     std::llround(1e6 * (blocked.size() < 2 ? 0 : blocked.back())),
                                     std::llround(1e6 * (blocked.size() < 2 ? 0 : lastWaiting)),
                                     std::chrono::duration_cast<std::chrono::microseconds>(entered.time_since_epoch()).count(),
                                     std::chrono::duration_cast<std::chrono::microseconds>(constructed.time_since_epoch()).count(),
                                     std::llround(1e6 * run.comm().connectSeconds)};
    std::vector<std::int64_t> table(phases.size() * static_cast<std::size_t>(c.world), 0);
    std::copy(phases.begin(), phases.end(), table.begin() + static_cast<std::ptrdiff_t>(phases.size()) * rank);
    run.allReduce(table);
    run.finish();
    if (rank == 0) {
        std::ofstream f(out);
        for (const auto &x : all) {
            f << x.rank << ' ' << x.tokens << ' ' << x.rounds << ' ' << x.computeSeconds << ' ' << x.waitSeconds << ' ' << x.transferSeconds << ' '
              << x.wallSeconds << ' ' << x.collectiveSeconds << ' ' << (x.rank == c.slowRank ? c.rate / c.slowFactor : c.rate);
            for (std::size_t i = 0; i < phases.size(); ++i)
                f << ' ' << table[phases.size() * static_cast<std::size_t>(x.rank) + i];
            f << '\n';
        }
        // Ideal: every token computed at the summed rate of all ranks, no sync at all.
        const double sumRate = c.rate * (c.world - (c.slowRank >= 0 && c.slowRank < c.world ? 1 : 0))
                               + (c.slowRank >= 0 && c.slowRank < c.world ? c.rate / c.slowFactor : 0);
        f << "ideal " << static_cast<double>(plan.scoredTokens) / sumRate << '\n';
    }
    return 0;
}

std::string syncName(std::int64_t s)
{
    if (s == kSyncAtEnd)
        return "end";
    if (s == kDefaultSyncEveryTokens)
        return std::to_string(s) + " (default)";
    return std::to_string(s);
}

void runConfig(const Config &c, const char *self)
{
    auto store = openTcpStore("127.0.0.1", 0, true, std::chrono::seconds(60));
    const std::string out = "/tmp/bench_comm." + std::to_string(::getpid()) + ".txt";
    std::vector<pid_t> pids;
    for (int r = 0; r < c.world; ++r) {
        const pid_t pid = ::fork();
        if (pid == 0) {
            std::vector<std::string> args{self, "--child", std::to_string(r), std::to_string(store->port()), out, std::to_string(c.world), c.topology,
                                          c.groups, std::to_string(c.sync), std::to_string(c.rate), std::to_string(c.seconds), c.schedule,
                                          std::to_string(c.slowRank), std::to_string(c.slowFactor), c.overlap ? "on" : "off",
                                          c.tolerant ? "continue" : "fail"};
            std::vector<char *> argv;
            for (auto &a : args)
                argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv("/proc/self/exe", argv.data());
            std::_Exit(127);
        }
        pids.push_back(pid);
    }
    bool ok = true;
    for (pid_t p : pids) {
        int st = 0;
        ::waitpid(p, &st, 0);
        ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    std::ifstream f(out);
    if (!ok || !f) {
        std::printf("%5d  %-8s  %-12s  %-16s  %-7s  %-8s  FAILED\n", c.world, c.schedule.c_str(), c.topology.c_str(), syncName(c.sync).c_str(),
                    c.overlap ? "on" : "off", c.tolerant ? "continue" : "fail");
        return;
    }
    struct Rank
    {
        int rank = 0;
        std::int64_t tokens = 0;
        double compute = 0, wait = 0, transfer = 0, wall = 0, collective = 0, rate = 1;
        std::int64_t startUs = 0, endUs = 0, claimUs = 0, firstUs = 0, lastUs = 0, lastWaitUs = 0, enteredUs = 0, constructedUs = 0, connectUs = 0;
    };
    std::vector<Rank> ranks;
    double ideal = 0;
    std::int64_t rounds = 0;
    for (std::string line; std::getline(f, line);) {
        std::istringstream is(line);
        if (line.starts_with("ideal")) {
            std::string w;
            is >> w >> ideal;
            continue;
        }
        Rank r;
        is >> r.rank >> r.tokens >> rounds >> r.compute >> r.wait >> r.transfer >> r.wall >> r.collective >> r.rate >> r.startUs >> r.endUs >> r.claimUs
            >> r.firstUs >> r.lastUs >> r.lastWaitUs >> r.enteredUs >> r.constructedUs >> r.connectUs;
        ranks.push_back(r);
    }
    std::remove(out.c_str());
    const auto n = static_cast<double>(ranks.size());
    double sumWait = 0, sumTransfer = 0, sumCollective = 0, sumWall = 0, sumOwnIdeal = 0;
    std::int64_t firstStart = INT64_MAX, lastEnd = INT64_MIN, lastStart = INT64_MIN, firstEnd = INT64_MAX;
    std::int64_t firstEntered = INT64_MAX, lastEntered = INT64_MIN, firstConstructed = INT64_MAX, lastConstructed = INT64_MIN;
    const Rank *slowest = &ranks.front();
    std::int64_t maxConnectUs = 0; // the longest wait of a first collective for the process groups formed behind
    double sumStartUs = 0; // relative to the first start, for the mean
    for (const Rank &r : ranks)
        sumStartUs += static_cast<double>(r.startUs - ranks.front().startUs);
    for (const Rank &r : ranks) {
        sumWait += r.wait;
        sumTransfer += r.transfer;
        sumCollective += r.collective;
        sumWall += r.wall;
        sumOwnIdeal += static_cast<double>(r.tokens) / r.rate;
        firstStart = std::min(firstStart, r.startUs);
        lastStart = std::max(lastStart, r.startUs);
        firstEnd = std::min(firstEnd, r.endUs);
        firstEntered = std::min(firstEntered, r.enteredUs);
        lastEntered = std::max(lastEntered, r.enteredUs);
        firstConstructed = std::min(firstConstructed, r.constructedUs);
        lastConstructed = std::max(lastConstructed, r.constructedUs);
        lastEnd = std::max(lastEnd, r.endUs);
        maxConnectUs = std::max(maxConnectUs, r.connectUs);
        if (r.wall > slowest->wall)
            slowest = &r;
    }
    const double maxWall = slowest->wall;
    const double meanWait = sumWait / n, meanTransfer = sumTransfer / n, meanCollective = sumCollective / n;
    const double share = (meanWait + meanTransfer) / maxWall;
    // Efficiency against ideal (every rank computing total/world at the rate, no sync at all).
    const double efficiency = ideal / maxWall;
    // The same against the ranks' mean start: with dynamic batches ranks that start at s_i and
    // share the work perfectly all end at mean(s) + ideal, so an early rank's longer wall is
    // not lost time; static ranks cannot use it and are charged max(s) - mean(s) here too.
    const double meanStartUs = static_cast<double>(ranks.front().startUs) + sumStartUs / n;
    const double fromMeanStart = ideal / (1e-6 * (static_cast<double>(lastEnd) - meanStartUs));
    const double perRound = rounds > 0 ? 1e6 / static_cast<double>(rounds) : 0;
    std::printf("%5d  %-8s  %-12s  %-16s  %-7s  %-8s  %7lld  %9.1f  %9.1f  %9.1f  %8.3f%%  %8.3f%%  %7.2f%%  %7.2f%%  %7.3f  %7.2f%%  %7.2f%%\n", c.world,
                c.schedule.c_str(), c.topology.c_str(), syncName(c.sync).c_str(), c.overlap ? "on" : "off", c.tolerant ? "continue" : "fail",
                static_cast<long long>(rounds),
                meanCollective * perRound, meanTransfer * perRound, meanWait * perRound, 100 * meanWait / maxWall, 100 * meanTransfer / maxWall,
                100 * share, 100 * efficiency, maxWall / ideal, 100 * sumOwnIdeal / sumWall, 100 * fromMeanStart);
    // Where the slowest rank's wall went beyond the ideal (ms; the terms add up to the excess):
    // its tokens beyond the mean share at its rate, the sleeps' oversleep, the blocked time of the
    // first wait, the rounds between and the last wait, claiming on the main thread, and the rest.
    const Rank &s = *slowest;
    const double own = static_cast<double>(s.tokens) / s.rate, blocked = s.wait + s.transfer;
    const double first = 1e-6 * static_cast<double>(s.firstUs), last = 1e-6 * static_cast<double>(s.lastUs), claim = 1e-6 * static_cast<double>(s.claimUs);
    std::printf("       slowest rank %d: wall - ideal %+.1f ms = work %+.1f, oversleep %+.1f, first wait %.1f, rounds %.1f, last wait %.1f (%.1f of it for the last arrival), "
                "claims %.1f, rest %.1f; it started %.1f ms after the first rank (start skew %.1f, end skew %.1f ms; the ranks' processes began "
                "within %.1f ms, left the construction within %.1f ms, on average %.1f ms after the first); end to end %.1f ms = ideal %+.1f (first "
                "process start to last end; first rank's start to last end %.1f ms); the first collective waited up to %.1f ms for the "
                "process groups formed behind the first rounds\n",
                s.rank, 1e3 * (s.wall - ideal), 1e3 * (own - ideal), 1e3 * (s.compute - own), 1e3 * first, 1e3 * (blocked - first - last), 1e3 * last, 1e-3 * static_cast<double>(s.lastWaitUs),
                1e3 * claim, 1e3 * (s.wall - s.compute - blocked - claim), 1e-3 * static_cast<double>(s.startUs - firstStart),
                1e-3 * static_cast<double>(lastStart - firstStart), 1e-3 * static_cast<double>(lastEnd - firstEnd),
                1e-3 * static_cast<double>(lastEntered - firstEntered), 1e-3 * static_cast<double>(lastConstructed - firstConstructed),
                1e-3 * (meanStartUs - static_cast<double>(firstStart)), 1e-3 * static_cast<double>(lastEnd - firstEntered),
                1e-3 * static_cast<double>(lastEnd - firstEntered) - 1e3 * ideal, 1e-3 * static_cast<double>(lastEnd - firstStart),
                1e-3 * static_cast<double>(maxConnectUs));
    std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1 && std::string(argv[1]) == "--child") {
        const auto entered = std::chrono::steady_clock::now();
        Config c;
        const int rank = std::atoi(argv[2]);
        const int port = std::atoi(argv[3]);
        const std::string out = argv[4];
        c.world = std::atoi(argv[5]);
        c.topology = argv[6];
        c.groups = argv[7];
        c.sync = std::atoll(argv[8]);
        c.rate = std::atof(argv[9]);
        c.seconds = std::atof(argv[10]);
        c.schedule = argv[11];
        c.slowRank = std::atoi(argv[12]);
        c.slowFactor = std::atof(argv[13]);
        c.overlap = std::string(argv[14]) == "on";
        c.tolerant = argc > 15 && std::string(argv[15]) == "continue";
        try {
            return child(c, rank, port, out, entered);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
            return 1;
        }
    }
    std::vector<int> worlds{2, 4, 8, 16};
    std::vector<std::int64_t> syncs{0, 4096, kDefaultSyncEveryTokens, kSyncAtEnd};
    double rate = 50000, seconds = 2, slowFactor = 1;
    int slowRank = -1;
    std::vector<std::string> schedules{"static", "dynamic"};
    std::vector<std::string> topologies{"flat", "hierarchical"};
    std::vector<std::string> overlaps{"on"};
    std::vector<std::string> losses{"fail"}; ///< --on-rank-loss: fail, as docs/communication.md's figures ran (the agent's default is continue with dynamic)
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--ranks") {
            worlds.clear();
            std::istringstream is(argv[i + 1]);
            for (std::string x; std::getline(is, x, ',');)
                worlds.push_back(std::stoi(x));
        } else if (k == "--sync") {
            syncs.clear();
            std::istringstream is(argv[i + 1]);
            for (std::string x; std::getline(is, x, ',');)
                syncs.push_back(x == "end" ? kSyncAtEnd : std::stoll(x));
        } else if (k == "--rate") {
            rate = std::atof(argv[i + 1]);
        } else if (k == "--seconds") {
            seconds = std::atof(argv[i + 1]);
        } else if (k == "--schedule" || k == "--topology" || k == "--overlap" || k == "--on-rank-loss") {
            auto &list = k == "--schedule" ? schedules : k == "--topology" ? topologies : k == "--overlap" ? overlaps : losses;
            list.clear();
            std::istringstream is(argv[i + 1]);
            for (std::string x; std::getline(is, x, ',');)
                list.push_back(x);
        } else if (k == "--slow") { // R:FACTOR, e.g. 3:2 = rank 3 at half speed
            if (std::sscanf(argv[i + 1], "%d:%lf", &slowRank, &slowFactor) != 2 || slowFactor <= 0) {
                std::fprintf(stderr, "--slow expects RANK:FACTOR, e.g. 3:2\n");
                return 2;
            }
        }
    }
    for (const std::string &l : losses)
        if (l != "fail" && l != "continue") {
            std::fprintf(stderr, "--on-rank-loss \"%s\" is not one of fail, continue (a comma-separated list)\n", l.c_str());
            return 2;
        }
    std::printf("bench_comm: Gloo on loopback, compute simulated by sleeping at %.0f tokens/s per rank, %.1f s of ideal compute per rank,\n"
                "hf-sliding windows of %lld tokens, batch %lld; hierarchical = groups of 2 ranks. %u cores here.\n"
                "Columns: overlap (--overlap on: a round's collective runs behind the next round's compute), on loss (--on-rank-loss:\n"
                "continue: collectives that a lost rank can end, abandoned in 50 ms slices; none is lost here), per-round collective\n"
                "duration, and the time the main thread was blocked in it, split into transfer and wait (means over ranks); wait and\n"
                "transfer as %% of wall, comm share, efficiency vs ideal (ideal / slowest wall), slowest wall / ideal, busy (each\n"
                "rank's tokens at its rate over its own wall, summed over ranks: the start skew of the ranks is not in it), from mean\n"
                "(ideal / (last end - the ranks' mean start): dynamic ranks that start apart and share the work perfectly score 100%%).\n"
                "Under each row: where the slowest rank's wall went beyond the ideal, the ranks' start skew, and the run end to end.\n"
                "--schedule none: static shards without any collective.\n\n",
                rate, seconds, static_cast<long long>(kContext), static_cast<long long>(kBatch), std::thread::hardware_concurrency());
    if (slowRank >= 0)
        std::printf("Rank %d computes at 1/%.2f of the rate; ideal = all tokens at the summed rate of all ranks.\n\n", slowRank, slowFactor);
    std::printf("%5s  %-8s  %-12s  %-16s  %-7s  %-8s  %7s  %9s  %9s  %9s  %9s  %9s  %8s  %8s  %7s  %8s  %9s\n", "ranks", "schedule", "topology", "sync tokens",
                "overlap", "on loss", "rounds", "coll us/r", "xfer us/r", "wait us/r", "wait", "transfer", "comm", "effic.", "wall/id", "busy", "from mean");
    for (int w : worlds)
        for (const std::string &topo : topologies)
            for (std::int64_t sync : syncs)
                for (const std::string &sched : schedules)
                    for (const std::string &overlap : overlaps)
                        for (const std::string &loss : losses) {
                    const std::string &onLoss = loss;
                    if (onLoss == "continue" && sched != "dynamic") {
                        std::printf("%5d  %-8s  %-12s  %-16s  %-7s  %-8s  refused: --on-rank-loss continue needs the dynamic schedule\n", w, sched.c_str(),
                                    topo.c_str(), syncName(sync).c_str(), overlap.c_str(), onLoss.c_str());
                        continue;
                    }
                    Config c;
                    c.overlap = overlap == "on";
                    c.tolerant = onLoss == "continue";
                    c.schedule = sched;
                    c.slowRank = slowRank;
                    c.slowFactor = slowFactor;
                    c.world = w;
                    c.topology = topo;
                    c.groups = "size:2";
                    c.sync = sync;
                    c.rate = rate;
                    c.seconds = seconds;
                    runConfig(c, argv[0]);
                }
    return 0;
}
