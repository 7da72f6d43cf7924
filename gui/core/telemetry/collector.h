// SPDX-License-Identifier: MIT
#pragma once

// Qt-free: sockets and a thread around CollectorState. CollectorObject adapts it to Qt.

#include "telemetry/collector_state.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace cppl::core::telemetry {

struct CollectorOptions
{
    // PULL endpoint to bind. Port 0 picks a free port (see Collector::endpoint()).
    std::string bind = "tcp://127.0.0.1:0";
    // Server side of CURVE: server_public, server_secret and every admitted client_public. Runs set
    // it always, loopback included (cppl::telemetry::generateCredentials().collector: fresh keys per
    // run), so other users of a node cannot inject; required when binding beyond loopback.
    std::optional<cppl::telemetry::Credentials> curve;
    // Optional PUB endpoint re-publishing for PlotJuggler's ZeroMQ source: two frames, topic
    // "<run>/rank<R>" + the message JSON as received, and "<run>/global" + global figures (<= 10 Hz).
    std::string publishBind;
    CollectorState::Options state;
    // Messages queued in ZeroMQ per connected sender before the collector reads them (ZMQ_RCVHWM):
    // one second of 1024 ranks at 10 Hz through a relay, ~7 MB. Beyond it ZeroMQ stops reading
    // that sender, whose own queue then fills: it drops and counts (dropped_total, a seq gap),
    // never blocks, and the collector's memory stays bounded however far behind it falls.
    int receiveHighWaterMark = 10000;
};

/**
 * Binds PULL (and ZAP, monitor, PUB), runs a receive thread that decodes and merges every message
 * into a CollectorState, and answers snapshot() from any thread. onChange is called on the receive
 * thread after each batch of accepted messages or when a rank stalls; coalesce there, it may fire
 * thousands of times per second.
 */
class Collector
{
public:
    explicit Collector(CollectorOptions options, std::function<void()> onChange = {});
    ~Collector();
    Collector(const Collector &) = delete;
    Collector &operator=(const Collector &) = delete;

    /// The bound PULL endpoint, e.g. tcp://127.0.0.1:41234.
    [[nodiscard]] std::string endpoint() const { return m_endpoint; }
    [[nodiscard]] std::string publishEndpoint() const { return m_publishEndpoint; }
    [[nodiscard]] Snapshot snapshot();
    /// ZAP denials plus CURVE handshakes that failed before ZAP (wrong server key, plaintext peer).
    [[nodiscard]] std::int64_t authRejected() const noexcept { return m_authRejected.load(); }
    [[nodiscard]] std::int64_t messagesReceived() const noexcept { return m_received.load(); }
    /// Stops the thread and closes the sockets (the port is free afterwards). Idempotent.
    void stop();

    struct Sockets;

private:
    void run();
    bool receiveBatch();
    void handleZap();
    void handleMonitor();
    void publishGlobal(double now);

    CollectorOptions m_options;
    std::function<void()> m_onChange;
    std::unique_ptr<Sockets> m_sockets;
    std::string m_endpoint;
    std::string m_publishEndpoint;

    std::mutex m_mutex; // guards m_state
    CollectorState m_state;
    std::atomic<bool> m_stop{false};
    std::atomic<std::int64_t> m_authRejected{0};
    std::atomic<std::int64_t> m_received{0};
    double m_lastGlobalPublish = 0;
    std::thread m_thread;
};

/// Seconds on the monotonic clock the collector uses.
[[nodiscard]] double monotonicSeconds() noexcept;

} // namespace cppl::core::telemetry
