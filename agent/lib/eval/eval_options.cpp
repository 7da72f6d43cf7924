// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 1: the options, parsed and checked (eval_options.h). Each step below
// reads a few flags into EvalOptions; they run in parseOptions()'s order, which is also the order
// in which a command line with several mistakes has them reported.
#include "eval_options.h"

#include "fault_hooks.h"

#include "gpu/device_choice.h"
#include "telemetry/stdin_keys.h"

#include "cppl/host.h"

#include <algorithm>
#include <filesystem>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <string_view>

namespace cppl::agent {

namespace {

DeviceSpec parseDevice(const std::string &text)
{
    const DeviceRequest r = parseDeviceText(text, text != "cpu" && cudaAvailable());
    return {r.cuda, r.cuda && r.index ? *r.index : -1};
}

/// `--shard R/N`: evaluate only rank R's shard of N (the same balanced shards a distributed run uses).
void parseShard(const std::string &shard, int &rank, int &count)
{
    const auto slash = shard.find('/');
    const auto whole = [](std::string_view t, int &v) {
        const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        return !t.empty() && ec == std::errc() && ptr == t.data() + t.size();
    };
    if (slash == std::string::npos || !whole(std::string_view(shard).substr(0, slash), rank)
        || !whole(std::string_view(shard).substr(slash + 1), count))
        throw ConfigError("--shard expects RANK/COUNT, e.g. 2/8, got \"" + shard + "\"");
    if (count < 1 || rank < 0 || rank >= count)
        throw ConfigError("--shard " + shard + ": need 0 <= RANK < COUNT");
}

/// "on" or "off" -> true or false; throws ConfigError naming @p flag otherwise.
bool onOff(const Args &a, const std::string &flag)
{
    const std::string value = a.get(flag).value_or("on");
    if (value != "on" && value != "off")
        throw ConfigError(flag + " \"" + value + "\" is not one of on, off");
    return value == "on";
}

/// The launcher's key line is stdin's first line: read before anything else reads stdin (the
/// command's --exit-on-stdin-eof watcher reads the rest).
void readStdinOptions(const Args &a, EvalOptions &o)
{
    if (a.has("--telemetry-keys-stdin"))
        o.stdinKeys = phase(kExitBadArguments, [&] {
            if (!a.has("--telemetry") || a.has("--telemetry-keys"))
                throw ConfigError("--telemetry-keys-stdin needs --telemetry tcp://HOST:PORT and replaces --telemetry-keys");
            return telemetry::readKeyLine(0);
        });
    if (a.get("--telemetry-keys") == std::optional<std::string>("-") && a.has("--exit-on-stdin-eof"))
        throw ConfigError("--telemetry-keys - reads stdin to its end, which --exit-on-stdin-eof takes for the launcher leaving; "
                          "pass the keys with --telemetry-keys-stdin (one line) or a 0600 file");
}

/// The model, and how the protocol cuts the data into windows.
void parseModelAndProtocol(const Args &a, EvalOptions &o)
{
    o.modelPath = a.require("--model", "a Hugging Face model directory or a TorchScript .pt file");
    const auto protocolText = a.get("--protocol").value_or("hf-sliding");
    const auto protocol = parseProtocol(protocolText);
    if (!protocol)
        throw ConfigError("--protocol \"" + protocolText + "\" is unknown (expected hf-sliding, llama.cpp or lm-eval-rolling)");
    o.plan.protocol = *protocol;
    o.plan.context = a.integer("--context", 512, 2, std::int64_t{1} << 24);
    o.plan.stride = a.integer("--stride", 0, 1, std::int64_t{1} << 24);
    o.plan.bosFirst = a.has("--bos-first");
}

void parseBatchAndThreads(const Args &a, EvalOptions &o)
{
    o.batch = a.integer("--batch", 8, 1, 1 << 16);
    o.maxWindows = a.integer("--max-windows", 0, 0, INT64_MAX);
    // 0: the default, this host's allowed CPUs / its local ranks (planCpus, once the rank is known).
    o.threads = a.has("--threads") ? a.integer("--threads", 1, 1, 1024) : 0;
    o.blasThreads = a.has("--blas-threads") ? a.integer("--blas-threads", 1, 1, 1024) : 0;
    o.profilePath = a.get("--profile").value_or("");
    o.profileBatches = a.integer("--profile-batches", 3, 1, 1000);
    if (a.has("--profile-batches") && o.profilePath.empty())
        throw ConfigError("--profile-batches N sets how many batches --profile PATH profiles: give --profile PATH too");
    // Said before the model loads, not after the pass: the file is written once the batches ran.
    if (const std::filesystem::path dir = std::filesystem::path(o.profilePath).parent_path(); !o.profilePath.empty() && !dir.empty()
                                                                                                && !std::filesystem::is_directory(dir))
        throw ConfigError("--profile " + o.profilePath + ": the directory " + dir.string() + " does not exist");
}

/// --weight-upload: "auto", "pinned" or "pageable".
WeightUpload weightUploadFromName(const std::string &name)
{
    if (name == "auto")
        return WeightUpload::Auto;
    if (name == "pinned")
        return WeightUpload::Pinned;
    if (name == "pageable")
        return WeightUpload::Pageable;
    throw ConfigError("--weight-upload \"" + name + "\" is not one of auto, pinned (a GPU's weights staged through pinned buffers, the default), "
                      "pageable (Tensor::to from the mapped file)");
}

/// Where the model runs and in which number format.
void parseDeviceAndDtype(const Args &a, EvalOptions &o)
{
    o.device = parseDevice(a.get("--device").value_or("auto"));
    // The host's "devices" (issue 43): the model's GPU and NCCL's, also when the model is on the CPU.
    if (const auto list = a.get("--devices"))
        o.distOptions.hostDevices = parseDeviceList(*list);
    // bfloat16 is the GPU default: the exponent range of float32 (no overflow where float32 has
    // none), tensor-core speed, and the log-softmax stays float32 (Evaluator).
    o.dtype = dtypeFromName(a.get("--dtype").value_or(o.device.isCuda() ? "bfloat16" : "float32"));
    const bool tf32 = onOff(a, "--tf32");
    o.tf32 = tf32 && o.device.isCuda() && o.dtype == Dtype::Float32;
    o.gemm = gemmFromName(a.get("--gemm").value_or("auto"));
    o.weightUpload = weightUploadFromName(a.get("--weight-upload").value_or("auto"));
    if (o.dtype == Dtype::Float16 && o.device.isCpu())
        throw ConfigError("--dtype float16 needs a GPU: LibTorch has no float16 matrix multiply on the CPU; use bfloat16 or float32");
}

/// "none", "int8", "int4", "int4-sym" or "int4-asym" from `flag`; ConfigError naming the choices otherwise.
std::string quantScheme(const Args &a, const std::string &flag)
{
    const std::string scheme = a.get(flag).value_or("none");
    for (const char *known : {"none", "int8", "int4", "int4-sym", "int4-asym"})
        if (scheme == known)
            return scheme;
    throw ConfigError(flag + " \"" + scheme + "\" is not one of none, int8, int4 (= int4-sym), int4-sym, int4-asym");
}

/// Weight quantization at load, of the model and of a reference (docs/models.md, "Quantized weights").
void parseQuantization(const Args &a, EvalOptions &o)
{
    o.quant.scheme = quantScheme(a, "--quantize");
    o.quant.group = a.integer("--quant-group", 32, 32, std::int64_t{1} << 20);
    if (o.quant.group % 32 != 0)
        throw ConfigError("--quant-group " + std::to_string(o.quant.group)
                          + " is not a multiple of 32 (the kernels quantize activations in blocks of 32; a group holds whole blocks)");
    o.quant.head = a.has("--quantize-head");
    if (o.quant.head && !o.quant.any())
        throw ConfigError("--quantize-head quantizes the vocabulary head as well: give --quantize int8|int4|int4-asym too");
}

/// --reference-model and its own dtype and quantization (the same --quant-group).
void parseReference(const Args &a, EvalOptions &o)
{
    ReferenceOptions &r = o.reference;
    r.path = a.get("--reference-model").value_or("");
    if (!r.any()) {
        for (const char *flag : {"--reference-dtype", "--reference-quantize"})
            if (a.has(flag))
                throw ConfigError(std::string(flag) + " describes the reference model: give --reference-model DIR too");
        return;
    }
    r.dtype = dtypeFromName(a.get("--reference-dtype").value_or(o.device.isCuda() ? "bfloat16" : "float32"));
    if (r.dtype == Dtype::Float16 && o.device.isCpu())
        throw ConfigError("--reference-dtype float16 needs a GPU: LibTorch has no float16 matrix multiply on the CPU; use bfloat16 or float32");
    r.quant.scheme = quantScheme(a, "--reference-quantize");
    r.quant.group = o.quant.group;
    if (a.has("--resume-state"))
        throw ConfigError("--resume-state with --reference-model: checkpoints carry the model's sums, not the comparison's; "
                          "run the comparison again from the start");
}

/// The data flags, the shard, and the plan's options together.
void checkDataAndPlan(const Args &a, EvalOptions &o)
{
    if (a.has("--tokens") == a.has("--text"))
        throw ConfigError("give the data as either --tokens FILE or --text FILE --tokenizer bytes|PATH (exactly one)");
    const std::string invalid = a.get("--on-invalid-utf8").value_or("error");
    if (invalid != "error" && invalid != "replace")
        throw ConfigError("--on-invalid-utf8 \"" + invalid + "\" is not one of error, replace");
    if (o.plan.bosFirst && o.plan.protocol != Protocol::LlamaCpp)
        throw ConfigError("--bos-first applies to the llama.cpp protocol only");
    if (const auto shard = a.get("--shard"))
        parseShard(*shard, o.shardRank, o.shardCount);
    PlanOptions check = o.plan;
    check.bosToken = 0; // the model's BOS is known only once it is loaded (makePlan())
    validatePlanOptions(check);
}

/// Distributed: who this rank is (torchrun / Slurm / Open MPI environment, flags override), and
/// how its rounds reduce.
void parseRankAndTopology(const Args &a, EvalOptions &o)
{
    o.identity = resolveRankIdentity(processEnvironment(), a.rankOverrides());
    o.syncEvery = a.syncEveryTokens();
    dist::DistributedOptions &d = o.distOptions;
    d.identity = o.identity;
    d.groups = a.get("--groups").value_or("by-host");
    const std::string topology = a.get("--topology").value_or("hierarchical");
    if (topology != "hierarchical" && topology != "flat")
        throw ConfigError("--topology \"" + topology + "\" is not one of hierarchical, flat");
    d.topology = topology == "flat" ? dist::Topology::Flat : dist::Topology::Hierarchical;
    d.backend = a.get("--backend").value_or("auto");
}

/// A resumed run must be the interrupted one: its schedule, and for a static schedule (whose
/// rounds are planned for one world size and threshold) its ranks and threshold too.
void checkResumeMatches(const EvalOptions &o, const std::string &schedule)
{
    if (o.resume->schedule != schedule)
        throw ConfigError("--resume-state: the interrupted run used the " + o.resume->schedule + " schedule; resume it with --schedule "
                          + o.resume->schedule);
    if (schedule == "static" && o.resume->worldSize != o.identity.worldSize)
        throw ConfigError("--resume-state: the interrupted run had " + std::to_string(o.resume->worldSize) + " ranks, this one has "
                          + std::to_string(o.identity.worldSize)
                          + ": a static schedule's rounds are planned for one world size (resume with as many ranks, or run the "
                            "dynamic schedule, whose runs resume on any number of ranks)");
    if (schedule == "static" && o.resume->syncEvery != o.syncEvery)
        throw ConfigError("--resume-state: the interrupted run synchronised every "
                          + (o.resume->syncEvery == kSyncAtEnd ? std::string("end") : std::to_string(o.resume->syncEvery))
                          + " tokens; a static schedule's rounds depend on it: resume with the same --sync-every-tokens");
}

/// Who evaluates which batches, whether collectives overlap compute, what survives a lost rank,
/// and a resumed run's state.
void parseScheduleAndResume(const Args &a, EvalOptions &o)
{
    // Dynamic by default (docs/communication.md, "Dynamic batches"); a resumed run keeps the
    // schedule its checkpoint names unless --schedule says otherwise (refused below if it differs).
    if (const auto state = a.get("--resume-state"))
        o.resume = dist::parseResumeState(*state);
    const std::string schedule = a.get("--schedule").value_or(o.resume ? o.resume->schedule : std::string("dynamic"));
    if (schedule != "static" && schedule != "dynamic")
        throw ConfigError("--schedule \"" + schedule + "\" is not one of static, dynamic");
    o.schedule = schedule == "dynamic" ? dist::Schedule::Dynamic : dist::Schedule::Static;
    o.checkpointLines = a.has("--checkpoint-lines");
    o.overlapSync = onOff(a, "--overlap-sync");
    if (o.resume)
        checkResumeMatches(o, schedule);
    // Surviving a lost rank is the default where it can work (the dynamic schedule); a static
    // shard cannot move to another rank, so static runs fail fast, and say so when asked otherwise.
    const std::string onLoss = a.get("--on-rank-loss").value_or(o.schedule == dist::Schedule::Dynamic ? "continue" : "fail");
    if (onLoss != "fail" && onLoss != "continue")
        throw ConfigError("--on-rank-loss \"" + onLoss + "\" is not one of fail, continue");
    o.distOptions.tolerateRankLoss = onLoss == "continue";
    if (o.distOptions.tolerateRankLoss && o.schedule != dist::Schedule::Dynamic)
        throw ConfigError("--on-rank-loss continue needs --schedule dynamic (a static shard cannot move to another rank)");
}

/// The tests' fault hooks (a malformed one is refused here, with the options), the run id and the
/// telemetry flags.
void checkHooksAndTelemetry(const Args &a)
{
    (void)faultHooks();
    if (const auto runId = a.get("--run-id"))
        validateRunId(*runId, "--run-id");
    else if (const char *envRun = std::getenv("CLUSTERPPL_RUN_ID"); envRun && *envRun)
        validateRunId(envRun, "$CLUSTERPPL_RUN_ID");
    if (a.has("--telemetry-keys") && !a.has("--telemetry"))
        throw ConfigError("--telemetry-keys needs --telemetry tcp://HOST:PORT");
}

/// The communicators' backend and timeout, what the environment says about the store and Gloo,
/// and this rank's shard of a distributed run.
void parseCommunication(const Args &a, EvalOptions &o)
{
    dist::DistributedOptions &d = o.distOptions;
    if (d.backend != "auto" && d.backend != "gloo" && d.backend != "nccl")
        throw ConfigError("--backend \"" + d.backend + "\" is not one of auto, gloo, nccl");
    d.timeout = std::chrono::milliseconds(a.integer("--timeout", 300, 1, 7 * 24 * 3600) * 1000);
    o.loadTimeout = std::chrono::milliseconds(a.integer("--load-timeout", 1800, 1, 7 * 24 * 3600) * 1000);
    d.cudaDevice = o.device.isCuda();
    d.storeServedElsewhere = std::getenv("TORCHELASTIC_USE_AGENT_STORE") != nullptr
                             && std::string(std::getenv("TORCHELASTIC_USE_AGENT_STORE")) == "True";
    if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"))
        d.glooInterface = ifname;
    if (o.identity.worldSize > 1 && a.has("--shard"))
        throw ConfigError("--shard is for evaluating one shard by hand; in a distributed run (world size "
                          + std::to_string(o.identity.worldSize) + ") every rank takes its shard automatically");
    // One rank with an explicit --backend still forms a (one-member) communicator and runs the
    // rounds: scripts/gpu-check.sh exercises NCCL that way on a single GPU.
    if (o.identity.worldSize > 1 || a.has("--backend")) {
        o.shardRank = o.identity.rank;
        o.shardCount = o.identity.worldSize;
        (void)parseRankGroups(d.groups, o.identity.worldSize,
                              std::vector<std::string>(static_cast<std::size_t>(o.identity.worldSize), "h")); // syntax only, before connecting
    }
}

/// What this version's tensor parallelism runs with (docs/models.md, "Tensor parallelism"): the CPU
/// over Gloo (the agent's float32 kernels or LibTorch's path, any dtype) and GPUs over NCCL
/// (LibTorch's path), either schedule, a lost rank survived (its whole group out), checkpoints and
/// resume (the leaders' ledger lines). Every refusal here, before the rendezvous.
void refuseForTensorParallel(const Args &a, const EvalOptions &o)
{
    const std::string n = std::to_string(o.tensorParallel);
    auto refuse = [&](const std::string &what) { throw ConfigError("--tensor-parallel " + n + ": " + what); };
    if (o.identity.worldSize % o.tensorParallel != 0)
        refuse("the world size " + std::to_string(o.identity.worldSize) + " is not a multiple of it (each group is " + n
               + " consecutive ranks of one host)");
    if (o.device.isCuda() && o.distOptions.backend == "gloo") // Gloo's groups move host memory: GPU tensors are refused, not staged
        refuse("with the model on a GPU runs over NCCL (--backend nccl or auto); Gloo's groups run with --device cpu");
    if (a.has("--shard"))
        refuse("--shard evaluates a shard on one rank; tensor parallelism needs a distributed run");
    if (o.reference.any())
        refuse("--reference-model runs without tensor parallelism in this version (the comparison needs the whole vocabulary's logits)");
}

/// --tensor-parallel N: the data-parallel rank and width (the shard), the member of its group.
/// Only each group's leader takes part in the data-parallel side (DistributedOptions::tensorParallel).
void parseTensorParallel(const Args &a, EvalOptions &o)
{
    o.tensorParallel = static_cast<int>(a.integer("--tensor-parallel", 1, 1, 1024));
    if (o.tensorParallel == 1)
        return;
    refuseForTensorParallel(a, o);
    o.distOptions.tensorParallel = o.tensorParallel;
    o.tpRank = o.identity.rank % o.tensorParallel;
    o.shardRank = o.identity.rank / o.tensorParallel;
    o.shardCount = o.identity.worldSize / o.tensorParallel;
}

/// Whether this is one rank of several (or one with an explicit --backend), and what follows
/// from it.
void decideDistribution(const Args &a, EvalOptions &o)
{
    o.distributed = o.identity.worldSize > 1 || a.has("--backend");
    // Without a communicator there is no store to claim batches from: one rank (or one --shard)
    // evaluates its contiguous shard, the static schedule, whatever --schedule says.
    if (!o.distributed)
        o.schedule = dist::Schedule::Static;
    if (o.resume && !o.distributed)
        throw ExitError(kExitBadArguments, "--resume-state needs a distributed run (world size > 1, or --backend): a resumed run synchronises in rounds");
    o.quietAsked = a.has("--quiet");
    o.quiet = o.quietAsked || (o.distributed && o.identity.rank != 0);
}

/// No --batch on a GPU: the batch comes from free device memory (EvalOptions::autoBatch). The
/// batch is part of the plan a resume must match, and free memory changes: a resumed run gets the
/// interrupted run's batch as --batch (clusterppl-cli passes the checkpoint's "batch").
void decideBatchSource(const Args &a, EvalOptions &o)
{
    o.autoBatch = (o.device.isCuda() || !faultHooks().gpuFreeBytes.empty()) && !a.has("--batch") && (o.distributed || o.shardCount == 1);
    if (o.autoBatch && o.resume) {
        if (o.resume->batch > 0)
            throw ExitError(kExitBadArguments, "--resume-state without --batch: the interrupted run used batch " + std::to_string(o.resume->batch)
                                                   + " (the checkpoint's \"batch\"); resume with --batch " + std::to_string(o.resume->batch)
                                                   + ", a default batch from free GPU memory could differ now");
        throw ExitError(kExitBadArguments, "--resume-state without --batch, and the checkpoint does not record the batch (written by an older "
                                           "clusterppl): add \"batch\": N to the run directory's checkpoint.json, N the batch the interrupted "
                                           "run used (its log says it), and resume again; a default batch from free GPU memory could differ now");
    }
    if (o.resume && o.resume->batch > 0 && a.has("--batch") && o.resume->batch != o.batch)
        throw ExitError(kExitBadArguments, "--resume-state: the interrupted run used batch " + std::to_string(o.resume->batch) + ", this one --batch "
                                               + std::to_string(o.batch) + ": resume with --batch " + std::to_string(o.resume->batch));
}

/// One CUDA device per rank, decided once: the model and NCCL both use it.
/// Every local rank's device as this process numbers them, for pinning each near its GPU: the
/// same rules, run for the other local ranks. Where a rank sees one GPU of its own (a one-entry
/// CUDA_VISIBLE_DEVICES per rank), the others' devices are not this process's to know.
std::vector<int> localRankDevices(DevicePlacement place, int mine)
{
    std::vector<int> devices(static_cast<std::size_t>(std::max(1, place.localWorldSize)), -1);
    if (place.localRank < 0 || place.localRank >= static_cast<int>(devices.size()))
        return {};
    devices[static_cast<std::size_t>(place.localRank)] = mine;
    if (place.visibleDevices == 1 && place.cudaVisibleDevices && devices.size() > 1)
        return devices;
    for (int r = 0; r < static_cast<int>(devices.size()); ++r) {
        place.localRank = r;
        try {
            devices[static_cast<std::size_t>(r)] = chooseCudaDevice(place);
        } catch (const ConfigError &) {
            // That rank's own start says what is wrong with its device; here it only stays unknown
            // (and pinning falls back to the plain split).
        }
    }
    return devices;
}

void placeOnCudaDevice(EvalOptions &o)
{
    phase(kExitBadArguments, [&] {
        DevicePlacement place;
        place.localRank = o.identity.localRank;
        place.localWorldSize = o.identity.localWorldSize;
        place.visibleDevices = static_cast<int>(cudaDeviceCount());
        if (const char *v = std::getenv("CUDA_VISIBLE_DEVICES"))
            place.cudaVisibleDevices = v;
        if (o.device.hasIndex())
            place.requested = o.device.index;
        place.hostDevices = o.distOptions.hostDevices;
        place.nccl = o.distributed && (o.distOptions.backend == "nccl" || o.distOptions.backend == "auto");
        place.shareGpu = ncclShareGpuRequested();
        place.host = localHostName();
        o.device.index = chooseCudaDevice(place);
        o.distOptions.cudaDeviceIndex = o.device.index;
        o.ranksPerDevice = ranksPerCudaDevice(place);
        o.localRankDevices = localRankDevices(place, o.device.index);
        return 0;
    });
}

} // namespace

Args parseArgs(const std::vector<std::string> &argv)
{
    return phase(kExitBadArguments, [&] {
        return Args(argv,
                    {"--model", "--tokens", "--text", "--tokenizer", "--protocol", "--context", "--stride", "--batch", "--max-windows",
                     "--dtype", "--device", "--devices", "--threads", "--blas-threads", "--json", "--bos-id", "--prefix-id", "--shard", "--gemm", "--dataset",
                     "--jsonl-field", "--bos", "--on-invalid-utf8", "--backend", "--topology", "--groups", "--sync-every-tokens", "--timeout", "--load-timeout",
                     "--rank", "--world-size", "--local-rank", "--local-world-size", "--master-addr", "--master-port", "--telemetry",
                     "--telemetry-keys", "--run-id", "--schedule", "--tf32", "--resume-state", "--on-rank-loss", "--overlap-sync",
                     "--tensor-parallel", "--quantize", "--quant-group", "--reference-model", "--reference-dtype", "--reference-quantize",
                     "--weight-upload", "--profile", "--profile-batches"},
                    {"--bos-first", "--allow-long-context", "--quiet", "--exit-on-stdin-eof", "--result-line", "--telemetry-keys-stdin",
                     "--checkpoint-lines", "--quantize-head"});
    });
}

EvalOptions parseOptions(const Args &a)
{
    EvalOptions o;
    readStdinOptions(a, o);
    phase(kExitBadArguments, [&] {
        parseModelAndProtocol(a, o);
        parseBatchAndThreads(a, o);
        parseDeviceAndDtype(a, o);
        parseQuantization(a, o);
        parseReference(a, o);
        checkDataAndPlan(a, o);
        parseRankAndTopology(a, o);
        parseScheduleAndResume(a, o);
        checkHooksAndTelemetry(a);
        parseCommunication(a, o);
        parseTensorParallel(a, o);
        return 0;
    });
    decideDistribution(a, o);
    decideBatchSource(a, o);
    if (o.device.isCuda())
        placeOnCudaDevice(o);
    return o;
}

} // namespace cppl::agent
