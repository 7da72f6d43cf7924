// SPDX-License-Identifier: MIT
// Helpers for the telemetry tests: simulated ranks that send hand-made messages over a raw PUSH
// socket (so tests can drop, reorder and duplicate them exactly), and exact reference merges.
#pragma once

#include "cppl/statistics.h"
#include "cppl/telemetry.h"

#include "test_exact.h" // sameBits
#include "zmq_push.h"

#include <QTest>

#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <thread>

namespace cppl::test {

/// A test's PUSH socket: nothing dropped (a deep queue) and nothing lost at close (2 s linger).
class RawPush : public ZmqPush
{
public:
    explicit RawPush(const std::string &endpoint, const std::optional<cppl::telemetry::Credentials> &curve = std::nullopt)
        : ZmqPush(endpoint, {1000000, 2000, curve})
    {
    }
};

inline cppl::telemetry::Message header(const std::string &run, std::int64_t rank, std::int64_t world, std::int64_t seq,
                                       cppl::telemetry::Kind kind)
{
    cppl::telemetry::Message m;
    m.header.run = run;
    m.header.rank = rank;
    m.header.host = "node" + std::to_string(rank / 8);
    m.header.group = rank / 8;
    m.header.localRank = rank % 8;
    m.header.worldSize = world;
    m.header.seq = seq;
    m.header.t = 1.7e9 + static_cast<double>(seq);
    m.header.kind = kind;
    m.phase = cppl::telemetry::Phase::Evaluating;
    return m;
}

/// Adds @p n NLL-like values (a few nats, with denormal-ish and large outliers) to @p s.
inline void addTokens(cppl::NllStats &s, std::mt19937_64 &rng, int n)
{
    std::lognormal_distribution<double> nll(1.0, 0.8);
    for (int i = 0; i < n; ++i) {
        double v = nll(rng);
        if (i % 97 == 0)
            v = 1e-300;
        if (i % 89 == 0)
            v = 700.0 + v;
        s.addToken(v);
    }
    s.windows += 1;
}

inline cppl::telemetry::Message progressOf(const std::string &run, std::int64_t rank, std::int64_t world, std::int64_t seq,
                                           const cppl::NllStats &s, std::int64_t windowsTotal)
{
    auto m = header(run, rank, world, seq, cppl::telemetry::Kind::Progress);
    auto &p = m.progress;
    p.nll = s.nll;
    p.nllSquared = s.nllSquared;
    p.tokensScoredTotal = s.tokens;
    p.windowsDone = s.windows;
    p.windowsTotal = windowsTotal;
    p.tokensPerSecond = 1000.0 + static_cast<double>(rank);
    p.computeSecondsTotal = 1.0 + static_cast<double>(seq);
    p.commWaitSecondsTotal = 0.1 * static_cast<double>(rank % 4);
    p.commTransferSecondsTotal = 0.05;
    p.rssBytes = 1 << 20;
    return m;
}

} // namespace cppl::test
