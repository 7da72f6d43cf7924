// SPDX-License-Identifier: MIT
#include "eval_command.h"

#include "args.h"
#include "evaluator.h"
#include "exit_codes.h"
#include "language_model.h"
#include "model/mapped_file.h"
#include "cpu_affinity.h"
#include "runtime_info.h"
#include "result_json.h"
#include "eval_data.h"
#include "distributed/batch_schedule.h"
#include "distributed/checkpoint.h"
#include "gpu/batch_sizing.h"
#include "gpu/device_choice.h"
#include "distributed/communicator.h"
#include "distributed/distributed_run.h"
#include "distributed/round_pipeline.h"
#include "distributed/store.h"
#include "telemetry/publisher.h"
#include "telemetry/stdin_keys.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/host.h"
#include "cppl/rank_env.h"
#include "cppl/sharding.h"
#include "cppl/statistics.h"
#include "cppl/window_plan.h"

#include <ATen/Context.h>
#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>
#include <thread>
#include <utility>

#include <unistd.h>

namespace cppl::agent {

namespace {

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

std::string clock(double seconds)
{
    if (!std::isfinite(seconds) || seconds < 0)
        return "--:--";
    const auto s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

c10::Device parseDevice(const std::string &text)
{
    if (text == "auto")
        return at::hasCUDA() ? c10::Device(c10::DeviceType::CUDA, 0) : c10::Device(c10::DeviceType::CPU);
    if (text == "cpu")
        return c10::Device(c10::DeviceType::CPU);
    if (text.starts_with("cuda")) {
        if (!at::hasCUDA())
            throw ConfigError("--device " + text + ": this agent's LibTorch was built without CUDA, or no GPU is visible; use --device cpu");
        return c10::Device(text);
    }
    throw ConfigError("--device \"" + text + "\" is not one of cpu, cuda, cuda:N, auto");
}


/// What a resumed run must match (checkpoint.h): the weights, the token stream as the model sees
/// it, and the plan. Hashing the weights takes seconds for large models: rank 0 does it beside the
/// evaluation unless a resume must check it first.
dist::RunFingerprint fingerprintOf(const std::vector<std::string> &weightFiles, const std::uint32_t *tokens, std::size_t count, std::string plan)
{
    std::string models;
    for (const std::string &f : weightFiles)
        models += std::filesystem::path(f).filename().string() + ' ' + sha256File(f) + '\n';
    return {sha256Bytes(models.data(), models.size()), sha256Bytes(tokens, count * sizeof(std::uint32_t)), std::move(plan)};
}

/// EvalOptions::slowRank for CLUSTERPPL_TEST_SLOW_RANK=*:MS: every rank is slow.
constexpr int kEveryRank = -2;

/// Step 1's result: everything the command line says, checked before the model or the data are touched.
struct EvalOptions
{
    PlanOptions plan;
    std::string modelPath;
    c10::ScalarType dtype = at::kFloat;
    c10::Device device{c10::DeviceType::CPU};
    bool tf32 = false; ///< TensorFloat-32 for float32 matrix products (CUDA only)
    std::int64_t batch = 0;
    /// No --batch on a GPU: the batch comes from free device memory once the model and the windows
    /// are known (gpu/batch_sizing.h), agreed by every rank. --shard runs keep the fixed default:
    /// shards evaluated one by one must cut the windows with the same batch.
    bool autoBatch = false;
    int ranksPerDevice = 1; ///< this host's ranks on one GPU (gloo may share one)
    std::int64_t maxWindows = 0;
    std::int64_t threads = 0;
    std::int64_t blasThreads = 0;
    int shardRank = 0;
    int shardCount = 1;
    GemmBackend gemm = GemmBackend::Auto;
    RankIdentity identity;
    dist::DistributedOptions distOptions;
    std::int64_t syncEvery = kDefaultSyncEveryTokens;
    dist::Schedule schedule = dist::Schedule::Dynamic; ///< --schedule (default dynamic); static without a communicator
    bool overlapSync = true; ///< --overlap-sync: a round's aggregation runs behind the next round's compute (round_pipeline.h)
    int slowRank = -1;        ///< CLUSTERPPL_TEST_SLOW_RANK=R:MS: rank R sleeps MS ms per batch (tests, benchmarks); *:MS every rank (kEveryRank)
    int slowMs = 0;
    int holdRank = -1;        ///< CLUSTERPPL_TEST_HOLD_RESULT=R:MS: rank R, reporting, waits MS ms before writing the result (tests)
    int holdMs = 0;
    /// CLUSTERPPL_TEST_GPU_FREE_BYTES=B0[,B1...]: rank r sizes its default batch as if its GPU had
    /// B(r mod n) bytes free, on any device (tests of the default batch and its agreement on the CPU).
    std::vector<std::int64_t> testFreeBytes;
    bool distributed = false; ///< one rank of several, or one rank with an explicit --backend
    bool quiet = false;       ///< rank 0 speaks for the run; other ranks report only problems
    bool checkpointLines = false; ///< ledger and checkpoint lines on stdout for the launcher (checkpoint.h)
    std::optional<dist::ResumeState> resume; ///< --resume-state: continue from a committed round
    std::optional<cppl::telemetry::Credentials> stdinKeys;
};

/// Step 3's result: the token stream as the model sees it, the windows over it, this rank's share.
struct EvalPlan
{
    std::vector<std::uint32_t> flat;
    WindowPlan windows;
    std::vector<Shard> shards;
};

/// Step 4's result: the totals of every rank (exact), and how long it took.
struct EvalOutcome
{
    NllStats stats;
    int rounds = 0;
    double seconds = 0;
    std::vector<dist::RankReport> reports;
    std::vector<std::string> batchRuns; ///< dynamic schedule, rank 0: each rank's batches ("0-3,8")
    NllStats resumedBase;               ///< a resumed run: the committed global totals it started from
    std::vector<dist::DynamicSchedule::LostRank> lostRanks; ///< --on-rank-loss continue: who was lost, and when
    std::string batchesRedone;          ///< ... and the batches evaluated again for them
};

Args parseArgs(const std::vector<std::string> &argv)
{
    return phase(kExitBadArguments, [&] {
        return Args(argv,
                    {"--model", "--tokens", "--text", "--tokenizer", "--protocol", "--context", "--stride", "--batch", "--max-windows",
                     "--dtype", "--device", "--threads", "--blas-threads", "--json", "--bos-id", "--prefix-id", "--shard", "--gemm", "--dataset",
                     "--jsonl-field", "--bos", "--on-invalid-utf8", "--backend", "--topology", "--groups", "--sync-every-tokens", "--timeout",
                     "--rank", "--world-size", "--local-rank", "--local-world-size", "--master-addr", "--master-port", "--telemetry",
                     "--telemetry-keys", "--run-id", "--schedule", "--tf32", "--resume-state", "--on-rank-loss", "--overlap-sync"},
                    {"--bos-first", "--allow-long-context", "--quiet", "--exit-on-stdin-eof", "--result-line", "--telemetry-keys-stdin",
                     "--checkpoint-lines"});
    });
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

/// Step 1: the options, the stdin handling a launcher asks for, and who this rank is.
EvalOptions parseOptions(const Args &a)
{
    EvalOptions o;
    // The launcher's key line is stdin's first line: read it before the EOF watcher reads stdin.
    if (a.has("--telemetry-keys-stdin"))
        o.stdinKeys = phase(kExitBadArguments, [&] {
            if (!a.has("--telemetry") || a.has("--telemetry-keys"))
                throw ConfigError("--telemetry-keys-stdin needs --telemetry tcp://HOST:PORT and replaces --telemetry-keys");
            return telemetry::readKeyLine(0);
        });
    if (a.get("--telemetry-keys") == std::optional<std::string>("-") && a.has("--exit-on-stdin-eof"))
        throw ConfigError("--telemetry-keys - reads stdin to its end, which --exit-on-stdin-eof takes for the launcher leaving; "
                          "pass the keys with --telemetry-keys-stdin (one line) or a 0600 file");
    if (a.has("--exit-on-stdin-eof")) {
        // Launchers keep our stdin open for as long as they live (an SSH channel, a pipe): EOF
        // means the launcher or its connection is gone, and no rank may outlive it.
        std::thread([] {
            char buf[256];
            while (::read(0, buf, sizeof buf) > 0) {
            }
            static const char msg[] = "clusterppl-agent: the launcher went away (stdin closed); stopping\n";
            (void)!::write(2, msg, sizeof msg - 1);
            std::_Exit(kExitRuntime);
        }).detach();
    }
    phase(kExitBadArguments, [&] {
        o.modelPath = a.require("--model", "a Hugging Face model directory or a TorchScript .pt file");
        const auto protocolText = a.get("--protocol").value_or("hf-sliding");
        const auto protocol = parseProtocol(protocolText);
        if (!protocol)
            throw ConfigError("--protocol \"" + protocolText + "\" is unknown (expected hf-sliding, llama.cpp or lm-eval-rolling)");
        o.plan.protocol = *protocol;
        o.plan.context = a.integer("--context", 512, 2, std::int64_t{1} << 24);
        o.plan.stride = a.integer("--stride", 0, 1, std::int64_t{1} << 24);
        o.plan.bosFirst = a.has("--bos-first");
        o.batch = a.integer("--batch", 8, 1, 1 << 16);
        o.maxWindows = a.integer("--max-windows", 0, 0, INT64_MAX);
        // 0: the default, this host's allowed CPUs / its local ranks (planCpus, once the rank is known).
        o.threads = a.has("--threads") ? a.integer("--threads", 1, 1, 1024) : 0;
        o.blasThreads = a.has("--blas-threads") ? a.integer("--blas-threads", 1, 1, 1024) : 0;
        o.device = parseDevice(a.get("--device").value_or("auto"));
        // bfloat16 is the GPU default: the exponent range of float32 (no overflow where float32
        // has none), tensor-core speed, and the log-softmax stays float32 (Evaluator).
        o.dtype = parseDtype(a.get("--dtype").value_or(o.device.is_cuda() ? "bfloat16" : "float32"));
        const std::string tf32 = a.get("--tf32").value_or("on");
        if (tf32 != "on" && tf32 != "off")
            throw ConfigError("--tf32 \"" + tf32 + "\" is not one of on, off");
        o.tf32 = tf32 == "on" && o.device.is_cuda() && o.dtype == at::kFloat;
        const std::string gemmText = a.get("--gemm").value_or("auto");
        if (gemmText == "native")
            o.gemm = GemmBackend::Native;
        else if (gemmText == "onednn")
            o.gemm = GemmBackend::OneDnn;
        else if (gemmText == "blas")
            o.gemm = GemmBackend::Blas;
        else if (gemmText != "auto")
            throw ConfigError("--gemm \"" + gemmText + "\" is not one of auto, native, onednn, blas");
        if (o.dtype == at::kHalf && o.device.is_cpu())
            throw ConfigError("--dtype float16 needs a GPU: LibTorch has no float16 matrix multiply on the CPU; use bfloat16 or float32");
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
        check.bosToken = 0;
        validatePlanOptions(check);
        // Distributed: who this rank is (torchrun / Slurm / Open MPI environment, flags override).
        RankOverrides flags;
        auto optInt = [&](const char *flag, std::int64_t min, std::int64_t max) -> std::optional<int> {
            if (!a.has(flag))
                return std::nullopt;
            return static_cast<int>(a.integer(flag, 0, min, max));
        };
        flags.rank = optInt("--rank", 0, (1 << 30) - 1);
        flags.worldSize = optInt("--world-size", 1, 1 << 30);
        flags.localRank = optInt("--local-rank", 0, (1 << 30) - 1);
        flags.localWorldSize = optInt("--local-world-size", 1, 1 << 30);
        flags.masterPort = optInt("--master-port", 1, 65535);
        flags.masterAddr = a.get("--master-addr");
        o.identity = resolveRankIdentity(processEnvironment(), flags);
        o.syncEvery = a.syncEveryTokens();
        dist::DistributedOptions &d = o.distOptions;
        d.identity = o.identity;
        d.groups = a.get("--groups").value_or("by-host");
        const std::string topology = a.get("--topology").value_or("hierarchical");
        if (topology != "hierarchical" && topology != "flat")
            throw ConfigError("--topology \"" + topology + "\" is not one of hierarchical, flat");
        d.topology = topology == "flat" ? dist::Topology::Flat : dist::Topology::Hierarchical;
        d.backend = a.get("--backend").value_or("auto");
        // Dynamic by default (docs/communication.md, "Dynamic batches"); a resumed run keeps the
        // schedule its checkpoint names unless --schedule says otherwise (refused below if it differs).
        if (const auto state = a.get("--resume-state"))
            o.resume = dist::parseResumeState(*state);
        const std::string schedule = a.get("--schedule").value_or(o.resume ? o.resume->schedule : std::string("dynamic"));
        if (schedule != "static" && schedule != "dynamic")
            throw ConfigError("--schedule \"" + schedule + "\" is not one of static, dynamic");
        o.schedule = schedule == "dynamic" ? dist::Schedule::Dynamic : dist::Schedule::Static;
        o.checkpointLines = a.has("--checkpoint-lines");
        const std::string overlap = a.get("--overlap-sync").value_or("on");
        if (overlap != "on" && overlap != "off")
            throw ConfigError("--overlap-sync \"" + overlap + "\" is not one of on, off");
        o.overlapSync = overlap == "on";
        if (o.resume) {
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
        // Surviving a lost rank is the default where it can work (the dynamic schedule); a static
        // shard cannot move to another rank, so static runs fail fast, and say so when asked otherwise.
        const std::string onLoss = a.get("--on-rank-loss").value_or(o.schedule == dist::Schedule::Dynamic ? "continue" : "fail");
        if (onLoss != "fail" && onLoss != "continue")
            throw ConfigError("--on-rank-loss \"" + onLoss + "\" is not one of fail, continue");
        d.tolerateRankLoss = onLoss == "continue";
        if (d.tolerateRankLoss && o.schedule != dist::Schedule::Dynamic)
            throw ConfigError("--on-rank-loss continue needs --schedule dynamic (a static shard cannot move to another rank)");
        if (const char *hold = std::getenv("CLUSTERPPL_TEST_HOLD_RESULT"); hold && *hold) {
            if (std::sscanf(hold, "%d:%d", &o.holdRank, &o.holdMs) != 2 || o.holdMs < 0)
                throw ConfigError(std::string("$CLUSTERPPL_TEST_HOLD_RESULT \"") + hold + "\" is not RANK:MILLISECONDS");
        }
        if (const char *slow = std::getenv("CLUSTERPPL_TEST_SLOW_RANK"); slow && *slow) {
            // Test-only: make one rank slow without another job on its core (heterogeneous
            // speeds), or every rank ("*:MS": a run that lasts until a test acts in it).
            const bool every = slow[0] == '*' && slow[1] == ':';
            if (every ? std::sscanf(slow + 2, "%d", &o.slowMs) != 1 : std::sscanf(slow, "%d:%d", &o.slowRank, &o.slowMs) != 2)
                throw ConfigError(std::string("$CLUSTERPPL_TEST_SLOW_RANK \"") + slow + "\" is not RANK:MILLISECONDS or *:MILLISECONDS");
            if (o.slowMs < 0)
                throw ConfigError(std::string("$CLUSTERPPL_TEST_SLOW_RANK \"") + slow + "\": the milliseconds must not be negative");
            if (every)
                o.slowRank = kEveryRank;
        }
        if (const char *fake = std::getenv("CLUSTERPPL_TEST_GPU_FREE_BYTES"); fake && *fake) {
            std::stringstream list(fake);
            for (std::string item; std::getline(list, item, ',');) {
                std::int64_t v = 0;
                const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
                if (ec != std::errc() || ptr != item.data() + item.size() || v < 0)
                    throw ConfigError(std::string("$CLUSTERPPL_TEST_GPU_FREE_BYTES \"") + fake + "\" is not a list of byte counts B0,B1,...");
                o.testFreeBytes.push_back(v);
            }
        }
        if (const auto runId = a.get("--run-id"))
            validateRunId(*runId, "--run-id");
        else if (const char *envRun = std::getenv("CLUSTERPPL_RUN_ID"); envRun && *envRun)
            validateRunId(envRun, "$CLUSTERPPL_RUN_ID");
        if (a.has("--telemetry-keys") && !a.has("--telemetry"))
            throw ConfigError("--telemetry-keys needs --telemetry tcp://HOST:PORT");
        if (d.backend != "auto" && d.backend != "gloo" && d.backend != "nccl")
            throw ConfigError("--backend \"" + d.backend + "\" is not one of auto, gloo, nccl");
        d.timeout = std::chrono::milliseconds(a.integer("--timeout", 300, 1, 7 * 24 * 3600) * 1000);
        d.cudaDevice = o.device.is_cuda();
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
        return 0;
    });
    o.distributed = o.identity.worldSize > 1 || a.has("--backend");
    // Without a communicator there is no store to claim batches from: one rank (or one --shard)
    // evaluates its contiguous shard, the static schedule, whatever --schedule says.
    if (!o.distributed)
        o.schedule = dist::Schedule::Static;
    if (o.resume && !o.distributed)
        throw ExitError(kExitBadArguments, "--resume-state needs a distributed run (world size > 1, or --backend): a resumed run synchronises in rounds");
    o.autoBatch = (o.device.is_cuda() || !o.testFreeBytes.empty()) && !a.has("--batch") && (o.distributed || o.shardCount == 1);
    // The batch is part of the plan a resume must match, and free memory changes: a resumed run gets
    // the interrupted run's batch as --batch (clusterppl-cli passes the checkpoint's "batch").
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
    o.quiet = a.has("--quiet") || (o.distributed && o.identity.rank != 0);
    if (o.device.is_cuda()) // one device per rank, decided once: the model and NCCL both use it
        phase(kExitBadArguments, [&] {
            DevicePlacement place;
            place.localRank = o.identity.localRank;
            place.localWorldSize = o.identity.localWorldSize;
            place.visibleDevices = static_cast<int>(at::getNumGPUs());
            if (const char *v = std::getenv("CUDA_VISIBLE_DEVICES"))
                place.cudaVisibleDevices = v;
            if (o.device.has_index())
                place.requested = o.device.index();
            place.nccl = o.distributed && (o.distOptions.backend == "nccl" || o.distOptions.backend == "auto");
            place.host = localHostName();
            const int index = chooseCudaDevice(place);
            o.device = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(index));
            o.distOptions.cudaDeviceIndex = index;
            o.ranksPerDevice = ranksPerCudaDevice(place);
            return 0;
        });
    return o;
}

/// Tolerant dynamic runs: the reporting rank has written the result (the others may leave).
const std::string kReportedKey = "cppl/reported";

/// Tolerant runs with checkpoints: rank 0's fingerprint (model, data, plan; one line each), for a
/// reporting rank after it, which then need not hash the weights again.
const std::string kFingerprintKey = "cppl/fingerprint";

/// One evaluation from the rendezvous to the result; each step is a member, in the order run() calls them.
class EvalSession
{
public:
    EvalSession(const Args &a, EvalOptions o, std::ostream &out, std::ostream &err) : m_a(a), m_o(std::move(o)), m_out(out), m_err(err) {}

    int run()
    {
        connect();
        const EvalInput input = loadData();
        const auto loadStart = std::chrono::steady_clock::now();
        const std::unique_ptr<LanguageModel> model = loadModel();
        const double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
        const EvalPlan plan = makePlan(input, *model, loadSeconds);
        EvalOutcome outcome = evaluate(*model, input, plan);
        const int code = writeResult(input, model->info(), loadSeconds, plan, outcome);
        if (m_run && m_run->tolerant() && m_o.schedule == dist::Schedule::Dynamic && m_run->reporter()) {
            // The others wait for this before they leave (evaluate(): a reporter lost before it gets here is replaced).
            m_run->store().set(kReportedKey, std::to_string(m_run->rank()));
            if (m_run->servesStore()) { // the store leaves with this process: the others first read that the result is written
                const auto until = std::chrono::steady_clock::now() + m_run->timeout();
                while (m_run->store().add(kReportedKey + "/acks", 0) < m_run->epochSize() - 1 && std::chrono::steady_clock::now() < until
                       && !m_run->lossPending())
                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            m_run->finish();
        }
        return code;
    }

    /// A rank that fails tells the others (through the watchdog) and telemetry before it exits, so
    /// none waits; agentMain() prints the message and exits with the code exitCodeFor() gives. A
    /// failure that holds for the whole run (isRunWide) ends a tolerant run too, every rank with
    /// this code, instead of being survived as this rank's loss.
    [[noreturn]] void fail(const std::exception &e)
    {
        const int code = exitCodeFor(e);
        const std::string message = exitMessageFor(e);
        if (m_run)
            m_run->reportFailure(code, message, isRunWide(e));
        if (m_tel) {
            m_tel->error(message, code);
            m_tel->close(code);
        }
        throw ExitError(code, (m_run ? "rank " + std::to_string(m_run->rank()) + ": " : std::string()) + message);
    }

private:
    // The agent's own log lines also go to telemetry (every rank's, even when quiet here).
    void logLine(const std::string &line, cppl::telemetry::LogLevel level = cppl::telemetry::LogLevel::Info)
    {
        if (!m_o.quiet)
            m_err << line << '\n';
        if (m_tel)
            m_tel->log(level, line);
    }

    /// Step 2: rendezvous (before the expensive loads: a missing rank is reported in seconds, and a
    /// rank that then fails to load tells the others instead of leaving them waiting), threads, telemetry.
    void connect()
    {
        const RankIdentity &identity = m_o.identity;
        // Pinned before any pool or communication thread starts, so that they inherit the CPU slice.
        m_cpu = planCpus(identity.localRank, identity.localWorldSize, static_cast<int>(m_o.threads));
        const bool pinnedOk = applyPinning(m_cpu);
        if (m_o.distributed) {
            try {
                m_run = std::make_unique<dist::DistributedRun>(m_o.distOptions);
            } catch (const Error &e) {
                throw ExitError(exitCodeFor(e), "rank " + std::to_string(identity.rank) + ": " + e.what());
            }
            if (m_run->backend() == "nccl")
                logLine("nccl: " + dist::describe(dist::gpuLibraries()) + ", rank " + std::to_string(identity.rank) + " on cuda:"
                        + std::to_string(m_o.distOptions.cudaDeviceIndex));
            if (!m_o.quiet)
                m_err << "distributed: " << identity.worldSize << " ranks (" << identity.source << "), backend " << m_run->backend() << ", "
                      << dist::topologyName(m_run->topology()) << ", " << m_run->groups().groups.size() << " node groups, store "
                      << m_run->storeAddress() << '\n';
        }
        setThreads(m_cpu.threads, static_cast<int>(m_o.blasThreads > 0 ? m_o.blasThreads : m_cpu.threads));
        if (m_o.device.is_cuda()) {
            at::globalContext().setAllowTF32CuBLAS(m_o.tf32);
            at::globalContext().setAllowTF32CuDNN(m_o.tf32);
        }
        if (const auto endpoint = m_a.get("--telemetry")) {
            // Telemetry never slows or stops the evaluation: the publisher only queues (docs/telemetry.md).
            telemetry::Identity who;
            const char *envRun = std::getenv("CLUSTERPPL_RUN_ID");
            who.run = m_a.get("--run-id").value_or(envRun && *envRun ? envRun : "run");
            who.rank = identity.rank;
            who.worldSize = identity.worldSize;
            who.localRank = identity.localRank;
            who.host = m_run ? m_run->hosts()[static_cast<std::size_t>(identity.rank)] : std::string();
            if (who.host.empty())
                who.host = localHostName();
            who.group = m_run ? m_run->groups().groupOf[static_cast<std::size_t>(identity.rank)] : 0;
            std::optional<cppl::telemetry::Credentials> keys = m_o.stdinKeys;
            try {
                if (const auto keyFile = m_a.get("--telemetry-keys"))
                    keys = cppl::telemetry::readCredentialsFile(*keyFile);
                m_tel = telemetry::Publisher::open(*endpoint, who, keys);
            } catch (const Error &e) {
                throw ExitError(kExitBadArguments, std::string("--telemetry: ") + e.what());
            }
            m_tel->phase(cppl::telemetry::Phase::Loading);
            if (m_o.device.is_cuda()) {
                // Device memory and utilisation through NVML when the node has it; absent otherwise.
                std::string why;
                if (auto gpu = telemetry::openNvmlForCudaDevice(m_o.device.has_index() ? m_o.device.index() : 0, &why))
                    m_tel->setGpuStats(std::move(gpu));
                else if (!m_o.quiet)
                    m_err << "telemetry: no GPU memory or utilisation figures: " << why << '\n';
            }
        }
        m_runtime = runtimeInfo();
        logLine(describe(m_runtime));
        logLine("threads: " + std::to_string(m_cpu.threads) + " (" + m_cpu.why + "), "
                + (m_cpu.pinned.empty() ? std::string(pinnedOk ? "not pinned" : "not pinned (the OS refused sched_setaffinity)")
                                        : "pinned to CPUs " + cpuListText(m_cpu.pinned))
                + "; local rank " + std::to_string(identity.localRank) + " of " + std::to_string(m_cpu.localRanks));
    }

    /// Step 3: the data (token file, or text through a tokenizer and a dataset reader).
    EvalInput loadData()
    {
        EvalInput input = phase(kExitBadData, [&] {
            EvalInputOptions io;
            io.tokensPath = m_a.get("--tokens").value_or("");
            io.textPath = m_a.get("--text").value_or("");
            io.tokenizer = m_a.get("--tokenizer").value_or("");
            io.dataset = m_a.get("--dataset").value_or("plain");
            io.jsonlField = m_a.get("--jsonl-field").value_or("text");
            io.bos = m_a.get("--bos").value_or("auto");
            io.replaceInvalidUtf8 = m_a.get("--on-invalid-utf8").value_or("error") == "replace";
            return loadEvalInput(io);
        });
        for (const auto &note : input.notes)
            logLine("note: " + note, cppl::telemetry::LogLevel::Warning);
        return input;
    }

    /// Step 4: the model.
    std::unique_ptr<LanguageModel> loadModel()
    {
        if (!m_o.testFreeBytes.empty()) {
            m_freeBytes = m_totalBytes = m_o.testFreeBytes[static_cast<std::size_t>(m_o.identity.rank) % m_o.testFreeBytes.size()];
            m_memoryKnown = true;
        } else if (m_o.autoBatch) { // before the weights: chooseBatch() subtracts them itself
            m_memoryKnown = dist::cudaMemoryInfo(m_o.device.index(), m_freeBytes, m_totalBytes);
        }
        return phase(kExitBadModel, [&] { return agent::loadModel(m_o.modelPath, {m_o.dtype, m_o.device, m_o.gemm}); });
    }

    /// Step 5: the windows over the data as the model sees it, this rank's shard, and the checks
    /// that need both the model and the data.
    EvalPlan makePlan(const EvalInput &input, LanguageModel &model, double loadSeconds)
    {
        const ModelInfo &mi = model.info();
        PlanOptions &opts = m_o.plan;
        EvalPlan p;
        p.windows = phase(kExitBadArguments, [&] {
            if (mi.maxPositions > 0 && opts.context > mi.maxPositions && !m_a.has("--allow-long-context"))
                throw ConfigError("--context " + std::to_string(opts.context) + " exceeds the model's max_position_embeddings "
                                  + std::to_string(mi.maxPositions) + "; use a shorter context, or --allow-long-context if you mean it");
            if (opts.bosFirst)
                opts.bosToken = m_a.integer("--bos-id", mi.bosTokenId, 0, 0xffffffffLL);
            if (opts.bosFirst && opts.bosToken < 0)
                throw ConfigError("--bos-first: the model declares no bos_token_id; pass --bos-id ID");
            std::vector<std::int64_t> lengths;
            for (const auto &d : input.documents)
                lengths.push_back(static_cast<std::int64_t>(d.size()));
            if (opts.protocol == Protocol::LmEvalRolling) {
                // lm-eval's prefix token: --prefix-id, else the tokenizer's BOS, else the model's.
                const std::int64_t fallback = input.bosId >= 0 ? input.bosId : mi.bosTokenId;
                const std::int64_t prefix = m_a.integer("--prefix-id", fallback, 0, 0xffffffffLL);
                if (prefix < 0)
                    throw ConfigError("lm-eval-rolling needs a prefix token: neither the tokenizer nor the model names a BOS; pass --prefix-id ID");
                if (mi.vocab > 0 && prefix >= mi.vocab)
                    throw ConfigError("--prefix-id " + std::to_string(prefix) + " is outside the vocabulary of " + std::to_string(mi.vocab));
                p.flat.reserve(static_cast<std::size_t>(input.totalTokens()) + input.documents.size());
                for (const auto &d : input.documents) {
                    p.flat.push_back(static_cast<std::uint32_t>(prefix));
                    p.flat.insert(p.flat.end(), d.begin(), d.end());
                }
                return planDocuments(opts, lengths);
            }
            // Stream protocols: the documents back to back, one BOS first when the tokenizer adds it.
            p.flat.reserve(static_cast<std::size_t>(input.totalTokens()) + 1);
            if (input.bosAdded)
                p.flat.push_back(static_cast<std::uint32_t>(input.bosId));
            for (const auto &d : input.documents)
                p.flat.insert(p.flat.end(), d.begin(), d.end());
            return planStream(opts, static_cast<std::int64_t>(p.flat.size()));
        });
        WindowPlan &plan = p.windows;
        if (m_o.maxWindows > 0 && m_o.maxWindows < static_cast<std::int64_t>(plan.windows.size())) {
            plan.windows.resize(static_cast<std::size_t>(m_o.maxWindows));
            plan.scoredTokens = 0;
            for (const Window &w : plan.windows)
                plan.scoredTokens += w.scored();
        }
        if (m_o.autoBatch)
            chooseDefaultBatch(plan, mi);
        p.shards = shardPlanByBatch(plan, m_o.shardCount, m_o.batch);
        const Shard &myShard = p.shards[static_cast<std::size_t>(m_o.shardRank)];
        phase(kExitBadModel, [&] {
            model.prepare(m_o.batch, plan.maxInput);
            return 0;
        });
        phase(kExitBadData, [&] {
            for (std::size_t d = 0; d < input.documents.size(); ++d) {
                const auto &ids = input.documents[d];
                const auto it = std::find_if(ids.begin(), ids.end(), [&](std::uint32_t id) { return id >= mi.vocab; });
                if (it != ids.end())
                    throw IoError(input.path + ": " + (input.documents.size() > 1 ? "document " + std::to_string(d) + ", " : std::string())
                                  + "token " + std::to_string(it - ids.begin()) + " has id " + std::to_string(*it)
                                  + ", outside the model's vocabulary of " + std::to_string(mi.vocab)
                                  + " (was the data tokenised for another model?)");
            }
            return 0;
        });
        if (m_o.distributed && (m_o.checkpointLines || m_o.resume))
            prepareCheckpoints(mi, p);
        std::ostringstream line;
        line << "model: " << mi.arch << " (" << mi.params << " parameters, " << dtypeName(m_o.dtype) << ", " << m_o.device.str() << ", GEMM "
             << mi.gemm << ") loaded in " << clock(loadSeconds) << "; " << plan.windows.size() << " windows, " << plan.scoredTokens
             << " tokens to score, batch " << m_o.batch;
        if (m_o.distributed && m_o.schedule == dist::Schedule::Dynamic)
            line << "; rank " << m_o.shardRank << "/" << m_o.shardCount << ": batches claimed as ranks go (dynamic schedule)";
        else if (m_o.shardCount > 1)
            line << "; " << (m_o.distributed ? "rank " : "shard ") << m_o.shardRank << "/" << m_o.shardCount << ": windows "
                 << myShard.firstWindow << ".." << myShard.endWindow - 1 << ", " << myShard.scoredTokens << " tokens";
        logLine(line.str());
        return p;
    }

    /// Part of step 5: what checkpoints carry and a resume must match; a resume is checked here,
    /// before any batch is evaluated.
    void prepareCheckpoints(const ModelInfo &mi, const EvalPlan &p)
    {
        const PlanOptions &opts = m_o.plan;
        const auto windows = static_cast<std::int64_t>(p.windows.windows.size());
        m_batchCount = (windows + m_o.batch - 1) / m_o.batch;
        std::ostringstream plan;
        plan << "protocol " << protocolName(opts.protocol) << ", context " << opts.context << ", stride "
             << (opts.stride == 0 ? opts.context : opts.stride) << ", batch " << m_o.batch << ", max_windows " << m_o.maxWindows << ", "
             << dtypeName(m_o.dtype) << " on " << (m_o.device.is_cuda() ? "cuda" : "cpu") << ", GEMM " << mi.gemm << ", " << windows
             << " windows, " << p.windows.scoredTokens << " tokens";
        const dist::ResumeState *resume = m_o.resume ? &*m_o.resume : nullptr;
        if (resume && resume->batchCount != m_batchCount)
            throw ExitError(kExitBadArguments,
                            "--resume-state: the interrupted run had " + std::to_string(resume->batchCount) + " global batches, this plan has "
                                + std::to_string(m_batchCount) + " (" + plan.str() + "); resume with the run's own data and settings",
                            ExitError::Scope::Run);
        auto compute = [files = mi.weightFiles, tokens = p.flat.data(), count = p.flat.size(), text = plan.str()] {
            return fingerprintOf(files, tokens, count, text);
        };
        // Every rank keeps the means: after rank 0's loss the new reporting rank writes checkpoints.
        m_computeFingerprint = compute;
        if (m_o.identity.rank != 0)
            return; // rank 0 checks and writes for the run
        if (resume) {
            const dist::RunFingerprint now = compute();
            if (const std::string why = dist::fingerprintMismatch(resume->fingerprint, now); !why.empty())
                throw ExitError(kExitBadArguments, "--resume-state: " + why, ExitError::Scope::Run); // the run's checkpoint, checked for the run
            std::promise<dist::RunFingerprint> ready;
            ready.set_value(now);
            m_fingerprint = ready.get_future().share();
            logLine("resuming after round " + std::to_string(resume->round) + ": " + std::to_string(resume->batchesDone()) + " of "
                    + std::to_string(m_batchCount) + " global batches committed, model and data unchanged");
        } else {
            m_fingerprint = std::async(std::launch::async, compute).share();
        }
    }

    /// A reporting rank after rank 0's loss: rank 0's fingerprint from the store, or (rank 0 was
    /// lost before it had one) hashed here, beside the evaluation, as rank 0 does.
    void adoptFingerprint(dist::DistributedRun &run)
    {
        if (!m_computeFingerprint)
            return;
        if (run.store().check({kFingerprintKey})) {
            const std::string text = run.store().get(kFingerprintKey, m_o.distOptions.timeout).value_or("");
            const auto a = text.find('\n'), b = a == std::string::npos ? a : text.find('\n', a + 1);
            if (b != std::string::npos) {
                std::promise<dist::RunFingerprint> ready;
                ready.set_value({text.substr(0, a), text.substr(a + 1, b - a - 1), text.substr(b + 1)});
                m_fingerprint = ready.get_future().share();
                return;
            }
        }
        m_fingerprint = std::async(std::launch::async, m_computeFingerprint).share();
    }

    /// Step 5's default batch on a GPU: the largest power of two of windows that fits this GPU's free
    /// memory, the smallest every rank can afford (each rank must cut the windows alike), then the
    /// bounds that do not depend on memory. Without a figure (no CUDA runtime to ask, a TorchScript
    /// module of unknown shape) the fixed default stays, on every rank alike.
    void chooseDefaultBatch(const WindowPlan &plan, const ModelInfo &mi)
    {
        BatchSizingInput in;
        in.freeBytes = m_freeBytes;
        in.totalBytes = m_totalBytes;
        in.weightBytes = mi.weightBytes;
        in.elementBytes = static_cast<int>(c10::elementSize(m_o.dtype));
        in.shape = mi.shape;
        in.width = plan.maxInput;
        for (const Window &w : plan.windows)
            in.scoredPerWindow = std::max(in.scoredPerWindow, w.scored());
        in.windows = static_cast<std::int64_t>(plan.windows.size());
        in.ranks = m_o.shardCount;
        in.ranksPerDevice = m_o.ranksPerDevice;
        in.fusedAttention = hasFusedAttention();
        BatchChoice c;
        std::string unknown;
        if (!m_memoryKnown)
            unknown = "the GPU's free memory is unknown (" + (dist::gpuLibraries().error.empty() ? std::string("cudaMemGetInfo failed")
                                                                                                   : dist::gpuLibraries().error) + ")";
        else if (windowFootprintBytes(in) == 0)
            unknown = "a " + mi.format + " model's activation sizes are unknown";
        else
            c = chooseBatch(in);
        std::int64_t memoryBatch = unknown.empty() ? c.memoryBatch : -1; // -1: keep the fixed default
        if (m_run && m_run->worldSize() > 1)
            memoryBatch = agreeOnMinimum(*m_run, "cppl/batch/memory", memoryBatch, m_o.distOptions.timeout);
        if (memoryBatch < 0) {
            m_batchFrom = {{"source", "default"},
                           {"reason", "batch " + std::to_string(m_o.batch) + ", the fixed default: "
                                          + (unknown.empty() ? std::string("another rank could not size its batch") : unknown)
                                          + " (--batch N sets it)"}};
            logLine(m_batchFrom["reason"].get<std::string>());
            return;
        }
        if (memoryBatch != c.memoryBatch) { // another rank has less memory: its batch, with the bounds again
            c.memoryBatch = memoryBatch;
            applyBatchBounds(in, c);
            c.reason += " (the smallest of every rank's memory batch)";
        }
        m_o.batch = c.batch;
        m_batchFrom = {{"source", "free memory"},
                       {"reason", c.reason},
                       {"limited_by", c.limitedBy},
                       {"free_bytes", m_freeBytes},
                       {"total_bytes", m_totalBytes},
                       {"weight_bytes", mi.weightBytes},
                       {"per_window_bytes", c.perWindowBytes},
                       {"budget_bytes", c.budgetBytes},
                       {"memory_batch", c.memoryBatch}};
        logLine(c.reason);
    }

    /// The smallest of every rank's @p mine, through the rendezvous store: each rank posts its own,
    /// rank 0 posts the minimum. Throws CollectiveError naming a rank that never posted.
    static std::int64_t agreeOnMinimum(dist::DistributedRun &run, const std::string &key, std::int64_t mine, std::chrono::milliseconds timeout)
    {
        dist::Store &store = run.store();
        store.set(key + "/" + std::to_string(run.rank()), std::to_string(mine));
        if (run.rank() == 0) {
            std::int64_t least = mine;
            for (int r = 1; r < run.worldSize(); ++r) {
                const auto v = store.get(key + "/" + std::to_string(r), timeout);
                if (!v)
                    throw CollectiveError("rank " + std::to_string(r) + " did not post " + key + " within the timeout (--timeout)");
                least = std::min<std::int64_t>(least, std::stoll(*v));
            }
            store.set(key, std::to_string(least));
            return least;
        }
        const auto v = store.get(key, timeout);
        if (!v)
            throw CollectiveError("rank 0 did not post " + key + " within the timeout (--timeout)");
        return std::stoll(*v);
    }

    /// Step 6: evaluate, in rounds every rank enters alike (the same collectives on every rank,
    /// however uneven the work); the totals of every rank, exactly. Static: the shards and rounds
    /// planned before the run. Dynamic: batches claimed from the store as ranks go (batch_schedule.h).
    EvalOutcome evaluate(LanguageModel &model, const EvalInput &input, const EvalPlan &planned)
    {
        const WindowPlan &plan = planned.windows;
        const int shardRank = m_o.shardRank;
        const bool distributed = m_o.distributed;
        const bool dynamic = distributed && m_o.schedule == dist::Schedule::Dynamic;
        const bool quiet = m_o.quiet;
        const std::int64_t batch = m_o.batch;
        const auto nWindows = static_cast<std::int64_t>(plan.windows.size());
        dist::DistributedRun *run = m_run.get();
        telemetry::Publisher *tel = m_tel.get();
        // Who prints the run's round lines and losses: rank 0, or after it is lost the lowest survivor.
        const bool userQuiet = m_a.has("--quiet");
        auto silent = [&] { return distributed ? userQuiet || !run->reporter() : quiet; };

        std::ostream &err = m_err;
        NllStats stats;  // this rank's own tokens, cumulative
        NllStats global; // after each round: every rank's, exactly
        // A resumed run: the committed global totals are rank 0's constant contribution (they
        // already hold the document totals), and the ledger's batches are not evaluated again.
        const dist::ResumeState *resume = m_o.resume ? &*m_o.resume : nullptr;
        const NllStats base = resume ? NllStats::fromReducedWords(resume->words) : NllStats();
        global = base;
        if (resume && shardRank == 0) {
            stats = base;
        } else if (shardRank == 0) { // document totals (text input): counted once, by rank/shard 0
            stats.bytes = input.bytes;
            stats.words = input.words;
        }
        // Checkpoint rounds continue the interrupted run's numbering.
        const int firstRound = resume ? resume->round + 1 : 0;
        Evaluator evaluator(model, std::span<const std::uint32_t>(planned.flat), plan, batch);
        std::optional<RoundPlan> rounds;
        std::optional<dist::DynamicSchedule> schedule;
        if (dynamic) {
            std::vector<std::int64_t> windowsOf;
            for (std::int64_t b = 0; b < nWindows; b += batch)
                windowsOf.push_back(std::min(batch, nWindows - b));
            schedule.emplace(*run, batchTokens(plan, batch), m_o.syncEvery, "cppl/sched/next",
                             resume ? std::optional(dist::remainingBatches(m_batchCount, resume->ledger)) : std::nullopt, std::move(windowsOf));
            // The document totals (and a resume's committed words) are known to every rank: they
            // travel in the schedule's carry, so they survive the loss of rank 0 (whose own totals
            // still hold them, for its telemetry and report) or of several ranks at once.
            NllStats constant = base;
            if (!resume) {
                constant.bytes = input.bytes;
                constant.words = input.words;
            }
            const NllStats::Words constantWords = constant.toWords();
            schedule->setConstant(constantWords, shardRank == 0);
        } else {
            rounds.emplace(plan, planned.shards, distributed ? m_o.syncEvery : kSyncAtEnd, batch);
        }
        auto lastPrint = std::chrono::steady_clock::now() - std::chrono::seconds(10);
        const auto evalStart = std::chrono::steady_clock::now();
        double computeSeconds = 0;
        const Shard &myWork = planned.shards[static_cast<std::size_t>(shardRank)];
        // Dynamic: a rank has no share of its own (it claims batches as it goes): the telemetry's
        // windows_total is the run's, the same on every rank (the collector takes it so).
        const std::int64_t windowsExpected = dynamic ? nWindows : myWork.windows();
        const bool slow = (m_o.slowRank == m_o.identity.rank || m_o.slowRank == kEveryRank) && m_o.slowMs > 0;
        auto publishProgress = [&](bool final, double inRound) {
            if (!tel)
                return;
            cppl::telemetry::Progress p;
            p.tokensScoredTotal = stats.tokens;
            const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
            p.tokensPerSecond = wall > 0 ? static_cast<double>(stats.tokens) / wall : 0;
            p.windowsDone = stats.windows;
            p.windowsTotal = std::max(windowsExpected, stats.windows);
            p.computeSecondsTotal = computeSeconds + inRound;
            if (run) {
                p.commWaitSecondsTotal = run->comm().waitSeconds;
                p.commTransferSecondsTotal = run->comm().transferSeconds;
            }
            p.nll = stats.nll;
            p.nllSquared = stats.nllSquared;
            tel->progress(p, final);
        };
        // Windows [first, end) into this rank's totals; returns the seconds it took.
        auto evaluateRange = [&](std::int64_t first, std::int64_t end) {
            const auto c0 = std::chrono::steady_clock::now();
            evaluator.run(first, end, stats, [&](const EvalProgress &p, const NllStats &s) {
                if (slow)
                    std::this_thread::sleep_for(std::chrono::milliseconds(m_o.slowMs));
                if (tel) // the publisher keeps at most 10 per second, the latest totals always
                    publishProgress(false, std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count());
                if (distributed)
                    return;
                const auto now = std::chrono::steady_clock::now();
                if (quiet || (now - lastPrint < std::chrono::milliseconds(500) && p.windowsDone < p.windowsTotal))
                    return;
                lastPrint = now;
                const double rate = p.seconds > 0 ? static_cast<double>(p.tokensDone) / p.seconds : 0;
                const double eta = rate > 0 ? static_cast<double>(p.tokensTotal - p.tokensDone) / rate : NAN;
                char line[200];
                std::snprintf(line, sizeof line, "[%lld/%lld windows] ppl %.4f  %.0f tok/s  elapsed %s  ETA %s\n",
                              static_cast<long long>(p.windowsDone), static_cast<long long>(p.windowsTotal), computePerplexity(s).ppl, rate,
                              clock(p.seconds).c_str(), clock(eta).c_str());
                err << line << std::flush;
            });
            const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
            computeSeconds += took;
            return took;
        };
        // After round r's collective: telemetry, and rank 0's line with the global running figures.
        auto roundDone = [&](int r, int total, double wait0, double transfer0) {
            const bool last = r + 1 == total;
            if (tel) {
                tel->sync({r + 1, std::max(total, r + 1), run->comm().waitSeconds - wait0, run->comm().transferSeconds - transfer0});
                tel->phase(cppl::telemetry::Phase::Evaluating);
            }
            const auto now = std::chrono::steady_clock::now();
            if (silent() || (now - lastPrint < std::chrono::milliseconds(500) && !last))
                return;
            lastPrint = now;
            const double elapsed = std::chrono::duration<double>(now - evalStart).count();
            const double rate = elapsed > 0 ? static_cast<double>(global.tokens) / elapsed : 0;
            const double eta = rate > 0 ? static_cast<double>(plan.scoredTokens - global.tokens) / rate : NAN;
            const double comm = run->comm().waitSeconds + run->comm().transferSeconds;
            char line[256];
            const std::string of = dynamic ? (last ? std::to_string(total) : std::string("~") + std::to_string(total)) : std::to_string(total);
            std::snprintf(line, sizeof line, "[round %d/%s] ppl %.4f  %lld/%lld tokens  %.0f tok/s (all ranks)  comm %.2f%%  elapsed %s  ETA %s\n", r + 1,
                          of.c_str(), computePerplexity(global).ppl, static_cast<long long>(global.tokens), static_cast<long long>(plan.scoredTokens), rate,
                          elapsed > 0 ? 100.0 * comm / elapsed : 0.0, clock(elapsed).c_str(), clock(eta).c_str());
            err << line << std::flush;
            if (tel)
                tel->log(cppl::telemetry::LogLevel::Info, std::string_view(line).substr(0, std::strlen(line) - 1));
        };
        if (tel)
            tel->phase(cppl::telemetry::Phase::Evaluating);
        // Before a round's collective every rank names its batches of the round; after it rank 0
        // gives the round's exact global words (checkpoint.h). One short stdout line each.
        const bool checkpoints = distributed && m_o.checkpointLines;
        // Batches computed while a round a loss ended was in flight (regroupBehind, below): they go
        // in the next ledger line, which is the only one of its (epoch, round) (the launcher's
        // CheckpointWriter takes a rank's round as complete at its first line of it).
        std::vector<dist::BatchRun> carriedLedger;
        auto ledger = [&](int r) {
            if (!checkpoints)
                return;
            std::vector<dist::BatchRun> mine;
            if (schedule) {
                mine = std::exchange(carriedLedger, {});
                mine.insert(mine.end(), schedule->roundDone().begin(), schedule->roundDone().end());
            } else {
                const Shard part = rounds->roundOf(shardRank, r);
                dist::addWindowsAsBatches(mine, part.firstWindow, part.endWindow, batch);
            }
            m_out << dist::ledgerLine(run->rank(), r, mine, run->epoch()) << '\n' << std::flush;
        };
        // After a regrouping, the first round whose checkpoint is complete (its regroup line says so).
        int checkpointsFrom = 0;
        auto checkpoint = [&](int r) {
            if (!checkpoints || !run->reporter() || r < checkpointsFrom)
                return;
            if (!m_fingerprint.valid())
                adoptFingerprint(*run); // a reporting rank after rank 0's loss
            if (!m_fingerprint.valid() || m_fingerprint.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
                return; // until the weights are hashed; the words are cumulative, a later round covers this one
            if (run->tolerant() && run->rank() == 0 && !m_fingerprintShared) {
                const dist::RunFingerprint &f = m_fingerprint.get(); // once, for a reporting rank after this one
                run->store().set(kFingerprintKey, f.model + '\n' + f.data + '\n' + f.plan);
                m_fingerprintShared = true;
            }
            m_out << dist::checkpointLine(r, global.toWords(), m_fingerprint.get(), dist::scheduleName(m_o.schedule), run->worldSize(),
                                          m_o.syncEvery, m_batchCount, m_o.batch, run->epoch())
                  << '\n'
                  << std::flush;
        };
        int roundsRun = 0;
        std::size_t lostSeen = 0;
        // A rank lost and the survivors regrouped (--on-rank-loss continue): the reporting rank says
        // so, and with checkpoints names the epoch, the first round whose checkpoint is complete again
        // and every lost rank's batches that count (the launcher's ledger replaces theirs by these).
        auto reportLosses = [&] {
            if (!schedule)
                return;
            const auto &lost = schedule->lostRanks();
            const bool fresh = lostSeen < lost.size();
            for (; lostSeen < lost.size(); ++lostSeen) {
                const auto &l = lost[lostSeen];
                std::int64_t redone = 0;
                for (const auto &b : schedule->redone())
                    redone += b.end - b.first;
                const std::string line = "recovered: rank " + std::to_string(l.rank) + " (" + run->hosts()[static_cast<std::size_t>(l.rank)]
                                         + ") " + l.cause + "; lost after round " + std::to_string(l.round) + ", "
                                         + std::to_string(l.windows) + " of its windows kept, " + std::to_string(redone)
                                         + " batches queued again so far; going on with " + std::to_string(run->epochSize()) + " ranks";
                if (run->reporter()) // a note, not progress: --quiet keeps it (a run that exits 0 says whom it lost)
                    err << line << '\n' << std::flush;
                if (tel)
                    tel->log(cppl::telemetry::LogLevel::Warning, line);
            }
            if (fresh) {
                // The survivors' next round: the ledger lines of the rounds before it that a
                // survivor printed are in the carry, as are a rank ahead's of this round.
                checkpointsFrom = firstRound + schedule->rounds();
                if (checkpoints && run->reporter()) {
                    std::vector<dist::RegroupLost> named;
                    for (const auto &l : lost)
                        named.push_back({l.rank, firstRound + l.round - 1, l.committed});
                    m_out << dist::regroupLine(run->epoch(), checkpointsFrom, named) << '\n' << std::flush;
                }
            }
        };
        // Round r's collective is done: the global totals, the checkpoint, telemetry and rank 0's
        // line. True when the run is complete (dynamic: every queue was empty).
        auto roundComplete = [&](int r, int committed, const NllStats::Words &words, bool allDone, double wait0, double transfer0) {
            global = NllStats::fromReducedWords(words);
            if (!dynamic) {
                checkpoint(committed);
                roundDone(r, rounds->rounds(), wait0, transfer0);
                return false;
            }
            const std::size_t lostBefore = lostSeen;
            reportLosses();
            if (lostSeen == lostBefore)
                checkpoint(committed); // not for a round whose collective the loss ended (the words are the carry)
            const int done = schedule->rounds();
            roundsRun = done;
            // Rounds left, estimated from the tokens left at the threshold per rank (telemetry needs a total).
            const std::int64_t perRound = std::max<std::int64_t>(1, m_o.syncEvery == kSyncAtEnd ? plan.scoredTokens : m_o.syncEvery)
                                          * run->epochSize();
            const auto left = static_cast<int>(std::min<std::int64_t>(1 << 30, (plan.scoredTokens - global.tokens + perRound - 1) / perRound));
            roundDone(done - 1, allDone ? done : done + std::max(1, left), wait0, transfer0);
            return allDone;
        };
        // The rounds' collectives go through a RoundPipeline (round_pipeline.h): with --overlap-sync
        // on, round r's aggregation runs on this rank's communication thread while round r+1 is
        // computed, and round r completes (global totals, checkpoint, rank 0's line) only then.
        // Tolerant runs too: a lost rank ends the round in flight, and this thread regroups once
        // the communication thread is idle (regroupBehind, below). A tolerant run without overlap
        // keeps its collectives in DynamicSchedule::sync, which regroups itself.
        std::optional<dist::RoundPipeline> pipe;
        if (distributed && (!run->tolerant() || m_o.overlapSync))
            pipe.emplace(*run, m_o.overlapSync);
        const bool tolerantPipe = pipe && run->tolerant();
        m_overlapRan = pipe && pipe->overlapping();
        int flightRound = 0, flightCommitted = 0;
        auto completeFlight = [&] {
            if (tel)
                tel->phase(cppl::telemetry::Phase::Syncing);
            const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
            const std::vector<std::int64_t> reduced = pipe->wait();
            NllStats::Words words{};
            bool allDone = false;
            if (schedule)
                allDone = schedule->complete(reduced, words);
            else
                std::copy_n(reduced.begin(), words.size(), words.begin());
            return roundComplete(flightRound, flightCommitted, words, allDone, wait0, transfer0);
        };
        // A tolerant run with overlap, after a loss: the round in flight failed (RankLostError out
        // of wait()) or the loss was seen before submitting. The communication thread is idle, so
        // this thread regroups as DynamicSchedule::sync does (the survivors agree on the committed
        // round, new communicators, the lost rank's uncommitted batches queued again). This rank's
        // totals hold the round it computed meanwhile: recover() puts all of them in the carry, so
        // they count once, and they go in the ledger line of the first round after the regrouping
        // (under the new epoch: its checkpoint is the first whose words hold them; under the old
        // epoch they could land in a checkpoint of the failed round's number), with that round's
        // own batches: one line per (epoch, round), as the launcher's CheckpointWriter expects.
        auto regroupBehind = [&](int r) {
            if (tel)
                tel->phase(cppl::telemetry::Phase::Syncing);
            const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
            NllStats::Words words = stats.toWords();
            schedule->recover(words);
            const int first = firstRound + schedule->rounds();
            roundComplete(r, first, words, false, wait0, transfer0); // the loss's lines; no checkpoint
            carriedLedger.insert(carriedLedger.end(), schedule->roundDone().begin(), schedule->roundDone().end());
        };
        auto runRounds = [&] {
            for (int r = dynamic ? 0 : firstRound;; ++r) {
                if (dynamic) {
                    schedule->beginRound();
                    while (const auto b = schedule->next())
                        schedule->evaluated(*b, evaluateRange(*b * batch, std::min(nWindows, (*b + 1) * batch)));
                } else {
                    if (r == rounds->rounds()) {
                        if (pipe && pipe->inFlight())
                            completeFlight(); // the last round's, with nothing left to hide it behind
                        break;
                    }
                    const Shard part = rounds->roundOf(shardRank, r);
                    evaluateRange(part.firstWindow, part.endWindow);
                }
                roundsRun = (dynamic ? r : r - firstRound) + 1;
                if (!distributed) {
                    global = stats;
                    continue;
                }
                // Round r-1's result, now that round r is computed. Dynamic and complete: every
                // queue was empty when it was submitted, so round r evaluated nothing.
                if (pipe && pipe->inFlight()) {
                    bool lost = false;
                    try {
                        if (completeFlight())
                            break;
                    } catch (const dist::RankLostError &) {
                        if (!tolerantPipe)
                            throw;
                        lost = true;
                    }
                    if (lost) {
                        regroupBehind(r);
                        continue;
                    }
                }
                if (tolerantPipe && run->lossPending()) { // not worth a collective that would fail at once
                    regroupBehind(r);
                    continue;
                }
                // Dynamic: the schedule counts rounds (after a regrouping, the survivors' agreed count).
                const int committed = dynamic ? firstRound + schedule->rounds() : r;
                ledger(committed);
                NllStats::Words words = stats.toWords();
                if (pipe) {
                    pipe->submit(schedule ? schedule->prepare(words) : std::vector<std::int64_t>(words.begin(), words.end()));
                    flightRound = r;
                    flightCommitted = committed;
                    if (!pipe->overlapping() && completeFlight())
                        break;
                    continue;
                }
                if (tel)
                    tel->phase(cppl::telemetry::Phase::Syncing);
                const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
                const bool allDone = schedule->sync(words); // tolerant: regroups around a lost rank
                if (roundComplete(r, committed, words, allDone, wait0, transfer0))
                    break;
            }
        };
        runRounds();
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
        std::vector<dist::RankReport> reports;
        std::vector<std::string> batchRuns; // dynamic: which batches each rank evaluated
        // A tolerant run: the others stay (their watchdogs watching) until the reporting rank has
        // written the result (kReportedKey); if it is lost first, they regroup and the next lowest
        // rank writes it. The reporter finishes after writing (run()).
        const bool tolerantReport = schedule && run->tolerant();
        auto awaitReport = [&] {
            if (run->reporter())
                return;
            const int reporter = run->members().front();
            for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
                if (run->store().check({kReportedKey})) {
                    run->store().add(kReportedKey + "/acks", 1); // a reporter that serves the store waits for these
                    return;
                }
                const auto losses = run->lossesSince(run->epoch());
                if (!losses.empty()) {
                    const auto &left = losses.back().members;
                    if (std::find(left.begin(), left.end(), reporter) == left.end())
                        throw dist::RankLostError("rank " + std::to_string(run->rank()) + ": rank " + std::to_string(reporter)
                                                  + ", which reports for the run, was lost before it wrote the result");
                }
                std::this_thread::sleep_for(pause);
            }
        };
        if (distributed) {
            for (;;) {
                dist::RankReport mine;
                const bool carries = resume && shardRank == 0; // rank 0's totals include the resumed base
                mine.tokens = stats.tokens - (carries ? base.tokens : 0);
                mine.windows = stats.windows - (carries ? base.windows : 0);
                mine.rounds = roundsRun;
                mine.payloadBytes = run->comm().payloadBytes;
                mine.computeSeconds = computeSeconds;
                mine.waitSeconds = run->comm().waitSeconds;
                mine.transferSeconds = run->comm().transferSeconds;
                mine.collectiveSeconds = run->comm().collectiveSeconds;
                mine.wallSeconds = seconds;
                if (schedule) {
                    // The ledger: each rank's batches through the store, read by rank 0 for the result.
                    const std::string runs = dist::formatBatchRuns(schedule->done());
                    run->store().set("cppl/sched/done/" + std::to_string(run->rank()), runs);
                    if (tel)
                        tel->log(cppl::telemetry::LogLevel::Info, "batches evaluated by rank " + std::to_string(run->rank()) + ": "
                                                                      + (runs.empty() ? std::string("none") : runs) + " ("
                                                                      + std::to_string(schedule->claims()) + " claims)");
                }
                try {
                    reports = run->gather(mine); // after every rank's ledger is in the store
                    if (tolerantReport)
                        awaitReport();
                    break;
                } catch (const dist::RankLostError &) {
                    // A rank was lost after the last round: regroup, evaluate what it left, gather again.
                    if (!schedule)
                        throw;
                    NllStats::Words words = stats.toWords();
                    schedule->recover(words);
                    global = NllStats::fromReducedWords(words);
                    reportLosses();
                    runRounds();
                    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
                }
            }
            if (schedule && run->reporter()) {
                batchRuns.assign(static_cast<std::size_t>(run->worldSize()), std::string());
                for (int k : run->members())
                    batchRuns[static_cast<std::size_t>(k)] = run->store().get("cppl/sched/done/" + std::to_string(k), m_o.distOptions.timeout).value_or("");
                for (const auto &l : schedule->lostRanks()) { // a lost rank's row: what of its work counts
                    batchRuns[static_cast<std::size_t>(l.rank)] = dist::formatBatchRuns(l.committed);
                    dist::RankReport rep;
                    rep.rank = l.rank;
                    rep.host = run->hosts()[static_cast<std::size_t>(l.rank)];
                    rep.group = run->groups().groupOf[static_cast<std::size_t>(l.rank)];
                    rep.tokens = l.tokens;
                    rep.windows = l.windows;
                    rep.rounds = l.round;
                    rep.lost = true;
                    reports.push_back(rep);
                }
                std::sort(reports.begin(), reports.end(), [](const auto &x, const auto &y) { return x.rank < y.rank; });
            }
            if (!tolerantReport || !run->reporter())
                run->finish();
            if (schedule && (global.tokens != plan.scoredTokens || global.windows != nWindows))
                // Never a silently wrong result: every batch must have been counted exactly once.
                throw ExitError(kExitCollective, "rank " + std::to_string(run->rank()) + ": the ranks' totals cover " + std::to_string(global.windows)
                                                     + " of " + std::to_string(nWindows) + " windows and " + std::to_string(global.tokens) + " of "
                                                     + std::to_string(plan.scoredTokens)
                                                     + " tokens: batches were lost or counted twice (a bug; please report it with the ranks' logs)");
        }
        publishProgress(true, 0); // this rank's complete totals, before its result
        if (global.nll.rejected() > 0)
            throw ExitError(kExitRuntime, std::to_string(global.nll.rejected())
                                              + " token log-probabilities were not finite (NaN/inf): the model overflowed in "
                                              + dtypeName(m_o.dtype) + "; try --dtype float32");
        EvalOutcome outcome{global, roundsRun, seconds, std::move(reports), std::move(batchRuns), base, {}, {}};
        if (schedule) {
            outcome.lostRanks = schedule->lostRanks();
            outcome.batchesRedone = dist::formatBatchRuns(schedule->redone());
        }
        return outcome;
    }

    /// Step 7: rank 0 (after its loss, the lowest survivor) prints the estimate and writes the result contract (docs/result-json.md).
    int writeResult(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome)
    {
        const NllStats &stats = outcome.stats;
        const Perplexity ppl = computePerplexity(stats);
        const bool distributed = m_o.distributed;
        const RankIdentity &identity = m_o.identity;
        const PlanOptions &opts = m_o.plan;
        const Shard &shard = p.shards[static_cast<std::size_t>(m_o.shardRank)];
        const double seconds = outcome.seconds;
        const auto &reports = outcome.reports;
        const auto &a = m_a;
        const auto &runtime = m_runtime;
        const auto &dtype = m_o.dtype;
        const auto &device = m_o.device;
        const auto &run = m_run;
        const auto &tel = m_tel;
        std::ostream &out = m_out;
        const std::int64_t batch = m_o.batch, maxWindows = m_o.maxWindows, syncEvery = m_o.syncEvery;
        const int shardRank = m_o.shardRank, shardCount = m_o.shardCount;
        if (distributed && run->reporter() && m_o.holdRank == identity.rank && m_o.holdMs > 0) {
            m_err << "clusterppl-agent: rank " << identity.rank << ": holding the result for " << m_o.holdMs << " ms (CLUSTERPPL_TEST_HOLD_RESULT)\n"
                  << std::flush;
            std::this_thread::sleep_for(std::chrono::milliseconds(m_o.holdMs));
        }
        if (distributed && !run->reporter()) {
            if (tel) {
                tel->result();
                tel->close(kExitOk);
            }
            return kExitOk; // rank 0 (or, once it is lost, the lowest survivor) reports for the run
        }
        out << formatFinalEstimate(ppl) << '\n' << std::flush;
        const bool resultLine = a.has("--result-line");

        // The result contract (docs/result-json.md).
        if (const auto jsonPath = a.get("--json"); jsonPath || resultLine || tel) {
            nlohmann::ordered_json j;
            j["ppl"] = ppl.ppl;
            j["ppl_stderr"] = ppl.pplStderr;
            j["nll_sum"] = stats.nll.toDouble();
            j["nll_sum_exact"] = stats.nll.toString();
            j["nll_sq_sum_exact"] = stats.nllSquared.toString();
            j["tokens_scored"] = stats.tokens;
            j["tokens_total"] = input.totalTokens();
            j["windows"] = stats.windows;
            if (stats.bytes > 0) {
                j["bytes"] = stats.bytes;
                j["words"] = stats.words;
                j["bits_per_byte"] = ppl.bitsPerByte;
                j["byte_perplexity"] = ppl.bytePpl;
                j["word_perplexity"] = ppl.wordPpl;
            }
            j["protocol"] = std::string(protocolName(opts.protocol));
            j["context"] = opts.context;
            j["stride"] = opts.protocol == Protocol::HfSliding ? (opts.stride == 0 ? opts.context : opts.stride) : opts.context;
            j["batch"] = batch;
            j["batch_from"] = m_batchFrom.is_null() ? nlohmann::ordered_json{{"source", m_a.has("--batch") ? "--batch" : "default"}} : m_batchFrom;
            j["max_windows"] = maxWindows;
            j["dtype"] = dtypeName(dtype);
            j["device"] = device.str();
            j["tf32"] = m_o.tf32;
            j["threads"] = runtime.intraOpThreads;
            j["cpus"] = {{"allowed", m_cpu.allowedCpus},
                         {"local_ranks", m_cpu.localRanks},
                         {"pinned", cpuListText(m_cpu.pinned)},
                         {"threads_from", m_cpu.why}};
            j["blas_threads"] = runtime.blasThreads;
            j["blas"] = runtime.blas;
            j["gemm"] = mi.gemm;
            j["seconds"] = seconds;
            j["load_seconds"] = loadSeconds;
            j["tokens_per_second"] = seconds > 0 ? static_cast<double>(stats.tokens) / seconds : 0.0;
            nlohmann::ordered_json hashes = nlohmann::ordered_json::object();
            for (const auto &f : mi.weightFiles)
                hashes[f] = sha256File(f);
            j["model"] = {{"path", mi.path}, {"format", mi.format}, {"arch", mi.arch}, {"params", mi.params}, {"sha256", hashes}};
            nlohmann::ordered_json source = {{"path", input.path}, {"format", input.format}, {"documents", input.documents.size()}};
            if (std::filesystem::is_regular_file(input.path))
                source["sha256"] = sha256File(input.path);
            if (!input.dataset.empty()) {
                source["dataset"] = input.dataset;
                source["tokenizer"] = input.tokenizer;
                source["replaced_invalid_utf8"] = input.replacedUtf8;
                source["bos"] = {{"mode", input.bosMode}, {"added", input.bosAdded}, {"id", input.bosId}, {"reason", input.bosReason}};
            }
            j["data"] = source;
            j["world_size"] = identity.worldSize;
            if (!distributed)
                j["shard"] = {{"rank", shardRank}, {"count", shardCount}, {"first_window", shard.firstWindow}, {"end_window", shard.endWindow}};
            j["backend"] = distributed ? run->backend() : "none";
            j["topology"] = distributed ? dist::topologyName(run->topology()) : "none";
            j["sync_every_tokens"] = syncEvery == kSyncAtEnd ? nlohmann::ordered_json("end") : nlohmann::ordered_json(syncEvery);
            j["rounds"] = outcome.rounds;
            if (const auto &resume = m_o.resume)
                j["resumed"] = {{"from_round", resume->round},
                                {"batches_done", resume->batchesDone()},
                                {"tokens_done", outcome.resumedBase.tokens},
                                {"world_size_before", resume->worldSize}};
            if (distributed) {
                j["schedule"] = dist::scheduleName(m_o.schedule);
                j["overlap_sync"] = m_overlapRan; // what ran: the rounds' collectives behind the next round's compute
                j["batch_count"] = (static_cast<std::int64_t>(p.windows.windows.size()) + batch - 1) / batch;
                j["groups"] = run->groups().groups;
                j["rendezvous"] = {{"source", identity.source}, {"store", run->storeAddress()}};
                j["ranks"] = ranksJson(reports, outcome.batchRuns);
                if (m_o.distOptions.tolerateRankLoss) {
                    nlohmann::ordered_json lost = nlohmann::ordered_json::array();
                    for (const auto &l : outcome.lostRanks)
                        lost.push_back({{"rank", l.rank},
                                        {"host", run->hosts()[static_cast<std::size_t>(l.rank)]},
                                        {"round", l.round},
                                        {"cause", l.cause}});
                    j["on_rank_loss"] = "continue";
                    j["lost_ranks"] = lost;
                    j["batches_redone"] = outcome.batchesRedone;
                }
            }
            j["version"] = CLUSTERPPL_VERSION_STRING;
            if (tel)
                tel->result(j.dump());
            if (resultLine) // for launchers that collect rank 0's stdout (SSH): one line, no file to fetch
                out << "CLUSTERPPL_RESULT " << j.dump() << '\n' << std::flush;
            if (jsonPath) {
                std::ofstream f(*jsonPath);
                if (!(f << j.dump(2) << '\n'))
                    throw ExitError(kExitRuntime, *jsonPath + ": cannot write the result JSON");
            }
        }
        if (tel)
            tel->close(kExitOk);
        return kExitOk;
    }

    const Args &m_a;
    EvalOptions m_o;
    std::ostream &m_out;
    std::ostream &m_err;
    std::unique_ptr<dist::DistributedRun> m_run; ///< set when this is one rank of several
    std::unique_ptr<telemetry::Publisher> m_tel; ///< set with --telemetry
    RuntimeInfo m_runtime;
    CpuPlan m_cpu;
    std::int64_t m_batchCount = 0;                          ///< global batches (with checkpoints)
    std::shared_future<dist::RunFingerprint> m_fingerprint; ///< the reporting rank with checkpoints: ready once hashed
    std::function<dist::RunFingerprint()> m_computeFingerprint; ///< with checkpoints, every rank: hashes the run's fingerprint
    bool m_fingerprintShared = false; ///< rank 0 put it in the store (kFingerprintKey) for a reporter after it
    bool m_overlapRan = false; ///< the rounds' collectives ran behind the next round's compute (the result's overlap_sync)
    bool m_memoryKnown = false; ///< the default batch's figures (autoBatch): the GPU before the weights loaded
    std::int64_t m_freeBytes = 0;
    std::int64_t m_totalBytes = 0;
    nlohmann::ordered_json m_batchFrom; ///< how the batch was chosen, for the result
};

} // namespace

int evalCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err)
{
    const Args a = parseArgs(argv);
    EvalSession session(a, parseOptions(a), out, err);
    try {
        return session.run();
    } catch (const c10::Error &e) {
        // what() carries a C++ backtrace; the message is enough.
        session.fail(ExitError(kExitRuntime, std::string("LibTorch failed: ") + e.what_without_backtrace()));
    } catch (const std::exception &e) {
        session.fail(e);
    }
}

} // namespace cppl::agent
