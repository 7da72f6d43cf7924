// SPDX-License-Identifier: MIT
// The rendezvous store's server (rendezvous_server.h): c10d's wire protocol, 1.x's and 2.x's, no
// blocking read or write on any client. Torch-free: tst_rendezvous_server compiles this file alone.
#include "rendezvous_server.h"

#include "cppl/errors.h"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace cppl::agent::dist {

namespace {

/// A request, in whichever dialect its connection speaks.
enum class Op : std::uint8_t {
    Set,
    CompareSet,
    Get,
    Add,
    Check,
    Wait,
    GetNumKeys,
    DeleteKey,
    Append,
    MultiGet,
    MultiSet,
    CancelWait,
    Ping,
    Validate,
    Refused, ///< WATCH_KEY (c10d 1.x's callback client), the queue ops (only c10d 2.x's libuv server has them), any other byte
};

/// c10d 1.x (LibTorch 1.13): SET 0 ... GETNUMKEYS 6, WATCH_KEY 7 (not served), DELETE_KEY 8.
Op opOf1x(std::uint8_t q)
{
    static constexpr Op table[] = {Op::Set, Op::CompareSet, Op::Get, Op::Add, Op::Check, Op::Wait, Op::GetNumKeys, Op::Refused, Op::DeleteKey};
    return q < std::size(table) ? table[q] : Op::Refused;
}

/// c10d 2.x: VALIDATE 0 opens every connection, so SET ... GETNUMKEYS moved up by one (1-7),
/// DELETE_KEY stayed 8; then APPEND 9, MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12, PING 13.
Op opOf2x(std::uint8_t q)
{
    static constexpr Op table[] = {Op::Validate,   Op::Set,    Op::CompareSet, Op::Get,      Op::Add,        Op::Check, Op::Wait,
                                   Op::GetNumKeys, Op::DeleteKey, Op::Append,  Op::MultiGet, Op::MultiSet, Op::CancelWait, Op::Ping};
    return q < std::size(table) ? table[q] : Op::Refused;
}

/// c10d 2.x's VALIDATE argument (its first request on every connection).
constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;
constexpr std::uint8_t kReady = 0, kNotReady = 1;          // CHECK's answer
constexpr std::uint8_t kStopWaiting = 0, kWaitCanceled = 1; // WAIT's answer; CANCEL_WAIT's (2.x)

/// Reads a request from the bytes received so far; any read past them makes it incomplete.
class Reader
{
public:
    Reader(const std::string &in, std::size_t pos) : m_in(in), m_pos(pos) {}
    bool complete() const { return !m_short; }
    bool malformed() const { return m_bad; }
    std::size_t pos() const { return m_pos; }

    template<typename T>
    T value()
    {
        T v{};
        if (m_short || m_bad)
            return v;
        if (m_in.size() - m_pos < sizeof v) {
            m_short = true;
            return v;
        }
        std::memcpy(&v, m_in.data() + m_pos, sizeof v);
        m_pos += sizeof v;
        return v;
    }
    std::string bytes()
    {
        const auto n = value<std::uint64_t>();
        if (m_short || m_bad)
            return {};
        if (n > RendezvousServer::kMaxBytes) {
            m_bad = true;
            return {};
        }
        if (m_in.size() - m_pos < n) {
            m_short = true;
            return {};
        }
        std::string s = m_in.substr(m_pos, static_cast<std::size_t>(n));
        m_pos += static_cast<std::size_t>(n);
        return s;
    }
    std::vector<std::string> keys()
    {
        const auto n = value<std::uint64_t>();
        if (n > RendezvousServer::kMaxKeys) {
            m_bad = true;
            return {};
        }
        std::vector<std::string> out;
        for (std::uint64_t i = 0; i < n && complete() && !malformed(); ++i)
            out.push_back(bytes());
        return out;
    }

private:
    const std::string &m_in;
    std::size_t m_pos;
    bool m_short = false, m_bad = false;
};

template<typename T>
void put(std::string &out, T v)
{
    out.append(reinterpret_cast<const char *>(&v), sizeof v);
}

void putBytes(std::string &out, const std::string &s)
{
    put<std::uint64_t>(out, s.size());
    out += s;
}

} // namespace

struct RendezvousServer::Impl
{
    /// Which c10d client a connection has: told by its first request (handle()).
    enum class Dialect : std::uint8_t { Unknown, C10d1x, C10d2x };
    struct Conn
    {
        Dialect dialect = Dialect::Unknown;
        std::string in;
        std::size_t consumed = 0; ///< bytes of `in` already handled
        std::string out;
        bool writing = false; ///< EPOLLOUT armed
        std::vector<std::uint64_t> waits;
    };
    struct Wait
    {
        int fd;
        std::unordered_set<std::string> missing;
    };

    int listener = -1, epoll = -1, wake = -1;
    int boundPort = 0;
    std::unordered_map<int, Conn> conns;
    std::unordered_map<std::string, std::string> kv;
    std::unordered_map<std::uint64_t, Wait> waits;
    std::unordered_map<std::string, std::vector<std::uint64_t>> waitersOf;
    std::uint64_t nextWait = 1;
    std::thread thread;

    void listen(int port, const std::string &bind);
    void run();
    void accept();
    void readFrom(int fd);
    void flush(int fd, Conn &c);
    void drop(int fd);
    /// Forgets every WAIT of @p c still pending (its client left, or cancelled them).
    void forgetWaits(Conn &c);
    /// Handles one request at c.consumed; false when it is not whole yet. Sets @p close for a
    /// request this server refuses.
    bool handle(int fd, Conn &c, bool &close);
    /// Tells a new connection's dialect by its first request; false until enough of it came.
    static bool learnDialect(Conn &c);
    /// What a request's handler decided: answer it (once whole), or close the connection.
    enum class Verdict : std::uint8_t { Answer, Refuse };
    Verdict serve(Op op, Reader &r, int fd, Conn &c, std::string &reply);
    Verdict serveSet(Reader &r);
    Verdict serveCompareSet(Reader &r, std::string &reply);
    Verdict serveGet(Reader &r, std::string &reply);
    Verdict serveAdd(Reader &r, std::string &reply);
    Verdict serveCheck(Reader &r, std::string &reply);
    /// WAIT: answered now when every key exists, else by created() when the last one is set.
    Verdict serveWait(Reader &r, int fd, Conn &c, std::string &reply);
    Verdict serveDeleteKey(Reader &r, std::string &reply);
    Verdict serveAppend(Reader &r);
    Verdict serveMultiGet(Reader &r, std::string &reply);
    Verdict serveMultiSet(Reader &r);
    void created(const std::string &key);
};

void RendezvousServer::Impl::listen(int port, const std::string &bind)
{
    // Every interface (no address, 0.0.0.0 or ::), as c10d's server listens: IPv6 with IPv4-mapped
    // peers when the host has IPv6 sockets, else IPv4. Otherwise the addresses @p bind resolves to,
    // in order, the first that binds.
    struct Candidate
    {
        sockaddr_storage addr{};
        socklen_t len = 0;
    };
    std::vector<Candidate> candidates;
    const bool any = bind.empty() || bind == "0.0.0.0" || bind == "::";
    const std::string where = (any ? std::string("every interface") : bind) + ", port " + std::to_string(port);
    if (any) {
        Candidate v6, v4;
        auto *a6 = reinterpret_cast<sockaddr_in6 *>(&v6.addr);
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_any;
        a6->sin6_port = htons(static_cast<std::uint16_t>(port));
        v6.len = sizeof *a6;
        auto *a4 = reinterpret_cast<sockaddr_in *>(&v4.addr);
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
        a4->sin_port = htons(static_cast<std::uint16_t>(port));
        v4.len = sizeof *a4;
        candidates = {v6, v4};
    } else {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        addrinfo *found = nullptr;
        if (const int rc = ::getaddrinfo(bind.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
            throw CollectiveError("cannot serve the rendezvous store on " + where + ": cannot resolve " + bind + " (" + ::gai_strerror(rc)
                                  + "); give an address of this host, or 0.0.0.0 for all of them");
        for (const addrinfo *a = found; a; a = a->ai_next)
            if (a->ai_addrlen <= sizeof(sockaddr_storage)) {
                Candidate c;
                std::memcpy(&c.addr, a->ai_addr, a->ai_addrlen);
                c.len = a->ai_addrlen;
                candidates.push_back(c);
            }
        ::freeaddrinfo(found);
    }
    const int one = 1, zero = 0;
    const char *failed = "getaddrinfo";
    int e = EADDRNOTAVAIL;
    for (Candidate &c : candidates) {
        const int family = c.addr.ss_family;
        listener = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        auto *addr = reinterpret_cast<sockaddr *>(&c.addr);
        failed = listener < 0                                                                                                     ? "socket"
                 : any && family == AF_INET6 && ::setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) != 0 ? "setsockopt(IPV6_V6ONLY)"
                 : ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0                                ? "setsockopt(SO_REUSEADDR)"
                 : ::bind(listener, addr, c.len) != 0                                                                      ? "bind"
                 : ::listen(listener, SOMAXCONN) != 0                                                                      ? "listen"
                 : ::getsockname(listener, addr, &c.len) != 0                                                              ? "getsockname"
                                                                                                                           : nullptr;
        if (!failed) {
            boundPort = family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6 *>(addr)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in *>(addr)->sin_port);
            return;
        }
        e = errno;
        if (listener >= 0)
            ::close(listener);
        listener = -1;
        if (e == EADDRINUSE || e == EACCES)
            break; // another address family would meet the same port
    }
    throw CollectiveError("cannot serve the rendezvous store on " + where + ": " + failed + ": " + std::strerror(e)
                          + (e == EADDRINUSE      ? " (is the port in use? pick another MASTER_PORT / --master-port, or 0 for a free one)"
                             : e == EADDRNOTAVAIL ? " (not an address of this host: give one of its addresses, or 0.0.0.0 for all of them)"
                                                  : ""));
}

void RendezvousServer::Impl::run()
{
    std::vector<epoll_event> events(256);
    for (;;) {
        const int n = ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()), -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return; // nothing sensible left to do; clients see their connections unanswered
        }
        for (int i = 0; i < n; ++i) {
            const int fd = events[static_cast<std::size_t>(i)].data.fd;
            const std::uint32_t ev = events[static_cast<std::size_t>(i)].events;
            if (fd == wake)
                return;
            if (fd == listener) {
                accept();
                continue;
            }
            const auto it = conns.find(fd);
            if (it == conns.end())
                continue; // dropped earlier in this batch
            if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
                readFrom(fd);
            else if (ev & EPOLLOUT)
                flush(fd, it->second);
        }
    }
}

void RendezvousServer::Impl::accept()
{
    for (;;) {
        const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                // Out of descriptors (the fd limit is raised at start; fd_limit.h): the pending
                // connection waits in the backlog, and this wakes again for it. A short pause
                // keeps a level-triggered listener from spinning meanwhile.
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            return; // EAGAIN: none left
        }
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        if (::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &ev) != 0) {
            ::close(fd);
            continue;
        }
        conns[fd] = Conn{};
    }
}

void RendezvousServer::Impl::readFrom(int fd)
{
    Conn &c = conns.at(fd);
    bool closed = false;
    for (;;) {
        char buf[16384];
        const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            c.in.append(buf, static_cast<std::size_t>(n));
            if (static_cast<std::size_t>(n) < sizeof buf)
                break;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        closed = true; // EOF or an error: handle what came whole, then drop it
        break;
    }
    bool refuse = false;
    while (!refuse && handle(fd, c, refuse)) {
    }
    if (refuse || closed) {
        drop(fd);
        return;
    }
    if (c.consumed > 0) {
        c.in.erase(0, c.consumed);
        c.consumed = 0;
    }
    flush(fd, c);
}

bool RendezvousServer::Impl::handle(int fd, Conn &c, bool &close)
{
    if (c.consumed >= c.in.size() || !learnDialect(c))
        return false;
    Reader r(c.in, c.consumed);
    const auto query = r.value<std::uint8_t>();
    std::string reply;
    if (serve(c.dialect == Dialect::C10d2x ? opOf2x(query) : opOf1x(query), r, fd, c, reply) == Verdict::Refuse || r.malformed()) {
        close = true;
        return false;
    }
    if (!r.complete())
        return false; // the rest has not arrived: wait for it, on this connection only
    c.consumed = r.pos();
    c.out += reply;
    return true;
}

bool RendezvousServer::Impl::learnDialect(Conn &c)
{
    if (c.dialect != Dialect::Unknown)
        return true;
    // c10d 2.x opens every connection with VALIDATE (0) and a uint32 magic number. To 1.x, 0 is
    // SET, and the next four bytes are the low half of the key's uint64 length: that number there
    // would be a key over kMaxBytes, refused anyway.
    if (c.in[c.consumed] != 0) {
        c.dialect = Dialect::C10d1x;
        return true;
    }
    if (c.in.size() - c.consumed < 1 + sizeof kValidationMagic)
        return false;
    std::uint32_t magic = 0;
    std::memcpy(&magic, c.in.data() + c.consumed + 1, sizeof magic);
    c.dialect = magic == kValidationMagic ? Dialect::C10d2x : Dialect::C10d1x;
    return true;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serve(Op op, Reader &r, int fd, Conn &c, std::string &reply)
{
    // Each handler reads its request and acts only once the request is whole and well-formed
    // (handle() then answers); Refuse closes the connection, as c10d's server does.
    switch (op) {
    case Op::Validate: // not a c10d client: another number
        return r.value<std::uint32_t>() != kValidationMagic && r.complete() ? Verdict::Refuse : Verdict::Answer;
    case Op::Ping:
        put<std::uint32_t>(reply, r.value<std::uint32_t>()); // the client's nonce back
        return Verdict::Answer;
    case Op::Set:
        return serveSet(r);
    case Op::CompareSet:
        return serveCompareSet(r, reply);
    case Op::Get:
        return serveGet(r, reply);
    case Op::Add:
        return serveAdd(r, reply);
    case Op::Check:
        return serveCheck(r, reply);
    case Op::Wait:
        return serveWait(r, fd, c, reply);
    case Op::GetNumKeys:
        put<std::int64_t>(reply, static_cast<std::int64_t>(kv.size()));
        return Verdict::Answer;
    case Op::DeleteKey:
        return serveDeleteKey(r, reply);
    case Op::Append:
        return serveAppend(r);
    case Op::MultiGet:
        return serveMultiGet(r, reply);
    case Op::MultiSet:
        return serveMultiSet(r);
    case Op::CancelWait:
        // 2.x, after its client's wait timed out: answered even when nothing waits any more (a
        // STOP_WAITING already sent comes first, and the client reads both).
        forgetWaits(c);
        put<std::uint8_t>(reply, kWaitCanceled);
        return Verdict::Answer;
    case Op::Refused:
        break;
    }
    return Verdict::Refuse;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveSet(Reader &r)
{
    std::string key = r.bytes();
    std::string value = r.bytes();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    const bool fresh = kv.find(key) == kv.end();
    kv[key] = std::move(value);
    if (fresh)
        created(key);
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveCompareSet(Reader &r, std::string &reply)
{
    std::string key = r.bytes();
    std::string expected = r.bytes();
    std::string desired = r.bytes();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    const auto it = kv.find(key);
    if (it == kv.end()) {
        // c10d's rule: a missing key is set only when the caller expected it empty; the answer is
        // then the new value, else the caller's expected value.
        if (expected.empty()) {
            kv[key] = desired;
            created(key);
            putBytes(reply, desired);
        } else {
            putBytes(reply, expected);
        }
        return Verdict::Answer;
    }
    if (it->second == expected)
        it->second = std::move(desired);
    putBytes(reply, it->second);
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveGet(Reader &r, std::string &reply)
{
    const std::string key = r.bytes();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    const auto it = kv.find(key);
    if (it == kv.end()) // c10d's clients wait for a key before they get it
        return Verdict::Refuse;
    putBytes(reply, it->second);
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveAdd(Reader &r, std::string &reply)
{
    const std::string key = r.bytes();
    const auto delta = r.value<std::int64_t>();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    std::int64_t now = 0;
    const auto it = kv.find(key);
    if (it != kv.end()) {
        const std::string &text = it->second;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), now);
        if (ec != std::errc() || end != text.data() + text.size())
            return Verdict::Refuse; // not a counter
    }
    if (__builtin_add_overflow(now, delta, &now))
        return Verdict::Refuse; // beyond int64: no counter of a run gets there (fuzz_rendezvous_server found it)
    const bool fresh = it == kv.end(); // before the insertion, which may rehash
    kv[key] = std::to_string(now);
    if (fresh)
        created(key);
    put<std::int64_t>(reply, now);
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveCheck(Reader &r, std::string &reply)
{
    const std::vector<std::string> keys = r.keys();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    bool all = true;
    for (const auto &k : keys)
        all = all && kv.count(k) != 0;
    put<std::uint8_t>(reply, all ? kReady : kNotReady);
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveWait(Reader &r, int fd, Conn &c, std::string &reply)
{
    const std::vector<std::string> keys = r.keys();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    Wait w{fd, {}};
    for (const auto &k : keys)
        if (kv.count(k) == 0)
            w.missing.insert(k);
    if (w.missing.empty()) {
        put<std::uint8_t>(reply, kStopWaiting);
        return Verdict::Answer;
    }
    // Answered by created() once the last of them is set; nothing now.
    const std::uint64_t id = nextWait++;
    for (const auto &k : w.missing)
        waitersOf[k].push_back(id);
    c.waits.push_back(id);
    waits.emplace(id, std::move(w));
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveDeleteKey(Reader &r, std::string &reply)
{
    const std::string key = r.bytes();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    put<std::int64_t>(reply, static_cast<std::int64_t>(kv.erase(key)));
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveAppend(Reader &r)
{
    // 2.x: onto the value, or a new key.
    const std::string key = r.bytes();
    const std::string more = r.bytes();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    const auto [it, fresh] = kv.try_emplace(key);
    it->second += more;
    if (fresh)
        created(key);
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveMultiGet(Reader &r, std::string &reply)
{
    // 2.x: the values in order (its client waits for the keys first).
    const std::vector<std::string> keys = r.keys();
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    for (const auto &k : keys) {
        const auto it = kv.find(k);
        if (it == kv.end())
            return Verdict::Refuse;
        putBytes(reply, it->second);
    }
    return Verdict::Answer;
}

RendezvousServer::Impl::Verdict RendezvousServer::Impl::serveMultiSet(Reader &r)
{
    // 2.x: a count, then key and value pairs.
    const auto n = r.value<std::uint64_t>();
    if (n > kMaxKeys)
        return Verdict::Refuse;
    std::vector<std::pair<std::string, std::string>> pairs;
    for (std::uint64_t i = 0; i < n && r.complete() && !r.malformed(); ++i) {
        std::string key = r.bytes();
        pairs.emplace_back(std::move(key), r.bytes());
    }
    if (!r.complete() || r.malformed())
        return Verdict::Answer;
    for (auto &[key, value] : pairs) {
        const auto [it, fresh] = kv.insert_or_assign(key, std::move(value));
        if (fresh)
            created(it->first);
    }
    return Verdict::Answer;
}

void RendezvousServer::Impl::created(const std::string &key)
{
    const auto it = waitersOf.find(key);
    if (it == waitersOf.end())
        return;
    const std::vector<std::uint64_t> ids = std::move(it->second);
    waitersOf.erase(it);
    for (const std::uint64_t id : ids) {
        const auto w = waits.find(id);
        if (w == waits.end())
            continue;
        w->second.missing.erase(key);
        if (!w->second.missing.empty())
            continue;
        const int fd = w->second.fd;
        waits.erase(w);
        const auto c = conns.find(fd);
        if (c == conns.end())
            continue;
        std::erase(c->second.waits, id);
        put<std::uint8_t>(c->second.out, kStopWaiting);
        flush(fd, c->second);
    }
}

void RendezvousServer::Impl::flush(int fd, Conn &c)
{
    while (!c.out.empty()) {
        const ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            c.out.erase(0, static_cast<std::size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break; // the client does not read (stopped): the rest waits for EPOLLOUT
        // The peer is gone: its EPOLLIN/EPOLLHUP drops it; nothing more to send.
        c.out.clear();
        break;
    }
    const bool want = !c.out.empty();
    if (want != c.writing) {
        epoll_event ev{};
        ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
        ev.data.fd = fd;
        ::epoll_ctl(epoll, EPOLL_CTL_MOD, fd, &ev);
        c.writing = want;
    }
}

void RendezvousServer::Impl::drop(int fd)
{
    const auto it = conns.find(fd);
    if (it == conns.end())
        return;
    forgetWaits(it->second);
    ::epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(it);
}

void RendezvousServer::Impl::forgetWaits(Conn &c)
{
    for (const std::uint64_t id : c.waits) {
        const auto w = waits.find(id);
        if (w == waits.end())
            continue;
        for (const auto &k : w->second.missing) {
            const auto of = waitersOf.find(k);
            if (of == waitersOf.end())
                continue;
            std::erase(of->second, id);
            if (of->second.empty())
                waitersOf.erase(of);
        }
        waits.erase(w);
    }
    c.waits.clear();
}

RendezvousServer::RendezvousServer(int port, const std::string &bind) : m(std::make_unique<Impl>())
{
    m->listen(port, bind);
    m->epoll = ::epoll_create1(EPOLL_CLOEXEC);
    m->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = m->listener;
    const bool ok = m->epoll >= 0 && m->wake >= 0 && ::epoll_ctl(m->epoll, EPOLL_CTL_ADD, m->listener, &ev) == 0;
    ev.data.fd = m->wake;
    if (!ok || ::epoll_ctl(m->epoll, EPOLL_CTL_ADD, m->wake, &ev) != 0) {
        const int e = errno;
        for (const int fd : {m->listener, m->epoll, m->wake})
            if (fd >= 0)
                ::close(fd);
        throw CollectiveError(std::string("cannot serve the rendezvous store: epoll: ") + std::strerror(e));
    }
    m->thread = std::thread([impl = m.get()] { impl->run(); });
}

RendezvousServer::~RendezvousServer()
{
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(m->wake, &one, sizeof one);
    m->thread.join();
    for (auto &[fd, c] : m->conns)
        ::close(fd);
    for (const int fd : {m->listener, m->epoll, m->wake})
        ::close(fd);
}

int RendezvousServer::port() const
{
    return m->boundPort;
}

} // namespace cppl::agent::dist
