// SPDX-License-Identifier: MIT
// Run credentials: CURVE key generation and the key line launchers write to an agent's stdin.
// Here, not in the agent, so that the dashboard makes a run's keys without linking agent code.
#include "cppl/telemetry.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#if CLUSTERPPL_HAVE_ZMQ
#include <zmq.h>
#endif

#include <array>

namespace cppl::telemetry {

#if CLUSTERPPL_HAVE_ZMQ

CurveKeyPair generateCurveKeyPair()
{
    char pub[41] = {};
    char sec[41] = {};
    if (!zmq_has("curve"))
        throw ConfigError("telemetry: this libzmq has no CURVE support, so it cannot make a run's keys (build libzmq with libsodium)");
    if (zmq_curve_keypair(pub, sec) != 0)
        throw ConfigError(std::string("telemetry: zmq_curve_keypair failed: ") + zmq_strerror(zmq_errno()));
    return {pub, sec};
}

#else

CurveKeyPair generateCurveKeyPair()
{
    throw ConfigError("telemetry: this build has no ZeroMQ (libzmq3-dev), so it cannot make CURVE keys");
}

#endif

RunCredentials generateCredentials()
{
    const auto server = generateCurveKeyPair();
    const auto client = generateCurveKeyPair();
    RunCredentials r;
    r.collector.serverPublic = server.publicKey;
    r.collector.serverSecret = server.secretKey;
    r.collector.clientPublic = {client.publicKey};
    r.agent.serverPublic = server.publicKey;
    r.agent.clientPublic = {client.publicKey};
    r.agent.clientSecret = client.secretKey;
    return r;
}

std::string formatKeyLine(const Credentials &agent)
{
    if (!agent.hasClient())
        throw ConfigError("telemetry key line: needs server_public, one client_public and client_secret (the agents' half of the run's credentials)");
    for (const std::string *k : {&agent.serverPublic, &agent.clientPublic.front(), &agent.clientSecret})
        if (!isZ85Key(*k))
            throw ConfigError("telemetry key line: a key is not a 40-character Z85 CURVE key");
    return std::string(kKeyLineTag) + ' ' + agent.serverPublic + ' ' + agent.clientPublic.front() + ' ' + agent.clientSecret + '\n';
}

Credentials parseKeyLine(std::string_view line)
{
    if (line.ends_with('\n'))
        line.remove_suffix(1);
    if (line.ends_with('\r'))
        line.remove_suffix(1);
    const std::string usage = " (expected `" + std::string(kKeyLineTag)
                              + " SERVER_PUBLIC CLIENT_PUBLIC CLIENT_SECRET`, as clusterppl-cli and the dashboard write it)";
    if (line.empty())
        throw ConfigError("telemetry key line: the first line on stdin is empty" + usage);
    std::array<std::string_view, 4> words;
    std::size_t n = 0;
    while (!line.empty()) {
        const auto sp = line.find(' ');
        if (sp == 0)
            throw ConfigError("telemetry key line: words must be separated by exactly one space" + usage);
        if (n == words.size())
            throw ConfigError("telemetry key line: more than 4 words" + usage);
        words[n++] = line.substr(0, sp);
        line = sp == std::string_view::npos ? std::string_view{} : line.substr(sp + 1);
    }
    if (words[0] != kKeyLineTag)
        throw ConfigError("telemetry key line: it does not start with `" + std::string(kKeyLineTag) + "`" + usage);
    if (n != 4)
        throw ConfigError("telemetry key line: " + std::to_string(n) + " words instead of 4" + usage);
    static constexpr std::array<const char *, 3> kNames{"server public key", "client public key", "client secret key"};
    for (std::size_t i = 1; i < 4; ++i)
        if (!isZ85Key(words[i]))
            throw ConfigError(std::string("telemetry key line: the ") + kNames[i - 1] + " is not 40 Z85 characters" + usage);
    Credentials c;
    c.serverPublic = std::string(words[1]);
    c.clientPublic = {std::string(words[2])};
    c.clientSecret = std::string(words[3]);
    return c;
}

} // namespace cppl::telemetry
