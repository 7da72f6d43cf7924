// SPDX-License-Identifier: MIT
#pragma once

// The watchdog's sockets and line protocol (watchdog.cpp, watchdog_mesh.cpp): internal to them.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cppl::agent::dist::wire {

/// Heartbeats on every watchdog connection (the star's and the mesh's).
constexpr auto kBeat = std::chrono::milliseconds(250);
/// The cause of a rank whose connection closed without "d".
extern const std::string kDiedCause;

/// "1.5 s", for messages.
std::string seconds(std::chrono::milliseconds ms);
/// A connected TCP socket (TCP_NODELAY) to host:port, or -1 (errno says why). @p within bounds
/// the connect itself (a host gone silent would otherwise hold it for minutes); 0: unbounded.
int connectTo(const std::string &host, const std::string &port, std::chrono::milliseconds within = std::chrono::milliseconds(0));
/// Reads one '\n'-terminated line with a deadline.
bool readLine(int fd, std::string &line, std::chrono::steady_clock::time_point deadline);
/// CLUSTERPPL_TEST_TRACE_WATCHDOG=1: the watchdog's steps on stderr, with a monotonic time.
void trace(int rank, const std::string &what);
/// CLOCK_REALTIME in ns.
std::int64_t realtimeNs();
/// A listening TCP socket on any port, IPv4 and IPv6; throws CollectiveError saying which call failed.
int listenAnywhere(int &port, const std::string &who);
/// "k<rank>[ <cause>]\n": what a rank's mesh link knows of @p rank, for a new hub (lost: the cause;
/// finished: none). In a reconnecting rank's hello, and later on its star connection.
std::string reportLine(int rank, const std::string &cause);
/// Reads a reportLine() without its newline; false when malformed or @p rank is outside the world.
bool parseReport(const std::string &line, int world, int &rank, std::string &cause);
/// A new hub's side of a reconnecting rank: the hello ("r<rank>[ <epoch>]"), what that rank's
/// mesh links know ("k<rank>[ <cause>]" lines: lost, or finished without a cause; into
/// @p reports), then clock pings (each "p" answered with this clock) until "e". Returns the rank,
/// or -1 (drop the connection).
int acceptHello(int fd, int world, std::chrono::steady_clock::time_point deadline, int &epoch, std::vector<std::pair<int, std::string>> &reports);

} // namespace cppl::agent::dist::wire
