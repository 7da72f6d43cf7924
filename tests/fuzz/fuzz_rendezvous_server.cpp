// SPDX-License-Identifier: MIT
// libFuzzer target for the rendezvous store's server (agent/lib/distributed/rendezvous_server.*,
// docs/fuzzing.md): the one parser of outside input that listens on the network (a tolerant run's
// store serves every interface). Each input is one client's bytes, sent whole to a fresh server on
// 127.0.0.1 and followed by the client's EOF. Properties: the server closes that connection once
// it has read the EOF (nothing it parsed keeps it open), and then still serves another client
// (c10d 1.x SET and GET of a key, answered in time): no input wedges it or takes it down.
#include "fuzz_support.h"

#include "distributed/rendezvous_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

int connectTo(int port)
{
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        cppl::fuzz::fail("socket() failed", std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // A signal (libFuzzer's timer) may interrupt connect(); the connection then completes on its own.
    if (::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
        int error = errno;
        if (error == EINTR) {
            pollfd p{fd, POLLOUT, 0};
            while (::poll(&p, 1, 4000) < 0 && errno == EINTR) {
            }
            socklen_t len = sizeof error;
            if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0)
                error = errno;
        }
        if (error != 0)
            cppl::fuzz::fail("cannot connect to the store server", std::strerror(error));
    }
    return fd;
}

/// Closes with a reset: the liveness client (which sent no FIN) then leaves no socket in TIME_WAIT.
/// The input's client half-closed first, so its socket still does, about 1,400 a second while
/// fuzzing (harmless on loopback: tcp_tw_reuse, and the kernel's cap on them).
void closeNow(int fd)
{
    const linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
}

/// Sends every byte (the server reads without blocking, so this never waits on it for long).
void sendAll(int fd, const void *data, std::size_t size)
{
    const auto *p = static_cast<const char *>(data);
    while (size > 0) {
        const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; // the server closed it (a refused request): what it read decided that
        p += n;
        size -= static_cast<std::size_t>(n);
    }
}

/// Reads until EOF (true) or until @p limit passes (false), dropping what arrives.
bool drainToEof(int fd, std::chrono::milliseconds limit)
{
    const auto end = Clock::now() + limit;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0)
            return false;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left)) <= 0)
            continue;
        char buf[4096];
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            return true; // EOF, or a reset: closed either way
    }
}

/// Reads exactly @p size bytes within @p limit; false when they did not come.
bool readExactly(int fd, void *out, std::size_t size, std::chrono::milliseconds limit)
{
    auto *p = static_cast<char *>(out);
    const auto end = Clock::now() + limit;
    while (size > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0)
            return false;
        pollfd pf{fd, POLLIN, 0};
        if (::poll(&pf, 1, static_cast<int>(left)) <= 0)
            continue; // a signal, or the time is up (checked above)
        const ssize_t n = ::recv(fd, p, size, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

void putString(std::string &out, const std::string &s)
{
    const std::uint64_t n = s.size();
    out.append(reinterpret_cast<const char *>(&n), sizeof n);
    out += s;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace std::chrono_literals;
    cppl::agent::dist::RendezvousServer server(0, "127.0.0.1");

    const int fd = connectTo(server.port());
    sendAll(fd, data, size);
    ::shutdown(fd, SHUT_WR);
    const bool closed = drainToEof(fd, 4s);
    closeNow(fd);
    if (!closed)
        cppl::fuzz::fail("the server kept a connection open after its client's EOF",
                         std::string(reinterpret_cast<const char *>(data), size));

    // Another client, c10d 1.x: SET 0 key value (no answer), GET 2 key -> uint64 length, value.
    const std::string key = "cppl-fuzz/alive";
    const std::string value = "still serving";
    std::string request(1, '\0');
    putString(request, key);
    putString(request, value);
    request += '\2';
    putString(request, key);
    const int live = connectTo(server.port());
    sendAll(live, request.data(), request.size());
    std::uint64_t length = 0;
    std::string got(value.size(), '\0');
    const bool answered = readExactly(live, &length, sizeof length, 4s) && length == value.size()
                          && readExactly(live, got.data(), got.size(), 4s) && got == value;
    closeNow(live);
    if (!answered)
        cppl::fuzz::fail("after this input the server no longer answers another client's SET and GET",
                         std::string(reinterpret_cast<const char *>(data), size));
    return 0;
}
