// SPDX-License-Identifier: MIT
// What bench_collector and bench_dashboard share: synthetic ranks' telemetry, paced ticks, the
// PUSH socket the simulated ranks send through, and `--name value` options.
#pragma once

#include "cppl/statistics.h"
#include "cppl/telemetry.h"
#include "zmq_push.h" // tests/common

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <variant>

namespace cppl::bench {

using Clock = std::chrono::steady_clock;

/// A PUSH socket as an agent's publisher is: it never blocks (beyond @p sendHighWaterMark queued
/// messages it drops) and does not linger at close.
class PushSocket : public cppl::test::ZmqPush
{
public:
    PushSocket(const std::string &endpoint, int sendHighWaterMark) : ZmqPush(endpoint, {sendHighWaterMark, 0, std::nullopt}) {}
};

/// Message @p seq of rank @p rank in a synthetic run of @p worldSize ranks, 8 to a host and
/// @p groupSize to a group: every 10th a heartbeat, the others progress with 8 more tokens drawn
/// from @p nll into @p stats (exact sums that grow as a real rank's do). The progress figures other
/// than the sums (windows, rates, times, memory) are the caller's.
inline cppl::telemetry::Message syntheticMessage(const std::string &run, int rank, int worldSize, int groupSize, std::int64_t seq, double t,
                                                 cppl::NllStats &stats, std::mt19937_64 &rng, std::lognormal_distribution<double> &nll)
{
    cppl::telemetry::Message m;
    auto &h = m.header;
    h.run = run;
    h.rank = rank;
    h.host = "node" + std::to_string(rank / 8);
    h.group = rank / groupSize;
    h.localRank = rank % 8;
    h.worldSize = worldSize;
    h.seq = seq;
    h.t = t;
    if (seq % 10 == 9) {
        h.kind = cppl::telemetry::Kind::Heartbeat;
        m.phase = cppl::telemetry::Phase::Evaluating;
    } else {
        h.kind = cppl::telemetry::Kind::Progress;
        for (int i = 0; i < 8; ++i)
            stats.addToken(nll(rng));
        m.progress.nll = stats.nll;
        m.progress.nllSquared = stats.nllSquared;
        m.progress.tokensScoredTotal = stats.tokens;
    }
    return m;
}

/// Calls @p tick(k, t) for k = 0, 1, ... at @p t0 + k / @p rate (back to back when @p rate is 0),
/// t being the seconds since @p t0, until @p duration seconds have passed or @p stop is set.
template<typename Tick>
void pacedTicks(Clock::time_point t0, double rate, double duration, const std::atomic<bool> &stop, Tick &&tick)
{
    for (std::int64_t k = 0; !stop.load(); ++k) {
        if (rate > 0)
            std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(static_cast<double>(k) / rate)));
        const double t = std::chrono::duration<double>(Clock::now() - t0).count();
        if (t >= duration)
            break;
        tick(k, t);
    }
}

/// One `--name value` option and the variable it sets.
struct Option
{
    const char *name;
    std::variant<int *, double *> value;
};

/// Reads `--name value` pairs into @p options' variables; false, saying which on stderr, for an
/// option that is not one of them.
inline bool parseOptions(int argc, char **argv, const char *program, std::initializer_list<Option> options)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const Option *found = nullptr;
        for (const Option &o : options)
            if (std::string(argv[i]) == o.name)
                found = &o;
        if (!found) {
            std::fprintf(stderr, "%s: unknown option %s\n", program, argv[i]);
            return false;
        }
        if (auto *n = std::get_if<int *>(&found->value))
            **n = std::atoi(argv[i + 1]);
        else
            *std::get<double *>(found->value) = std::atof(argv[i + 1]);
    }
    return true;
}

} // namespace cppl::bench
