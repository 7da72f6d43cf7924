// SPDX-License-Identifier: MIT
#include "eval_command.h"

#include "args.h"
#include "evaluator.h"
#include "exit_codes.h"
#include "language_model.h"
#include "model/mapped_file.h"
#include "runtime_info.h"
#include "eval_data.h"
#include "distributed/distributed_run.h"
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
#include <chrono>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace cppl::agent {

namespace {

// A failure with the exit code it maps to; keeps each phase's mapping next to the phase.
struct Failure
{
    int code;
    std::string message;
};

template<typename F>
auto phase(int code, F &&f) -> decltype(f())
{
    try {
        return f();
    } catch (const ConfigError &e) {
        throw Failure{code == kExitBadData || code == kExitBadModel ? code : kExitBadArguments, e.what()};
    } catch (const IoError &e) {
        throw Failure{code, e.what()};
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

} // namespace

int evalCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err)
{
    std::unique_ptr<dist::DistributedRun> run; // set when this is one rank of several
    std::unique_ptr<telemetry::Publisher> tel; // set with --telemetry
    // A rank that fails tells the others (through the watchdog) before it exits, so none waits.
    auto fail = [&](int code, const std::string &message) {
        if (run)
            run->reportFailure(code, message);
        if (tel) {
            tel->error(message, code);
            tel->close(code);
        }
        err << "clusterppl-agent: " << (run ? "rank " + std::to_string(run->rank()) + ": " : std::string()) << message << '\n';
        return code;
    };
    try {
        const Args a(argv,
                     {"--model", "--tokens", "--text", "--tokenizer", "--protocol", "--context", "--stride", "--batch", "--max-windows",
                      "--dtype", "--device", "--threads", "--blas-threads", "--json", "--bos-id", "--prefix-id", "--shard", "--gemm", "--dataset", "--jsonl-field", "--bos", "--on-invalid-utf8",
                      "--backend", "--topology", "--groups", "--sync-every-tokens", "--timeout", "--rank", "--world-size", "--local-rank",
                      "--local-world-size", "--master-addr", "--master-port", "--telemetry", "--telemetry-keys", "--run-id"},
                     {"--bos-first", "--allow-long-context", "--quiet", "--exit-on-stdin-eof", "--result-line", "--telemetry-keys-stdin"});
        // The launcher's key line is stdin's first line: read it before the EOF watcher reads stdin.
        std::optional<cppl::telemetry::Credentials> stdinKeys;
        if (a.has("--telemetry-keys-stdin"))
            stdinKeys = phase(kExitBadArguments, [&] {
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
        // 1. Arguments: everything that needs neither the model nor the data.
        PlanOptions opts;
        std::string modelPath;
        c10::ScalarType dtype = at::kFloat;
        c10::Device device(c10::DeviceType::CPU);
        std::int64_t batch = 0, maxWindows = 0, threads = 0, blasThreads = 0;
        int shardRank = 0, shardCount = 1;
        GemmBackend gemm = GemmBackend::Auto;
        RankIdentity identity;
        dist::DistributedOptions distOptions;
        std::int64_t syncEvery = kDefaultSyncEveryTokens;
        phase(kExitBadArguments, [&] {
            modelPath = a.require("--model", "a Hugging Face model directory or a TorchScript .pt file");
            const auto protocolText = a.get("--protocol").value_or("hf-sliding");
            const auto protocol = parseProtocol(protocolText);
            if (!protocol)
                throw ConfigError("--protocol \"" + protocolText + "\" is unknown (expected hf-sliding, llama.cpp or lm-eval-rolling)");
            opts.protocol = *protocol;
            opts.context = a.integer("--context", 512, 2, std::int64_t{1} << 24);
            opts.stride = a.integer("--stride", 0, 1, std::int64_t{1} << 24);
            opts.bosFirst = a.has("--bos-first");
            batch = a.integer("--batch", 8, 1, 1 << 16);
            maxWindows = a.integer("--max-windows", 0, 0, INT64_MAX);
            const auto hw = static_cast<std::int64_t>(std::max(1U, std::thread::hardware_concurrency()));
            threads = a.integer("--threads", hw, 1, 1024);
            blasThreads = a.integer("--blas-threads", threads, 1, 1024);
            dtype = parseDtype(a.get("--dtype").value_or("float32"));
            const std::string gemmText = a.get("--gemm").value_or("auto");
            if (gemmText == "onednn")
                gemm = GemmBackend::OneDnn;
            else if (gemmText == "blas")
                gemm = GemmBackend::Blas;
            else if (gemmText != "auto")
                throw ConfigError("--gemm \"" + gemmText + "\" is not one of auto, onednn, blas");
            device = parseDevice(a.get("--device").value_or("auto"));
            if (dtype == at::kHalf && device.is_cpu())
                throw ConfigError("--dtype float16 needs a GPU: LibTorch has no float16 matrix multiply on the CPU; use bfloat16 or float32");
            if (a.has("--tokens") == a.has("--text"))
                throw ConfigError("give the data as either --tokens FILE or --text FILE --tokenizer bytes|PATH (exactly one)");
            const std::string invalid = a.get("--on-invalid-utf8").value_or("error");
            if (invalid != "error" && invalid != "replace")
                throw ConfigError("--on-invalid-utf8 \"" + invalid + "\" is not one of error, replace");
            if (opts.bosFirst && opts.protocol != Protocol::LlamaCpp)
                throw ConfigError("--bos-first applies to the llama.cpp protocol only");
            if (const auto shard = a.get("--shard")) {
                // R/N: evaluate only rank R's shard of N (the same balanced shards a distributed run uses).
                const auto slash = shard->find('/');
                try {
                    if (slash == std::string::npos)
                        throw std::invalid_argument("no slash");
                    shardRank = std::stoi(shard->substr(0, slash));
                    shardCount = std::stoi(shard->substr(slash + 1));
                } catch (const std::exception &) {
                    throw ConfigError("--shard expects RANK/COUNT, e.g. 2/8, got \"" + *shard + "\"");
                }
                if (shardCount < 1 || shardRank < 0 || shardRank >= shardCount)
                    throw ConfigError("--shard " + *shard + ": need 0 <= RANK < COUNT");
            }
            PlanOptions check = opts;
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
            identity = resolveRankIdentity(processEnvironment(), flags);
            syncEvery = a.syncEveryTokens();
            distOptions.identity = identity;
            distOptions.groups = a.get("--groups").value_or("by-host");
            const std::string topology = a.get("--topology").value_or("hierarchical");
            if (topology != "hierarchical" && topology != "flat")
                throw ConfigError("--topology \"" + topology + "\" is not one of hierarchical, flat");
            distOptions.topology = topology == "flat" ? dist::Topology::Flat : dist::Topology::Hierarchical;
            distOptions.backend = a.get("--backend").value_or("auto");
            if (a.has("--telemetry-keys") && !a.has("--telemetry"))
                throw ConfigError("--telemetry-keys needs --telemetry tcp://HOST:PORT");
            if (distOptions.backend != "auto" && distOptions.backend != "gloo" && distOptions.backend != "nccl")
                throw ConfigError("--backend \"" + distOptions.backend + "\" is not one of auto, gloo, nccl");
            distOptions.timeout = std::chrono::milliseconds(a.integer("--timeout", 300, 1, 7 * 24 * 3600) * 1000);
            distOptions.cudaDevice = device.is_cuda();
            distOptions.storeServedElsewhere = std::getenv("TORCHELASTIC_USE_AGENT_STORE") != nullptr
                                               && std::string(std::getenv("TORCHELASTIC_USE_AGENT_STORE")) == "True";
            if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"))
                distOptions.glooInterface = ifname;
            if (identity.worldSize > 1 && a.has("--shard"))
                throw ConfigError("--shard is for evaluating one shard by hand; in a distributed run (world size "
                                  + std::to_string(identity.worldSize) + ") every rank takes its shard automatically");
            // One rank with an explicit --backend still forms a (one-member) communicator and runs the
            // rounds: scripts/gpu-check.sh exercises NCCL that way on a single GPU.
            if (identity.worldSize > 1 || a.has("--backend")) {
                shardRank = identity.rank;
                shardCount = identity.worldSize;
                (void)parseRankGroups(distOptions.groups, identity.worldSize,
                                      std::vector<std::string>(static_cast<std::size_t>(identity.worldSize), "h")); // syntax only, before connecting
            }
            return 0;
        });
        const bool distributed = identity.worldSize > 1 || a.has("--backend");
        // Rank 0 speaks for the run; other ranks report only problems.
        const bool quiet = a.has("--quiet") || (distributed && identity.rank != 0);
        if (distributed && device.is_cuda() && a.get("--device").value_or("auto") == "auto")
            device = c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(identity.localRank));
        if (distributed) {
            // Rendezvous before the expensive loads: a missing rank is reported in seconds, and a
            // rank that then fails to load tells the others instead of leaving them waiting.
            try {
                run = std::make_unique<dist::DistributedRun>(distOptions);
            } catch (const TimeoutError &e) {
                throw Failure{kExitTimeout, "rank " + std::to_string(identity.rank) + ": " + e.what()};
            } catch (const CollectiveError &e) {
                throw Failure{kExitCollective, "rank " + std::to_string(identity.rank) + ": " + e.what()};
            } catch (const ConfigError &e) {
                throw Failure{kExitBadArguments, "rank " + std::to_string(identity.rank) + ": " + e.what()};
            }
            if (!quiet)
                err << "distributed: " << identity.worldSize << " ranks (" << identity.source << "), backend " << run->backend() << ", "
                    << dist::topologyName(run->topology()) << ", " << run->groups().groups.size() << " node groups, store "
                    << run->storeAddress() << '\n';
        }
        setThreads(static_cast<int>(threads), static_cast<int>(blasThreads));
        if (const auto endpoint = a.get("--telemetry")) {
            // Telemetry never slows or stops the evaluation: the publisher only queues (docs/telemetry.md).
            telemetry::Identity who;
            const char *envRun = std::getenv("CLUSTERPPL_RUN_ID");
            who.run = a.get("--run-id").value_or(envRun && *envRun ? envRun : "run");
            who.rank = identity.rank;
            who.worldSize = identity.worldSize;
            who.localRank = identity.localRank;
            who.host = run ? run->hosts()[static_cast<std::size_t>(identity.rank)] : std::string();
            if (who.host.empty())
                who.host = localHostName();
            who.group = run ? run->groups().groupOf[static_cast<std::size_t>(identity.rank)] : 0;
            std::optional<cppl::telemetry::Credentials> keys = stdinKeys;
            try {
                if (const auto keyFile = a.get("--telemetry-keys"))
                    keys = cppl::telemetry::readCredentialsFile(*keyFile);
                tel = telemetry::Publisher::open(*endpoint, who, keys);
            } catch (const Error &e) {
                throw Failure{kExitBadArguments, std::string("--telemetry: ") + e.what()};
            }
            tel->phase(cppl::telemetry::Phase::Loading);
        }
        // The agent's own log lines also go to telemetry (every rank's, even when quiet here).
        auto logLine = [&](const std::string &line, cppl::telemetry::LogLevel level = cppl::telemetry::LogLevel::Info) {
            if (!quiet)
                err << line << '\n';
            if (tel)
                tel->log(level, line);
        };
        const RuntimeInfo runtime = runtimeInfo();
        logLine(describe(runtime));

        // 2. Data, then model (each failure maps to its own exit code).
        const EvalInput input = phase(kExitBadData, [&] {
            EvalInputOptions io;
            io.tokensPath = a.get("--tokens").value_or("");
            io.textPath = a.get("--text").value_or("");
            io.tokenizer = a.get("--tokenizer").value_or("");
            io.dataset = a.get("--dataset").value_or("plain");
            io.jsonlField = a.get("--jsonl-field").value_or("text");
            io.bos = a.get("--bos").value_or("auto");
            io.replaceInvalidUtf8 = a.get("--on-invalid-utf8").value_or("error") == "replace";
            return loadEvalInput(io);
        });
        for (const auto &note : input.notes)
            logLine("note: " + note, cppl::telemetry::LogLevel::Warning);
        const auto loadStart = std::chrono::steady_clock::now();
        const std::unique_ptr<LanguageModel> model = phase(kExitBadModel, [&] { return loadModel(modelPath, {dtype, device, gemm}); });
        const ModelInfo &mi = model->info();
        const double loadSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loadStart).count();
        // 3. The plan.
        std::vector<std::uint32_t> flat;
        WindowPlan plan = phase(kExitBadArguments, [&] {
            if (mi.maxPositions > 0 && opts.context > mi.maxPositions && !a.has("--allow-long-context"))
                throw ConfigError("--context " + std::to_string(opts.context) + " exceeds the model's max_position_embeddings "
                                  + std::to_string(mi.maxPositions) + "; use a shorter context, or --allow-long-context if you mean it");
            if (opts.bosFirst)
                opts.bosToken = a.integer("--bos-id", mi.bosTokenId, 0, 0xffffffffLL);
            if (opts.bosFirst && opts.bosToken < 0)
                throw ConfigError("--bos-first: the model declares no bos_token_id; pass --bos-id ID");
            std::vector<std::int64_t> lengths;
            for (const auto &d : input.documents)
                lengths.push_back(static_cast<std::int64_t>(d.size()));
            if (opts.protocol == Protocol::LmEvalRolling) {
                // lm-eval's prefix token: --prefix-id, else the tokenizer's BOS, else the model's.
                const std::int64_t fallback = input.bosId >= 0 ? input.bosId : mi.bosTokenId;
                const std::int64_t prefix = a.integer("--prefix-id", fallback, 0, 0xffffffffLL);
                if (prefix < 0)
                    throw ConfigError("lm-eval-rolling needs a prefix token: neither the tokenizer nor the model names a BOS; pass --prefix-id ID");
                if (mi.vocab > 0 && prefix >= mi.vocab)
                    throw ConfigError("--prefix-id " + std::to_string(prefix) + " is outside the vocabulary of " + std::to_string(mi.vocab));
                flat.reserve(static_cast<std::size_t>(input.totalTokens()) + input.documents.size());
                for (const auto &d : input.documents) {
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
        });
        const std::span<const std::uint32_t> data(flat);
        if (maxWindows > 0 && maxWindows < static_cast<std::int64_t>(plan.windows.size())) {
            plan.windows.resize(static_cast<std::size_t>(maxWindows));
            plan.scoredTokens = 0;
            for (const Window &w : plan.windows)
                plan.scoredTokens += w.scored();
        }
        const Shard myShard = shardPlanByBatch(plan, shardCount, batch)[static_cast<std::size_t>(shardRank)];
        phase(kExitBadModel, [&] {
            model->prepare(batch, plan.maxInput);
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
        {
            std::ostringstream line;
            line << "model: " << mi.arch << " (" << mi.params << " parameters, " << dtypeName(dtype) << ", " << device.str() << ", GEMM "
                 << mi.gemm << ") loaded in " << clock(loadSeconds) << "; " << plan.windows.size() << " windows, " << plan.scoredTokens
                 << " tokens to score, batch " << batch;
            if (shardCount > 1)
                line << "; " << (distributed ? "rank " : "shard ") << shardRank << "/" << shardCount << ": windows " << myShard.firstWindow
                     << ".." << myShard.endWindow - 1 << ", " << myShard.scoredTokens << " tokens";
            logLine(line.str());
        }

        // 4. Evaluate, in the rounds every rank plans alike (the same collectives on every rank,
        //    however uneven the shards).
        NllStats stats;  // this rank's own tokens, cumulative
        NllStats global; // after each round: every rank's, exactly
        if (shardRank == 0) { // document totals (text input): counted once, by rank/shard 0
            stats.bytes = input.bytes;
            stats.words = input.words;
        }
        Evaluator evaluator(*model, data, plan, batch);
        const std::vector<Shard> shards = shardPlanByBatch(plan, shardCount, batch);
        const RoundPlan rounds(plan, shards, distributed ? syncEvery : kSyncAtEnd, batch);
        auto lastPrint = std::chrono::steady_clock::now() - std::chrono::seconds(10);
        const auto evalStart = std::chrono::steady_clock::now();
        double computeSeconds = 0;
        const Shard &myWork = shards[static_cast<std::size_t>(shardRank)];
        auto publishProgress = [&](bool final, double inRound) {
            if (!tel)
                return;
            cppl::telemetry::Progress p;
            p.tokensScoredTotal = stats.tokens;
            const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
            p.tokensPerSecond = wall > 0 ? static_cast<double>(stats.tokens) / wall : 0;
            p.windowsDone = stats.windows;
            p.windowsTotal = myWork.windows();
            p.computeSecondsTotal = computeSeconds + inRound;
            if (run) {
                p.commWaitSecondsTotal = run->comm().waitSeconds;
                p.commTransferSecondsTotal = run->comm().transferSeconds;
            }
            p.nll = stats.nll;
            p.nllSquared = stats.nllSquared;
            tel->progress(p, final);
        };
        if (tel)
            tel->phase(cppl::telemetry::Phase::Evaluating);
        for (int r = 0; r < rounds.rounds(); ++r) {
            const Shard part = rounds.roundOf(shardRank, r);
            const auto c0 = std::chrono::steady_clock::now();
            evaluator.run(part.firstWindow, part.endWindow, stats, [&](const EvalProgress &p, const NllStats &s) {
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
            computeSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
            if (!distributed) {
                global = stats;
                continue;
            }
            NllStats::Words words = stats.toWords();
            const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
            if (tel)
                tel->phase(cppl::telemetry::Phase::Syncing);
            run->allReduce(words);
            global = NllStats::fromReducedWords(words);
            if (tel) {
                tel->sync({r + 1, rounds.rounds(), run->comm().waitSeconds - wait0, run->comm().transferSeconds - transfer0});
                tel->phase(cppl::telemetry::Phase::Evaluating);
            }
            const auto now = std::chrono::steady_clock::now();
            if (!quiet && (now - lastPrint >= std::chrono::milliseconds(500) || r + 1 == rounds.rounds())) {
                lastPrint = now;
                const double elapsed = std::chrono::duration<double>(now - evalStart).count();
                const double rate = elapsed > 0 ? static_cast<double>(global.tokens) / elapsed : 0;
                const double eta = rate > 0 ? static_cast<double>(plan.scoredTokens - global.tokens) / rate : NAN;
                const double comm = run->comm().waitSeconds + run->comm().transferSeconds;
                char line[256];
                std::snprintf(line, sizeof line, "[round %d/%d] ppl %.4f  %lld/%lld tokens  %.0f tok/s (all ranks)  comm %.2f%%  elapsed %s  ETA %s\n",
                              r + 1, rounds.rounds(), computePerplexity(global).ppl, static_cast<long long>(global.tokens),
                              static_cast<long long>(plan.scoredTokens), rate, elapsed > 0 ? 100.0 * comm / elapsed : 0.0,
                              clock(elapsed).c_str(), clock(eta).c_str());
                err << line << std::flush;
                if (tel)
                    tel->log(cppl::telemetry::LogLevel::Info, std::string_view(line).substr(0, std::strlen(line) - 1));
            }
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
        std::vector<dist::RankReport> reports;
        if (distributed) {
            dist::RankReport mine;
            mine.tokens = stats.tokens;
            mine.windows = stats.windows;
            mine.rounds = rounds.rounds();
            mine.payloadBytes = run->comm().payloadBytes;
            mine.computeSeconds = computeSeconds;
            mine.waitSeconds = run->comm().waitSeconds;
            mine.transferSeconds = run->comm().transferSeconds;
            mine.wallSeconds = seconds;
            reports = run->gather(mine);
            run->finish();
        }
        const Shard shard = shards[static_cast<std::size_t>(shardRank)];
        publishProgress(true, 0); // this rank's complete totals, before its result
        stats = global;
        const Perplexity ppl = computePerplexity(stats);
        if (stats.nll.rejected() > 0)
            throw Failure{kExitRuntime, std::to_string(stats.nll.rejected())
                                            + " token log-probabilities were not finite (NaN/inf): the model overflowed in "
                                            + dtypeName(dtype) + "; try --dtype float32"};
        if (distributed && identity.rank != 0) {
            if (tel) {
                tel->result();
                tel->close(kExitOk);
            }
            return kExitOk; // rank 0 reports for the run
        }
        out << formatFinalEstimate(ppl) << '\n' << std::flush;
        const bool resultLine = a.has("--result-line");

        // 5. The result contract (docs/result-json.md).
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
            j["max_windows"] = maxWindows;
            j["dtype"] = dtypeName(dtype);
            j["device"] = device.str();
            j["threads"] = runtime.intraOpThreads;
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
            j["rounds"] = rounds.rounds();
            if (distributed) {
                j["groups"] = run->groups().groups;
                j["rendezvous"] = {{"source", identity.source}, {"store", run->storeAddress()}};
                nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
                for (const auto &rep : reports)
                    ranks.push_back({{"rank", rep.rank},
                                     {"host", rep.host},
                                     {"group", rep.group},
                                     {"tokens", rep.tokens},
                                     {"windows", rep.windows},
                                     {"rounds", rep.rounds},
                                     {"compute_seconds", rep.computeSeconds},
                                     {"wait_seconds", rep.waitSeconds},
                                     {"transfer_seconds", rep.transferSeconds},
                                     {"wall_seconds", rep.wallSeconds},
                                     {"comm_share", rep.commShare()},
                                     {"clock_offset_seconds", rep.clockOffsetSeconds},
                                     {"clock_uncertainty_seconds", rep.clockUncertaintySeconds},
                                     {"payload_bytes", rep.payloadBytes}});
                j["ranks"] = ranks;
            }
            j["version"] = CLUSTERPPL_VERSION_STRING;
            if (tel)
                tel->result(j.dump());
            if (resultLine) // for launchers that collect rank 0's stdout (SSH): one line, no file to fetch
                out << "CLUSTERPPL_RESULT " << j.dump() << '\n' << std::flush;
            if (jsonPath) {
                std::ofstream f(*jsonPath);
                if (!(f << j.dump(2) << '\n'))
                    throw Failure{kExitRuntime, *jsonPath + ": cannot write the result JSON"};
            }
        }
        if (tel)
            tel->close(kExitOk);
        return kExitOk;
    } catch (const Failure &f) {
        return fail(f.code, f.message);
    } catch (const ConfigError &e) {
        return fail(kExitBadArguments, e.what());
    } catch (const c10::Error &e) {
        return fail(kExitRuntime, std::string("LibTorch failed: ") + e.what_without_backtrace());
    } catch (const TimeoutError &e) {
        return fail(kExitTimeout, e.what());
    } catch (const CollectiveError &e) {
        return fail(kExitCollective, e.what());
    } catch (const Error &e) {
        return fail(kExitRuntime, e.what());
    } catch (const std::exception &e) { // e.g. std::bad_alloc: report and exit, never carry on
        return fail(kExitRuntime, std::string("unexpected failure: ") + e.what());
    }
}

} // namespace cppl::agent
