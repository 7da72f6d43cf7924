// SPDX-License-Identifier: MIT
// `clusterppl-agent store`: the rendezvous store in a process of its own (docs/communication.md,
// "The store outside rank 0").
#include "rendezvous_command.h"

#include "rendezvous_server.h"

#include "args.h"
#include "exit_codes.h"

#include "cppl/errors.h"
#include "cppl/signal_pipe.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace cppl::agent::dist {

namespace {

/// Checks before the server starts that ADDR is an address of this host and that the port is free
/// on it, so that each has its own exit code (2: a wrong argument, 5: a port in use). Throws
/// ExitError with what to do.
void probe(const std::string &addr, int port)
{
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo *found = nullptr;
    const std::string service = std::to_string(port);
    if (const int rc = ::getaddrinfo(addr.c_str(), service.c_str(), &hints, &found); rc != 0)
        throw ExitError(kExitBadArguments, "store: --bind " + addr + ": cannot resolve it (" + ::gai_strerror(rc)
                                               + "); give an address of this host, or 0.0.0.0 for all of them");
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, &::freeaddrinfo);
    int lastErrno = 0;
    for (addrinfo *a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            lastErrno = errno;
            continue;
        }
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); // as TCPStore does: TIME_WAIT is not "in use"
        const int rc = ::bind(fd, a->ai_addr, a->ai_addrlen);
        lastErrno = errno;
        ::close(fd);
        if (rc == 0)
            return;
        if (lastErrno == EADDRINUSE)
            throw ExitError(kExitCollective, "store: port " + service + " is in use on this host (another run's store or rank 0?); pick "
                                                 "another with --port (the launchers: --master-port), or --port 0 for a free one");
    }
    throw ExitError(kExitBadArguments, "store: --bind " + addr + ": not an address of this host (" + std::strerror(lastErrno)
                                           + "); give one of its addresses, or 0.0.0.0 for all of them");
}

} // namespace

int rendezvousCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err)
{
    const Args a(argv, {"--port", "--bind"}, {});
    const int port = static_cast<int>(a.integer("--port", 0, 0, 65535));
    const std::string bind = a.get("--bind").value_or("0.0.0.0");
    if (bind.empty())
        throw ExitError(kExitBadArguments, "store: --bind needs an address of this host, or 0.0.0.0 for all of them");
    probe(bind, port);
    // Signals first: a launcher may stop the store while it still starts.
    cppl::SignalPipe signals{SIGINT, SIGTERM, SIGHUP};
    std::unique_ptr<RendezvousServer> store;
    try {
        store = std::make_unique<RendezvousServer>(port, bind);
    } catch (const Error &e) {
        throw ExitError(kExitCollective, std::string("store: ") + e.what());
    }
    out << "CLUSTERPPL_STORE {\"port\":" << store->port() << ",\"addr\":\"" << bind << "\"}\n" << std::flush;
    err << "clusterppl-agent store: serving the rendezvous store on " << bind << ":" << store->port()
        << " until stdin closes or SIGTERM\n"
        << std::flush;
    bool stdinOpen = true;
    for (;;) {
        pollfd fds[2] = {{signals.readFd(), POLLIN, 0}, {stdinOpen ? 0 : -1, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            throw Error(std::string("store: poll: ") + std::strerror(errno));
        }
        if (fds[0].revents & POLLIN)
            if (const int sig = signals.drain(); sig != 0) {
                err << "clusterppl-agent store: " << ::strsignal(sig) << ", stopping\n" << std::flush;
                return kExitOk;
            }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
            char buf[512];
            const ssize_t n = (fds[1].revents & POLLNVAL) ? 0 : ::read(0, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                err << "clusterppl-agent store: stdin closed (the launcher is done or gone), stopping\n" << std::flush;
                return kExitOk;
            }
        }
    }
}

} // namespace cppl::agent::dist
