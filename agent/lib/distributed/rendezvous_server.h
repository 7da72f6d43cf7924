// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace cppl::agent::dist {

/**
 * @brief The rendezvous store's server: speaks the wire protocol of c10d's TCPStore, LibTorch
 * 1.13's and 2.x's (each connection in its own: what the agent was built against decides which
 * its c10d client speaks), so c10d's own client (the ranks', Gloo's) talks to it unchanged, but
 * never waits for one client.
 *
 * c10d 1.13's server reads a request with blocking reads once its first byte arrives: a client
 * that stops in the middle of a request (SIGSTOP, a hung host, a network partition: a rank stopped
 * between the send() calls of one claim) holds the server, and every other rank's store call
 * then times out; with `--on-rank-loss continue` the survivors could not elect a hub or regroup
 * (docs/communication.md, "The store never waits for one rank"). This server reads every
 * connection without blocking into a buffer of its own and handles a request once it is whole,
 * on one thread with epoll, and writes replies without blocking too (a stopped client that does
 * not read its replies holds only its own connection).
 *
 * Requests (little-endian, as c10d sends them; strings and byte vectors are a uint64 length and
 * the bytes). c10d 1.x: SET 0 key value; COMPARE_SET 1 key expected desired -> value; GET 2 key
 * -> value; ADD 3 key int64 -> int64 (the value is kept as decimal text, as c10d does); CHECK 4 n
 * keys -> 0 ready / 1 not ready; WAIT 5 n keys -> 0 once every key exists (kept until then);
 * GETNUMKEYS 6 -> int64; DELETE_KEY 8 key -> int64 (1 deleted, 0 absent). c10d 2.x opens every
 * connection with VALIDATE 0 uint32 0x3C85F7CE (how a connection's dialect is told), then the
 * same requests one number higher (SET 1 ... GETNUMKEYS 7; DELETE_KEY stays 8), and APPEND 9 key
 * bytes (onto the value, or a new key); MULTI_GET 10 n keys -> n values; MULTI_SET 11 n (key
 * value)*n; CANCEL_WAIT 12 -> 1 (its client's wait timed out: the pending waits of the
 * connection are dropped); PING 13 uint32 -> the same uint32. WATCH_KEY (1.x's 7, c10d's
 * callback client, unused by the agent), 2.x's queue requests (14-16, which only its libuv
 * server has), a GET or MULTI_GET of a missing key, an ADD to a value that is not an integer, a
 * VALIDATE with another number, and any other byte close that connection, as c10d's server does;
 * so does an ADD whose sum leaves int64 (c10d's would overflow).
 */
class RendezvousServer
{
public:
    /// Listens on @p port (0: any free one) and serves from a thread of its own: on every
    /// interface, IPv4 and IPv6, when @p bind is empty, 0.0.0.0 or ::, else on the address @p bind
    /// names only (127.0.0.1 for a store no other host may reach). Throws CollectiveError naming
    /// the address, the port and the failed call.
    explicit RendezvousServer(int port, const std::string &bind = {});
    ~RendezvousServer();
    RendezvousServer(const RendezvousServer &) = delete;
    RendezvousServer &operator=(const RendezvousServer &) = delete;

    /// @brief The port bound.
    [[nodiscard]] int port() const;

    /// Larger strings or values close the connection (a stray or corrupt client, not a rank).
    static constexpr std::uint64_t kMaxBytes = std::uint64_t{64} << 20;
    /// More keys in one CHECK or WAIT close the connection.
    static constexpr std::uint64_t kMaxKeys = std::uint64_t{1} << 20;

private:
    struct Impl;
    std::unique_ptr<Impl> m;
};

} // namespace cppl::agent::dist
