// SPDX-License-Identifier: MIT
#include "standalone.h"

#include "checkpoint.h"
#include "rendezvous_server.h"

#include "args.h"
#include "exit_codes.h"

#include "cppl/child_process.h"
#include "cppl/errors.h"
#include "cppl/host.h"
#include "cppl/signal_pipe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>

extern char **environ;

namespace cppl::agent::dist {

namespace {

struct Child
{
    int rank = 0;
    pid_t pid = -1;
    int errFd = -1;
    cppl::LineSplitter lines; ///< its stderr, cut into lines
    std::string lastError;    ///< its last "clusterppl-agent: ..." line
    bool exited = false;
    int status = 0;
    bool stoppedByUs = false;
};

/**
 * The root cause a rank's last words name (run_cause.h), or empty: "clusterppl-agent: rank 0:
 * CAUSE (the cause); then: ..." gives CAUSE; a failure report the watchdog relayed, "... rank 1
 * (host) failed: WHAT", gives "rank 1 (host): WHAT" (the first report is the cause: the others
 * failed after it).
 */
std::string causeNamedIn(std::string_view line)
{
    constexpr std::string_view kAgent = "clusterppl-agent: ", kMarker = " (the cause); then: ", kFailed = " failed: ";
    if (!line.starts_with(kAgent))
        return {};
    line.remove_prefix(kAgent.size());
    if (line.starts_with("rank ")) // this rank's own name first
        if (const std::size_t colon = line.find(": "); colon != std::string_view::npos && line.substr(5, colon - 5).find_first_not_of("0123456789") == std::string_view::npos)
            line.remove_prefix(colon + 2);
    if (const std::size_t at = line.find(kMarker); at != std::string_view::npos)
        return std::string(line.substr(0, at));
    const std::size_t failed = line.find(kFailed);
    if (!line.starts_with("rank ") || failed == std::string_view::npos || line.substr(0, failed).find(": ") != std::string_view::npos)
        return {};
    return std::string(line.substr(0, failed)) + ": " + std::string(line.substr(failed + kFailed.size()));
}

/**
 * A cause no rank named (each gave up on its own, say at the same --timeout, so no line carries
 * "(the cause)"): the first failing rank's own last words, "rank R (host): WHAT", or empty.
 */
std::string ownCause(const Child &first)
{
    std::string_view line = first.lastError;
    constexpr std::string_view kAgent = "clusterppl-agent: ";
    if (!line.starts_with(kAgent))
        return {};
    line.remove_prefix(kAgent.size());
    const std::string self = "rank " + std::to_string(first.rank) + ": ";
    if (line.starts_with(self))
        line.remove_prefix(self.size());
    return "rank " + std::to_string(first.rank) + " (" + cppl::localHostName() + "): " + std::string(line);
}

/// Whether @p pid is stopped (SIGSTOP, a debugger): /proc/PID/stat's state field is 'T' or 't'.
bool isStopped(pid_t pid)
{
    std::FILE *f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
    if (!f)
        return false;
    char buf[512];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = 0;
    const char *paren = std::strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}

bool failed(int status)
{
    return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/// After a partial start: SIGTERM the ranks already running, SIGKILL what is left after a grace
/// period, and reap every one, so that no rank outlives a launcher that gives up.
void stopStarted(std::vector<Child> &children)
{
    for (auto &c : children)
        if (c.pid > 0) {
            ::kill(c.pid, SIGTERM);
            ::kill(c.pid, SIGCONT);
        }
    const auto killAt = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    for (auto &c : children) {
        if (c.pid <= 0)
            continue;
        int status = 0;
        while (::waitpid(c.pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() >= killAt)
                ::kill(c.pid, SIGKILL);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (c.errFd >= 0)
            ::close(c.errFd);
        c.pid = -1;
        c.errFd = -1;
    }
}

struct Options
{
    int nproc = 0;
    int port = 0;        ///< 0: the store picks a free port
    std::vector<std::string> evalArgs;
    std::string command = "eval"; ///< what each rank runs: eval, or comm-check (the collective self-test)
    bool tolerant = false;        ///< eval's --on-rank-loss continue (its default with the dynamic schedule): a failing rank, rank 0 included, stops no other
};

/// Launcher flags before "--", eval arguments after it.
Options parseOptions(const std::vector<std::string> &argvIn)
{
    std::vector<std::string> mine;
    Options o;
    bool afterDashes = false;
    for (const auto &x : argvIn) {
        if (!afterDashes && x == "--") {
            afterDashes = true;
            continue;
        }
        (afterDashes ? o.evalArgs : mine).push_back(x);
    }
    if (!o.evalArgs.empty() && (o.evalArgs.front() == "eval" || o.evalArgs.front() == "comm-check")) {
        o.command = o.evalArgs.front();
        o.evalArgs.erase(o.evalArgs.begin());
    }
    const Args a(mine, {"--nproc-per-node", "--groups", "--master-port"}, {"--standalone"});
    if (!a.has("--standalone"))
        throw ConfigError("run: only --standalone is supported here (one host); for several hosts use clusterppl-cli, torchrun or srun");
    o.nproc = static_cast<int>(a.integer("--nproc-per-node", 0, 1, 1024));
    if (o.nproc == 0)
        throw ConfigError("run --standalone needs --nproc-per-node N");
    o.port = static_cast<int>(a.integer("--master-port", 0, 1, 65535));
    if (!afterDashes || (o.evalArgs.empty() && o.command == "eval"))
        throw ConfigError("run: put the eval arguments after \"--\", e.g. run --standalone --nproc-per-node 4 -- --model DIR --text FILE");
    // eval's --on-rank-loss, with eval's default: continue with the dynamic schedule (the default,
    // or the resumed checkpoint's), fail with the static one. A bad value is eval's to refuse.
    std::optional<std::string> onLoss, schedule, resumeState;
    for (std::size_t i = 0; i + 1 < o.evalArgs.size(); ++i) {
        if (o.evalArgs[i] == "--on-rank-loss")
            onLoss = o.evalArgs[i + 1];
        else if (o.evalArgs[i] == "--schedule")
            schedule = o.evalArgs[i + 1];
        else if (o.evalArgs[i] == "--resume-state")
            resumeState = o.evalArgs[i + 1];
    }
    if (!schedule && resumeState) {
        try {
            schedule = parseResumeState(*resumeState).schedule;
        } catch (const std::exception &) { // eval refuses it with the reason
        }
    }
    o.tolerant = o.command == "eval" && onLoss.value_or(schedule.value_or("dynamic") == "static" ? "fail" : "continue") == "continue";
    if (const auto groups = a.get("--groups"); groups && !groups->empty()) {
        o.evalArgs.push_back("--groups");
        o.evalArgs.push_back(*groups);
    }
    return o;
}

/// This process's environment with torchrun's variables for one rank.
std::vector<std::string> rankEnvironment(int rank, int nproc, const std::string &masterPort)
{
    std::map<std::string, std::string> env;
    for (char **e = environ; *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
    for (const char *k : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"})
        env.erase(k); // torchrun's variables below decide, not a surrounding job's
    env["RANK"] = std::to_string(rank);
    env["WORLD_SIZE"] = std::to_string(nproc);
    env["LOCAL_RANK"] = std::to_string(rank);
    env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
    env["GROUP_RANK"] = "0";
    env["MASTER_ADDR"] = "127.0.0.1";
    env["MASTER_PORT"] = masterPort;
    env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
    std::vector<std::string> out;
    for (const auto &[k, v] : env)
        out.push_back(k + "=" + v);
    return out;
}

/// Forks one rank of `eval` with its stderr on a pipe; on failure stops the ranks already started.
void startRank(std::vector<Child> &children, int r, const Options &o, const std::string &masterPort)
{
    auto giveUp = [&](const char *call, int e, const char *hint) {
        stopStarted(children);
        throw Error("run: cannot start rank " + std::to_string(r) + " of " + std::to_string(o.nproc) + ": " + call + ": " + std::strerror(e)
                    + hint + "; the ranks already started were stopped");
    };
    int pfd[2];
    if (::pipe2(pfd, O_CLOEXEC) != 0)
        giveUp("pipe2", errno, "");
    std::vector<std::string> envStrings = rankEnvironment(r, o.nproc, masterPort);
    std::vector<std::string> args{"clusterppl-agent", o.command};
    args.insert(args.end(), o.evalArgs.begin(), o.evalArgs.end());
    std::vector<char *> cargv, cenv;
    for (auto &x : args)
        cargv.push_back(x.data());
    cargv.push_back(nullptr);
    for (auto &x : envStrings)
        cenv.push_back(x.data());
    cenv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
        const int e = errno;
        ::close(pfd[0]);
        ::close(pfd[1]);
        giveUp("fork", e, " (out of processes or memory?)");
    }
    if (pid == 0) {
        if (::dup2(pfd[1], 2) < 0) { // stderr is still the launcher's: say so there
            const std::string msg = std::string("clusterppl-agent run: dup2: ") + std::strerror(errno) + "\n";
            (void)!::write(2, msg.data(), msg.size());
            ::_exit(127);
        }
        ::execve("/proc/self/exe", cargv.data(), cenv.data());
        const std::string msg = std::string("clusterppl-agent run: cannot start rank: ") + std::strerror(errno) + "\n";
        (void)!::write(2, msg.data(), msg.size());
        ::_exit(127);
    }
    ::close(pfd[1]);
    Child &c = children[static_cast<std::size_t>(r)];
    c.rank = r;
    c.pid = pid;
    c.errFd = pfd[0];
}

/// supervise()'s state: the failures seen so far and the deadlines of stopping what is left.
class Supervisor
{
public:
    Supervisor(std::vector<Child> &children, cppl::SignalPipe &signals, std::ostream &err, bool tolerant)
        : m_children(children), m_signals(signals), m_err(err), m_tolerant(tolerant)
    {
    }

    int run()
    {
        for (;;) {
            relayOutputAndSignals();
            const bool running = reap();
            if (!running && std::none_of(m_children.begin(), m_children.end(), [](const Child &c) { return c.errFd >= 0; }))
                return m_tolerant ? m_tolerantFailure : m_firstFailure;
            if (m_tolerant && running && m_tolerantFailure >= 0 && !stopping()
                && std::all_of(m_children.begin(), m_children.end(), [](const Child &c) { return c.exited || isStopped(c.pid); }))
                m_stopAt = clock::now() + kGrace; // every rank left is stopped: nobody will finish the run
            stopWhenDue();
        }
    }

    /// The root cause a rank's words named (causeNamedIn), or empty.
    [[nodiscard]] const std::string &cause() const noexcept { return m_cause; }

private:
    using clock = std::chrono::steady_clock;
    /// How long the others get to end on their own (their watchdogs, with their own reasons) before SIGTERM, and SIGTERM before SIGKILL.
    static constexpr std::chrono::seconds kGrace{3};

    [[nodiscard]] bool stopping() const { return m_stopAt != clock::time_point{} || m_killAt != clock::time_point{}; }

    void relayOutputAndSignals()
    {
        std::vector<pollfd> fds{{m_signals.readFd(), POLLIN, 0}};
        std::vector<Child *> owners{nullptr};
        for (auto &c : m_children)
            if (c.errFd >= 0) {
                fds.push_back({c.errFd, POLLIN, 0});
                owners.push_back(&c);
            }
        if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR)
            throw Error(std::string("run: poll: ") + std::strerror(errno));
        if (fds[0].revents & POLLIN)
            if (const int sig = m_signals.drain(); sig != 0) {
                ++m_forwarded; // a third one kills
                for (auto &c : m_children)
                    if (!c.exited)
                        ::kill(c.pid, m_forwarded > 2 ? SIGKILL : sig);
            }
        for (std::size_t i = 1; i < fds.size(); ++i)
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
                readOutput(*owners[i]);
        m_err.flush();
    }

    void readOutput(Child &c)
    {
        const auto relay = [&](std::string_view line) {
            if (c.rank != 0)
                m_err << "[rank " << c.rank << "] ";
            m_err << line << '\n';
            if (m_cause.empty())
                m_cause = causeNamedIn(line);
            if (line.starts_with("clusterppl-agent: "))
                c.lastError = line;
        };
        char buf[8192];
        const ssize_t n = ::read(c.errFd, buf, sizeof buf);
        if (n > 0) {
            c.lines.feed(std::string_view(buf, static_cast<std::size_t>(n)), relay);
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            c.lines.flush(relay);
            ::close(c.errFd);
            c.errFd = -1;
        }
    }

    /// Reaps the ranks that exited; whether any is still running.
    bool reap()
    {
        bool running = false;
        // Ranks reaped in the same sweep may have died in any order within it (a killed rank's peers
        // notice its closed connection within milliseconds and exit with their own code). The one a
        // signal ended is the cause, the others are its consequence: it is named first.
        int sweepFailure = -1;
        for (auto &c : m_children) {
            if (c.exited)
                continue;
            int status = 0;
            if (::waitpid(c.pid, &status, WNOHANG) != c.pid) {
                running = true;
                continue;
            }
            c.exited = true;
            c.status = status;
            if (m_tolerant && !c.stoppedByUs) {
                // --on-rank-loss continue: the survivors regroup without a failed rank (rank 0
                // too); nothing to stop. A rank that finished means the run is over: a rank
                // that is stopped (SIGSTOP) or hung, which the others left behind, gets the
                // grace period and is then stopped.
                if (failed(status) && m_tolerantFailure < 0)
                    m_tolerantFailure = c.rank;
                if (!failed(status) && !stopping())
                    m_stopAt = clock::now() + kGrace;
            } else if (failed(status) && m_firstFailure < 0 && !c.stoppedByUs) {
                if (sweepFailure < 0 || (WIFSIGNALED(status) && !WIFSIGNALED(m_children[static_cast<std::size_t>(sweepFailure)].status)))
                    sweepFailure = c.rank;
            }
        }
        if (sweepFailure >= 0) {
            m_firstFailure = sweepFailure;
            m_stopAt = clock::now() + kGrace;
        }
        return running;
    }

    void stopWhenDue()
    {
        const auto now = clock::now();
        if (m_stopAt != clock::time_point{} && now >= m_stopAt) {
            for (auto &c : m_children)
                if (!c.exited) {
                    c.stoppedByUs = true;
                    ::kill(c.pid, SIGTERM);
                    ::kill(c.pid, SIGCONT); // a stopped rank acts on SIGTERM only once it runs
                }
            m_stopAt = {};
            m_killAt = now + kGrace;
        }
        if (m_killAt != clock::time_point{} && now >= m_killAt) {
            for (auto &c : m_children)
                if (!c.exited)
                    ::kill(c.pid, SIGKILL);
            m_killAt = {};
        }
    }

    std::vector<Child> &m_children;
    cppl::SignalPipe &m_signals;
    std::ostream &m_err;
    bool m_tolerant;
    int m_firstFailure = -1;
    int m_tolerantFailure = -1; ///< tolerant: the first rank that failed (the others went on)
    clock::time_point m_stopAt{}, m_killAt{};
    int m_forwarded = 0;
    std::string m_cause; ///< the root cause the first rank's words named (causeNamedIn), or empty
};

/// Watches the ranks until every one exited and every pipe is drained: relays their stderr,
/// forwards signals (a third one kills), and stops the rest when one fails (after a grace period
/// in which the others' watchdogs usually end them with their own reasons). Returns the first
/// failing rank, or -1. Tolerant (--on-rank-loss continue): no failure stops the others, rank 0's
/// included (the survivors regroup); the run is over when a rank finished successfully or only
/// stopped ranks are left, and what is left is then stopped after the grace period.
int supervise(std::vector<Child> &children, cppl::SignalPipe &signals, std::ostream &err, bool tolerant, std::string &cause)
{
    Supervisor s(children, signals, err, tolerant);
    const int first = s.run();
    cause = s.cause();
    return first;
}

} // namespace

int standaloneCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err)
{
    const Options o = parseOptions(argv);
    std::unique_ptr<RendezvousServer> store;
    try {
        store = std::make_unique<RendezvousServer>(o.port, "127.0.0.1");
    } catch (const Error &e) {
        throw ExitError(kExitCollective, std::string("run: ") + e.what());
    }
    const std::string masterPort = std::to_string(store->port());
    cppl::SignalPipe signals{SIGINT, SIGTERM, SIGHUP};

    std::vector<Child> children(static_cast<std::size_t>(o.nproc));
    err << "clusterppl-agent run: " << o.nproc << " local ranks, store 127.0.0.1:" << masterPort << '\n' << std::flush;
    for (int r = 0; r < o.nproc; ++r)
        startRank(children, r, o, masterPort);
    std::string cause;
    const int firstFailure = supervise(children, signals, err, o.tolerant, cause);

    const Child &zero = children.front();
    if (o.tolerant) {
        // The lowest rank that finished reported for the run (rank 0, or the lowest survivor).
        const auto reporter = std::find_if(children.begin(), children.end(), [](const Child &c) { return !c.stoppedByUs && !failed(c.status); });
        if (reporter != children.end()) {
            for (const auto &c : children)
                if (failed(c.status))
                    err << "clusterppl-agent run: rank " << c.rank << " "
                        << (c.stoppedByUs ? "was stopped after rank " + std::to_string(reporter->rank) + " finished"
                                          : cppl::describeWaitStatus(c.status))
                        << "; the others went on without it (--on-rank-loss continue)\n";
            out.flush();
            return cppl::exitCodeFromWaitStatus(reporter->status);
        }
    }
    if (firstFailure >= 0) {
        const Child &f = children[static_cast<std::size_t>(firstFailure)];
        err << "clusterppl-agent run: rank " << f.rank << " " << cppl::describeWaitStatus(f.status) << " first";
        for (const auto &c : children)
            if (c.rank != f.rank && failed(c.status))
                err << "; rank " << c.rank << (c.stoppedByUs ? " was stopped" : " " + cppl::describeWaitStatus(c.status));
        if (cause.empty())
            cause = ownCause(f);
        if (!cause.empty()) // which rank exited first is a race; the cause the ranks named is not
            err << "; the cause: " << cause;
        err << '\n';
        if (zero.stoppedByUs)
            return cppl::exitCodeFromWaitStatus(f.status);
    }
    out.flush();
    return cppl::exitCodeFromWaitStatus(zero.status);
}

} // namespace cppl::agent::dist
