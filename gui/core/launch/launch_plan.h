// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/cluster_profile.h"
#include "cppl/telemetry.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cppl::core {

/// @brief How one rank is started: where, in which directory, with which environment and arguments.
struct RankCommand
{
    int rank = 0;
    int hostIndex = 0;
    std::string hostName;  ///< the profile's name for the host
    std::string address;   ///< where to connect (SSH); the name when the profile gives none
    SshOptions ssh;
    std::string workdir;   ///< empty: the login directory (SSH) or the current one (local)
    std::vector<std::pair<std::string, std::string>> env; ///< in order: rank variables, run id, the profile's env (hostEnvironment)
    std::vector<std::string> argv;                        ///< argv[0] is the agent executable
};

struct LaunchOptions
{
    std::string runId;               ///< CLUSTERPPL_RUN_ID on every rank
    std::string masterAddr;          ///< empty: the first host's address (127.0.0.1 for the local launcher)
    int masterPort = 29500;
    std::string profileDir;          ///< relative model/data paths resolve against it (local launcher only)
    std::string agentOverride;       ///< replaces every host's `agent` (tests, a local build)
    std::string telemetry;           ///< collector endpoint passed as --telemetry (empty: none)
    /// The agents' half of this run's CURVE credentials (cppl::telemetry::generateCredentials().agent;
    /// the collector binds with the other half). With `telemetry` set, every rank gets
    /// `--telemetry-keys-stdin` and its launcher writes LaunchPlan::keyLine to its stdin first: the
    /// keys never appear in argv, the environment or a file.
    std::optional<cppl::telemetry::Credentials> telemetryCredentials;
    /// A resumed run: the checkpoint every rank gets as --resume-state (compact JSON); empty: none.
    std::string resumeState;
    /// A resumed run's batch, from its checkpoint's "batch" (0: not recorded): every rank gets it as
    /// --batch when the profile says "auto", so the agents do not size another from free memory.
    std::int64_t resumeBatch = 0;
};

struct LaunchPlan
{
    std::string launcher; ///< "local" or "ssh"
    std::string masterAddr;
    int masterPort = 0;
    std::string groups;   ///< the agents' --groups list, e.g. "0,1;2,3"
    std::vector<RankCommand> ranks;
    /// The rendezvous store in a process of its own (`clusterppl-agent store`), for
    /// `on_rank_loss: continue`: the launcher starts it on the first host before any rank and
    /// stops it (EOF on its stdin) after the last, so that it outlives rank 0; every rank then has
    /// TORCHELASTIC_USE_AGENT_STORE=True. rank -1. Unset: rank 0 serves the store, as torchrun's
    /// ranks do. The Slurm launcher runs it in the job's batch step instead (slurm_job.h).
    std::optional<RankCommand> store;
    /// Secret: the line each rank with `--telemetry-keys-stdin` reads first from its stdin
    /// (cppl::telemetry::formatKeyLine). Never print or log it. Empty: no keys.
    std::string keyLine;
};

/// @brief The agent flag that makes a rank read LaunchPlan::keyLine from stdin before anything else.
inline constexpr std::string_view kKeysStdinFlag = "--telemetry-keys-stdin";

/// @brief True when @p rank reads the key line from its stdin (its argv has kKeysStdinFlag).
[[nodiscard]] bool readsKeyLine(const RankCommand &rank);

/**
 * @brief One agent per rank from a valid profile. Ranks are numbered host by host (the profile's
 * rank layout), groups become an explicit `--groups` list, and every evaluation setting becomes an
 * `eval` flag; the ranks print the lines of the agent -> launcher protocol (docs/agent-lines.md:
 * the result, checkpoints, lost ranks), and every rank exits when its stdin closes (no rank
 * outlives its launcher). Throws ConfigError for values that cannot be
 * passed safely (control characters).
 */
[[nodiscard]] LaunchPlan buildLaunchPlan(const ClusterProfile &profile, const LaunchOptions &options);

/// @brief POSIX shell single-quoting. Throws ConfigError (naming @p what) for control characters.
[[nodiscard]] std::string shellQuote(std::string_view value, std::string_view what = "value");

/// @brief The command line an SSH server runs for a rank: `cd DIR && exec env K=V... AGENT ARGS...`,
/// every piece quoted.
[[nodiscard]] std::string remoteCommand(const RankCommand &rank);

} // namespace cppl::core
