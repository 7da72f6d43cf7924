// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/telemetry.h"
#include "telemetry/gpu_stats.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

namespace cppl::agent::telemetry {

using cppl::telemetry::Credentials;
using cppl::telemetry::LogLevel;
using cppl::telemetry::Phase;
using cppl::telemetry::Progress;
using cppl::telemetry::Sync;

/// Who this rank is; copied into every message's header.
struct Identity
{
    std::string run;            // run id shared by all ranks, [A-Za-z0-9._:-]{1,128}
    std::int64_t rank = 0;
    std::string host;
    std::int64_t group = 0;
    std::int64_t localRank = 0;
    std::int64_t worldSize = 1;
};

struct PublisherOptions
{
    // Liveness: the collector calls a rank stalled after 3 s of silence by default, so a heartbeat
    // every second survives two lost ones.
    std::chrono::milliseconds heartbeatInterval{1000};
    // At most 10 progress messages per second: 1024 ranks then cost the collector ~10k msgs/s.
    // Calls in between are coalesced; the latest totals always go out.
    std::chrono::milliseconds progressInterval{100};
    // Messages waiting for the sender thread. When full, new messages are dropped and counted; the
    // evaluation thread never waits.
    std::size_t queueCapacity = 4096;
    // ZeroMQ's own queue per connection (ZMQ_SNDHWM); a full one makes a send a counted drop too.
    int sendHighWaterMark = 1000;
    // close(): how long queued messages and `bye` may still take to leave (ZMQ_LINGER). Bounds the
    // delay at exit when the collector is unreachable.
    std::chrono::milliseconds closeTimeout{1000};
};

/**
 * Streams this rank's telemetry to the collector over a ZeroMQ PUSH socket (docs/telemetry.md).
 * Every call only queues a message and returns: a sender thread encodes and sends with
 * ZMQ_DONTWAIT, so evaluation never waits on the network. Thread-safe.
 */
class Publisher
{
public:
    /**
     * Connects to @p endpoint (tcp://HOST:PORT) and sends `hello`. CURVE is used when
     * @p credentials are given and is mandatory when HOST is not a loopback address. Throws
     * ConfigError for a bad endpoint, missing credentials or an agent built without ZeroMQ.
     */
    static std::unique_ptr<Publisher> open(const std::string &endpoint, Identity identity,
                                           std::optional<Credentials> credentials, PublisherOptions options = {});
    ~Publisher(); // close()
    Publisher(const Publisher &) = delete;
    Publisher &operator=(const Publisher &) = delete;

    /// What this rank is doing now; sent at once as a heartbeat, then with every heartbeat.
    void phase(Phase p);
    /// Where this rank's GPU figures come from (openNvmlForCudaDevice); none: no device fields.
    void setGpuStats(std::unique_ptr<GpuStats> gpu);
    /// Cumulative totals. Rate-limited to progressInterval unless @p final (the shard's last one).
    /// rssBytes 0 is filled in from /proc/self/statm; the device fields, when not set, from the
    /// GpuStats (read at most once a second).
    void progress(const Progress &p, bool final = false);
    /// One sync round done (phase returns to evaluating).
    void sync(const Sync &s);
    void log(LogLevel level, std::string_view line);
    /// The shard is done: sends any coalesced progress first, then `result` (rank 0: the
    /// aggregated result JSON; other ranks may pass an empty string).
    void result(std::string resultJson = {});
    void error(std::string_view message, int exitCode);
    /// Sends `bye` and waits at most closeTimeout for queued messages to leave. Idempotent.
    void close(std::optional<int> exitCode = 0);

    [[nodiscard]] std::int64_t droppedTotal() const noexcept { return m_dropped.load(); }

    struct Socket;

private:
    Publisher(Identity identity, PublisherOptions options, std::unique_ptr<Socket> socket);
    using Clock = std::chrono::steady_clock;
    void enqueueLocked(cppl::telemetry::Message &&m);
    void flushProgressLocked(Clock::time_point now);
    void run();

    Identity m_identity;
    PublisherOptions m_options;
    std::unique_ptr<Socket> m_socket;

    std::mutex m_mutex;
    std::condition_variable m_wake;
    std::deque<cppl::telemetry::Message> m_queue;
    std::int64_t m_nextSeq = 0;
    Phase m_phase = Phase::Connecting;
    std::optional<Progress> m_pendingProgress;
    std::unique_ptr<GpuStats> m_gpu;
    std::optional<GpuSample> m_gpuSample;
    Clock::time_point m_gpuSampledAt{};
    Clock::time_point m_lastProgress{};
    Clock::time_point m_nextHeartbeat{};
    bool m_stopping = false;
    bool m_closed = false;

    std::atomic<std::int64_t> m_dropped{0};
    std::thread m_thread;
};

// A run's keys: cppl::telemetry::generateCredentials() (shared/, so the dashboard needs no agent code).

/// Resident set size of this process in bytes (0 when unknown).
[[nodiscard]] std::int64_t currentRssBytes() noexcept;

} // namespace cppl::agent::telemetry
