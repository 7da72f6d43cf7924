// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`: the command (options, then an EvalSession, whose failures reach the
// other ranks), and the session's setup steps: connect, data, model, plan, default batch and
// checkpoints, and the evaluation's set-up around the round loop (eval_session.h). The only eval
// command TU that includes ATen.
#include "eval_command.h"

#include "compute_spec_c10.h"
#include "eval_options.h"
#include "eval_session.h"
#include "evaluator.h"
#include "fault_hooks.h"
#include "language_model.h"
#include "process_exit.h"
#include "reference_check.h"
#include "stdin_eof_watcher.h"
#include "tensor_parallel.h"
#include "tensor_parallel_driver.h"
#include "torch_profile.h"
#include "gpu/batch_sizing.h"
#include "distributed/c10d.h"

#include "cppl/host.h"

#include <ATen/Context.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

namespace cppl::agent {

namespace {

/// The smallest of every rank's @p mine, through the rendezvous store: each rank posts its own,
/// rank 0 posts the minimum. Throws CollectiveError naming a rank that never posted.
std::int64_t agreeOnMinimum(dist::DistributedRun &run, const std::string &key, std::int64_t mine, std::chrono::milliseconds timeout)
{
    run.awaitLoaded(); // every rank posts after its load: a slow one is bounded by --load-timeout, not --timeout
    dist::RendezvousStore &store = run.store();
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

/// --max-windows: the first @p maxWindows windows only (0: all), and their scored tokens.
void limitWindows(WindowPlan &plan, std::int64_t maxWindows)
{
    if (maxWindows <= 0 || maxWindows >= static_cast<std::int64_t>(plan.windows.size()))
        return;
    plan.windows.resize(static_cast<std::size_t>(maxWindows));
    plan.scoredTokens = 0;
    for (const Window &w : plan.windows)
        plan.scoredTokens += w.scored();
}

/// Throws IoError naming the first id outside the model's vocabulary, its document and position.
void checkIdsInVocabulary(const EvalInput &input, const ModelInfo &mi)
{
    for (std::size_t d = 0; d < input.documents.size(); ++d) {
        const auto &ids = input.documents[d];
        const auto it = std::find_if(ids.begin(), ids.end(), [&](std::uint32_t id) { return id >= mi.vocab; });
        if (it != ids.end())
            throw IoError(input.path + ": " + (input.documents.size() > 1 ? "document " + std::to_string(d) + ", " : std::string()) + "token "
                          + std::to_string(it - ids.begin()) + " has id " + std::to_string(*it) + ", outside the model's vocabulary of "
                          + std::to_string(mi.vocab) + " (was the data tokenised for another model?)");
    }
}

} // namespace

bool cudaAvailable()
{
    return at::hasCUDA();
}

std::size_t cudaDeviceCount()
{
    return at::getNumGPUs();
}

int EvalSession::run()
{
    connect();
    // The load phase (data, model, reference): its own bound, --load-timeout; the first
    // collective waits for every rank's end of it (DistributedRun::awaitLoaded).
    if (m_run)
        m_run->beginLoad(m_o.loadTimeout);
    const EvalInput input = loadData();
    const auto loadStart = std::chrono::steady_clock::now();
    m_loadStart = steadySeconds();
    m_rssBeforeLoad = residentBytes();
    const bool peakReset = resetPeakResident();
    const std::unique_ptr<LanguageModel> model = loadModel();
    m_rssLoad = residentBytes() - m_rssBeforeLoad;
    m_rssLoadPeak = peakReset ? std::max<std::int64_t>(peakResidentBytes() - m_rssBeforeLoad, m_rssLoad) : -1;
    const double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
    const std::unique_ptr<LanguageModel> reference = loadReference(*model);
    if (m_run) {
        m_run->endLoad();
        if (m_tp) // a group's forward passes are collectives of their own: its members start loaded
            m_run->awaitLoaded();
    }
    const EvalPlan plan = makePlan(input, *model, reference.get(), loadSeconds);
    const EvalOutcome outcome = evaluate(*model, reference.get(), input, plan);
    const int code = writeResult(input, model->info(), loadSeconds, plan, outcome);
    announceResultWritten();
    return code;
}

/// A rank that fails tells the others (through the watchdog) and telemetry before it exits, so
/// none waits; agentMain() prints the message and exits with the code exitCodeFor() gives. A
/// failure that holds for the whole run (isRunWide) ends a tolerant run too, every rank with
/// this code, instead of being survived as this rank's loss.
void EvalSession::fail(const std::exception &e)
{
    const int code = exitCodeFor(e);
    const std::string message = exitMessageFor(e);
    const ExitError failure(code, (m_run ? "rank " + std::to_string(m_run->rank()) + ": " : std::string()) + message);
    // Once the others can learn of it, this failure is how this process ends: the store's server
    // may leave at once, and a library thread that throws then must not end it otherwise
    // (process_exit.h). The line is the one agentMain() prints.
    if (m_run) {
        decideExit(code, "clusterppl-agent: " + exitMessageFor(failure));
        m_run->reportFailure(code, message, isRunWide(e));
    }
    if (m_tel) {
        m_tel->error(message, code);
        m_tel->close(code);
    }
    // CLUSTERPPL_TEST_HOLD_FAILURE=R:MS: rank R says so and waits MS ms after it reported its
    // failure, before it leaves (its unwinding and exit, slow on a loaded host), where a test
    // makes the store's server vanish under its store clients.
    // (m_run exists only after the options, and so the hooks, were read without error.)
    if (m_run && faultHooks().holdFailure.appliesTo(m_run->rank())) {
        const RankHold &hold = faultHooks().holdFailure;
        sayHook("clusterppl-agent: rank " + std::to_string(hold.rank) + ": holding after it reported its failure for "
                + std::to_string(hold.ms.count()) + " ms (CLUSTERPPL_TEST_HOLD_FAILURE)");
        std::this_thread::sleep_for(hold.ms);
    }
    throw failure;
}

// The agent's own log lines also go to telemetry (every rank's, even when quiet here).
void EvalSession::logLine(const std::string &line, cppl::telemetry::LogLevel level)
{
    if (!m_o.quiet)
        m_err << line << '\n';
    if (m_tel)
        m_tel->log(level, line);
}

/// Step 2: rendezvous (before the expensive loads: a missing rank is reported in seconds, and a
/// rank that then fails to load tells the others instead of leaving them waiting), threads, telemetry.
void EvalSession::connect()
{
    const RankIdentity &identity = m_o.identity;
    // Pinned before any pool or communication thread starts, so that they inherit the CPU slice.
    m_cpu = planCpus(identity.localRank, identity.localWorldSize, static_cast<int>(m_o.threads), cpuPlacement());
    const bool pinnedOk = applyPinning(m_cpu);
    // The current CUDA device is per thread and starts as cuda:0: this rank's GPU from here on, so
    // that what LibTorch makes for the current device (its context, pinned host memory) is made
    // on the GPU this rank uses, not on another rank's (NCCL sets it again on its own threads).
    if (m_o.device.isCuda())
        c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->setDevice(toDevice(m_o.device));
    if (m_o.distributed)
        joinRun();
    setThreads(m_cpu.threads, static_cast<int>(m_o.blasThreads > 0 ? m_o.blasThreads : m_cpu.threads));
    if (m_o.device.isCuda()) {
        at::globalContext().setAllowTF32CuBLAS(m_o.tf32);
        at::globalContext().setAllowTF32CuDNN(m_o.tf32);
    }
    if (const auto endpoint = m_a.get("--telemetry"))
        openTelemetry(*endpoint);
    m_runtime = runtimeInfo();
    logLine(describe(m_runtime));
    logLine("threads: " + std::to_string(m_cpu.threads) + " (" + m_cpu.why + "), "
            + (m_cpu.pinned.empty() ? std::string(pinnedOk ? "not pinned" : "not pinned (the OS refused sched_setaffinity)")
                                    : "pinned to CPUs " + cpuListText(m_cpu.pinned))
            + "; local rank " + std::to_string(identity.localRank) + " of " + std::to_string(m_cpu.localRanks));
    if (!m_cpu.note.empty())
        logLine("threads: " + m_cpu.note);
}

/// Where this host's ranks run, for pinning near memory: on CUDA, each local rank's GPU by its PCI
/// bus id (empty where unknown); on the CPU, none (the ranks spread over the NUMA nodes).
CpuPlacement EvalSession::cpuPlacement() const
{
    CpuPlacement placement;
    if (m_o.device.isCuda())
        for (const int device : m_o.localRankDevices)
            placement.gpuBusIds.push_back(device < 0 ? std::string() : dist::cudaPciBusId(device));
    return placement;
}

/// Part of step 2: the rendezvous, the communicators and the watchdog (distributed_run.h).
void EvalSession::joinRun()
{
    const RankIdentity &identity = m_o.identity;
    try {
        m_run = std::make_unique<dist::DistributedRun>(m_o.distOptions, dist::libtorchC10d());
    } catch (const Error &e) {
        throw ExitError(exitCodeFor(e), "rank " + std::to_string(identity.rank) + ": " + e.what());
    }
    if (m_run->backend() == "nccl")
        logLine("nccl: " + dist::describe(dist::gpuLibraries()) + ", rank " + std::to_string(identity.rank)
                + (m_o.distOptions.cudaDeviceIndex >= 0 ? " on cuda:" + std::to_string(m_o.distOptions.cudaDeviceIndex)
                                                         : std::string(", the model on the CPU")));
    if (m_o.tensorParallel > 1) {
        // Before any weight loads: a group spanning hosts is refused here, every member joins here.
        try {
            m_tp = m_run->formTensorParallelGroup(m_o.tensorParallel);
        } catch (const Error &e) {
            throw ExitError(exitCodeFor(e), "rank " + std::to_string(identity.rank) + ": " + e.what());
        }
    }
    if (!m_o.quiet)
        m_err << "distributed: " << identity.worldSize << " ranks (" << identity.source << "), backend " << m_run->backend() << ", "
              << dist::topologyName(m_run->topology()) << ", " << m_run->groups().groups.size() << " node groups, store "
              << m_run->storeAddress()
              << (m_o.tensorParallel > 1 ? ", tensor-parallel groups of " + std::to_string(m_o.tensorParallel) + " (data-parallel width "
                                               + std::to_string(m_o.shardCount) + ")"
                                         : std::string())
              << '\n';
}

/// Part of step 2, with --telemetry: the publisher. Telemetry never slows or stops the
/// evaluation: the publisher only queues (docs/telemetry.md).
void EvalSession::openTelemetry(const std::string &endpoint)
{
    const RankIdentity &identity = m_o.identity;
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
        m_tel = telemetry::Publisher::open(endpoint, who, keys);
    } catch (const Error &e) {
        throw ExitError(kExitBadArguments, std::string("--telemetry: ") + e.what());
    }
    m_tel->phase(cppl::telemetry::Phase::Loading);
    if (m_o.device.isCuda()) {
        // Device memory and utilisation through NVML when the node has it; absent otherwise. NVML
        // is asked by the device's PCI bus id: its order need not be CUDA's.
        std::string why;
        const int cudaIndex = m_o.device.hasIndex() ? m_o.device.index : 0;
        if (auto gpu = telemetry::openNvmlForCudaDevice(cudaIndex, dist::cudaPciBusId(cudaIndex), &why))
            m_tel->setGpuStats(std::move(gpu));
        else if (!m_o.quiet)
            m_err << "telemetry: no GPU memory or utilisation figures: " << why << '\n';
    }
}

/// Step 3: the data (token file, or text through a tokenizer and a dataset reader).
EvalInput EvalSession::loadData()
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
std::unique_ptr<LanguageModel> EvalSession::loadModel()
{
    // CLUSTERPPL_TEST_SLOW_LOAD=R:MS: rank R's weights come as from a slow NFS.
    if (const RankHold &slow = faultHooks().slowLoad; slow.appliesTo(m_o.identity.rank)) {
        sayHook("clusterppl-agent: rank " + std::to_string(slow.rank) + ": loading " + std::to_string(slow.ms.count())
                + " ms longer (CLUSTERPPL_TEST_SLOW_LOAD)");
        std::this_thread::sleep_for(slow.ms);
    }
    if (const auto &fake = faultHooks().gpuFreeBytes; !fake.empty()) {
        m_freeBytes = m_totalBytes = fake[static_cast<std::size_t>(m_o.identity.rank) % fake.size()];
        m_memoryKnown = true;
    } else if (m_o.autoBatch) { // before the weights: chooseBatch() subtracts them itself
        m_memoryKnown = dist::cudaMemoryInfo(m_o.device.index, m_freeBytes, m_totalBytes);
    }
    return phase(kExitBadModel, [&] {
        if (m_tp && !std::filesystem::is_directory(m_o.modelPath))
            throw ConfigError("--tensor-parallel splits Hugging Face checkpoints (a directory); a TorchScript module cannot be split");
        return agent::loadModel(m_o.modelPath, {toScalarType(m_o.dtype), toDevice(m_o.device), m_o.gemm, m_o.quant, m_tp.get(), m_o.weightUpload});
    });
}

/// Part of step 4, with --reference-model: the reference, in its own dtype and quantization on the
/// same device, refused unless it reads the same tokens as the model.
std::unique_ptr<LanguageModel> EvalSession::loadReference(const LanguageModel &model)
{
    const ReferenceOptions &r = m_o.reference;
    if (!r.any())
        return nullptr;
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<LanguageModel> reference =
        phase(kExitBadModel, [&] { return agent::loadModel(r.path, {toScalarType(r.dtype), toDevice(m_o.device), m_o.gemm, r.quant, nullptr, m_o.weightUpload}); });
    m_referenceLoadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const ModelInfo &ri = reference->info();
    const std::vector<std::string> notes = phase(kExitBadModel, [&] { return checkSameTokenizer(m_o.modelPath, model.info().vocab, r.path, ri.vocab); });
    for (const auto &note : notes)
        logLine("reference: " + note, cppl::telemetry::LogLevel::Warning);
    m_referenceInfo = ri;
    logLine("reference: " + ri.arch + " (" + std::to_string(ri.params) + " parameters, " + dtypeName(r.dtype) + ", GEMM " + ri.gemm + ") loaded in "
            + clock(m_referenceLoadSeconds) + "; KL divergence, top-token agreement and the PPL ratio against it, token by token");
    return reference;
}

/// Step 5: the windows over the data as the model sees it, this rank's shard, and the checks
/// that need both the model and the data.
EvalPlan EvalSession::makePlan(const EvalInput &input, LanguageModel &model, LanguageModel *reference, double loadSeconds)
{
    const ModelInfo &mi = model.info();
    EvalPlan p;
    std::vector<std::uint32_t> flat;
    p.windows = phase(kExitBadArguments, [&] { return planWindows(input, mi, flat); });
    p.flat = std::make_shared<const std::vector<std::uint32_t>>(std::move(flat));
    limitWindows(p.windows, m_o.maxWindows);
    if (m_o.autoBatch)
        chooseDefaultBatch(p.windows, mi);
    p.shards = shardPlanByBatch(p.windows, m_o.shardCount, m_o.batch);
    phase(kExitBadModel, [&] {
        model.prepare(m_o.batch, p.windows.maxInput);
        if (reference)
            reference->prepare(m_o.batch, p.windows.maxInput);
        return 0;
    });
    phase(kExitBadData, [&] {
        checkIdsInVocabulary(input, mi);
        return 0;
    });
    if (m_o.distributed && (m_o.checkpointLines || m_o.resume))
        prepareCheckpoints(mi, p);
    describePlan(mi, p, loadSeconds);
    return p;
}

/// Part of step 5: the token stream as the model sees it (into @p flat) and the protocol's
/// windows over it, with the model's limits and special tokens. Throws ConfigError.
WindowPlan EvalSession::planWindows(const EvalInput &input, const ModelInfo &mi, std::vector<std::uint32_t> &flat)
{
    PlanOptions &opts = m_o.plan;
    if (mi.maxPositions > 0 && opts.context > mi.maxPositions && !m_a.has("--allow-long-context"))
        throw ConfigError("--context " + std::to_string(opts.context) + " exceeds the model's max_position_embeddings "
                          + std::to_string(mi.maxPositions) + "; use a shorter context, or --allow-long-context if you mean it");
    if (opts.bosFirst)
        opts.bosToken = m_a.integer("--bos-id", mi.bosTokenId, 0, 0xffffffffLL);
    if (opts.bosFirst && opts.bosToken < 0)
        throw ConfigError("--bos-first: the model declares no bos_token_id; pass --bos-id ID");
    if (opts.protocol == Protocol::LmEvalRolling) {
        // lm-eval's prefix token: --prefix-id, else the tokenizer's BOS, else the model's.
        const std::int64_t fallback = input.bosId >= 0 ? input.bosId : mi.bosTokenId;
        const std::int64_t prefix = m_a.integer("--prefix-id", fallback, 0, 0xffffffffLL);
        if (prefix < 0)
            throw ConfigError("lm-eval-rolling needs a prefix token: neither the tokenizer nor the model names a BOS; pass --prefix-id ID");
        if (mi.vocab > 0 && prefix >= mi.vocab)
            throw ConfigError("--prefix-id " + std::to_string(prefix) + " is outside the vocabulary of " + std::to_string(mi.vocab));
        std::vector<std::int64_t> lengths;
        flat.reserve(static_cast<std::size_t>(input.totalTokens()) + input.documents.size());
        for (const auto &d : input.documents) {
            lengths.push_back(static_cast<std::int64_t>(d.size()));
            flat.push_back(static_cast<std::uint32_t>(prefix));
            flat.insert(flat.end(), d.begin(), d.end());
        }
        return planDocuments(opts, lengths);
    }
    // Stream protocols: the documents back to back, one BOS first when the tokenizer adds it.
    flat.reserve(static_cast<std::size_t>(input.totalTokens()) + 1);
    if (input.bosAdded)
        flat.push_back(static_cast<std::uint32_t>(input.bosId));
    for (const auto &d : input.documents)
        flat.insert(flat.end(), d.begin(), d.end());
    return planStream(opts, static_cast<std::int64_t>(flat.size()));
}

/// The end of step 5: the log line that says what will be evaluated, and where.
void EvalSession::describePlan(const ModelInfo &mi, const EvalPlan &p, double loadSeconds)
{
    const WindowPlan &plan = p.windows;
    std::ostringstream line;
    line << "model: " << mi.arch << " (" << mi.params << " parameters, " << dtypeName(m_o.dtype) << ", " << m_o.device.str() << ", GEMM " << mi.gemm;
    if (const QuantizationInfo &q = mi.quantization; q.params > 0) {
        char bits[32];
        std::snprintf(bits, sizeof bits, "%.2f", 8.0 * static_cast<double>(q.bytes) / static_cast<double>(q.params));
        line << ", " << q.method << " weights in " << q.layers << " products (group " << q.group << ", " << bits << " bits per weight"
             << (q.denseLayers > 0 ? ", " + std::to_string(q.denseLayers) + " layers dequantized: " + q.denseReason : std::string()) << ")";
    }
    line << ") loaded in " << clock(loadSeconds) << "; " << plan.windows.size() << " windows, " << plan.scoredTokens << " tokens to score, batch "
         << m_o.batch;
    if (m_o.distributed && m_o.schedule == dist::Schedule::Dynamic) {
        line << "; rank " << m_o.shardRank << "/" << m_o.shardCount << ": batches claimed as ranks go (dynamic schedule)";
    } else if (m_o.shardCount > 1) {
        const Shard &myShard = p.shards[static_cast<std::size_t>(m_o.shardRank)];
        line << "; " << (m_o.distributed ? "rank " : "shard ") << m_o.shardRank << "/" << m_o.shardCount << ": windows " << myShard.firstWindow
             << ".." << myShard.endWindow - 1 << ", " << myShard.scoredTokens << " tokens";
    }
    logLine(line.str());
}

/// Part of step 5: what checkpoints carry and a resume must match; a resume is checked here,
/// before any batch is evaluated.
void EvalSession::prepareCheckpoints(const ModelInfo &mi, const EvalPlan &p)
{
    const PlanOptions &opts = m_o.plan;
    const auto windows = static_cast<std::int64_t>(p.windows.windows.size());
    const std::int64_t batchCount = (windows + m_o.batch - 1) / m_o.batch;
    std::ostringstream plan;
    plan << "protocol " << protocolName(opts.protocol) << ", context " << opts.context << ", stride " << (opts.stride == 0 ? opts.context : opts.stride)
         << ", batch " << m_o.batch << ", max_windows " << m_o.maxWindows << ", " << dtypeName(m_o.dtype) << " on "
         << (m_o.device.isCuda() ? "cuda" : "cpu") << ", GEMM " << mi.gemm << ", " << windows << " windows, " << p.windows.scoredTokens << " tokens";
    if (m_o.tensorParallel > 1) // another N sums in another order: its committed words are not this run's
        plan << ", tensor-parallel " << m_o.tensorParallel;
    const dist::ResumeState *resume = m_o.resume ? &*m_o.resume : nullptr;
    if (resume && resume->batchCount != batchCount)
        throw ExitError(kExitBadArguments,
                        "--resume-state: the interrupted run had " + std::to_string(resume->batchCount) + " global batches, this plan has "
                            + std::to_string(batchCount) + " (" + plan.str() + "); resume with the run's own data and settings",
                        ExitError::Scope::Run);
    // Every rank keeps the means: after rank 0's loss the new reporting rank writes checkpoints.
    m_fingerprint.prepare(mi.weightFiles, p.flat, plan.str());
    if (m_o.identity.rank != 0)
        return; // rank 0 checks and writes for the run
    if (!resume) {
        m_fingerprint.hashInBackground();
        return;
    }
    if (const std::string why = dist::fingerprintMismatch(resume->fingerprint, m_fingerprint.hashNow()); !why.empty())
        throw ExitError(kExitBadArguments, "--resume-state: " + why, ExitError::Scope::Run); // the run's checkpoint, checked for the run
    logLine("resuming after round " + std::to_string(resume->round) + ": " + std::to_string(resume->batchesDone()) + " of "
            + std::to_string(batchCount) + " global batches committed, model and data unchanged");
}

/// Step 5's default batch on a GPU: the largest power of two of windows that fits this GPU's free
/// memory, the smallest every rank can afford (each rank must cut the windows alike), then the
/// bounds that do not depend on memory. Without a figure (no CUDA runtime to ask, a TorchScript
/// module of unknown shape) the fixed default stays, on every rank alike.
void EvalSession::chooseDefaultBatch(const WindowPlan &plan, const ModelInfo &mi)
{
    BatchSizingInput in;
    in.freeBytes = m_freeBytes;
    in.totalBytes = m_totalBytes;
    in.weightBytes = mi.weightBytes + (m_referenceInfo ? m_referenceInfo->weightBytes : 0); // both were loaded after free memory was read
    in.elementBytes = bytesPerElement(m_o.dtype);
    in.shape = mi.shape;
    in.width = plan.maxInput;
    for (const Window &w : plan.windows)
        in.scoredPerWindow = std::max(in.scoredPerWindow, w.scored());
    in.windows = static_cast<std::int64_t>(plan.windows.size());
    in.ranks = m_o.shardCount;
    in.ranksPerDevice = m_o.ranksPerDevice;
    in.fusedAttention = hasFusedAttention();
    if (m_run && m_run->backend() == "nccl") { // every rank reserves a leader's two: the batch is agreed by minimum anyway
        in.ncclCommunicators = m_o.distOptions.topology == dist::Topology::Flat ? 1 : 2;
        in.ncclWideCommunicators = m_o.tensorParallel > 1 ? 1 : 0; // and its group's
    }
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

/// Step 6: the model's evaluator, warmed up on a GPU, driven through the rounds (round_loop.h).
EvalOutcome EvalSession::evaluate(LanguageModel &model, LanguageModel *reference, const EvalInput &input, const EvalPlan &plan)
{
    Evaluator evaluator(model, std::span<const std::uint32_t>(*plan.flat), plan.windows, m_o.batch, reference);
    const double warmupSeconds = warmUp(evaluator, model.info(), static_cast<std::int64_t>(plan.windows.windows.size()));
    profile(evaluator, model.info());
    if (m_tp && m_o.tpFollower())
        return follow(evaluator);
    // --tensor-parallel: the leader sends each range it scores to its followers first.
    std::optional<TensorParallelLeader> leader;
    if (m_tp)
        leader.emplace(evaluator, *m_tp, faultHooks().deathPoint(m_run->rank()) == "tp-range");
    WindowScorer &scorer = leader ? static_cast<WindowScorer &>(*leader) : evaluator;
    RoundLoop loop(m_o, {m_out, m_err, m_run.get(), m_tel.get(), m_fingerprint, leader ? &*leader : nullptr}, scorer, input, plan);
    EvalOutcome outcome = loop.run();
    if (leader)
        leader->finish();
    outcome.warmupSeconds = warmupSeconds;
    outcome.firstTokenSeconds = evaluator.firstBatchAt() > 0 ? evaluator.firstBatchAt() - m_loadStart : 0;
    return outcome;
}

/// Step 6 on a tensor-parallel follower: the leader's ranges, until it finishes (tensor_parallel_driver.h).
/// Its outcome is empty: the group's totals, rounds and report are its leader's.
EvalOutcome EvalSession::follow(WindowScorer &scorer)
{
    if (m_tel)
        m_tel->phase(cppl::telemetry::Phase::Evaluating);
    const MemberFigures mine = followLeader(scorer, *m_tp, [&](const MemberFigures &f) { publishFollower(f, false); },
                                            faultHooks().deathPoint(m_run->rank()) == "tp-range");
    publishFollower(mine, true);
    m_run->finish();
    EvalOutcome outcome;
    outcome.seconds = mine.wallSeconds;
    return outcome;
}

/// A follower's telemetry: its time, no tokens (the group's are its leader's, counted once).
void EvalSession::publishFollower(const MemberFigures &f, bool final)
{
    if (!m_tel)
        return;
    cppl::telemetry::Progress p;
    p.computeSecondsTotal = f.computeSeconds;
    p.tpSize = m_o.tensorParallel;
    p.tpRank = m_o.tpRank;
    p.tpCollectiveSecondsTotal = f.tensorParallelSeconds;
    m_tel->progress(p, final);
}

/// On a GPU, one batch before the clock (Evaluator::warmUp); CLUSTERPPL_NO_WARMUP=1 leaves it
/// out, to measure what it saves.
double EvalSession::warmUp(Evaluator &evaluator, const ModelInfo &mi, std::int64_t windows)
{
    const char *noWarmup = std::getenv("CLUSTERPPL_NO_WARMUP");
    if (!mi.device.isCuda() || windows == 0 || (noWarmup && std::string_view(noWarmup) == "1"))
        return 0;
    const double seconds = evaluator.warmUp();
    char took[32];
    std::snprintf(took, sizeof took, "%.2f", seconds);
    if (!m_o.quiet)
        m_err << "warm-up: one batch on " << mi.device.str() << " in " << took
              << " s (CUDA kernels and cuBLAS loaded; not counted in tokens per second)\n";
    return seconds;
}

namespace {

/// --profile's file for @p rank: "{rank}" replaced; without it only rank 0 writes (empty: none).
std::string profileFileFor(const std::string &path, int rank)
{
    const std::string mark = "{rank}";
    if (const auto at = path.find(mark); at != std::string::npos)
        return path.substr(0, at) + std::to_string(rank) + path.substr(at + mark.size());
    return rank == 0 ? path : std::string();
}

nlohmann::ordered_json profileJson(const ProfileReport &r, std::int64_t batches, std::int64_t batch, std::int64_t tokens, const ModelInfo &mi)
{
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const ProfiledOp &op : r.ops)
        ops.push_back({{"name", op.name}, {"device", op.device}, {"calls", op.calls}, {"total_us", op.totalMicroseconds},
                       {"share_of_wall", r.wallSeconds > 0 ? op.totalMicroseconds / 1e6 / r.wallSeconds : 0.0}});
    return {{"batches", batches},
            {"batch", batch},
            {"tokens", tokens},
            {"wall_seconds", r.wallSeconds},
            {"tokens_per_second", r.wallSeconds > 0 ? static_cast<double>(tokens) / r.wallSeconds : 0.0},
            {"device", mi.device.str()},
            {"device_kernels_recorded", r.deviceActivities},
            {"device_busy_share", r.wallSeconds > 0 ? r.deviceMicroseconds / 1e6 / r.wallSeconds : 0.0},
            {"chrome_trace", r.tracePath.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.tracePath)},
            {"note", r.note},
            {"ops", ops}};
}

} // namespace

/// --profile PATH: after the warm-up, before the clock, the first --profile-batches batches once
/// more under LibTorch's profiler (every rank, in step: under tensor parallelism the group's
/// collectives need all members). The summary by operator and kernel goes to PATH, a Chrome trace
/// to PATH.trace.json where LibTorch has Kineto, and the largest lines to stderr.
void EvalSession::profile(Evaluator &evaluator, const ModelInfo &mi)
{
    if (m_o.profilePath.empty())
        return;
    const int rank = m_run ? m_run->rank() : 0;
    const std::string file = profileFileFor(m_o.profilePath, rank);
    std::int64_t tokens = 0;
    const ProfileReport r = profileWork(mi.device.isCuda(), [&] { tokens = evaluator.scratchPass(m_o.profileBatches); },
                                        file.empty() ? std::string() : file + ".trace.json");
    if (file.empty())
        return;
    std::ofstream f(file);
    if (!(f << profileJson(r, m_o.profileBatches, m_o.batch, tokens, mi).dump(2) << '\n'))
        throw ExitError(kExitRuntime, file + ": cannot write the profile (--profile)");
    char line[160];
    std::snprintf(line, sizeof line, "profile: %lld batches, %lld tokens in %.3f s -> ", static_cast<long long>(m_o.profileBatches),
                  static_cast<long long>(tokens), r.wallSeconds);
    std::ostringstream top;
    top << line << file << (r.note.empty() ? "" : " (" + r.note + ")") << '\n';
    for (std::size_t i = 0; i < std::min<std::size_t>(r.ops.size(), 12); ++i) {
        const ProfiledOp &op = r.ops[i];
        std::snprintf(line, sizeof line, "  %-4s %10.3f ms %7lld x  ", op.device.c_str(), op.totalMicroseconds / 1000.0, static_cast<long long>(op.calls));
        top << line << op.name << '\n';
    }
    m_err << top.str();
}

/// After step 7, the reporting rank of a tolerant dynamic run: the others wait for this before
/// they leave (RoundLoop::awaitReport(): a reporter lost before it gets here is replaced).
void EvalSession::announceResultWritten()
{
    if (!m_run || !m_run->tolerant() || m_o.schedule != dist::Schedule::Dynamic || !m_run->reporter())
        return;
    m_run->store().set(dist::kReportedKey, std::to_string(m_run->rank()));
    if (m_run->servesStore()) { // the store leaves with this process: the others first read that the result is written
        const auto until = std::chrono::steady_clock::now() + m_run->timeout();
        while (m_run->store().add(dist::kReportedKey + "/acks", 0) < m_run->epochSize() - 1 && std::chrono::steady_clock::now() < until
               && !m_run->lossPending())
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    m_run->finish();
}

int evalCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err)
{
    const Args a = parseArgs(argv);
    EvalOptions options = parseOptions(a);
    if (a.has("--exit-on-stdin-eof"))
        StdinEofWatcher().start();
    EvalSession session(a, std::move(options), out, err);
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
