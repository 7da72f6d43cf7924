// SPDX-License-Identifier: MIT
#include "comm_check.h"

#include "args.h"
#include "distributed_run.h"
#include "exit_codes.h"
#include "tensor_parallel_check.h"

#include "eval/tensor_parallel.h"

#include "cppl/errors.h"
#include "cppl/rank_env.h"

#include <chrono>
#include <cstdio>
#include <ostream>
#include <sstream>

namespace cppl::agent::dist {

namespace {

std::uint64_t mix(std::uint64_t x) noexcept // splitmix64's finaliser: distinct low bits per (rank, word)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

std::vector<std::int64_t> parseSizes(const std::string &text)
{
    std::vector<std::int64_t> sizes;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        char *end = nullptr;
        const long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end || v < 1 || v > (1LL << 27))
            throw ConfigError("--words expects a comma-separated list of word counts, 1..134217728 each, e.g. 1,7,1048577; got \"" + text + "\"");
        sizes.push_back(v);
    }
    return sizes;
}

/// --tensor-parallel N: every group's collectives instead of the data-parallel words (the
/// followers are in no data-parallel communicator).
int checkTensorParallel(DistributedRun &run, int n, const std::vector<std::int64_t> &sizes, std::ostream &out, std::ostream &err)
{
    const int rank = run.rank(), g = rank / n;
    const std::string who = "comm-check: rank " + std::to_string(rank) + ": ";
    std::unique_ptr<TensorParallelGroup> group = run.formTensorParallelGroup(n);
    if (rank == 0)
        out << "comm-check: backend " << run.backend() << ", tensor-parallel groups of " << n << ", " << run.worldSize() / n << " groups"
            << (group->gathersOnDevice() ? ", GPU memory gathered on the device" : "") << "\n";
    std::string firstWrong;
    const std::int64_t wrong = checkTensorParallelGroup(*group, g, sizes, out, err, firstWrong);
    if (wrong > 0) {
        const std::string msg = std::to_string(wrong) + " elements of tensor-parallel group " + std::to_string(g)
                                + " differ from their member-order sums (first: " + firstWrong + ")";
        run.reportFailure(kExitRuntime, msg);
        throw ExitError(kExitRuntime, who + msg);
    }
    group.reset();
    run.finish();
    if (rank == 0)
        out << "comm-check: every tensor-parallel reduction exact on every rank\n";
    return kExitOk;
}

} // namespace

std::int64_t commCheckWord(int rank, int worldSize, std::int64_t i) noexcept
{
    const std::int64_t magnitude = ((std::int64_t{1} << 62) / worldSize) - static_cast<std::int64_t>(mix(static_cast<std::uint64_t>(rank) << 40 ^ static_cast<std::uint64_t>(i)) & 0xfffff);
    return (rank + i) % 2 == 0 ? magnitude : -magnitude;
}

std::int64_t commCheckExpected(int worldSize, std::int64_t i) noexcept
{
    std::int64_t sum = 0; // every partial sum stays within +-2^62: each word is at most 2^62 / worldSize
    for (int r = 0; r < worldSize; ++r)
        sum += commCheckWord(r, worldSize, i);
    return sum;
}

int commCheckCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err, const C10d &c10d)
{
    const Args a(argv,
                 {"--backend", "--topology", "--groups", "--timeout", "--words", "--tensor-parallel", "--rank", "--world-size", "--local-rank", "--local-world-size",
                  "--master-addr", "--master-port"},
                 {});
    DistributedOptions o;
    o.identity = resolveRankIdentity(processEnvironment(), a.rankOverrides());
    o.backend = a.get("--backend").value_or("gloo");
    if (o.backend != "gloo" && o.backend != "nccl")
        throw ConfigError("--backend \"" + o.backend + "\" is not one of gloo, nccl");
    const std::string topology = a.get("--topology").value_or("hierarchical");
    if (topology != "hierarchical" && topology != "flat")
        throw ConfigError("--topology \"" + topology + "\" is not one of hierarchical, flat");
    o.topology = topology == "flat" ? Topology::Flat : Topology::Hierarchical;
    o.groups = a.get("--groups").value_or("by-host");
    o.timeout = std::chrono::milliseconds(a.integer("--timeout", 120, 1, 24 * 3600) * 1000);
    o.storeServedElsewhere = std::getenv("TORCHELASTIC_USE_AGENT_STORE") && std::string(std::getenv("TORCHELASTIC_USE_AGENT_STORE")) == "True";
    o.connectInBackground = false; // a check: its groups' errors at once, its timings without their forming
    const std::vector<std::int64_t> sizes = parseSizes(a.get("--words").value_or("1,7,65536,1048577"));
    o.tensorParallel = static_cast<int>(a.integer("--tensor-parallel", 1, 1, 1024));

    DistributedRun run(o, c10d);
    if (o.tensorParallel > 1)
        return checkTensorParallel(run, o.tensorParallel, sizes, out, err);
    const int rank = run.rank(), world = run.worldSize();
    const std::string who = "comm-check: rank " + std::to_string(rank) + ": ";
    if (rank == 0)
        out << "comm-check: backend " << run.backend() << ", " << topologyName(run.topology()) << ", world size " << world << ", "
            << run.groups().groups.size() << " node groups\n";
    std::int64_t wrongTotal = 0;
    std::string firstWrong;
    for (const std::int64_t n : sizes) {
        std::vector<std::int64_t> words(static_cast<std::size_t>(n));
        for (std::int64_t i = 0; i < n; ++i)
            words[static_cast<std::size_t>(i)] = commCheckWord(rank, world, i);
        const auto t0 = std::chrono::steady_clock::now();
        run.allReduce(words);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::int64_t wrong = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            const std::int64_t want = commCheckExpected(world, i), got = words[static_cast<std::size_t>(i)];
            if (got != want && wrong++ == 0 && firstWrong.empty())
                firstWrong = "word " + std::to_string(i) + " of " + std::to_string(n) + ": expected " + std::to_string(want) + ", got " + std::to_string(got);
        }
        wrongTotal += wrong;
        char line[200];
        std::snprintf(line, sizeof line, "%lld words: %s, %.3f ms, %.1f MB/s\n", static_cast<long long>(n),
                      wrong == 0 ? "exact" : (std::to_string(wrong) + " WRONG").c_str(), seconds * 1e3,
                      seconds > 0 ? static_cast<double>(n) * 8 / seconds / 1e6 : 0.0);
        if (rank == 0 || wrong > 0)
            (rank == 0 ? out : err) << who << line << std::flush;
    }
    if (wrongTotal > 0) {
        const std::string msg = std::to_string(wrongTotal) + " words differ from their exact sums (first: " + firstWrong + ")";
        run.reportFailure(kExitRuntime, msg);
        throw ExitError(kExitRuntime, who + msg);
    }
    run.finish();
    if (rank == 0)
        out << "comm-check: every word exact on every rank\n";
    return kExitOk;
}

} // namespace cppl::agent::dist
