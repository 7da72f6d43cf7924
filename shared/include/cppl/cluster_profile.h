// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cppl {

/// @brief How to reach a host over SSH. Empty fields fall back to ~/.ssh/config, then defaults.
struct SshOptions
{
    std::string alias;        ///< Host alias from ~/.ssh/config (takes precedence over address)
    std::string user;         ///< login user; empty: ~/.ssh/config or the local user
    int port = 22;
    std::string identityFile; ///< private key; empty: ssh-agent, then ~/.ssh defaults
    bool passwordAuth = false; ///< allow password authentication (asked for at launch) when keys fail
    friend bool operator==(const SshOptions &, const SshOptions &) = default;
};

struct HostSpec
{
    std::string name;    ///< unique within the profile; ranks sharing it share a node
    std::string address; ///< where to connect; empty means `name`
    SshOptions ssh;
    int slots = 1;            ///< ranks (GPUs) on this host
    std::vector<int> devices; ///< explicit device indices (after include/exclude); empty: 0..slots-1
    std::string agent = "clusterppl-agent"; ///< agent executable on that host
    std::string workdir;                    ///< working directory on that host; empty: home
    std::map<std::string, std::string> env; ///< extra environment for the agent
    std::string group;                      ///< group label (hostfile `group=`), used by "by-label"
    friend bool operator==(const HostSpec &, const HostSpec &) = default;
};

struct GroupSpec
{
    std::string name;
    std::vector<std::string> hosts;
    friend bool operator==(const GroupSpec &, const GroupSpec &) = default;
};

/// @brief How ranks form the node groups that aggregate first (reduce inside, all-reduce among leaders).
struct GroupingSpec
{
    enum class Mode { ByHost, ByLabel, BySize, Explicit };
    Mode mode = Mode::ByHost;
    int size = 0;                  ///< BySize: consecutive ranks per group
    std::vector<GroupSpec> groups; ///< Explicit: every host in exactly one group
    friend bool operator==(const GroupingSpec &, const GroupingSpec &) = default;
};

/// EvaluationSpec::batch for "auto": the agents choose (docs/profile.md).
inline constexpr std::int64_t kAutoBatch = 0;

struct EvaluationSpec
{
    std::string model;   ///< HF directory or TorchScript file, as seen on the hosts
    std::string tokens;  ///< pre-tokenised ids (.u16/.u32/.npy), or empty
    std::string text;    ///< text corpus, or empty
    std::string tokenizer = "bytes";
    std::string protocol = "hf-sliding";
    std::int64_t context = 512;
    std::int64_t stride = 0; ///< 0 = context
    /// Windows per forward pass; kAutoBatch ("auto" in JSON, the default): no --batch, so the agent
    /// sizes it from free GPU memory on CUDA and uses its fixed default (8) on the CPU.
    std::int64_t batch = kAutoBatch;
    std::int64_t maxWindows = 0; ///< 0 = all
    /// The agents' --dtype; "auto" (the default) passes none, so each agent picks bfloat16 on a
    /// GPU and float32 on the CPU (agent_cli.cpp). The result says which one ran.
    std::string dtype = "auto";
    std::string device = "auto";
    std::string backend = "auto";
    std::string topology = "hierarchical";
    std::string schedule = "dynamic"; ///< the agents' --schedule: dynamic batches (default) or static shards (docs/communication.md)
    /// The agents' --on-rank-loss: continue (the others regroup and finish; needs schedule dynamic;
    /// docs/communication.md, "Losing a rank") or fail (a lost rank ends the run: fail fast). The
    /// default follows the schedule: a profile without "on_rank_loss" reads as continue with the
    /// dynamic schedule and fail with the static one (defaultOnRankLoss); the writer always writes it.
    std::string onRankLoss = "continue";
    /// The agents' --overlap-sync: true (on) runs round r's aggregation behind round r+1's compute,
    /// false (off) aggregates each round before the next starts. Same bits either way, tolerant
    /// runs included (docs/communication.md).
    bool overlapSync = true;
    /// Weights quantized at load (docs/models.md, "Quantized weights"): the agents' --quantize
    /// (none, int8, int4 = int4-sym, int4-asym), --quant-group and --quantize-head.
    std::string quantize = "none";
    std::int64_t quantGroup = 32;
    bool quantizeHead = false;
    /// --reference-model (empty: none; "The reference model") and its --reference-dtype ("auto": the
    /// agent's default) and --reference-quantize.
    std::string referenceModel;
    std::string referenceDtype = "auto";
    std::string referenceQuantize = "none";
    /// The agents' --tensor-parallel: N consecutive ranks of one host split the model (group k =
    /// ranks [kN, kN+N)); 1 = none. The world size and every host's slots are multiples of N.
    int tensorParallel = 1;
    /// The agents' --load-timeout: how long the ranks' load phase (data, model; weights on NFS may
    /// be slow on one node) may take before the first collective, which --timeout does not cover.
    double loadTimeoutSeconds = 1800.0;
    friend bool operator==(const EvaluationSpec &, const EvaluationSpec &) = default;
};

/// @brief evaluation.on_rank_loss when a profile does not say: continue with the dynamic schedule
/// (a lost rank's batches move to the others), fail with the static one (its shards cannot move).
[[nodiscard]] inline const char *defaultOnRankLoss(const std::string &schedule) noexcept
{
    return schedule == "static" ? "fail" : "continue";
}

struct Thresholds
{
    /// Sync about every this many scored tokens per rank; 0 = every batch, -1 = only at the end.
    std::int64_t syncEveryTokens = 65536;
    double deviationTolerance = 0.0;  ///< allowed relative PPL deviation from the one-rank reference
    double commShareAlert = 0.01;     ///< flag a rank whose communication share exceeds this
    double stallSeconds = 30.0;       ///< flag a rank silent for this long
    double collectiveTimeoutSeconds = 300.0; ///< abort a collective after this long
    friend bool operator==(const Thresholds &, const Thresholds &) = default;
};

/// @brief What a Slurm job asks for (launcher "slurm"; hosts[0] is the login node it is submitted on).
struct SlurmSpec
{
    std::string partition;  ///< sbatch --partition; empty: the cluster's default
    std::string account;    ///< sbatch --account
    std::string qos;        ///< sbatch --qos
    std::string timeLimit;  ///< sbatch --time ("MM", "HH:MM:SS", "D-HH"); empty: the partition's default
    int nodes = 1;          ///< nodes of the allocation
    int ntasksPerNode = 1;  ///< ranks (one agent each) per node
    int gpusPerNode = 0;    ///< sbatch --gpus-per-node; 0: none asked for
    std::string constraint; ///< sbatch --constraint (node features)
    std::vector<std::string> sbatchOptions; ///< extra "--option=value" words, each passed as one argument
    std::string agent;      ///< the agent's path on the cluster; empty: hosts[0].agent
    std::vector<std::string> modules; ///< `module load` each, in the job before any step
    std::string envScript;  ///< a file sourced in the job (and before sbatch) on the cluster
    /// Where the job's files go (script, outputs, keys), relative to the login node's workdir or
    /// home; shared with the compute nodes, as home directories on clusters are.
    std::string jobDir = ".clusterppl/jobs";
    friend bool operator==(const SlurmSpec &, const SlurmSpec &) = default;
};

/// @brief The cluster and the evaluation a user runs on it (schema: docs/profile.md).
struct ClusterProfile
{
    static constexpr int kVersion = 1;
    std::string name;
    std::string launcher = "local"; ///< "local", "ssh" or "slurm"
    /// Environment for every rank on every host (a host's own `env` wins for a name both set):
    /// NCCL_SOCKET_IFNAME, NCCL_IB_HCA, GLOO_SOCKET_IFNAME and the like. The launchers pass nothing
    /// else from the machine that launches (docs/launching.md, "The ranks' environment").
    std::map<std::string, std::string> env;
    std::vector<HostSpec> hosts;
    SlurmSpec slurm; ///< launcher "slurm" only
    GroupingSpec grouping;
    EvaluationSpec evaluation;
    Thresholds thresholds;
    friend bool operator==(const ClusterProfile &, const ClusterProfile &) = default;
};

/// @brief One rank's place in the cluster.
struct RankInfo
{
    int rank = 0;
    int hostIndex = 0;
    int localRank = 0;
    int device = 0; ///< device index on the host
    int group = 0;  ///< index into RankLayout::groups
};

struct RankLayout
{
    struct Group
    {
        std::string name;
        std::vector<int> ranks; ///< ascending; ranks.front() is the leader
    };
    std::vector<RankInfo> ranks;
    std::vector<Group> groups;
    [[nodiscard]] int worldSize() const noexcept { return static_cast<int>(ranks.size()); }
};

/// @brief Ranks as a reader reads them: "3", or "0–3" with an en dash (U+2013), @p first to @p last.
/// Every rank range the dashboard, the CLI's output and reports show is written with these two;
/// the agents' own syntax (--groups "0,1;2,3", a ledger's "0-4") is not prose and keeps its form.
[[nodiscard]] std::string rankRangeText(int first, int last);
/// @brief A set of ranks as consecutive runs: "0–3, 6, 8–9" (sorted first; duplicates once).
[[nodiscard]] std::string rankListText(std::vector<int> ranks);

/// @brief Ranks in host order, local ranks 0..slots-1, grouped per the profile. Assumes a valid profile.
/// Groups of consecutive ranks (groups "size:N") are named "ranks 0–1" (rankRangeText).
[[nodiscard]] RankLayout rankLayout(const ClusterProfile &profile);

/// @brief Result of decoding untrusted profile text: every problem found, each naming its field.
struct ProfileParseResult
{
    ClusterProfile profile;
    std::vector<std::string> errors; ///< "hosts[1].slots: expected an integer >= 1, got 0"
    [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

/// @brief Parses and validates profile JSON. `source` (a file name) prefixes JSON syntax errors.
[[nodiscard]] ProfileParseResult parseProfile(std::string_view json, std::string_view source = "profile");
/// @brief Reads and parses a file; throws IoError when it cannot be read, ConfigError listing every problem.
[[nodiscard]] ClusterProfile loadProfile(const std::string &path);
/// @brief Canonical JSON (2-space indent), readable by parseProfile().
[[nodiscard]] std::string profileToJson(const ClusterProfile &profile);
/// @brief A host's ranks' environment from the profile: the cluster's `env`, then the host's (which
/// wins), in name order.
[[nodiscard]] std::map<std::string, std::string> hostEnvironment(const ClusterProfile &profile, const HostSpec &host);
/// @brief True for the variables that choose which devices a process sees (CUDA_VISIBLE_DEVICES and
/// its kin): a profile's `env` may not set them, a host's `devices` list does.
[[nodiscard]] bool isDeviceVisibilityVariable(std::string_view name);
/// @brief Checks a profile built in code; the same messages parseProfile() gives.
[[nodiscard]] std::vector<std::string> validateProfile(const ClusterProfile &profile);

} // namespace cppl
