// SPDX-License-Identifier: MIT
// The fake NCCL's transport: TCP, as NCCL's socket transport, so that ranks on different hosts
// (network namespaces) reach each other only over the network, a lost link hangs and a dead peer
// closes its connection. Every process has one bootstrap listener on the address NCCL would pick
// (NCCL_SOCKET_IFNAME); a new communicator's members connect to its rank 0's listener with a
// hello carrying the communicator's key, and the listener hands each connection to the
// communicator waiting for that key.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cppl::fakes::net {

/// What a member says when it connects to its communicator's rank 0.
struct Hello
{
    std::uint64_t key = 0;   ///< the communicator being formed
    std::int32_t rank = 0;   ///< the member's rank in it
    std::int32_t size = 0;   ///< the size it was asked for
    std::string listen;      ///< the member's own bootstrap listener, "ip:port" (for a later shrink)
    std::string host;        ///< NCCL_HOSTID, else the host name: two ranks on one GPU are refused
    std::string busId;       ///< the PCI bus id of the member's current device
};

enum class FrameType : std::uint32_t {
    Hello = 1,
    Welcome,    ///< rank 0 to every member: the members' listeners, or an error text
    Connect,    ///< the lazy connection of a communicator's first collective
    Connected,
    Op,         ///< one collective's contribution
    Result,
    Split,      ///< ncclCommSplit: color and key
    SplitReply, ///< new rank, size, key and rank 0's listener
};

struct Frame
{
    FrameType type = FrameType::Hello;
    std::vector<unsigned char> payload;
};

/// Binary payloads: little-endian integers and length-prefixed strings, read back in order.
class Writer
{
public:
    Writer &u64(std::uint64_t v);
    Writer &i32(std::int32_t v) { return u64(static_cast<std::uint32_t>(v)); }
    Writer &str(const std::string &s);
    Writer &bytes(const void *data, std::size_t n);
    [[nodiscard]] std::vector<unsigned char> take() { return std::move(m_out); }

private:
    std::vector<unsigned char> m_out;
};

class Reader
{
public:
    explicit Reader(const std::vector<unsigned char> &in) : m_in(in) {}
    std::uint64_t u64();
    std::int32_t i32() { return static_cast<std::int32_t>(static_cast<std::uint32_t>(u64())); }
    std::string str();
    /// The next @p n raw bytes.
    const unsigned char *bytes(std::size_t n);
    [[nodiscard]] bool ok() const { return m_ok; }

private:
    const std::vector<unsigned char> &m_in;
    std::size_t m_at = 0;
    bool m_ok = true;
};

[[nodiscard]] bool sendFrame(int fd, FrameType type, const std::vector<unsigned char> &payload);
/// False when the connection closed, was shut down (an abort) or failed.
[[nodiscard]] bool recvFrame(int fd, Frame &frame);

std::vector<unsigned char> encodeHello(const Hello &h);
bool decodeHello(const std::vector<unsigned char> &payload, Hello &h);

/// The IPv4 address NCCL's socket transport would use here: NCCL_SOCKET_IFNAME's interface
/// ("eth", "=eth0", "^docker", comma-separated), else the first interface that is up and not
/// loopback, else loopback. Empty, with @p why, when NCCL_SOCKET_IFNAME matches nothing.
[[nodiscard]] std::string socketAddress(std::string &why);

/// This process's bootstrap listener ("ip:port"), started on first use; empty with @p why.
[[nodiscard]] std::string listenAddress(std::string &why);

/// Waits for @p count members' hellos with @p key; false when @p stop became true first.
[[nodiscard]] bool awaitHellos(std::uint64_t key, int count, const std::atomic<bool> &stop, std::vector<std::pair<int, Hello>> &out);

/// Connects to @p address ("ip:port", retrying while it is refused, as NCCL's bootstrap does)
/// and sends @p hello. The socket, or -1 with @p why (also when @p stop became true).
[[nodiscard]] int connectTo(const std::string &address, const Hello &hello, const std::atomic<bool> &stop, std::string &why);

/// Waits until @p fd is readable or @p stop is set; false on stop.
[[nodiscard]] bool waitReadable(int fd, const std::atomic<bool> &stop);

/// A 64-bit random number (communicator keys).
[[nodiscard]] std::uint64_t randomKey();

} // namespace cppl::fakes::net
