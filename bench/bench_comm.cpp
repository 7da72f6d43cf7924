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
// Each configuration runs world x rate x S tokens (S seconds of ideal compute per rank).
#include "distributed/distributed_run.h"
#include "distributed/store.h"

#include "cppl/sharding.h"
#include "cppl/statistics.h"
#include "cppl/window_plan.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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
int child(const Config &c, int rank, int port, const std::string &out)
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
    DistributedRun run(o);
    const WindowPlan plan = planFor(c);
    const auto shards = shardPlanByBatch(plan, c.world, kBatch);
    const RoundPlan rounds(plan, shards, c.sync, kBatch);
    NllStats stats;
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    double compute = 0;
    for (int r = 0; r < rounds.rounds(); ++r) {
        const Shard part = rounds.roundOf(rank, r);
        const auto t0 = clock::now();
        std::this_thread::sleep_until(t0 + std::chrono::duration<double>(static_cast<double>(part.scoredTokens) / c.rate));
        compute += std::chrono::duration<double>(clock::now() - t0).count();
        for (std::int64_t t = 0; t < part.scoredTokens; t += 97) // some real numbers to reduce
            stats.addToken(2.5 + 1e-3 * static_cast<double>(t % 1000));
        stats.tokens += part.scoredTokens - (part.scoredTokens + 96) / 97;
        NllStats::Words w = stats.toWords();
        run.allReduce(w);
    }
    RankReport mine;
    mine.tokens = shards[static_cast<std::size_t>(rank)].scoredTokens;
    mine.rounds = rounds.rounds();
    mine.computeSeconds = compute;
    mine.waitSeconds = run.comm().waitSeconds;
    mine.transferSeconds = run.comm().transferSeconds;
    mine.wallSeconds = std::chrono::duration<double>(clock::now() - start).count();
    const auto all = run.gather(mine);
    run.finish();
    if (rank == 0) {
        std::ofstream f(out);
        for (const auto &x : all)
            f << x.rank << ' ' << x.tokens << ' ' << x.rounds << ' ' << x.computeSeconds << ' ' << x.waitSeconds << ' ' << x.transferSeconds << ' '
              << x.wallSeconds << '\n';
        f << "ideal " << static_cast<double>(plan.scoredTokens) / (c.rate * c.world) << '\n';
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
                                          c.groups, std::to_string(c.sync), std::to_string(c.rate), std::to_string(c.seconds)};
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
        std::printf("%5d  %-12s  %-16s  FAILED\n", c.world, c.topology.c_str(), syncName(c.sync).c_str());
        return;
    }
    double maxWall = 0, sumCompute = 0, maxCompute = 0, sumWait = 0, sumTransfer = 0, ideal = 0;
    std::int64_t rounds = 0;
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
        std::istringstream is(line);
        if (line.starts_with("ideal")) {
            std::string w;
            is >> w >> ideal;
            continue;
        }
        int rank = 0;
        std::int64_t tokens = 0;
        double comp = 0, wait = 0, xfer = 0, wall = 0;
        is >> rank >> tokens >> rounds >> comp >> wait >> xfer >> wall;
        maxWall = std::max(maxWall, wall);
        sumCompute += comp;
        maxCompute = std::max(maxCompute, comp);
        sumWait += wait;
        sumTransfer += xfer;
        ++n;
    }
    std::remove(out.c_str());
    const double meanWait = sumWait / n, meanTransfer = sumTransfer / n, meanCompute = sumCompute / n;
    const double share = (meanWait + meanTransfer) / maxWall;
    // Efficiency against ideal (every rank computing total/world at the rate, no sync at all).
    const double efficiency = ideal / maxWall;
    std::printf("%5d  %-12s  %-16s  %7lld  %9.1f  %9.1f  %8.3f%%  %8.3f%%  %7.2f%%  %7.2f%%\n", c.world, c.topology.c_str(), syncName(c.sync).c_str(),
                static_cast<long long>(rounds), 1e6 * meanTransfer / static_cast<double>(rounds), 1e6 * meanWait / static_cast<double>(rounds),
                100 * meanWait / maxWall, 100 * meanTransfer / maxWall, 100 * share, 100 * efficiency);
    (void)meanCompute;
    (void)maxCompute;
    std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc > 1 && std::string(argv[1]) == "--child") {
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
        try {
            return child(c, rank, port, out);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
            return 1;
        }
    }
    std::vector<int> worlds{2, 4, 8, 16};
    std::vector<std::int64_t> syncs{0, 4096, kDefaultSyncEveryTokens, kSyncAtEnd};
    double rate = 50000, seconds = 2;
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
        }
    }
    std::printf("bench_comm: Gloo on loopback, compute simulated by sleeping at %.0f tokens/s per rank, %.1f s of ideal compute per rank,\n"
                "hf-sliding windows of %lld tokens, batch %lld; hierarchical = groups of 2 ranks. %u cores here.\n"
                "Columns: per-round transfer and wait (mean over ranks), wait and transfer as %% of wall, comm share, efficiency vs ideal.\n\n",
                rate, seconds, static_cast<long long>(kContext), static_cast<long long>(kBatch), std::thread::hardware_concurrency());
    std::printf("%5s  %-12s  %-16s  %7s  %9s  %9s  %9s  %9s  %8s  %8s\n", "ranks", "topology", "sync tokens", "rounds", "xfer us/r", "wait us/r",
                "wait", "transfer", "comm", "effic.");
    for (int w : worlds)
        for (const char *topo : {"flat", "hierarchical"})
            for (std::int64_t sync : syncs) {
                Config c;
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
