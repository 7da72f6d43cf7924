// SPDX-License-Identifier: MIT
// A raw ZeroMQ PUSH socket in a context of its own: how the telemetry tests and benchmarks send
// hand-made messages to a collector (so they can drop, reorder and duplicate them exactly, or send
// as many as 1024 simulated ranks do), plaintext or with CURVE keys.
#pragma once

#include "cppl/telemetry.h"

#include <zmq.h>

#include <optional>
#include <string>

namespace cppl::test {

class ZmqPush
{
public:
    struct Options
    {
        int sendHighWaterMark = 1000; ///< messages queued before send() drops
        int lingerMs = 0;             ///< how long the close waits for queued messages
        std::optional<cppl::telemetry::Credentials> curve; ///< client keys; plaintext when unset
    };

    ZmqPush(const std::string &endpoint, const Options &o) : m_context(zmq_ctx_new()), m_socket(zmq_socket(m_context, ZMQ_PUSH))
    {
        zmq_setsockopt(m_socket, ZMQ_SNDHWM, &o.sendHighWaterMark, sizeof o.sendHighWaterMark);
        zmq_setsockopt(m_socket, ZMQ_LINGER, &o.lingerMs, sizeof o.lingerMs);
        if (o.curve) {
            zmq_setsockopt(m_socket, ZMQ_CURVE_SERVERKEY, o.curve->serverPublic.c_str(), 41);
            zmq_setsockopt(m_socket, ZMQ_CURVE_PUBLICKEY, o.curve->clientPublic.front().c_str(), 41);
            zmq_setsockopt(m_socket, ZMQ_CURVE_SECRETKEY, o.curve->clientSecret.c_str(), 41);
        }
        zmq_connect(m_socket, endpoint.c_str());
    }
    ~ZmqPush()
    {
        zmq_close(m_socket);
        zmq_ctx_term(m_context);
    }
    ZmqPush(const ZmqPush &) = delete;
    ZmqPush &operator=(const ZmqPush &) = delete;

    /// False when the message was dropped (the queue is full), as an agent's publisher drops it.
    bool send(const std::string &bytes) { return zmq_send(m_socket, bytes.data(), bytes.size(), ZMQ_DONTWAIT) >= 0; }
    /// Blocking send (the tests want every message delivered).
    void sendAll(const std::string &bytes) { zmq_send(m_socket, bytes.data(), bytes.size(), 0); }

private:
    void *m_context;
    void *m_socket;
};

} // namespace cppl::test
