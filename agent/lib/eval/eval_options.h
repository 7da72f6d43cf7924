// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 1 (private to agent/lib/eval): what the command line says, checked
// before the model or the data are touched, and phase(), which turns a step's bad input into that
// step's exit code. Torch-free: the device and dtype are compute_spec.h's.
#pragma once

#include "args.h"
#include "compute_spec.h"
#include "exit_codes.h"
#include "model_info.h"
#include "distributed/batch_schedule.h"
#include "distributed/checkpoint.h"
#include "distributed/distributed_run.h"

#include "cppl/errors.h"
#include "cppl/rank_env.h"
#include "cppl/sharding.h"
#include "cppl/telemetry.h"
#include "cppl/window_plan.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cppl::agent {

// Runs one phase; a bad input inside it is the phase's kind of failure (a ConfigError while loading
// the model is a bad model). The code reaches exitCodeFor() through ExitError.
template<typename F>
auto phase(int code, F &&f) -> decltype(f())
{
    try {
        return f();
    } catch (const ConfigError &e) {
        // Bad data or a bad model is this rank's (its host's files); bad arguments are the run's
        // (the same on every rank: isRunWide()).
        if (code == kExitBadData || code == kExitBadModel)
            throw ExitError(code, e.what());
        throw ExitError(kExitBadArguments, e.what(), ExitError::Scope::Run);
    } catch (const IoError &e) {
        throw ExitError(code, e.what());
    }
}

/// --reference-model: a second model evaluated on the same windows and compared token by token
/// (reference_stats.h), in its own number format and quantization.
struct ReferenceOptions
{
    std::string path;             ///< empty: no reference
    Dtype dtype = Dtype::Float32; ///< --reference-dtype (default: the device's, as --dtype's)
    QuantRequest quant;           ///< --reference-quantize (none by default), in groups of --quant-group
    [[nodiscard]] bool any() const noexcept { return !path.empty(); }
};

/// Step 1's result: everything the command line says, checked before the model or the data are touched.
struct EvalOptions
{
    PlanOptions plan;
    std::string modelPath;
    Dtype dtype = Dtype::Float32;
    DeviceSpec device;
    bool tf32 = false; ///< TensorFloat-32 for float32 matrix products (CUDA only)
    WeightUpload weightUpload = WeightUpload::Auto; ///< --weight-upload: how the weights reach a GPU
    std::string profilePath;          ///< --profile PATH: a pass of profileBatches batches under LibTorch's profiler ("{rank}" replaced)
    std::int64_t profileBatches = 3;  ///< --profile-batches N
    std::int64_t batch = 0;
    /// No --batch on a GPU: the batch comes from free device memory once the model and the windows
    /// are known (gpu/batch_sizing.h), agreed by every rank. --shard runs keep the fixed default:
    /// shards evaluated one by one must cut the windows with the same batch.
    bool autoBatch = false;
    int ranksPerDevice = 1; ///< this host's ranks on one GPU (gloo may share one)
    /// --load-timeout: how long the ranks' load phase (data, model) may take before the first
    /// collective, instead of --timeout (docs/communication.md, "The load phase").
    std::chrono::milliseconds loadTimeout{1800000};
    /// The CUDA device of each of this host's ranks by the same rules (pinning near each GPU's
    /// NUMA node); -1 where this process cannot know it (each rank sees one GPU of its own).
    std::vector<int> localRankDevices;
    std::int64_t maxWindows = 0;
    std::int64_t threads = 0;
    std::int64_t blasThreads = 0;
    int shardRank = 0;  ///< distributed: the data-parallel rank (rank / --tensor-parallel)
    int shardCount = 1; ///< distributed: the data-parallel width (world size / --tensor-parallel)
    /// --tensor-parallel N: N consecutive ranks of one host split the model (docs/models.md,
    /// "Tensor parallelism"); this rank is member tpRank of its group, which contributes its sums
    /// once (through member 0, its leader).
    int tensorParallel = 1;
    int tpRank = 0;
    GemmBackend gemm = GemmBackend::Auto;
    QuantRequest quant;         ///< --quantize, --quant-group, --quantize-head
    ReferenceOptions reference; ///< --reference-model, --reference-dtype, --reference-quantize
    RankIdentity identity;
    dist::DistributedOptions distOptions;
    std::int64_t syncEvery = kDefaultSyncEveryTokens;
    dist::Schedule schedule = dist::Schedule::Dynamic; ///< --schedule (default dynamic); static without a communicator
    bool overlapSync = true; ///< --overlap-sync: a round's aggregation runs behind the next round's compute (round_pipeline.h)
    bool distributed = false; ///< one rank of several, or one rank with an explicit --backend
    bool quiet = false;       ///< rank 0 speaks for the run; other ranks report only problems
    bool quietAsked = false;  ///< --quiet itself: no round lines from the reporting rank either
    bool checkpointLines = false; ///< ledger and checkpoint lines on stdout for the launcher (checkpoint.h)
    std::optional<dist::ResumeState> resume; ///< --resume-state: continue from a committed round
    std::optional<cppl::telemetry::Credentials> stdinKeys;

    /// A tensor-parallel follower: computes its leader's batches, contributes nothing to the sums.
    [[nodiscard]] bool tpFollower() const { return tpRank != 0; }
};

/// The words after "eval", checked against the options `eval` knows (a bad one is a bad argument).
Args parseArgs(const std::vector<std::string> &argv);

/// Step 1: the options (a launcher's key line read from stdin among them), and who this rank is.
/// --exit-on-stdin-eof is the command's to act on, once they are parsed (stdin_eof_watcher.h).
EvalOptions parseOptions(const Args &a);

/// at::hasCUDA() and at::getNumGPUs(), defined in eval_command.cpp, the one eval TU with ATen.
bool cudaAvailable();
std::size_t cudaDeviceCount();

} // namespace cppl::agent
