// SPDX-License-Identifier: MIT
// `clusterppl-agent relay`: telemetry for clusters whose compute nodes reach only the login node.
// On the login node it binds a PULL socket (CURVE server with keys of its own, admitting only the
// client key it hands to the agents) and forwards every message, untouched, over a PUSH socket (a
// CURVE client with the run's keys) to the collector, through the SSH reverse tunnel on the login
// node's loopback. docs/telemetry.md, "Relay".
#include "telemetry/relay.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/telemetry.h"

#if CLUSTERPPL_HAVE_ZMQ
#include <zmq.h>
#endif

#include <array>
#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace cppl::agent::telemetry {

namespace {

std::atomic<bool> g_stop{false};

std::string readSecretFile(const std::string &path)
{
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0)
        throw ConfigError("relay: cannot read the key file " + path + " (does it exist?)");
    if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid())
        throw ConfigError("relay: the key file " + path + " must belong to this user with mode 0600 (chmod 600)");
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

void writeSecretFile(const std::string &path, const std::string &text)
{
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) || ::close(fd) != 0
        || ::rename(tmp.c_str(), path.c_str()) != 0)
        throw IoError("relay: cannot write " + path);
}

} // namespace

#if CLUSTERPPL_HAVE_ZMQ

namespace {

std::string zmqError(const std::string &what)
{
    return what + ": " + zmq_strerror(zmq_errno());
}

void setKey(void *s, int option, const std::string &z85, const char *what)
{
    if (zmq_setsockopt(s, option, z85.c_str(), z85.size() + 1) != 0)
        throw ConfigError(zmqError(std::string("relay: bad CURVE ") + what));
}

/// The relay's ZeroMQ context and its sockets, closed (linger 0) before the context ends.
struct ZmqContext
{
    void *ctx = zmq_ctx_new();
    std::vector<void *> sockets;
    ZmqContext() = default;
    ZmqContext(const ZmqContext &) = delete;
    ZmqContext &operator=(const ZmqContext &) = delete;
    ~ZmqContext()
    {
        for (void *s : sockets)
            zmq_close(s);
        zmq_ctx_term(ctx);
    }
    void *make(int type)
    {
        void *s = zmq_socket(ctx, type);
        if (!s)
            throw ConfigError(zmqError("relay: cannot create a socket"));
        const int zero = 0;
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
        sockets.push_back(s);
        return s;
    }
};

/// tcp://HOST:PORT the agents send to: @p pull's bound port on this host (its name, or the one asked).
std::string agentEndpoint(void *pull, const RelayOptions &o)
{
    std::array<char, 256> last{};
    std::size_t len = last.size();
    zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, last.data(), &len);
    const std::string bound(last.data());
    const std::string port = bound.substr(bound.rfind(':') + 1);
    std::string host = o.advertiseHost;
    if (host.empty()) {
        std::array<char, 256> h{};
        ::gethostname(h.data(), h.size() - 1);
        host = h.data();
    }
    return "tcp://" + host + ":" + port;
}

/// The collector's side: a PUSH socket, a CURVE client with the run's keys, through the SSH tunnel.
void *connectCollector(ZmqContext &c, const cppl::telemetry::Credentials &upstream, const std::string &forward)
{
    void *push = c.make(ZMQ_PUSH);
    setKey(push, ZMQ_CURVE_SERVERKEY, upstream.serverPublic, "collector public key");
    setKey(push, ZMQ_CURVE_PUBLICKEY, upstream.clientPublic.front(), "client public key");
    setKey(push, ZMQ_CURVE_SECRETKEY, upstream.clientSecret, "client secret key");
    const int hwm = 100000;
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (zmq_connect(push, forward.c_str()) != 0)
        throw ConfigError(zmqError("relay: cannot connect to " + forward));
    return push;
}

/// What the agents sent, up to 1000 messages: each forwarded as is (every frame, neither read nor
/// rewritten), or counted dropped when the collector is gone or far behind (the relay never blocks).
void forwardBurst(void *pull, void *push, RelayStats &stats)
{
    for (int burst = 0; burst < 1000; ++burst) {
        bool more = true, got = false, lost = false;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, pull, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&m);
                break;
            }
            got = true;
            more = zmq_msg_more(&m);
            lost = (!lost && zmq_msg_send(&m, push, (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) || lost;
            zmq_msg_close(&m);
        }
        if (!got)
            break;
        ++(lost ? stats.dropped : stats.forwarded);
    }
}

/// Answers the ZAP requests of agents connecting (only the run's client key is admitted) and
/// forwards their messages until SIGTERM or SIGINT.
void forwardUntilStopped(void *zap, void *pull, void *push, const cppl::telemetry::Credentials &agents, RelayStats &stats)
{
    g_stop = false;
    struct sigaction sa{};
    sa.sa_handler = [](int) { g_stop = true; };
    ::sigaction(SIGTERM, &sa, nullptr);
    ::sigaction(SIGINT, &sa, nullptr);
    while (!g_stop) {
        zmq_pollitem_t items[] = {{zap, 0, ZMQ_POLLIN, 0}, {pull, 0, ZMQ_POLLIN, 0}};
        if (zmq_poll(items, 2, 200) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            throw IoError(zmqError("relay: poll"));
        }
        if ((items[0].revents & ZMQ_POLLIN) && cppl::telemetry::answerZap(zap, agents.clientPublic) == cppl::telemetry::ZapVerdict::Refused)
            ++stats.rejected;
        if (items[1].revents & ZMQ_POLLIN)
            forwardBurst(pull, push, stats);
    }
}

} // namespace

RelayStats runRelay(const RelayOptions &o, std::ostream &log)
{
    const cppl::telemetry::Credentials upstream = cppl::telemetry::parseKeyLine(readSecretFile(o.keysFile));
    ::unlink(o.keysFile.c_str()); // read once; the secret stays in this process only
    if (!zmq_has("curve"))
        throw ConfigError("relay: this libzmq has no CURVE support (libsodium)");
    (void)cppl::telemetry::parseEndpoint(o.forward);
    // The agents' keys: a server pair of the relay's own and one client pair for every rank.
    const auto server = cppl::telemetry::generateCurveKeyPair();
    const auto client = cppl::telemetry::generateCurveKeyPair();
    cppl::telemetry::Credentials agents;
    agents.serverPublic = server.publicKey;
    agents.clientPublic = {client.publicKey};
    agents.clientSecret = client.secretKey;

    ZmqContext c;
    void *zap = c.make(ZMQ_REP);
    if (zmq_bind(zap, cppl::telemetry::kZapEndpoint) != 0)
        throw IoError(zmqError("relay: ZAP handler"));
    void *pull = c.make(ZMQ_PULL);
    cppl::telemetry::makeCurveServer(pull, server.secretKey, "clusterppl-relay", "relay"); // admitting only `client` (the ZAP handler)
    if (zmq_bind(pull, o.bind.c_str()) != 0)
        throw IoError(zmqError("relay: cannot bind " + o.bind));
    const std::string endpoint = agentEndpoint(pull, o);
    void *push = connectCollector(c, upstream, o.forward);

    writeSecretFile(o.agentKeysOut, cppl::telemetry::formatKeyLine(agents));
    writeSecretFile(o.endpointOut, endpoint + "\n");
    log << "relay: listening on " << endpoint << " (CURVE), forwarding to " << o.forward << '\n' << std::flush;
    RelayStats stats;
    forwardUntilStopped(zap, pull, push, agents, stats);
    log << "relay: forwarded " << stats.forwarded << " messages, dropped " << stats.dropped << ", rejected " << stats.rejected
        << " unknown clients\n"
        << std::flush;
    return stats;
}

#else

RelayStats runRelay(const RelayOptions &, std::ostream &)
{
    throw ConfigError("relay: this clusterppl-agent was built without ZeroMQ (libzmq3-dev)");
}

#endif

} // namespace cppl::agent::telemetry
