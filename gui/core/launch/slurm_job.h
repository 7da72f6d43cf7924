// SPDX-License-Identifier: MIT
#pragma once

// The pure half of the Slurm launcher: the batch script a run submits, the driver that submits and
// watches it on the login node, and the parsing of what Slurm and the driver say back. No I/O here,
// so every word of the script is testable without a cluster (docs/launching.md, "Slurm").

#include "launch_plan.h"

#include "cppl/cluster_profile.h"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::core {

/// @brief The profile the rank layout is computed from: slurm.nodes placeholder hosts of
/// slurm.ntasks_per_node slots each (block distribution: ranks 0..T-1 on the first allocated node,
/// and so on), with the login host's workdir and env and the cluster's agent path.
[[nodiscard]] ClusterProfile slurmRankProfile(const ClusterProfile &profile);

/// Placeholder in an argv the batch script replaces by the first allocated node ("$MASTER_ADDR").
inline constexpr std::string_view kSlurmMasterPlaceholder = "@CPPL_MASTER_ADDR@";
/// Placeholder the batch script replaces by the relay's endpoint on the login node ("$CPPL_RELAY").
inline constexpr std::string_view kSlurmRelayPlaceholder = "@CPPL_RELAY@";

struct SlurmJobInputs
{
    std::string runId;
    std::vector<std::string> evalArgv;      ///< rank 0's argv (agent first), as buildLaunchPlan made it
    /// rank 0's environment as buildLaunchPlan made it: exported in the job, except the rank's own
    /// variables (Slurm gives those) and MASTER_ADDR/MASTER_PORT (the job sets them).
    std::vector<std::pair<std::string, std::string>> env;
    std::vector<std::string> preflightArgv; ///< one node's pre-flight argv; empty: no pre-flight step
    /// `clusterppl-agent store` (LaunchPlan::store, on_rank_loss continue): run in the batch step,
    /// on the first allocated node (MASTER_ADDR), before the agents and until they all ended.
    /// Empty: rank 0 serves the store.
    std::vector<std::string> storeArgv;
    int masterPort = 29500;
    std::string generatedAt;                ///< a UTC time for the script's header comment
};

/// @brief What a Slurm run submits: the batch script and the sbatch directory, both on the cluster.
struct SlurmJob
{
    std::string dir;          ///< the job's directory, relative to the login node's workdir (or home)
    std::string batchScript;  ///< job.sbatch, saved with the run and shown to the user
    std::string driverScript; ///< POSIX sh run on the login node for the job's whole life
    int worldSize = 0;
    int ranksPerNode = 0;
};

/**
 * @brief Builds the job of a valid slurm profile. The batch script asks for slurm.nodes nodes and
 * nodes x ntasks_per_node tasks, sources the env script and loads the modules, runs pre-flight as
 * its first step (one task per node), waits for the launcher's decision (a `gate` file), then runs
 * one agent per task with `srun -l`; agents read their identity from SLURM_PROCID/SLURM_NTASKS/
 * SLURM_LOCALID. Every value is single-quoted; ConfigError names a value that cannot be.
 */
[[nodiscard]] SlurmJob buildSlurmJob(const ClusterProfile &profile, const SlurmJobInputs &in);

/// @brief The GPUs per node the job asks for: slurm.gpus_per_node when set; else one per task
/// (ntasks_per_node) unless the evaluation runs on the CPU without NCCL (`device` "cpu" and
/// `backend` not "nccl"), since a cluster that enforces GPU allocation shows a task only the GPUs
/// its job asked for (issue 43, point 3). 0: none asked for.
[[nodiscard]] int slurmGpusPerNode(const ClusterProfile &profile);

/// @brief The RankCommand that runs the driver on the login node through the SSH launcher.
/// @p telemetryKeys: the agents' key line follows on stdin (the SSH launcher writes it).
[[nodiscard]] RankCommand slurmDriverCommand(const ClusterProfile &profile, const SlurmJob &job, bool telemetryKeys);

/// @brief One line of the driver's stdout, decoded.
struct SlurmEvent
{
    enum class Kind {
        Other,        ///< not the driver's: shown as is
        Saved,        ///< text: the batch script's path on the cluster
        Submitted,    ///< text: the job id
        SubmitFailed, ///< text: sbatch's message
        State,        ///< state, reason, nodes, exitCode
        Nodes,        ///< text: the allocated nodes, comma separated, in SLURM_JOB_NODELIST order
        PreflightLine,///< rank: node index; text: its pre-flight output line
        PreflightDone,///< pre-flight step ended (text: srun's exit code)
        EvalStarted,  ///< the eval step began
        RankStdout,   ///< rank, text
        RankStderr,   ///< rank, text
        RankExit,     ///< rank, exitCode (the task's agent ended)
        JobLine,      ///< the batch script's own output (text; "@store-exit CODE LAST-LINE": the store process ended,
                      ///< "@store-closing": the script ends it, after the agents)
        Relay,        ///< text: the relay's status line
        Result,       ///< text: rank 0's result JSON on one line
        Done,         ///< the driver is leaving (text: why)
    };
    Kind kind = Kind::Other;
    int rank = -1;
    int exitCode = -1;
    std::string text, state, reason, nodes;
};
[[nodiscard]] SlurmEvent parseDriverLine(std::string_view line);

/**
 * @brief Joins what srun -l cut. A labelled line longer than srun's buffer (1 KiB in the Slurm
 * versions we know) comes as several lines, each labelled; an agent's protocol line
 * (docs/agent-lines.md: a checkpoint with 18 words and a fingerprint, a regroup naming many
 * batches) can be that long. A rank's stdout piece that is one of ours, at least kMinCut bytes and
 * whose JSON ends early (cppl::lines::endsEarly) waits; the rank's next pieces are added to it
 * until its JSON is whole, a shorter piece (the last one) came, the next line of ours began, or it
 * passed kMaxLineBytes. What cannot be joined comes out as it came (the launcher then says what is
 * wrong with it), never dropped.
 */
class SrunLineJoiner
{
public:
    /// Below this, a piece is no cut piece: srun's buffer is larger.
    static constexpr std::size_t kMinCut = 512;

    /// One stdout line of @p rank as the driver passed it on; the lines complete now, in order.
    [[nodiscard]] std::vector<std::string> add(int rank, std::string_view piece);
    /// What waits for @p rank (at its end), as it came; nothing when nothing waits.
    [[nodiscard]] std::optional<std::string> flush(int rank);
    /// Every rank that has a piece waiting, lowest first.
    [[nodiscard]] std::vector<int> waiting() const;

private:
    struct Waiting
    {
        std::string text;
        std::size_t cut = 0; ///< the first piece's length: srun's buffer
    };
    std::map<int, Waiting> m_waiting;
};

/// @brief True for a Slurm job state that will not change any more (COMPLETED, FAILED, CANCELLED...).
[[nodiscard]] bool isFinalSlurmState(std::string_view state);

} // namespace cppl::core
