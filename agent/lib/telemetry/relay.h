// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace cppl::agent::telemetry {

struct RelayOptions
{
    std::string forward;      ///< the collector as the login node reaches it (the SSH reverse tunnel)
    std::string keysFile;     ///< the run's key line (0600); read once, then removed
    std::string agentKeysOut; ///< written 0600: the key line the agents read (the relay's server key, their client pair)
    std::string bind = "tcp://0.0.0.0:0"; ///< where compute nodes connect; port 0 = any free one
    std::string endpointOut;  ///< written: tcp://HOST:PORT the agents send to
    std::string advertiseHost; ///< HOST in endpointOut; empty: this host's name
};

struct RelayStats
{
    std::int64_t forwarded = 0, dropped = 0, rejected = 0;
};

/// @brief Forwards CURVE-encrypted telemetry from the agents to the collector until SIGTERM/SIGINT.
RelayStats runRelay(const RelayOptions &options, std::ostream &log);

} // namespace cppl::agent::telemetry
