// SPDX-License-Identifier: MIT
// Collector ingest with many simulated ranks (docs/telemetry.md, "Benchmark"):
//   1. decode + merge alone (CollectorState::ingest), one thread: messages/s and CPU ns/message;
//   2. over real sockets on 127.0.0.1: paced at RANKS x RATE Hz, then unpaced ("and beyond");
//   3. snapshot latency: Collector::snapshot() cost, and send -> visible in a snapshot.
// Usage: bench_collector [--ranks 1024] [--rate 10] [--seconds 3] [--senders 2]
#include "bench_telemetry.h"

#include "telemetry/collector.h"

#include "cppl/telemetry.h"

#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <time.h>
#include <vector>

using namespace cppl::core::telemetry;
using cppl::telemetry::Kind;
using cppl::telemetry::Message;
using cppl::bench::Clock;

namespace {

double cpuSeconds(clockid_t id)
{
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds(Clock::duration d)
{
    return std::chrono::duration<double>(d).count();
}

// Message k of rank r: 9 of 10 are progress (growing exact accumulators), 1 a heartbeat.
std::vector<std::vector<std::string>> makeMessages(int ranks, int perRank)
{
    std::vector<std::vector<std::string>> out(static_cast<std::size_t>(ranks));
    std::mt19937_64 rng(42);
    std::lognormal_distribution<double> nll(1.0, 0.8);
    for (int r = 0; r < ranks; ++r) {
        cppl::NllStats s;
        for (int k = 0; k < perRank; ++k) {
            Message m = cppl::bench::syntheticMessage("bench-run", r, ranks, 8, k, 1.7e9 + k * 0.1, s, rng, nll);
            if (m.header.kind == Kind::Progress) {
                auto &p = m.progress;
                p.windowsDone = k;
                p.windowsTotal = perRank;
                p.tokensPerSecond = 2500;
                p.computeSecondsTotal = k * 0.1;
                p.commWaitSecondsTotal = k * 0.001;
                p.commTransferSecondsTotal = k * 0.0005;
                p.rssBytes = 1 << 30;
            }
            out[static_cast<std::size_t>(r)].push_back(cppl::telemetry::encode(m));
        }
    }
    return out;
}

void ingestAlone(int ranks)
{
    const int perRank = 100;
    const auto msgs = makeMessages(ranks, perRank);
    std::size_t bytes = 0;
    for (auto &v : msgs)
        for (auto &m : v)
            bytes += m.size();
    CollectorState st({});
    const double cpu0 = cpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    const auto t0 = Clock::now();
    std::int64_t accepted = 0;
    for (int k = 0; k < perRank; ++k) // round-robin over ranks, as they would arrive
        for (int r = 0; r < ranks; ++r)
            accepted += st.ingest(msgs[static_cast<std::size_t>(r)][static_cast<std::size_t>(k)], 0.0);
    const double wall = seconds(Clock::now() - t0);
    const double cpu = cpuSeconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    const auto n = static_cast<double>(ranks) * perRank;
    std::printf("decode+merge alone   %5d ranks  %8.0f msgs  %9.0f msgs/s  %6.2f us CPU/msg  (avg %zu bytes, %lld accepted)\n", ranks, n,
                n / wall, cpu / n * 1e6, bytes / static_cast<std::size_t>(n), static_cast<long long>(accepted));
    const auto s0 = Clock::now();
    const int reps = 20;
    for (int i = 0; i < reps; ++i)
        (void)st.snapshot(1.0);
    std::printf("snapshot() cost      %5d ranks  %9.3f ms per snapshot\n", ranks, seconds(Clock::now() - s0) / reps * 1e3);
}

void overSockets(int ranks, double rate, double duration, int senders)
{
    CollectorOptions o;
    Collector collector(o);
    const int perRank = std::max(10, static_cast<int>(rate * duration) + 1);
    const auto msgs = makeMessages(ranks, std::min(perRank, 400));
    const int have = static_cast<int>(msgs[0].size());
    std::atomic<std::int64_t> sent{0};
    std::atomic<std::int64_t> dropped{0};
    const double cpu0 = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
    const auto t0 = Clock::now();
    const std::atomic<bool> never{false};
    std::vector<std::thread> threads;
    for (int sdx = 0; sdx < senders; ++sdx)
        threads.emplace_back([&, sdx] {
            cppl::bench::PushSocket sock(collector.endpoint(), 100000);
            // Each sender plays every senders-th rank; a "tick" sends one message per rank.
            cppl::bench::pacedTicks(t0, rate, duration, never, [&](std::int64_t tick, double) {
                const int k = static_cast<int>(tick);
                for (int r = sdx; r < ranks; r += senders) {
                    // Past the pre-encoded messages, repeat the last ones with fresh seq numbers (cheap to patch).
                    const std::string &m = msgs[static_cast<std::size_t>(r)][static_cast<std::size_t>(std::min(k, have - 1))];
                    std::string copy;
                    const std::string *bytes = &m;
                    if (k >= have) {
                        copy = m;
                        const auto at = copy.find("\"seq\":");
                        const auto end = copy.find(',', at);
                        copy.replace(at + 6, end - at - 6, std::to_string(k));
                        bytes = &copy;
                    }
                    (sock.send(*bytes) ? sent : dropped).fetch_add(1);
                }
            });
        });
    for (auto &t : threads)
        t.join();
    // Let the collector drain what is queued.
    auto last = collector.messagesReceived();
    for (int i = 0; i < 200 && last < sent.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        last = collector.messagesReceived();
    }
    const double wall = seconds(Clock::now() - t0);
    const double cpu = cpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    const auto snap = collector.snapshot();
    const auto n = static_cast<double>(collector.messagesReceived());
    std::printf("sockets %-12s %5d ranks  %8.0f msgs  %9.0f msgs/s received  %6.2f us CPU/msg (senders included)  "
                "sender drops %lld, rejected %lld, lost %lld\n",
                rate > 0 ? (std::to_string(static_cast<int>(rate)) + " Hz").c_str() : "unpaced", ranks, n, n / wall, cpu / n * 1e6,
                static_cast<long long>(dropped.load()), static_cast<long long>(snap.decode.rejectedTotal()),
                static_cast<long long>(snap.lostTotal));

    // Snapshot latency: one marker message, then poll until a snapshot shows it.
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_PUSH);
    zmq_connect(sock, collector.endpoint().c_str());
    std::vector<double> lat;
    for (int i = 0; i < 20; ++i) {
        Message m;
        m.header.run = "bench-run";
        m.header.rank = 0;
        m.header.host = "node0";
        m.header.worldSize = ranks;
        m.header.seq = 1000000 + i;
        m.header.t = 1.8e9;
        m.header.kind = Kind::Progress;
        m.progress.tokensScoredTotal = 1000000000 + i;
        m.progress.windowsTotal = 1;
        const auto bytes = cppl::telemetry::encode(m);
        const auto s0 = Clock::now();
        zmq_send(sock, bytes.data(), bytes.size(), 0);
        // Poll every 0.2 ms (views poll at 25 Hz; a tight loop would starve the receive thread of its mutex).
        while (collector.snapshot().ranks[0].stats.tokens != 1000000000 + i)
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        lat.push_back(seconds(Clock::now() - s0) * 1e3);
    }
    std::sort(lat.begin(), lat.end());
    std::printf("send -> in snapshot  %5d ranks  median %.3f ms, max %.3f ms (polled every 0.2 ms)\n", ranks,
                lat[lat.size() / 2], lat.back());
    int zero = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(sock);
    zmq_ctx_term(ctx);
}

} // namespace

int main(int argc, char **argv)
{
    int ranks = 1024;
    double rate = 10;
    double duration = 3;
    int senders = 2;
    if (!cppl::bench::parseOptions(argc, argv, "bench_collector",
                                   {{"--ranks", &ranks}, {"--rate", &rate}, {"--seconds", &duration}, {"--senders", &senders}}))
        return 2;
    std::printf("bench_collector: %d ranks, %d sender threads, %.0f s per socket run, %u hardware threads\n", ranks, senders, duration,
                std::thread::hardware_concurrency());
    ingestAlone(ranks);
    overSockets(ranks, rate, duration, senders);
    overSockets(ranks, rate * 10, duration, senders);
    overSockets(ranks, 0, duration, senders);
    return 0;
}
