// SPDX-License-Identifier: MIT
// The CURVE server side that the dashboard's collector and the agent's relay share: the server
// socket's options and the ZAP handler that admits only a run's client keys.
#include "cppl/telemetry.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#if CLUSTERPPL_HAVE_ZMQ
#include <zmq.h>
#endif

#include <array>
#include <cstdint>

namespace cppl::telemetry {

#if CLUSTERPPL_HAVE_ZMQ

namespace {
std::string zmqError(const std::string &what)
{
    return what + ": " + zmq_strerror(zmq_errno());
}
} // namespace

void makeCurveServer(void *socket, const std::string &serverSecret, std::string_view zapDomain, const std::string &who)
{
    const int one = 1;
    if (zmq_setsockopt(socket, ZMQ_CURVE_SERVER, &one, sizeof one) != 0)
        throw ConfigError(zmqError(who + ": cannot make the PULL socket a CURVE server"));
    if (zmq_setsockopt(socket, ZMQ_CURVE_SECRETKEY, serverSecret.c_str(), serverSecret.size() + 1) != 0)
        throw ConfigError(zmqError(who + ": bad CURVE server secret"));
    if (zmq_setsockopt(socket, ZMQ_ZAP_DOMAIN, zapDomain.data(), zapDomain.size()) != 0)
        throw ConfigError(zmqError(who + ": cannot set the ZAP domain"));
}

ZapVerdict answerZap(void *zapSocket, const std::vector<std::string> &admitted)
{
    // RFC 27: version, request id, domain, address, routing id, mechanism, credentials...
    std::array<std::string, 8> frames;
    std::size_t count = 0;
    for (bool more = true; more;) {
        zmq_msg_t frame;
        zmq_msg_init(&frame);
        if (zmq_msg_recv(&frame, zapSocket, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&frame);
            return ZapVerdict::NoRequest;
        }
        if (count < frames.size())
            frames[count].assign(static_cast<const char *>(zmq_msg_data(&frame)), zmq_msg_size(&frame));
        ++count;
        more = zmq_msg_more(&frame);
        zmq_msg_close(&frame);
    }
    bool allowed = false;
    if (count >= 7 && frames[0] == "1.0" && frames[5] == "CURVE" && frames[6].size() == 32) {
        char z85[41] = {};
        zmq_z85_encode(z85, reinterpret_cast<const std::uint8_t *>(frames[6].data()), 32);
        for (const auto &key : admitted)
            allowed = allowed || key == z85;
    }
    const std::array<std::string, 6> reply{"1.0", count > 1 ? frames[1] : std::string(), allowed ? "200" : "400",
                                           allowed ? "OK" : "client key not admitted to this run", std::string(), std::string()};
    for (std::size_t i = 0; i < reply.size(); ++i)
        zmq_send(zapSocket, reply[i].data(), reply[i].size(), i + 1 < reply.size() ? ZMQ_SNDMORE : 0);
    return allowed ? ZapVerdict::Admitted : ZapVerdict::Refused;
}

#else

void makeCurveServer(void *, const std::string &, std::string_view, const std::string &who)
{
    throw ConfigError(who + ": this build has no ZeroMQ (libzmq3-dev), so it has no CURVE");
}

ZapVerdict answerZap(void *, const std::vector<std::string> &)
{
    return ZapVerdict::NoRequest;
}

#endif

} // namespace cppl::telemetry
