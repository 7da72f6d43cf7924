// SPDX-License-Identifier: MIT
// Ranks on remote hosts through libssh. A libssh session and its channels belong to one thread, so
// each host gets its own thread; results reach the launcher through queued calls.
#include "launcher.h"
#include "ssh_session.h"

#include "cppl/child_process.h"

#include <QMetaObject>
#include <QPointer>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace cppl::core {

namespace {

class SshLauncher final : public Launcher
{
public:
    using Launcher::Launcher;
    ~SshLauncher() override
    {
        m_stop = true;
        wakeStoreWaiters();
        for (auto &t : m_threads)
            if (t.joinable())
                t.join();
    }

    void start(const LaunchPlan &plan) override
    {
        setPlan(plan);
        std::vector<std::vector<const RankCommand *>> byHost;
        for (const RankCommand &r : m_plan.ranks) {
            if (static_cast<std::size_t>(r.hostIndex) >= byHost.size())
                byHost.resize(static_cast<std::size_t>(r.hostIndex) + 1);
            byHost[static_cast<std::size_t>(r.hostIndex)].push_back(&r);
        }
        for (std::size_t h = 0; h < byHost.size(); ++h)
            if (!byHost[h].empty())
                m_threads.emplace_back([this, ranks = byHost[h]] { runHost(ranks); });
    }

    void stop() override
    {
        m_stopping = true;
        m_stop = true;
        wakeStoreWaiters(); // hosts waiting for the store give up
    }

    bool sendInput(int rank, const std::string &bytes) override
    {
        std::lock_guard lock(m_inputMutex);
        if (m_stop)
            return false;
        m_input[rank] += bytes; // written by the host's thread, which owns the channel
        return true;
    }

private:
    template<typename F>
    void post(F &&f)
    {
        QMetaObject::invokeMethod(this, std::forward<F>(f), Qt::QueuedConnection);
    }

    /// A forwarded connection of the telemetry tunnel and what waits to go each way.
    struct Tunnel
    {
        ssh_channel ch = nullptr;
        int fd = -1;
        std::string toLocal, toRemote;
    };
    /// One rank's exec channel.
    struct Chan
    {
        const RankCommand *rank = nullptr;
        ssh_channel ch = nullptr;
        cppl::LineSplitter lines[2];
        bool done = false;
    };
    struct StoreChan;

    /// One host's whole life on its own thread: connect, the telemetry tunnel, a tolerant run's
    /// store (or the wait for it), the ranks, then their output until every one has ended.
    void runHost(std::vector<const RankCommand *> ranks)
    {
        const RankCommand &first = *ranks.front();
        const QString hostName = QString::fromStdString(first.hostName);
        ssh_callbacks_struct callbacks{}; // libssh keeps it for the session's life
        SshSession session;
        const bool storeHere = m_plan.store && m_plan.store->hostIndex == first.hostIndex;
        std::string note;
        const std::string problem = openSshSession(first, m_settings, session, callbacks, note);
        if (!note.empty())
            post([this, n = QString::fromStdString(note)] { Q_EMIT rankOutput(-1, true, n); });
        if (!problem.empty()) {
            if (storeHere)
                publishStore("host " + first.hostName + " could not be reached");
            post([this, hostIndex = first.hostIndex, hostName, m = QString::fromStdString(problem)] { onHostFailed(hostIndex, hostName, m); });
            if (storeHere)
                post([this] { onStoreGone(); });
            return;
        }
        ssh_session s = session.get();
        const int bound = openTelemetryTunnel(s, hostName);
        StoreChan store;
        if (!storeReady(s, ranks, storeHere, store))
            return;
        std::vector<Chan> chans;
        for (const RankCommand *r : ranks)
            if (auto c = startRank(s, *r, bound))
                chans.push_back(std::move(*c));
        std::vector<Tunnel> tunnels;
        pumpHost(s, hostName, chans, store, tunnels, bound);
        for (auto &t : tunnels) {
            if (t.fd >= 0)
                ::close(t.fd);
            if (t.ch) {
                ssh_channel_close(t.ch);
                ssh_channel_free(t.ch);
            }
        }
    }

    /// The reverse tunnel for telemetry: the host's 127.0.0.1:<port> leads to our collector. The
    /// port, or 0 (no tunnel asked, or the host refused it: its ranks run without telemetry).
    int openTelemetryTunnel(ssh_session s, const QString &hostName)
    {
        int bound = 0;
        if (m_settings.telemetryTunnelPort <= 0)
            return 0;
        if (ssh_channel_listen_forward(s, "127.0.0.1", 0, &bound) == SSH_OK)
            return bound;
        post([this, h = hostName, e = QString::fromUtf8(ssh_get_error(s))] {
            Q_EMIT rankOutput(-1, true, QStringLiteral("host %1 refused the reverse tunnel for telemetry (%2; AllowTcpForwarding?); "
                                                       "its ranks run without live telemetry").arg(h, e));
        });
        return 0;
    }

    /// A tolerant run's store: started on its host before any rank anywhere; the other hosts wait
    /// for it. False when this host's ranks must not start (it did not start; a stop).
    bool storeReady(ssh_session s, const std::vector<const RankCommand *> &ranks, bool storeHere, StoreChan &store)
    {
        const RankCommand &first = *ranks.front();
        if (storeHere) {
            const std::string why = startStore(s, store);
            publishStore(why);
            if (why.empty())
                return true;
            const QString m = QStringLiteral("the rendezvous store on %1 did not start: %2").arg(storeWhere(), QString::fromStdString(why));
            post([this, hostIndex = first.hostIndex, hostName = QString::fromStdString(first.hostName), m] { onHostFailed(hostIndex, hostName, m); });
            post([this] { onStoreGone(); });
            return false;
        }
        if (!m_plan.store)
            return true;
        std::unique_lock lock(m_storeMutex);
        m_storeCv.wait(lock, [this] { return m_storeState != 0 || m_stop; });
        if (m_storeState == 1)
            return true;
        const QString m = m_stop ? QStringLiteral("stopped by the launcher before it started")
                                 : QStringLiteral("not started: the rendezvous store on %1 did not start (%2)")
                                       .arg(storeWhere(), QString::fromStdString(m_storeProblem));
        for (const RankCommand *r : ranks)
            post([this, rank = r->rank, m] { onRankEnded(rank, -1, m); });
        return false;
    }

    /// @p r's command line on this host: telemetry through the tunnel's @p bound port, or none
    /// (and no key line) when there is no tunnel. @p sendKeys: the key line follows on stdin.
    std::string commandOf(const RankCommand &r, int bound, bool &sendKeys) const
    {
        RankCommand rc = r;
        for (std::size_t i = 0; i + 1 < rc.argv.size(); ++i)
            if (rc.argv[i] == "--telemetry") {
                if (bound > 0) {
                    rc.argv[i + 1] = "tcp://127.0.0.1:" + std::to_string(bound);
                } else {
                    rc.argv.erase(rc.argv.begin() + static_cast<std::ptrdiff_t>(i), rc.argv.begin() + static_cast<std::ptrdiff_t>(i) + 2);
                    // No telemetry on this host, so no key line either.
                    std::erase(rc.argv, std::string(kKeysStdinFlag));
                }
                break;
            }
        sendKeys = readsKeyLine(rc) && !m_plan.keyLine.empty();
        return remoteCommand(rc);
    }

    /// Starts one rank in an exec channel; nothing when it could not start (its end is reported).
    std::optional<Chan> startRank(ssh_session s, const RankCommand &r, int bound)
    {
        const auto fail = [&](const QString &m) {
            post([this, rank = r.rank, m] { onRankEnded(rank, -1, m); });
            return std::nullopt;
        };
        std::string cmd;
        bool sendKeys = false;
        try {
            cmd = commandOf(r, bound, sendKeys);
        } catch (const std::exception &e) {
            return fail(QString::fromUtf8(e.what()));
        }
        Chan c;
        c.rank = &r;
        c.ch = ssh_channel_new(s);
        if (!c.ch || ssh_channel_open_session(c.ch) != SSH_OK || ssh_channel_request_exec(c.ch, cmd.c_str()) != SSH_OK) {
            const QString m = QStringLiteral("cannot start the agent over SSH: %1").arg(QString::fromUtf8(ssh_get_error(s)));
            if (c.ch)
                ssh_channel_free(c.ch);
            return fail(m);
        }
        // The run's telemetry keys: the first line on the agent's stdin, inside the encrypted
        // channel (never in the command line, which other users of the host can see in ps).
        if (sendKeys && ssh_channel_write(c.ch, m_plan.keyLine.data(), static_cast<uint32_t>(m_plan.keyLine.size()))
                            != static_cast<int>(m_plan.keyLine.size())) {
            const QString m = QStringLiteral("cannot send the telemetry keys over SSH: %1").arg(QString::fromUtf8(ssh_get_error(s)));
            ssh_channel_close(c.ch);
            ssh_channel_free(c.ch);
            return fail(m);
        }
        post([this, rank = r.rank] { onStarted(rank); });
        return c;
    }

    /// The host's loop: the ranks' output and ends, the tunnel, the store, keepalives, a stop;
    /// returns once every rank (and the store) has ended or the connection was lost.
    void pumpHost(ssh_session s, const QString &hostName, std::vector<Chan> &chans, StoreChan &store, std::vector<Tunnel> &tunnels, int bound)
    {
        auto lastKeepalive = std::chrono::steady_clock::now();
        auto signalledAt = lastKeepalive;
        bool signalled = false;
        // A host whose network is down answers neither the stop nor its end: its TCP connection
        // would look alive for many minutes. Past this, its ranks are left behind (issue 43).
        const auto stopWait = std::chrono::seconds(std::max(10, m_settings.connectTimeoutSeconds));
        for (;;) {
            bool any = false, progressed = false;
            if (m_stop && !signalled) {
                // Stop: TERM to the agent, and EOF on its stdin (which ends it even where the
                // server refuses signal requests).
                for (auto &c : chans)
                    if (!c.done) {
                        ssh_channel_request_send_signal(c.ch, "TERM");
                        ssh_channel_send_eof(c.ch);
                    }
                signalled = true;
                signalledAt = std::chrono::steady_clock::now();
            }
            for (auto &c : chans)
                if (!c.done) {
                    any = true;
                    progressed = pumpRank(c, signalled) || progressed;
                }
            if (bound > 0 && pumpTunnels(s, tunnels))
                progressed = true;
            if (store.ch) {
                if (pumpStore(store, !any))
                    progressed = true;
                if (store.ch)
                    any = true;
            }
            if (!any)
                return;
            if (!ssh_is_connected(s))
                return connectionLost(chans, store, QStringLiteral("lost the SSH connection to %1").arg(hostName));
            const auto now = std::chrono::steady_clock::now();
            if (signalled && now - signalledAt > stopWait)
                return connectionLost(chans, store,
                                      QStringLiteral("no answer from %1 %2 s after the stop (is the host or its network down?); left behind")
                                          .arg(hostName)
                                          .arg(std::chrono::duration_cast<std::chrono::seconds>(stopWait).count()));
            if (now - lastKeepalive > std::chrono::seconds(m_settings.keepaliveSeconds)) {
                ssh_send_ignore(s, "keepalive"); // libssh sends none by itself; NAT and firewalls forget idle connections
                lastKeepalive = now;
            }
            if (!progressed)
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }

    /// One rank's channel: input for it, its output lines, its end. True when anything moved.
    bool pumpRank(Chan &c, bool signalled)
    {
        bool moved = false;
        if (!signalled) {
            std::string in;
            {
                std::lock_guard lock(m_inputMutex);
                if (const auto it = m_input.find(c.rank->rank); it != m_input.end())
                    in.swap(it->second);
            }
            if (!in.empty())
                ssh_channel_write(c.ch, in.data(), static_cast<uint32_t>(in.size()));
        }
        const auto toLauncher = [&](int err) {
            return [this, &c, err](std::string_view l) {
                post([this, rank = c.rank->rank, err, line = QString::fromUtf8(l.data(), static_cast<qsizetype>(l.size()))] {
                    onOutput(rank, err == 1, line);
                });
            };
        };
        for (int err = 0; err < 2; ++err) {
            char buf[4096];
            const int n = ssh_channel_read_nonblocking(c.ch, buf, sizeof buf, err);
            if (n > 0) {
                moved = true;
                c.lines[err].feed(std::string_view(buf, static_cast<std::size_t>(n)), toLauncher(err));
            }
        }
        if (!ssh_channel_is_eof(c.ch) && ssh_channel_is_open(c.ch))
            return moved;
        for (int err = 0; err < 2; ++err)
            c.lines[err].flush(toLauncher(err));
        int code = ssh_channel_get_exit_status(c.ch);
        QString reason;
        if (code < 0) {
            reason = signalled ? QStringLiteral("stopped by the launcher") : QStringLiteral("the SSH channel closed without an exit status");
            code = signalled ? 128 + 15 : -1;
        } else if (signalled && code != 0) {
            reason = QStringLiteral("stopped by the launcher");
        }
        ssh_channel_close(c.ch);
        ssh_channel_free(c.ch);
        c.done = true;
        post([this, rank = c.rank->rank, code, reason] { onRankEnded(rank, code, reason); });
        return moved;
    }

    /// The SSH connection went, or the host no longer answers (@p why): the store and every rank
    /// still running on this host are gone as far as this launcher can tell.
    void connectionLost(std::vector<Chan> &chans, StoreChan &store, const QString &why)
    {
        if (store.ch) {
            ssh_channel_free(store.ch);
            store.ch = nullptr;
            post([this, why] { onStoreFailed(why); });
            post([this] { onStoreGone(); });
        }
        for (auto &c : chans)
            if (!c.done) {
                c.done = true;
                post([this, rank = c.rank->rank, why] { onRankEnded(rank, -1, why); });
            }
    }

    struct StoreChan
    {
        ssh_channel ch = nullptr;
        cppl::LineSplitter lines[2];
        QStringList lastErr;     ///< its last stderr lines, for messages
        bool closing = false;
        std::chrono::steady_clock::time_point closeBy{};
    };

    void wakeStoreWaiters()
    {
        { std::lock_guard lock(m_storeMutex); } // a waiter between its check and its wait sees m_stop
        m_storeCv.notify_all();
    }

    /// Every thread that waits for the store learns whether it started: empty @p problem, it did.
    void publishStore(const std::string &problem)
    {
        {
            std::lock_guard lock(m_storeMutex);
            m_storeState = problem.empty() ? 1 : -1;
            m_storeProblem = problem;
        }
        m_storeCv.notify_all();
    }

    /// Runs `clusterppl-agent store` in a channel of its own and waits for its store line
    /// (docs/agent-lines.md; 30 s at most); the reason it did not come, or empty.
    std::string startStore(ssh_session s, StoreChan &st)
    {
        std::string cmd;
        try {
            cmd = remoteCommand(*m_plan.store);
        } catch (const std::exception &e) {
            return e.what();
        }
        st.ch = ssh_channel_new(s);
        if (!st.ch || ssh_channel_open_session(st.ch) != SSH_OK || ssh_channel_request_exec(st.ch, cmd.c_str()) != SSH_OK) {
            const std::string why = std::string("cannot start it over SSH: ") + ssh_get_error(s);
            if (st.ch)
                ssh_channel_free(st.ch);
            st.ch = nullptr;
            return why;
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        StoreLine said;
        while (!said.ready && said.problem.isEmpty() && !m_stop && std::chrono::steady_clock::now() < deadline) {
            bool got = false;
            for (int err = 0; err < 2; ++err) {
                char buf[4096];
                const int n = ssh_channel_read_nonblocking(st.ch, buf, sizeof buf, err);
                if (n <= 0)
                    continue;
                got = true;
                st.lines[err].feed(std::string_view(buf, static_cast<std::size_t>(n)), [&](std::string_view l) {
                    if (err == 0 && !said.ready && said.problem.isEmpty())
                        said = readStoreLine(l);
                    else if (err == 1)
                        st.lastErr << QString::fromUtf8(l.data(), static_cast<qsizetype>(l.size()));
                });
            }
            if (!said.ready && (ssh_channel_is_eof(st.ch) || !ssh_channel_is_open(st.ch)))
                break;
            if (!got)
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        if (said.ready)
            return {};
        std::string why = m_stop                                                   ? std::string("stopped by the launcher")
                          : !said.problem.isEmpty()                                ? said.problem.toStdString()
                          : ssh_channel_is_eof(st.ch) || !ssh_channel_is_open(st.ch) ? "exit code " + std::to_string(ssh_channel_get_exit_status(st.ch))
                                                                                   : noStoreLineText(30).toStdString();
        if (!st.lastErr.isEmpty())
            why += ": " + st.lastErr.back().toStdString();
        ssh_channel_close(st.ch);
        ssh_channel_free(st.ch);
        st.ch = nullptr;
        return why;
    }

    /// Reads what the store says; once every rank has ended (@p ranksDone and onAllRanksEnded, or a
    /// stop) sends it EOF and waits 5 s at most for it to go. True when anything moved.
    bool pumpStore(StoreChan &st, bool ranksDone)
    {
        bool moved = false;
        for (int err = 0; err < 2; ++err) {
            char buf[4096];
            const int n = ssh_channel_read_nonblocking(st.ch, buf, sizeof buf, err);
            if (n > 0) {
                moved = true;
                st.lines[err].feed(std::string_view(buf, static_cast<std::size_t>(n)), [&](std::string_view l) {
                    if (err == 1) {
                        st.lastErr << QString::fromUtf8(l.data(), static_cast<qsizetype>(l.size()));
                        while (st.lastErr.size() > 3)
                            st.lastErr.removeFirst();
                    }
                });
            }
        }
        const auto now = std::chrono::steady_clock::now();
        if (!st.closing && ranksDone && (m_storeEnd || m_stop)) {
            ssh_channel_send_eof(st.ch); // its stdin's EOF ends it
            st.closing = true;
            st.closeBy = now + std::chrono::seconds(5);
        }
        const bool ended = ssh_channel_is_eof(st.ch) || !ssh_channel_is_open(st.ch);
        if (ended || (st.closing && now >= st.closeBy)) {
            if (!st.closing) {
                const int code = ssh_channel_get_exit_status(st.ch);
                QString how = code < 0 ? QStringLiteral("its SSH channel closed without an exit status") : QStringLiteral("exit code %1").arg(code);
                if (code > 128)
                    how = QStringLiteral("killed by signal %1").arg(code - 128);
                if (!st.lastErr.isEmpty())
                    how += QStringLiteral(": ") + st.lastErr.back();
                post([this, how] { onStoreFailed(how); });
            }
            ssh_channel_close(st.ch);
            ssh_channel_free(st.ch);
            st.ch = nullptr;
            post([this] { onStoreGone(); });
            moved = true;
        }
        return moved;
    }

    /// On the launcher's thread: the store's channel is closed.
    void onStoreGone()
    {
        m_storeGone = true;
        if (m_waitingForStore)
            storeStopped();
    }

    void onAllRanksEnded() override
    {
        if (!m_plan.store || m_storeGone)
            return storeStopped();
        m_waitingForStore = true;
        m_storeEnd = true; // the store's host thread closes it
    }

    /// Accepts forwarded connections and copies bytes both ways between each and a local TCP
    /// connection to the collector. True when anything moved.
    bool pumpTunnels(ssh_session s, std::vector<Tunnel> &tunnels)
    {
        bool moved = false;
        int port = 0;
        if (ssh_channel ch = ssh_channel_open_forward_port(s, 0, &port, nullptr, nullptr)) {
            const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons(static_cast<uint16_t>(m_settings.telemetryTunnelPort));
            if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) {
                ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
                const int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                tunnels.push_back({ch, fd, {}, {}});
            } else {
                if (fd >= 0)
                    ::close(fd);
                ssh_channel_close(ch);
                ssh_channel_free(ch);
            }
            moved = true;
        }
        char buf[16384];
        for (auto &t : tunnels) {
            if (!t.ch)
                continue;
            const int n = ssh_channel_read_nonblocking(t.ch, buf, sizeof buf, 0);
            if (n > 0) {
                t.toLocal.append(buf, static_cast<std::size_t>(n));
                moved = true;
            }
            if (!t.toLocal.empty()) {
                const ssize_t w = ::send(t.fd, t.toLocal.data(), t.toLocal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0)
                    t.toLocal.erase(0, static_cast<std::size_t>(w));
            }
            const ssize_t r = ::recv(t.fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0) {
                t.toRemote.append(buf, static_cast<std::size_t>(r));
                moved = true;
            }
            if (!t.toRemote.empty()) {
                const int w = ssh_channel_write(t.ch, t.toRemote.data(), static_cast<uint32_t>(t.toRemote.size()));
                if (w > 0)
                    t.toRemote.erase(0, static_cast<std::size_t>(w));
            }
            const bool localGone = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
            if (localGone || ssh_channel_is_eof(t.ch) || !ssh_channel_is_open(t.ch)) {
                ::close(t.fd);
                t.fd = -1;
                ssh_channel_close(t.ch);
                ssh_channel_free(t.ch);
                t.ch = nullptr;
            }
        }
        return moved;
    }

    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_storeEnd{false};      // every rank ended: the store's thread closes it
    bool m_storeGone = false, m_waitingForStore = false; // the launcher's thread's view of the store
    std::mutex m_storeMutex;
    std::condition_variable m_storeCv;
    int m_storeState = 0;                      // 0 starting, 1 ready, -1 failed (m_storeProblem)
    std::string m_storeProblem;
    std::vector<std::thread> m_threads;
    std::mutex m_inputMutex;
    std::map<int, std::string> m_input; // sendInput() -> the host's thread
};

} // namespace

std::unique_ptr<Launcher> makeSshLauncher(LauncherSettings settings, QObject *parent)
{
    return std::make_unique<SshLauncher>(std::move(settings), parent);
}

} // namespace cppl::core
