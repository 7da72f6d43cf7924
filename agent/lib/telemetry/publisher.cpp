// SPDX-License-Identifier: MIT
#include "telemetry/publisher.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#if CLUSTERPPL_HAVE_ZMQ
#include <zmq.h>
#endif

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace cppl::agent::telemetry {

using cppl::telemetry::Kind;
using cppl::telemetry::Message;

namespace {

double epochSeconds()
{
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

} // namespace

#if CLUSTERPPL_HAVE_ZMQ

struct Publisher::Socket
{
    void *context = nullptr;
    void *socket = nullptr;
    ~Socket()
    {
        if (socket)
            zmq_close(socket);
        if (context)
            zmq_ctx_term(context); // waits at most ZMQ_LINGER for queued messages
    }
    void set(int option, int value, const char *what)
    {
        if (zmq_setsockopt(socket, option, &value, sizeof value) != 0)
            throw ConfigError(std::string("telemetry: cannot set ") + what + ": " + zmq_strerror(zmq_errno()));
    }
    void setKey(int option, const std::string &z85, const char *what)
    {
        // 41 bytes: a Z85 key with its terminating NUL, as libzmq expects the text form.
        if (zmq_setsockopt(socket, option, z85.c_str(), z85.size() + 1) != 0)
            throw ConfigError(std::string("telemetry: bad CURVE ") + what + ": " + zmq_strerror(zmq_errno()));
    }
};

std::unique_ptr<Publisher> Publisher::open(const std::string &endpoint, Identity identity, std::optional<Credentials> credentials,
                                           PublisherOptions options)
{
    const auto ep = cppl::telemetry::parseEndpoint(endpoint);
    if (!ep.isLoopback() && !credentials)
        throw ConfigError("--telemetry " + endpoint + ": telemetry that leaves this host must be encrypted; pass this run's "
                          "CURVE credentials with --telemetry-keys FILE (mode 0600) or --telemetry-keys - (stdin)");
    if (credentials && !credentials->hasClient())
        throw ConfigError("telemetry credentials: an agent needs server_public, one client_public and client_secret");
    if (credentials && !zmq_has("curve"))
        throw ConfigError("telemetry: this libzmq has no CURVE support (build it with libsodium)");

    auto s = std::make_unique<Socket>();
    s->context = zmq_ctx_new();
    if (!s->context)
        throw ConfigError(std::string("telemetry: zmq_ctx_new failed: ") + zmq_strerror(zmq_errno()));
    zmq_ctx_set(s->context, ZMQ_IO_THREADS, 1);
    s->socket = zmq_socket(s->context, ZMQ_PUSH);
    if (!s->socket)
        throw ConfigError(std::string("telemetry: cannot create a PUSH socket: ") + zmq_strerror(zmq_errno()));
    s->set(ZMQ_SNDHWM, options.sendHighWaterMark, "ZMQ_SNDHWM");
    s->set(ZMQ_LINGER, static_cast<int>(options.closeTimeout.count()), "ZMQ_LINGER");
    // ZMTP heartbeats notice a collector that vanished without closing the connection (a host
    // gone), so the socket reconnects instead of queueing into a dead pipe.
    s->set(ZMQ_HEARTBEAT_IVL, 1000, "ZMQ_HEARTBEAT_IVL");
    s->set(ZMQ_HEARTBEAT_TIMEOUT, 3000, "ZMQ_HEARTBEAT_TIMEOUT");
    s->set(ZMQ_RECONNECT_IVL_MAX, 2000, "ZMQ_RECONNECT_IVL_MAX");
    if (credentials) {
        s->setKey(ZMQ_CURVE_SERVERKEY, credentials->serverPublic, "server_public");
        s->setKey(ZMQ_CURVE_PUBLICKEY, credentials->clientPublic.front(), "client_public");
        s->setKey(ZMQ_CURVE_SECRETKEY, credentials->clientSecret, "client_secret");
    }
    if (zmq_connect(s->socket, ep.zmq().c_str()) != 0)
        throw ConfigError("--telemetry " + endpoint + ": " + zmq_strerror(zmq_errno()));
    return std::unique_ptr<Publisher>(new Publisher(std::move(identity), options, std::move(s)));
}

#else // !CLUSTERPPL_HAVE_ZMQ

struct Publisher::Socket
{
};

std::unique_ptr<Publisher> Publisher::open(const std::string &endpoint, Identity, std::optional<Credentials>, PublisherOptions)
{
    throw ConfigError("--telemetry " + endpoint + ": this clusterppl-agent was built without ZeroMQ (libzmq3-dev), "
                      "so it cannot stream telemetry; rebuild with libzmq or run without --telemetry");
}

#endif

std::int64_t currentRssBytes() noexcept
{
    std::FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    long long size = 0;
    long long resident = 0;
    const int n = std::fscanf(f, "%lld %lld", &size, &resident);
    std::fclose(f);
    return n == 2 ? static_cast<std::int64_t>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

Publisher::Publisher(Identity identity, PublisherOptions options, std::unique_ptr<Socket> socket)
    : m_identity(std::move(identity)), m_options(options), m_socket(std::move(socket))
{
    m_nextHeartbeat = Clock::now() + m_options.heartbeatInterval;
    {
        std::lock_guard lock(m_mutex);
        Message hello;
        hello.header.kind = Kind::Hello;
        hello.phase = m_phase;
        enqueueLocked(std::move(hello));
    }
    m_thread = std::thread([this] { run(); });
}

Publisher::~Publisher()
{
    close();
}

void Publisher::enqueueLocked(Message &&m)
{
    // The sequence number is taken even when the message is dropped: the collector sees the gap.
    auto &h = m.header;
    h.seq = m_nextSeq++;
    h.t = epochSeconds();
    h.run = m_identity.run;
    h.rank = m_identity.rank;
    h.host = m_identity.host;
    h.group = m_identity.group;
    h.localRank = m_identity.localRank;
    h.worldSize = m_identity.worldSize;
    if (m_closed || m_queue.size() >= m_options.queueCapacity) {
        m_dropped.fetch_add(1);
        return;
    }
    m_queue.push_back(std::move(m));
    m_wake.notify_one();
}

void Publisher::flushProgressLocked(Clock::time_point now)
{
    if (!m_pendingProgress)
        return;
    Message m;
    m.header.kind = Kind::Progress;
    m.progress = std::move(*m_pendingProgress);
    m_pendingProgress.reset();
    if (m.progress.rssBytes == 0)
        m.progress.rssBytes = currentRssBytes();
    if (m_gpu && !m.progress.deviceMemoryBytes) {
        // NVML answers in well under a millisecond, but 10 progress messages a second need no
        // more than one reading a second.
        if (m_gpuSampledAt == Clock::time_point{} || now - m_gpuSampledAt >= std::chrono::seconds(1)) {
            m_gpuSample = m_gpu->sample();
            m_gpuSampledAt = now;
        }
        if (m_gpuSample) {
            m.progress.deviceMemoryBytes = m_gpuSample->usedBytes;
            m.progress.deviceMemoryTotalBytes = m_gpuSample->totalBytes;
            m.progress.gpuUtilizationPercent = m_gpuSample->utilizationPercent;
        }
    }
    m_lastProgress = now;
    enqueueLocked(std::move(m));
}

void Publisher::setGpuStats(std::unique_ptr<GpuStats> gpu)
{
    std::lock_guard lock(m_mutex);
    m_gpu = std::move(gpu);
    m_gpuSample.reset();
    m_gpuSampledAt = {};
}

void Publisher::phase(Phase p)
{
    std::lock_guard lock(m_mutex);
    m_phase = p;
    Message m;
    m.header.kind = Kind::Heartbeat;
    m.phase = p;
    enqueueLocked(std::move(m));
}

void Publisher::progress(const Progress &p, bool final)
{
    const auto now = Clock::now();
    std::lock_guard lock(m_mutex);
    m_pendingProgress = p;
    if (final || now - m_lastProgress >= m_options.progressInterval)
        flushProgressLocked(now);
    else
        m_wake.notify_one(); // the sender thread sends it when the interval has passed
}

void Publisher::sync(const Sync &s)
{
    std::lock_guard lock(m_mutex);
    m_phase = Phase::Evaluating;
    Message m;
    m.header.kind = Kind::Sync;
    m.sync = s;
    enqueueLocked(std::move(m));
}

void Publisher::log(LogLevel level, std::string_view line)
{
    Message m;
    m.header.kind = Kind::Log;
    m.level = level;
    m.text.assign(line.substr(0, cppl::telemetry::kMaxTextBytes));
    std::lock_guard lock(m_mutex);
    enqueueLocked(std::move(m));
}

void Publisher::result(std::string resultJson)
{
    std::lock_guard lock(m_mutex);
    flushProgressLocked(Clock::now());
    m_phase = Phase::Finishing;
    Message m;
    m.header.kind = Kind::Result;
    m.resultJson = std::move(resultJson);
    enqueueLocked(std::move(m));
}

void Publisher::error(std::string_view message, int exitCode)
{
    Message m;
    m.header.kind = Kind::Error;
    m.text.assign(message.substr(0, cppl::telemetry::kMaxTextBytes));
    m.exitCode = exitCode < 0 || exitCode > 255 ? 1 : exitCode;
    std::lock_guard lock(m_mutex);
    flushProgressLocked(Clock::now());
    enqueueLocked(std::move(m));
}

void Publisher::close(std::optional<int> exitCode)
{
    {
        std::lock_guard lock(m_mutex);
        if (m_closed)
            return;
        flushProgressLocked(Clock::now());
        Message bye;
        bye.header.kind = Kind::Bye;
        if (exitCode)
            bye.exitCode = *exitCode < 0 || *exitCode > 255 ? 1 : *exitCode;
        enqueueLocked(std::move(bye));
        m_closed = true;
        m_stopping = true;
        m_wake.notify_one();
    }
    if (m_thread.joinable())
        m_thread.join();
    m_socket.reset(); // zmq_ctx_term: at most closeTimeout (ZMQ_LINGER)
}

void Publisher::run()
{
    std::deque<Message> batch;
    for (;;) {
        bool stopping = false;
        {
            std::unique_lock lock(m_mutex);
            auto deadline = m_nextHeartbeat;
            if (m_pendingProgress)
                deadline = std::min(deadline, m_lastProgress + m_options.progressInterval);
            m_wake.wait_until(lock, deadline, [&] {
                return m_stopping || !m_queue.empty()
                       || (m_pendingProgress && Clock::now() - m_lastProgress >= m_options.progressInterval);
            });
            const auto now = Clock::now();
            if (m_pendingProgress && now - m_lastProgress >= m_options.progressInterval)
                flushProgressLocked(now);
            if (now >= m_nextHeartbeat && !m_stopping) {
                Message hb;
                hb.header.kind = Kind::Heartbeat;
                hb.phase = m_phase;
                enqueueLocked(std::move(hb));
                m_nextHeartbeat = now + m_options.heartbeatInterval;
            }
            batch.swap(m_queue);
            stopping = m_stopping;
        }
        for (auto &m : batch) {
            m.header.droppedTotal = m_dropped.load();
            const std::string bytes = cppl::telemetry::encode(m);
#if CLUSTERPPL_HAVE_ZMQ
            int rc = -1;
            do
                rc = zmq_send(m_socket->socket, bytes.data(), bytes.size(), ZMQ_DONTWAIT);
            while (rc < 0 && zmq_errno() == EINTR);
            if (rc < 0)
                m_dropped.fetch_add(1); // EAGAIN: the high-water mark is reached or no peer yet
#endif
        }
        batch.clear();
        if (stopping)
            return;
    }
}

} // namespace cppl::agent::telemetry
