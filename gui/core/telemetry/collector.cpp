// SPDX-License-Identifier: MIT
#include "telemetry/collector.h"

#include "cppl/errors.h"

#include <zmq.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

namespace cppl::core::telemetry {

namespace {
constexpr std::size_t kBatch = 4096;   // messages per lock; keeps snapshot() responsive under load
// Messages read from the socket before any is applied. The more a lagging collector reads at once,
// the more of them a newer message of the same rank supersedes (1024 ranks: ~16 each). Held as
// ZeroMQ's own buffers and freed after the batch.
constexpr std::size_t kDrain = 16384;
constexpr double kGlobalPublishInterval = 0.1;

std::string zmqError(const std::string &what)
{
    return what + ": " + zmq_strerror(zmq_errno());
}

std::string bindHost(const std::string &endpoint)
{
    if (!endpoint.starts_with("tcp://"))
        return {};
    const auto rest = endpoint.substr(6);
    const auto colon = rest.rfind(':');
    std::string host = rest.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    return host;
}
} // namespace

double monotonicSeconds() noexcept
{
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Collector::Sockets
{
    void *context = nullptr;
    void *pull = nullptr;
    void *zap = nullptr;
    void *monitor = nullptr;
    void *pub = nullptr;
    std::vector<zmq_msg_t> batch = std::vector<zmq_msg_t>(kDrain); // receiveBatch()'s buffers, kept
    std::vector<std::optional<PeekedHeader>> peeks;
    std::vector<char> superseded;
    ~Sockets()
    {
        for (void *s : {pull, zap, monitor, pub})
            if (s) {
                int zero = 0;
                zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
                zmq_close(s);
            }
        if (context)
            zmq_ctx_term(context);
    }
    void *make(int type, const char *what)
    {
        void *s = zmq_socket(context, type);
        if (!s)
            throw IoError(zmqError(std::string("telemetry collector: cannot create the ") + what + " socket"));
        int zero = 0;
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
        return s;
    }
};

Collector::Collector(CollectorOptions options, std::function<void()> onChange)
    : m_options(std::move(options)), m_onChange(std::move(onChange)), m_state(m_options.state)
{
    cppl::telemetry::Endpoint where;
    where.host = bindHost(m_options.bind);
    if (where.host.empty())
        throw ConfigError("telemetry collector: bind `" + m_options.bind + "`: expected tcp://HOST:PORT (port 0: any free port)");
    if (!where.isLoopback() && !m_options.curve)
        throw ConfigError("telemetry collector: binding " + m_options.bind
                          + " exposes telemetry beyond this host; CURVE credentials are required (docs/telemetry.md)");
    if (m_options.curve && !m_options.curve->hasServer())
        throw ConfigError("telemetry collector: credentials need server_public, server_secret and at least one client_public");
    if (m_options.curve && !zmq_has("curve"))
        throw ConfigError("telemetry collector: this libzmq has no CURVE support (libsodium)");

    m_sockets = std::make_unique<Sockets>();
    auto &s = *m_sockets;
    s.context = zmq_ctx_new();
    if (!s.context)
        throw IoError(zmqError("telemetry collector: zmq_ctx_new"));
    if (m_options.curve) {
        // The ZAP handler must be bound before any CURVE server socket accepts a peer.
        s.zap = s.make(ZMQ_REP, "ZAP");
        if (zmq_bind(s.zap, cppl::telemetry::kZapEndpoint) != 0)
            throw IoError(zmqError("telemetry collector: ZAP handler"));
    }
    s.pull = s.make(ZMQ_PULL, "PULL");
    if (zmq_setsockopt(s.pull, ZMQ_RCVHWM, &m_options.receiveHighWaterMark, sizeof(int)) != 0)
        throw ConfigError(zmqError("telemetry collector: ZMQ_RCVHWM " + std::to_string(m_options.receiveHighWaterMark)));
    if (m_options.curve)
        cppl::telemetry::makeCurveServer(s.pull, m_options.curve->serverSecret, "clusterppl", "telemetry collector");
    // Failed handshakes (wrong keys, plaintext peers) are counted from the socket's monitor.
    const std::string monitorEndpoint = "inproc://cppl-collector-monitor";
    if (zmq_socket_monitor(s.pull, monitorEndpoint.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        != 0)
        throw IoError(zmqError("telemetry collector: socket monitor"));
    s.monitor = s.make(ZMQ_PAIR, "monitor");
    if (zmq_connect(s.monitor, monitorEndpoint.c_str()) != 0)
        throw IoError(zmqError("telemetry collector: socket monitor"));
    if (zmq_bind(s.pull, m_options.bind.c_str()) != 0)
        throw IoError(zmqError("telemetry collector: cannot bind " + m_options.bind));
    char buf[256] = {};
    std::size_t len = sizeof buf;
    zmq_getsockopt(s.pull, ZMQ_LAST_ENDPOINT, buf, &len);
    m_endpoint = buf;
    if (!m_options.publishBind.empty()) {
        s.pub = s.make(ZMQ_PUB, "PUB");
        if (zmq_bind(s.pub, m_options.publishBind.c_str()) != 0)
            throw IoError(zmqError("telemetry collector: cannot bind the PlotJuggler PUB " + m_options.publishBind));
        len = sizeof buf;
        zmq_getsockopt(s.pub, ZMQ_LAST_ENDPOINT, buf, &len);
        m_publishEndpoint = buf;
    }
    m_thread = std::thread([this] { run(); });
}

Collector::~Collector()
{
    stop();
}

void Collector::stop()
{
    m_stop = true;
    if (m_thread.joinable())
        m_thread.join();
    m_sockets.reset();
}

Snapshot Collector::snapshot()
{
    std::lock_guard lock(m_mutex);
    auto s = m_state.snapshot(monotonicSeconds());
    s.authRejected = m_authRejected.load();
    return s;
}

void Collector::run()
{
    auto &s = *m_sockets;
    std::array<zmq_pollitem_t, 3> items{};
    int n = 0;
    items[n++] = {s.pull, 0, ZMQ_POLLIN, 0};
    items[n++] = {s.monitor, 0, ZMQ_POLLIN, 0};
    if (s.zap)
        items[n++] = {s.zap, 0, ZMQ_POLLIN, 0};
    double lastStallCheck = 0;
    while (!m_stop.load()) {
        if (zmq_poll(items.data(), n, 50) < 0 && zmq_errno() != EINTR)
            break;
        bool changed = false;
        if (items[0].revents & ZMQ_POLLIN)
            changed = receiveBatch() || changed;
        if (items[1].revents & ZMQ_POLLIN)
            handleMonitor();
        if (n > 2 && (items[2].revents & ZMQ_POLLIN))
            handleZap();
        const double now = monotonicSeconds();
        if (now - lastStallCheck >= 0.1) {
            lastStallCheck = now;
            std::lock_guard lock(m_mutex);
            changed = m_state.checkStalls(now) || changed;
        }
        if (s.pub && now - m_lastGlobalPublish >= kGlobalPublishInterval) {
            m_lastGlobalPublish = now;
            publishGlobal(now);
        }
        if (changed && m_onChange)
            m_onChange();
    }
}

bool Collector::receiveBatch()
{
    // Everything queued (up to kDrain) first, without the lock; then what still matters is
    // decoded, under the lock in chunks: when this thread falls behind, a rank's older progress
    // and heartbeats in the queue are superseded by its newest and cost a scan, not a decode.
    auto &s = *m_sockets;
    auto &msgs = s.batch;
    auto &peeks = s.peeks;
    auto &superseded = s.superseded;
    std::size_t n = 0;
    for (; n < msgs.size(); ++n) {
        zmq_msg_init(&msgs[n]);
        if (zmq_msg_recv(&msgs[n], s.pull, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msgs[n]);
            break;
        }
    }
    auto bytesOf = [&](std::size_t i) {
        return std::string_view(static_cast<const char *>(zmq_msg_data(&msgs[i])), zmq_msg_size(&msgs[i]));
    };
    peeks.resize(n);
    for (std::size_t i = 0; i < n; ++i)
        peeks[i] = peekHeader(bytesOf(i));
    markSuperseded(peeks, superseded);
    bool changed = false;
    for (std::size_t start = 0; start < n; start += kBatch) {
        const std::size_t end = std::min(n, start + kBatch);
        std::lock_guard lock(m_mutex);
        const double now = monotonicSeconds();
        for (std::size_t i = start; i < end; ++i) {
            const std::string_view bytes = bytesOf(i);
            // Counted under the lock: a snapshot taken after messagesReceived() reached N shows them.
            m_received.fetch_add(1, std::memory_order_relaxed);
            std::string_view run;
            std::int64_t rank = -1;
            if (superseded[i] && m_state.skipSuperseded(*peeks[i], now)) {
                run = peeks[i]->run;
                rank = peeks[i]->rank;
            } else if (m_state.ingest(bytes, now)) {
                const auto &h = m_state.lastMessage().header;
                run = h.run;
                rank = h.rank;
            } else {
                continue;
            }
            changed = true;
            if (s.pub) {
                const std::string topic = std::string(run) + "/rank" + std::to_string(rank);
                zmq_send(s.pub, topic.data(), topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
                zmq_send(s.pub, bytes.data(), bytes.size(), ZMQ_DONTWAIT);
            }
        }
    }
    for (std::size_t i = 0; i < n; ++i)
        zmq_msg_close(&msgs[i]);
    return changed;
}

void Collector::handleMonitor()
{
    // Two frames: 6 bytes (uint16 event, uint32 value), then the peer's address.
    for (;;) {
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, m_sockets->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frame);
            return;
        }
        std::uint16_t event = 0;
        if (zmq_msg_size(&frame) >= 2)
            std::memcpy(&event, zmq_msg_data(&frame), 2);
        const bool more = zmq_msg_more(&frame);
        zmq_msg_close(&frame);
        if (more) {
            zmq_msg_init(&frame);
            zmq_msg_recv(&frame, m_sockets->monitor, 0);
            zmq_msg_close(&frame);
        }
        if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
            m_authRejected.fetch_add(1);
    }
}

void Collector::handleZap()
{
    cppl::telemetry::answerZap(m_sockets->zap, m_options.curve->clientPublic);
}

void Collector::publishGlobal(double now)
{
    Snapshot snap;
    {
        std::lock_guard lock(m_mutex);
        snap = m_state.snapshot(now);
    }
    if (snap.run.empty())
        return;
    std::string json = "{\"t\":" + std::to_string(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    auto field = [&](const char *key, double v) {
        if (!std::isfinite(v))
            return; // JSON has no NaN: leave the field out
        char buf[64];
        std::snprintf(buf, sizeof buf, ",\"%s\":%.17g", key, v);
        json += buf;
    };
    field("ppl", snap.globalPpl.ppl);
    field("ppl_stderr", snap.globalPpl.pplStderr);
    field("tokens_scored_total", static_cast<double>(snap.global.tokens));
    field("tokens_per_second", snap.tokensPerSecond);
    field("windows_done", static_cast<double>(snap.windowsDone));
    field("windows_total", static_cast<double>(snap.windowsTotal));
    for (int i = 0; i < kRankStateCount; ++i) {
        const std::string key = "ranks_" + std::string(rankStateName(static_cast<RankState>(i)));
        field(key.c_str(), static_cast<double>(snap.stateCounts[static_cast<std::size_t>(i)]));
    }
    field("lost_total", static_cast<double>(snap.lostTotal));
    json += '}';
    const std::string topic = snap.run + "/global";
    zmq_send(m_sockets->pub, topic.data(), topic.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(m_sockets->pub, json.data(), json.size(), ZMQ_DONTWAIT);
}

} // namespace cppl::core::telemetry
