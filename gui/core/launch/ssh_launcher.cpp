// SPDX-License-Identifier: MIT
// Ranks on remote hosts through libssh. A libssh session and its channels belong to one thread, so
// each host gets its own thread; results reach the launcher through queued calls.
#include "launcher.h"

#include "cppl/child_process.h"

#include <QMetaObject>
#include <QPointer>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

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
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace cppl::core {

namespace {

struct SessionDeleter
{
    void operator()(ssh_session s) const
    {
        ssh_disconnect(s);
        ssh_free(s);
    }
};
using Session = std::unique_ptr<std::remove_pointer_t<ssh_session>, SessionDeleter>;

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

    /// Connects, checks the host key, authenticates; an error text or empty.
    std::string open(const RankCommand &first, Session &session, ssh_callbacks_struct &callbacks)
    {
        const std::string target = first.ssh.alias.empty() ? first.address : first.ssh.alias;
        session.reset(ssh_new());
        ssh_session s = session.get();
        if (std::string e = setOptions(s, first, target); !e.empty())
            return e;
        unsigned int port = 0;
        ssh_options_get_port(s, &port);
        const std::string where = target + " (port " + std::to_string(port) + ")";
        if (ssh_connect(s) != SSH_OK)
            return "cannot connect to " + where + ": " + ssh_get_error(s);
        if (std::string e = checkHostKey(s, where); !e.empty())
            return e;
        return authenticate(s, first, where, callbacks);
    }

    /// The session's options: ~/.ssh/config (or the given file) first, the profile's values over it.
    std::string setOptions(ssh_session s, const RankCommand &first, const std::string &target)
    {
        // Every option is checked: a value libssh refuses must not silently fall back to a default
        // (another user, another known_hosts file).
        auto option = [&](ssh_options_e what, const void *value, const char *name) -> std::string {
            if (ssh_options_set(s, what, value) != SSH_OK)
                return std::string("cannot set the SSH option ") + name + " for " + target + ": " + ssh_get_error(s);
            return {};
        };
        if (auto e = option(SSH_OPTIONS_HOST, target.c_str(), "host"); !e.empty())
            return e;
        if (ssh_options_parse_config(s, m_settings.sshConfigFile.empty() ? nullptr : m_settings.sshConfigFile.c_str()) != SSH_OK)
            return "cannot read the SSH configuration " + (m_settings.sshConfigFile.empty() ? std::string("~/.ssh/config") : m_settings.sshConfigFile)
                   + " for " + target + ": " + ssh_get_error(s) + " (fix the file, or pass another with --ssh-config)";
        if (first.ssh.port != 22) {
            const unsigned int port = static_cast<unsigned int>(first.ssh.port);
            if (auto e = option(SSH_OPTIONS_PORT, &port, "port"); !e.empty())
                return e;
        }
        if (!first.ssh.user.empty())
            if (auto e = option(SSH_OPTIONS_USER, first.ssh.user.c_str(), "user"); !e.empty())
                return e;
        if (!m_settings.knownHostsFile.empty())
            if (auto e = option(SSH_OPTIONS_KNOWNHOSTS, m_settings.knownHostsFile.c_str(), "known_hosts file"); !e.empty())
                return e;
        const long timeout = m_settings.connectTimeoutSeconds;
        return option(SSH_OPTIONS_TIMEOUT, &timeout, "connect timeout");
    }

    /// "ssh-ed25519 SHA256:..." of the server's key, or "unknown".
    static std::string hostKeyFingerprint(ssh_session s)
    {
        ssh_key key = nullptr;
        std::string fingerprint = "unknown";
        if (ssh_get_server_publickey(s, &key) == SSH_OK) {
            unsigned char *hash = nullptr;
            size_t len = 0;
            if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &len) == 0) {
                char *fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, len);
                fingerprint = std::string(ssh_key_type_to_char(ssh_key_type(key))) + " " + fp;
                ssh_string_free_char(fp);
                ssh_clean_pubkey_hash(&hash);
            }
            ssh_key_free(key);
        }
        return fingerprint;
    }

    /// The host key against known_hosts, as OpenSSH checks it; an error text or empty.
    std::string checkHostKey(ssh_session s, const std::string &where)
    {
        const std::string fingerprint = hostKeyFingerprint(s);
        switch (ssh_session_is_known_server(s)) {
        case SSH_KNOWN_HOSTS_OK:
            return {};
        case SSH_KNOWN_HOSTS_CHANGED:
            return "@@@ WARNING: THE HOST KEY OF " + where + " HAS CHANGED @@@ It now offers " + fingerprint
                   + ", which differs from known_hosts. Someone could be intercepting the connection (man-in-the-middle), "
                     "or the host was reinstalled. Refusing to connect; if you trust the new key, remove the old one "
                     "(ssh-keygen -R) and run again.";
        case SSH_KNOWN_HOSTS_OTHER:
            return "host key of " + where + " is of another type than known_hosts records (now " + fingerprint
                   + "); refusing to connect, as OpenSSH would (possible man-in-the-middle)";
        case SSH_KNOWN_HOSTS_NOT_FOUND:
        case SSH_KNOWN_HOSTS_UNKNOWN:
            return acceptNewHostKey(s, where, fingerprint);
        case SSH_KNOWN_HOSTS_ERROR:
        default:
            return "cannot check the host key of " + where + " against known_hosts: " + ssh_get_error(s);
        }
    }

    /// A host known_hosts does not know: refused, or accepted (for this connection, or recorded)
    /// as the settings or the user say; an error text or empty.
    std::string acceptNewHostKey(ssh_session s, const std::string &where, const std::string &fingerprint)
    {
        HostKeyAnswer answer = HostKeyAnswer::Refuse;
        if (m_settings.newHostKeys == NewHostKeys::Ask && m_settings.askNewHostKey) {
            answer = m_settings.askNewHostKey(where, fingerprint);
            if (answer == HostKeyAnswer::Refuse)
                return "host " + where + " is not in known_hosts and its key " + fingerprint
                       + " was refused; nothing was started there (accept the key, or remove the host from the profile)";
        } else if (m_settings.newHostKeys == NewHostKeys::Accept) {
            answer = HostKeyAnswer::AcceptAlways;
        } else {
            return "host " + where + " is not in known_hosts; its key is " + fingerprint
                   + ". Check that fingerprint with the host's administrator, then run again with --accept-new-host-keys "
                     "(or add it with ssh-keyscan)";
        }
        // Accepted once: trusted for this connection only, so nothing is written anywhere.
        if (answer == HostKeyAnswer::AcceptAlways && ssh_session_update_known_hosts(s) != SSH_OK)
            return "cannot record the host key of " + where + " in known_hosts: " + ssh_get_error(s);
        post([this, fp = QString::fromStdString(fingerprint), w = QString::fromStdString(where), always = answer == HostKeyAnswer::AcceptAlways] {
            Q_EMIT rankOutput(-1, true,
                              always ? QStringLiteral("accepted new host key for %1 and recorded it in known_hosts: %2").arg(w, fp)
                                     : QStringLiteral("accepted new host key for %1 for this run only (not recorded): %2").arg(w, fp));
        });
        return {};
    }

    static std::string userOf(ssh_session s)
    {
        char *user = nullptr;
        ssh_options_get(s, SSH_OPTIONS_USER, &user);
        const std::string u = user ? user : "?";
        ssh_string_free_char(user);
        return u;
    }

    /// The profile's key, else ssh-agent, then the default keys in ~/.ssh; a password only where
    /// the profile allows it, after the keys. An error text or empty.
    std::string authenticate(ssh_session s, const RankCommand &first, const std::string &where, ssh_callbacks_struct &callbacks)
    {
        int rc = SSH_AUTH_DENIED;
        std::string tried;
        if (!first.ssh.identityFile.empty()) {
            tried = "key " + first.ssh.identityFile;
            ssh_key priv = nullptr;
            if (ssh_pki_import_privkey_file(first.ssh.identityFile.c_str(), nullptr, nullptr, nullptr, &priv) != SSH_OK) {
                // Perhaps encrypted: ask for its passphrase (the CLI reads it from the terminal).
                std::optional<std::string> pass;
                if (m_settings.passphrase)
                    pass = m_settings.passphrase("passphrase for " + first.ssh.identityFile + " (" + where + "): ");
                if (!pass || ssh_pki_import_privkey_file(first.ssh.identityFile.c_str(), pass->c_str(), nullptr, nullptr, &priv) != SSH_OK)
                    return "cannot read the private key " + first.ssh.identityFile + " for " + where
                           + " (missing, unreadable, or encrypted and no right passphrase given; or load it into ssh-agent)";
            }
            rc = ssh_userauth_publickey(s, nullptr, priv);
            ssh_key_free(priv);
        } else {
            rc = authenticateWithDefaultKeys(s, tried, callbacks);
        }
        if (rc != SSH_AUTH_SUCCESS && first.ssh.passwordAuth && m_settings.passphrase) {
            tried += ", password";
            if (const auto pw = m_settings.passphrase("password for " + userOf(s) + "@" + where + ": "))
                rc = ssh_userauth_password(s, nullptr, pw->c_str());
        }
        if (rc != SSH_AUTH_SUCCESS)
            return "authentication to " + where + " as " + userOf(s) + " failed (tried " + tried + "): " + ssh_get_error(s);
        return {};
    }

    /// ssh-agent, then the keys in ~/.ssh and IdentityFile (an encrypted one's passphrase asked
    /// through @p callbacks, which libssh keeps for the session's life: runHost owns them).
    int authenticateWithDefaultKeys(ssh_session s, std::string &tried, ssh_callbacks_struct &callbacks)
    {
        int rc = SSH_AUTH_DENIED;
        if (std::getenv("SSH_AUTH_SOCK")) {
            tried = "ssh-agent";
            rc = ssh_userauth_agent(s, nullptr);
        }
        if (rc == SSH_AUTH_SUCCESS)
            return rc;
        tried += std::string(tried.empty() ? "" : ", ") + "keys in ~/.ssh and IdentityFile";
        callbacks = {};
        callbacks.userdata = this;
        callbacks.auth_function = [](const char *prompt, char *buf, size_t len, int, int, void *self) -> int {
            auto *me = static_cast<SshLauncher *>(self);
            if (!me->m_settings.passphrase || len == 0)
                return -1;
            const auto pass = me->m_settings.passphrase(prompt ? prompt : "passphrase: ");
            if (!pass || pass->size() + 1 > len)
                return -1;
            std::memcpy(buf, pass->c_str(), pass->size() + 1);
            return 0;
        };
        ssh_callbacks_init(&callbacks);
        ssh_set_callbacks(s, &callbacks);
        return ssh_userauth_publickey_auto(s, nullptr, nullptr);
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
        ssh_callbacks_struct callbacks{};
        Session session;
        const bool storeHere = m_plan.store && m_plan.store->hostIndex == first.hostIndex;
        if (const std::string problem = open(first, session, callbacks); !problem.empty()) {
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
        bool signalled = false;
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
                return connectionLost(hostName, chans, store);
            const auto now = std::chrono::steady_clock::now();
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

    /// The SSH connection went: the store and every rank still running on this host are gone.
    void connectionLost(const QString &hostName, std::vector<Chan> &chans, StoreChan &store)
    {
        if (store.ch) {
            ssh_channel_free(store.ch);
            store.ch = nullptr;
            post([this, m = QStringLiteral("lost the SSH connection to %1").arg(hostName)] { onStoreFailed(m); });
            post([this] { onStoreGone(); });
        }
        for (auto &c : chans)
            if (!c.done) {
                c.done = true;
                post([this, rank = c.rank->rank, h = hostName] { onRankEnded(rank, -1, QStringLiteral("lost the SSH connection to %1").arg(h)); });
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
