// SPDX-License-Identifier: MIT
#include "fake_nccl_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace cppl::fakes::net {

namespace {

constexpr auto kConnectRetryFor = std::chrono::seconds(60); // NCCL's bootstrap retries refused connections for a while too
constexpr int kPollSliceMs = 50;

bool writeAll(int fd, const void *data, std::size_t n)
{
    const auto *p = static_cast<const unsigned char *>(data);
    while (n > 0) {
        const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL); // a closed peer is an error here, never SIGPIPE
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= static_cast<std::size_t>(k);
    }
    return true;
}

bool readAll(int fd, void *data, std::size_t n)
{
    auto *p = static_cast<unsigned char *>(data);
    while (n > 0) {
        const ssize_t k = ::recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        p += k;
        n -= static_cast<std::size_t>(k);
    }
    return true;
}

/// One NCCL_SOCKET_IFNAME item against an interface name: "=name" exact, else a prefix.
bool matches(const std::string &item, const std::string &name)
{
    if (!item.empty() && item[0] == '=')
        return name == item.substr(1);
    return name.compare(0, item.size(), item) == 0;
}

bool selected(const std::string &name, const char *spec)
{
    if (!spec || !*spec) // NCCL's default: anything but loopback and docker bridges
        return name != "lo" && name.compare(0, 6, "docker") != 0;
    std::string s = spec;
    const bool exclude = s[0] == '^';
    if (exclude)
        s = s.substr(1);
    bool any = false;
    std::size_t start = 0;
    for (;;) {
        const std::size_t comma = s.find(',', start);
        const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        any = any || (!item.empty() && matches(item, name));
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return exclude ? !any : any;
}

/// Connections that said hello, by communicator key, until a communicator takes them.
struct Pending
{
    std::mutex mutex;
    std::condition_variable arrived;
    std::multimap<std::uint64_t, std::pair<int, Hello>> byKey;
};
Pending &pending()
{
    static auto *p = new Pending; // never destroyed: the listener's threads outlive static destructors
    return *p;
}

void readHello(int fd)
{
    Frame f;
    Hello h;
    if (!recvFrame(fd, f) || f.type != FrameType::Hello || !decodeHello(f.payload, h)) {
        ::close(fd);
        return;
    }
    Pending &p = pending();
    const std::lock_guard lock(p.mutex);
    p.byKey.emplace(h.key, std::make_pair(fd, h));
    p.arrived.notify_all();
}

void acceptLoop(int listener)
{
    for (;;) {
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::thread(readHello, fd).detach(); // a member that connects and says nothing holds only its own thread
    }
}

bool parseAddress(const std::string &address, sockaddr_in &a)
{
    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos)
        return false;
    a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(address.c_str() + colon + 1)));
    return ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr) == 1;
}

/// One non-blocking connect, abandoned when @p stop is set: 0, or the errno.
int connectOnce(int fd, const sockaddr_in &a, const std::atomic<bool> &stop)
{
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    if (::connect(fd, reinterpret_cast<const sockaddr *>(&a), sizeof a) != 0) {
        if (errno != EINPROGRESS)
            return errno;
        pollfd p{fd, POLLOUT, 0};
        while (::poll(&p, 1, kPollSliceMs) == 0)
            if (stop.load())
                return ECANCELED;
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0)
            return err;
    }
    ::fcntl(fd, F_SETFL, flags);
    return 0;
}

} // namespace

Writer &Writer::u64(std::uint64_t v)
{
    for (int i = 0; i < 8; ++i)
        m_out.push_back(static_cast<unsigned char>(v >> (8 * i)));
    return *this;
}

Writer &Writer::str(const std::string &s)
{
    u64(s.size());
    return bytes(s.data(), s.size());
}

Writer &Writer::bytes(const void *data, std::size_t n)
{
    const auto *p = static_cast<const unsigned char *>(data);
    m_out.insert(m_out.end(), p, p + n);
    return *this;
}

std::uint64_t Reader::u64()
{
    const unsigned char *p = bytes(8);
    std::uint64_t v = 0;
    for (int i = 0; p && i < 8; ++i)
        v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
    return v;
}

std::string Reader::str()
{
    const std::uint64_t n = u64();
    const unsigned char *p = bytes(static_cast<std::size_t>(n));
    return p ? std::string(reinterpret_cast<const char *>(p), static_cast<std::size_t>(n)) : std::string();
}

const unsigned char *Reader::bytes(std::size_t n)
{
    if (!m_ok || n > m_in.size() - m_at) {
        m_ok = false;
        return nullptr;
    }
    const unsigned char *p = m_in.data() + m_at;
    m_at += n;
    return p;
}

bool sendFrame(int fd, FrameType type, const std::vector<unsigned char> &payload)
{
    Writer header;
    header.u64(static_cast<std::uint64_t>(type)).u64(payload.size());
    const std::vector<unsigned char> h = header.take();
    return writeAll(fd, h.data(), h.size()) && writeAll(fd, payload.data(), payload.size());
}

bool recvFrame(int fd, Frame &frame)
{
    std::vector<unsigned char> header(16);
    if (!readAll(fd, header.data(), header.size()))
        return false;
    Reader r(header);
    frame.type = static_cast<FrameType>(r.u64());
    const std::uint64_t n = r.u64();
    if (n > (std::uint64_t{1} << 34))
        return false;
    frame.payload.resize(static_cast<std::size_t>(n));
    return readAll(fd, frame.payload.data(), frame.payload.size());
}

std::vector<unsigned char> encodeHello(const Hello &h)
{
    Writer w;
    w.u64(h.key).i32(h.rank).i32(h.size).str(h.listen).str(h.host).str(h.busId);
    return w.take();
}

bool decodeHello(const std::vector<unsigned char> &payload, Hello &h)
{
    Reader r(payload);
    h.key = r.u64();
    h.rank = r.i32();
    h.size = r.i32();
    h.listen = r.str();
    h.host = r.str();
    h.busId = r.str();
    return r.ok();
}

std::string socketAddress(std::string &why)
{
    const char *spec = std::getenv("NCCL_SOCKET_IFNAME");
    ifaddrs *all = nullptr;
    if (::getifaddrs(&all) != 0) {
        why = std::string("getifaddrs: ") + std::strerror(errno);
        return {};
    }
    std::string found, loopback;
    for (ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        char text[INET_ADDRSTRLEN] = {};
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr, text, sizeof text);
        if ((i->ifa_flags & IFF_LOOPBACK) && loopback.empty())
            loopback = text;
        if (found.empty() && selected(i->ifa_name, spec))
            found = text;
    }
    ::freeifaddrs(all);
    if (!found.empty())
        return found;
    if (spec && *spec) {
        why = std::string("Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=") + spec + ")";
        return {};
    }
    return loopback.empty() ? std::string("127.0.0.1") : loopback;
}

std::string listenAddress(std::string &why)
{
    static std::mutex mutex;
    static std::string address;
    static std::string error;
    const std::lock_guard lock(mutex);
    if (!address.empty() || !error.empty()) {
        why = error;
        return address;
    }
    const std::string ip = socketAddress(error);
    sockaddr_in a{};
    if (ip.empty() || !parseAddress(ip + ":0", a)) {
        why = error.empty() ? (error = "no address to listen on") : error;
        return {};
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 || ::listen(fd, 256) != 0
        || ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
        why = error = "bootstrap listener on " + ip + ": " + std::strerror(errno);
        return {};
    }
    std::thread(acceptLoop, fd).detach();
    address = ip + ":" + std::to_string(ntohs(a.sin_port));
    return address;
}

bool awaitHellos(std::uint64_t key, int count, const std::atomic<bool> &stop, std::vector<std::pair<int, Hello>> &out)
{
    Pending &p = pending();
    std::unique_lock lock(p.mutex);
    while (static_cast<int>(p.byKey.count(key)) < count) {
        if (stop.load())
            return false;
        p.arrived.wait_for(lock, std::chrono::milliseconds(kPollSliceMs));
    }
    const auto [first, last] = p.byKey.equal_range(key);
    for (auto it = first; it != last; ++it)
        out.push_back(it->second);
    p.byKey.erase(first, last);
    return true;
}

int connectTo(const std::string &address, const Hello &hello, const std::atomic<bool> &stop, std::string &why)
{
    sockaddr_in a{};
    if (!parseAddress(address, a)) {
        why = "malformed bootstrap address \"" + address + "\"";
        return -1;
    }
    const auto giveUp = std::chrono::steady_clock::now() + kConnectRetryFor;
    for (;;) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int err = connectOnce(fd, a, stop);
        if (err == 0) {
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (sendFrame(fd, FrameType::Hello, encodeHello(hello)))
                return fd;
            why = "bootstrap: the hello to " + address + " failed: " + std::strerror(errno);
            ::close(fd);
            return -1;
        }
        ::close(fd);
        const bool retry = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH;
        if (err == ECANCELED || !retry || std::chrono::steady_clock::now() > giveUp || stop.load()) {
            why = "bootstrap: connect to " + address + " failed: " + (err == ECANCELED ? std::string("aborted") : std::strerror(err));
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

bool waitReadable(int fd, const std::atomic<bool> &stop)
{
    pollfd p{fd, POLLIN, 0};
    for (;;) {
        const int n = ::poll(&p, 1, kPollSliceMs);
        if (n > 0)
            return true;
        if (stop.load())
            return false;
    }
}

std::uint64_t randomKey()
{
    static std::mutex mutex;
    static std::mt19937_64 engine(std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32)
                                  ^ static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
    const std::lock_guard lock(mutex);
    return engine();
}

} // namespace cppl::fakes::net
