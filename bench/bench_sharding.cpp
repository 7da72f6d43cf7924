// SPDX-License-Identifier: MIT
// Planning cost at cluster scale: window plan + balanced shards + sync rounds for large streams.
#include "cppl/sharding.h"
#include "cppl/window_plan.h"

#include <chrono>
#include <cstdio>

int main()
{
    std::printf("%14s %8s %8s %10s %12s %12s %12s\n", "tokens", "context", "ranks", "windows", "plan ms", "shard ms", "rounds ms");
    for (std::int64_t tokens : {std::int64_t{1} << 20, std::int64_t{1} << 26, std::int64_t{1} << 30}) {
        for (int ranks : {8, 1024}) {
            using clock = std::chrono::steady_clock;
            const auto t0 = clock::now();
            const cppl::WindowPlan plan = cppl::planStream({cppl::Protocol::HfSliding, 2048, 1024}, tokens);
            const auto t1 = clock::now();
            const auto shards = cppl::shardPlan(plan, ranks);
            const auto t2 = clock::now();
            const cppl::RoundPlan rounds(plan, shards, 65536, 8);
            const auto t3 = clock::now();
            auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
            std::printf("%14lld %8d %8d %10zu %12.2f %12.2f %12.2f\n", static_cast<long long>(tokens), 2048, ranks,
                        plan.windows.size(), ms(t0, t1), ms(t1, t2), ms(t2, t3));
        }
    }
    return 0;
}
