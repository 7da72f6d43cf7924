// SPDX-License-Identifier: MIT
#include "fd_limit.h"

#include "cppl/errors.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace cppl::agent {

namespace {

std::uint64_t fromRlim(rlim_t v)
{
    return v == RLIM_INFINITY ? UINT64_MAX : static_cast<std::uint64_t>(v);
}

std::string text(std::uint64_t v)
{
    return v == UINT64_MAX ? std::string("unlimited") : std::to_string(v);
}

} // namespace

FileLimit raiseFileLimit()
{
    FileLimit f;
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return f;
    f.before = fromRlim(rl.rlim_cur);
    if (rl.rlim_cur != rl.rlim_max) {
        rlimit up = rl;
        up.rlim_cur = rl.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &up) != 0 && rl.rlim_max == RLIM_INFINITY) {
            // An unlimited hard limit: the kernel caps open files at fs.nr_open.
            if (std::FILE *nr = std::fopen("/proc/sys/fs/nr_open", "re")) {
                unsigned long long cap = 0;
                if (std::fscanf(nr, "%llu", &cap) == 1 && cap > rl.rlim_cur) {
                    up.rlim_cur = static_cast<rlim_t>(cap);
                    (void)::setrlimit(RLIMIT_NOFILE, &up);
                }
                std::fclose(nr);
            }
        }
        (void)::getrlimit(RLIMIT_NOFILE, &rl);
    }
    f.soft = fromRlim(rl.rlim_cur);
    f.hard = fromRlim(rl.rlim_max);
    if (std::getenv("CLUSTERPPL_DEBUG_CONNECT")) {
        const std::string line = "clusterppl-agent: open files limit " + text(f.before) + " raised to " + text(f.soft) + " (hard limit "
                                 + text(f.hard) + ")\n";
        std::fputs(line.c_str(), stderr);
    }
    return f;
}

std::uint64_t filesNeeded(int rank, int world, bool servesStore, int meshLinks)
{
    const auto others = static_cast<std::uint64_t>(world > 1 ? world - 1 : 0);
    std::uint64_t need = 64;                     // the margin: the model's files, logs, pipes, the store connections
    need += others;                              // Gloo's pairs of the whole run's group
    need += rank == 0 ? others : 1;              // the watchdog's star
    need += static_cast<std::uint64_t>(meshLinks); // the watchdog's mesh (watchdog_mesh.h)
    if (servesStore)
        need += others + 1; // every rank's store client
    return need;
}

void requireFileLimit(int rank, int world, bool servesStore, int meshLinks)
{
    const std::uint64_t need = filesNeeded(rank, world, servesStore, meshLinks);
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || fromRlim(rl.rlim_cur) >= need)
        return;
    throw ConfigError("rank " + std::to_string(rank) + " of " + std::to_string(world) + ": the open files limit (RLIMIT_NOFILE) is "
                      + text(fromRlim(rl.rlim_cur)) + " (hard limit " + text(fromRlim(rl.rlim_max)) + "), but this rank needs at least "
                      + std::to_string(need) + " for its connections to the other ranks" + (servesStore ? " and the store's clients" : "")
                      + "; raise the hard limit where the ranks start: `ulimit -n " + std::to_string(need)
                      + "` (as root, or within the hard limit) in the shell that launches them, `nofile` in /etc/security/limits.conf, "
                        "or the launcher's setting (systemd LimitNOFILE=, Slurm PropagateResourceLimits, Docker --ulimit nofile=); "
                        "docs/launching.md, \"Open files\"");
}

} // namespace cppl::agent
