// SPDX-License-Identifier: MIT
#include "standalone.h"

#include "store.h"

#include "args.h"
#include "exit_codes.h"

#include "cppl/errors.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <thread>

extern char **environ;

namespace cppl::agent::dist {

namespace {

int g_signalPipe = -1;

void onSignal(int sig)
{
    const char c = static_cast<char>(sig);
    (void)!::write(g_signalPipe, &c, 1);
}

struct Child
{
    int rank = 0;
    pid_t pid = -1;
    int errFd = -1;
    std::string pending; ///< a partial stderr line
    bool exited = false;
    int status = 0;
    bool stoppedByUs = false;
};

int exitCodeOf(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return kExitRuntime;
}

std::string describeStatus(int status)
{
    if (WIFSIGNALED(status))
        return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    return "exited with code " + std::to_string(exitCodeOf(status));
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

void checked(int rc, const char *what)
{
    if (rc != 0)
        throw Error(std::string("run: ") + what + ": " + std::strerror(errno));
}

} // namespace

int runCommand(const std::vector<std::string> &argvIn, std::ostream &out, std::ostream &err)
{
    // Launcher flags before "--", eval arguments after it.
    std::vector<std::string> mine, evalArgs;
    bool afterDashes = false;
    for (const auto &x : argvIn) {
        if (!afterDashes && x == "--") {
            afterDashes = true;
            continue;
        }
        (afterDashes ? evalArgs : mine).push_back(x);
    }
    if (!evalArgs.empty() && evalArgs.front() == "eval")
        evalArgs.erase(evalArgs.begin());
    int nproc = 0, port = 0;
    std::string groups;
    std::chrono::milliseconds storeTimeout{30000};
    {
        const Args a(mine, {"--nproc-per-node", "--groups", "--master-port"}, {"--standalone"});
        if (!a.has("--standalone"))
            throw ConfigError("run: only --standalone is supported here (one host); for several hosts use clusterppl-cli, torchrun or srun");
        nproc = static_cast<int>(a.integer("--nproc-per-node", 0, 1, 1024));
        if (nproc == 0)
            throw ConfigError("run --standalone needs --nproc-per-node N");
        port = static_cast<int>(a.integer("--master-port", 0, 1, 65535)); // 0 (absent): the store picks a free port
        groups = a.get("--groups").value_or("");
        if (!afterDashes || evalArgs.empty())
            throw ConfigError("run: put the eval arguments after \"--\", e.g. run --standalone --nproc-per-node 4 -- --model DIR --text FILE");
    }
    if (!groups.empty()) {
        evalArgs.push_back("--groups");
        evalArgs.push_back(groups);
    }

    std::unique_ptr<Store> store;
    try {
        store = openTcpStore("127.0.0.1", port, true, storeTimeout);
    } catch (const Error &e) {
        throw ExitError(kExitCollective, std::string("run: ") + e.what());
    }
    const std::string masterPort = std::to_string(store->port());

    int sigPipe[2];
    checked(::pipe2(sigPipe, O_CLOEXEC | O_NONBLOCK), "pipe2 (signal pipe)");
    g_signalPipe = sigPipe[1];
    struct sigaction sa{};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (const int sig : {SIGINT, SIGTERM, SIGHUP})
        checked(::sigaction(sig, &sa, nullptr), "sigaction");

    std::vector<Child> children(static_cast<std::size_t>(nproc));
    const std::string self = "/proc/self/exe";
    err << "clusterppl-agent run: " << nproc << " local ranks, store 127.0.0.1:" << masterPort << '\n' << std::flush;
    for (int r = 0; r < nproc; ++r) {
        int pfd[2];
        if (::pipe2(pfd, O_CLOEXEC) != 0) {
            const int e = errno;
            stopStarted(children);
            throw Error("run: cannot start rank " + std::to_string(r) + " of " + std::to_string(nproc) + ": pipe2: " + std::strerror(e)
                        + "; the ranks already started were stopped");
        }
        std::map<std::string, std::string> env;
        for (char **e = environ; *e; ++e) {
            const std::string kv = *e;
            const auto eq = kv.find('=');
            env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
        }
        for (const char *k : {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"})
            env.erase(k); // torchrun's variables below decide, not a surrounding job's
        env["RANK"] = std::to_string(r);
        env["WORLD_SIZE"] = std::to_string(nproc);
        env["LOCAL_RANK"] = std::to_string(r);
        env["LOCAL_WORLD_SIZE"] = std::to_string(nproc);
        env["GROUP_RANK"] = "0";
        env["MASTER_ADDR"] = "127.0.0.1";
        env["MASTER_PORT"] = masterPort;
        env["TORCHELASTIC_USE_AGENT_STORE"] = "True";
        std::vector<std::string> envStrings;
        for (const auto &[k, v] : env)
            envStrings.push_back(k + "=" + v);
        std::vector<std::string> args{"clusterppl-agent", "eval"};
        args.insert(args.end(), evalArgs.begin(), evalArgs.end());
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
            stopStarted(children);
            throw Error("run: cannot start rank " + std::to_string(r) + " of " + std::to_string(nproc) + ": fork: " + std::strerror(e)
                        + " (out of processes or memory?); the ranks already started were stopped");
        }
        if (pid == 0) {
            if (::dup2(pfd[1], 2) < 0) { // stderr is still the launcher's: say so there
                const std::string msg = std::string("clusterppl-agent run: dup2: ") + std::strerror(errno) + "\n";
                (void)!::write(2, msg.data(), msg.size());
                ::_exit(127);
            }
            ::execve(self.c_str(), cargv.data(), cenv.data());
            const std::string msg = std::string("clusterppl-agent run: cannot start rank: ") + std::strerror(errno) + "\n";
            (void)!::write(2, msg.data(), msg.size());
            ::_exit(127);
        }
        ::close(pfd[1]);
        children[static_cast<std::size_t>(r)] = Child{r, pid, pfd[0], {}, false, 0, false};
    }

    auto relay = [&](Child &c, bool flushAll) {
        for (std::size_t nl; (nl = c.pending.find('\n')) != std::string::npos;) {
            const std::string line = c.pending.substr(0, nl + 1);
            c.pending.erase(0, nl + 1);
            if (c.rank == 0)
                err << line;
            else
                err << "[rank " << c.rank << "] " << line;
        }
        if (flushAll && !c.pending.empty()) {
            err << (c.rank == 0 ? "" : "[rank " + std::to_string(c.rank) + "] ") << c.pending << '\n';
            c.pending.clear();
        }
        err.flush();
    };

    using clock = std::chrono::steady_clock;
    int firstFailure = -1;            // rank
    clock::time_point stopAt{}, killAt{};
    const auto grace = std::chrono::seconds(3);
    int forwarded = 0;
    for (;;) {
        std::vector<pollfd> fds{{sigPipe[0], POLLIN, 0}};
        std::vector<Child *> owners{nullptr};
        for (auto &c : children)
            if (c.errFd >= 0) {
                fds.push_back({c.errFd, POLLIN, 0});
                owners.push_back(&c);
            }
        ::poll(fds.data(), fds.size(), 100);
        if (fds[0].revents & POLLIN) {
            char sig = 0;
            while (::read(sigPipe[0], &sig, 1) == 1) {
                ++forwarded;
                for (auto &c : children)
                    if (!c.exited)
                        ::kill(c.pid, forwarded > 2 ? SIGKILL : sig);
            }
        }
        for (std::size_t i = 1; i < fds.size(); ++i) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            Child &c = *owners[i];
            char buf[8192];
            const ssize_t n = ::read(c.errFd, buf, sizeof buf);
            if (n > 0) {
                c.pending.append(buf, static_cast<std::size_t>(n));
                relay(c, false);
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                relay(c, true);
                ::close(c.errFd);
                c.errFd = -1;
            }
        }
        bool running = false;
        for (auto &c : children) {
            if (c.exited)
                continue;
            int status = 0;
            if (::waitpid(c.pid, &status, WNOHANG) == c.pid) {
                c.exited = true;
                c.status = status;
                if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && firstFailure < 0 && !c.stoppedByUs) {
                    firstFailure = c.rank;
                    stopAt = clock::now() + grace; // peers notice through their watchdog; give them time to say why
                }
            } else {
                running = true;
            }
        }
        if (!running) {
            bool pipesOpen = false;
            for (const auto &c : children)
                pipesOpen = pipesOpen || c.errFd >= 0;
            if (!pipesOpen)
                break;
        }
        const auto now = clock::now();
        if (firstFailure >= 0 && now >= stopAt && stopAt != clock::time_point{}) {
            for (auto &c : children)
                if (!c.exited) {
                    c.stoppedByUs = true;
                    ::kill(c.pid, SIGTERM);
                    ::kill(c.pid, SIGCONT); // a stopped rank acts on SIGTERM only once it runs
                }
            stopAt = {};
            killAt = now + grace;
        }
        if (killAt != clock::time_point{} && now >= killAt) {
            for (auto &c : children)
                if (!c.exited)
                    ::kill(c.pid, SIGKILL);
            killAt = {};
        }
    }
    ::close(sigPipe[0]);
    ::close(sigPipe[1]);
    g_signalPipe = -1;
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);

    const Child &zero = children.front();
    if (firstFailure >= 0) {
        const Child &f = children[static_cast<std::size_t>(firstFailure)];
        err << "clusterppl-agent run: rank " << f.rank << " " << describeStatus(f.status) << " first";
        for (const auto &c : children)
            if (c.rank != f.rank && (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0))
                err << "; rank " << c.rank << (c.stoppedByUs ? " was stopped" : " " + describeStatus(c.status));
        err << '\n';
        if (zero.stoppedByUs)
            return exitCodeOf(f.status);
    }
    out.flush();
    return exitCodeOf(zero.status);
}

} // namespace cppl::agent::dist
