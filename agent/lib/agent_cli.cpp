// SPDX-License-Identifier: MIT
#include "agent_cli.h"

#include "args.h"
#include "distributed/standalone.h"
#include "distributed/rendezvous_command.h"
#include "result_json.h"
#include "exit_codes.h"
#include "fd_limit.h"
#include "gpu/memory_plan_command.h"
#include "process_exit.h"
#include "telemetry/relay.h"
#include "token_file.h"
#include "tokenizer/tokenize_command.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/statistics.h"
#include "cppl/sharding.h"
#include "cppl/window_plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <optional>
#include <ostream>
#include <sstream>

namespace cppl::agent {

namespace {

constexpr const char *kUsageHead = R"(clusterppl-agent — the per-rank evaluator of ClusterPPL

Usage:
)";

// One entry per command: `clusterppl-agent CMD --help` prints its own, `--help` all of them.
struct CommandUsage
{
    const char *name;
    const char *text;
};
constexpr CommandUsage kCommandUsage[] = {
    {"eval", R"(  clusterppl-agent eval --model PATH (--tokens FILE | --text FILE --tokenizer bytes|PATH) [options]
      Evaluate one rank: perplexity of a Hugging Face directory (llama, mistral, qwen2, qwen3, gemma2,
      gemma3_text, phi3, gpt2, mixtral, qwen2_moe; safetensors F32/F16/BF16, memory-mapped, GPTQ
      and AWQ as stored) or a TorchScript .pt module.
      --protocol, --context, --stride, --bos-first, --max-windows   as for plan (plan --help)
      --tokenizer bytes|PATH UTF-8 bytes as ids, or a tokenizer.json, SentencePiece .model
                             or model directory
      --dataset plain|wikitext|jsonl|dir   documents of --text (default plain: one stream)
      --jsonl-field F        JSONL text field (default text)
      --bos auto|always|never            BOS before the stream (recorded in the result)
      --on-invalid-utf8 error|replace    (default error, naming the byte offset)
      --batch B              windows per forward pass (default 8; on a GPU sized from free
                             memory, agreed by all ranks; the result's batch_from says how)
      --dtype float32|bfloat16|float16   (default bfloat16 on a GPU, else float32; log-softmax
                                         always in float32)
      --device cpu|cuda[:i]|auto         (default auto: cuda when available; cuda takes
                                         cuda:LOCAL_RANK, or cuda:0 when a rank sees one GPU)
      --devices I,J,...      this host's GPUs for its ranks: local rank L takes the L-th (the
                             profile's "devices"; with --device cuda or auto, and for NCCL)
      --tf32 on|off          TensorFloat-32 matrix products for float32 on a GPU (default on)
      --profile PATH         before the clock, --profile-batches batches (default 3) once more
                             under LibTorch's profiler: time by operator and GPU kernel to PATH
                             (JSON), a Chrome trace to PATH.trace.json where LibTorch has Kineto;
                             "{rank}" in PATH is replaced by the rank, else rank 0 alone writes
      --weight-upload auto|pinned|pageable  how the weights reach a GPU: pinned host buffers
                             with copies on a stream of their own, each chunk's mapped pages
                             released once read (auto = pinned), or Tensor::to from the mapped
                             file; the same bits either way (result: model.weight_upload)
      --threads N            threads (default: the allowed CPUs / local ranks, pinned)
      --blas-threads N       OpenBLAS threads (default: --threads)
      --gemm auto|native|onednn|blas  float32 CPU kernels: the agent's own (packed weights,
                             AVX-512/AVX2 by cpuid, bits independent of --threads), oneDNN, or the
                             BLAS (default auto: native for float32 on the CPU, and for bfloat16
                             on a CPU with AVX512_BF16, else LibTorch's)
      --quantize none|int8|int4|int4-asym  round-to-nearest weights of every linear layer at load
                             (int4 = int4-sym; embeddings and norms stay; docs/models.md)
      --quant-group G        input features per float16 scale (default 32; a multiple of 32)
      --quantize-head        quantize the vocabulary head too
      --reference-model DIR  also evaluate DIR on the same windows and compare token by token:
                             KL divergence, top-token agreement, PPL ratio (result "reference")
      --reference-dtype D    the reference's dtype (default: as --dtype's default)
      --reference-quantize Q the reference's quantization (default none; --quant-group applies)
      --bos-id ID            llama.cpp --bos-first token (default: config bos_token_id)
      --prefix-id ID         lm-eval-rolling prefix token (default: config bos_token_id)
      --allow-long-context   allow --context beyond max_position_embeddings
      --json OUT             write the result (docs/result-json.md)
      --shard R/N            evaluate only shard R of N (balanced by scored tokens)
      --quiet                no progress on stderr (a "recovered:" line, naming a lost rank
                             and the cause, is still printed)
      --result-line          also print the result JSON on stdout as one "CLUSTERPPL_RESULT {...}" line
      --exit-on-stdin-eof    exit when stdin closes (launchers: no rank outlives its SSH channel)
      --telemetry tcp://HOST:PORT   stream progress, syncs, logs and the result to a collector
                             (never blocks; CURVE required off loopback; docs/telemetry.md)
      --telemetry-keys FILE|-       CURVE credentials (a file you own, mode 0600/0400, or stdin to its end)
      --telemetry-keys-stdin        the run's keys as stdin's first line (what launchers write; 10 s limit)
      --run-id ID            run id in telemetry (default: $CLUSTERPPL_RUN_ID); it names directories:
                             1..128 of A-Z a-z 0-9 . _ -, not starting with a dot
    Distributed (one process per rank; identity from torchrun's RANK/WORLD_SIZE/LOCAL_RANK/
    MASTER_ADDR/MASTER_PORT, Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_NODELIST or Open MPI's
    OMPI_COMM_WORLD_*; these flags override them). Rank 0 prints and writes the result.
      --rank R --world-size N --local-rank L --local-world-size M --master-addr A --master-port P
      --backend auto|gloo|nccl           (default auto: nccl when the model runs on a GPU)
      --topology hierarchical|flat       reduce in groups, all-reduce leaders, broadcast (default),
                                         or one all-reduce; both give the same bits
      --groups by-host|size:K|LIST       node groups, e.g. "0-3;4-7" (default by-host)
      --sync-every-tokens T|end          sync about every T scored tokens per rank; 0 = every
                                         batch (default 65536; docs/communication.md)
      --schedule dynamic|static          global batches claimed as ranks go (default dynamic: no
                                         waiting for a slow rank), or shards fixed before the run;
                                         same bits. One rank without --backend, or --shard:
                                         static (no store to claim from)
      --overlap-sync on|off              on (default): a round's aggregation runs on a thread of its
                                         own behind the next round's compute; the live global PPL
                                         lags one round; same bits
      --on-rank-loss continue|fail       a rank dies or stalls past --timeout: regroup without it
                                         and finish with the same bits (continue, the default with
                                         --schedule dynamic; rank 0 may be lost too when the store
                                         is served outside the ranks), or end the run (fail: fail
                                         fast; the default and the only choice with --schedule static)
      --tensor-parallel N                N consecutive ranks of one host split the model (heads, MLP
                                         and experts' columns, vocabulary; default 1); world size / N
                                         groups evaluate batches in parallel, the same bits for any
                                         number of them; a lost rank takes its group out. The CPU
                                         over Gloo (float32; bfloat16 with --gemm blas or auto;
                                         --quantize with each row-parallel slice on --quant-group
                                         boundaries), GPUs over NCCL (each group a communicator)
                                         (docs/models.md, "Tensor parallelism")
      --checkpoint-lines                 committed rounds on stdout for the launcher: every rank's
                                         batches ("CLUSTERPPL_LEDGER {...}") before a round's
                                         collective, rank 0's exact global words after it
                                         ("CLUSTERPPL_CHECKPOINT {...}"); after a lost rank the
                                         reporting rank's, from the round its "CLUSTERPPL_REGROUP
                                         {...}" line names on, and a "CLUSTERPPL_RANK_LOST {...}"
                                         line per lost rank; clusterppl-cli writes them to the run
                                         directory (docs/communication.md, "Resuming a run"; the
                                         lines: docs/agent-lines.md)
      --resume-state JSON                continue from a committed round (what clusterppl-cli passes
                                         when it resumes a run): rank 0 adds its exact words, nobody
                                         evaluates its ledger's batches; refused when the model,
                                         the token stream or the settings changed (the schedule:
                                         the state's when --schedule is not given)
      --timeout S                        rendezvous, collectives and peer heartbeats (default 300)
      --load-timeout S                   the load phase (data and model, e.g. from NFS): how long
                                         the first collective waits for every rank's load instead
                                         of --timeout (default 1800)
)"},
    {"run", R"(  clusterppl-agent run --standalone --nproc-per-node N [--groups SPEC] [--master-port P] -- EVAL ARGS
      --nproc-per-node N     local ranks, 1..1024
      --master-port P        the rendezvous store's port, 1..65535 (default: a free one)
      Start N local ranks of eval with torchrun's environment; the launcher serves the rendezvous
      store, prefixes other ranks' messages with [rank R], forwards SIGINT/SIGTERM, stops all ranks
      when one fails and returns rank 0's exit code. With eval's --on-rank-loss continue (the
      default with the dynamic schedule) no failing rank stops the others; once a rank is done the
      rest are stopped after 3 s, and the lowest rank that finished gives the exit code.
)"},
    {"store", R"(  clusterppl-agent store [--port P] [--bind ADDR]
      Serve a run's rendezvous store (c10d's TCPStore) in a process of its own, so that it
      outlives every rank, rank 0 included; ranks use it with TORCHELASTIC_USE_AGENT_STORE=True
      and MASTER_ADDR/MASTER_PORT pointing here. clusterppl-cli starts one for runs that go on
      after a lost rank (on_rank_loss continue, the default with the dynamic schedule). Prints
      CLUSTERPPL_STORE {"port":P,"addr":"ADDR"} on stdout once listening;
      exits 0 when stdin reaches EOF (an SSH session's end stops it) or on SIGTERM/SIGINT/SIGHUP.
      --port P               1..65535, or 0 for a free one (default 0)
      --bind ADDR            serve on this address of the host only, e.g. 127.0.0.1 for a
                             store that no other host may reach (default 0.0.0.0: every
                             interface)
)"},
    {"comm-check", R"(  clusterppl-agent comm-check [--backend gloo|nccl] [--topology hierarchical|flat] [--words N,...]
      One rank of a collective self-test (start it like eval, e.g. run --standalone
      --nproc-per-node 2 -- comm-check --backend nccl): forms eval's communicators, all-reduces
      words of about +-2^62/WORLD_SIZE with distinct low bits, and checks every word against its
      exact sum (computed locally). Exit 0 only when all are exact on every rank.
      --words N,...          word counts, one all-reduce each (default 1,7,65536,1048577)
      --tensor-parallel N    check eval's tensor-parallel groups of N instead: float32 and
                             float64 sums (in member order) and maxima of N elements each, and
                             over nccl the all-gather of GPU memory, every bit checked
      --groups, --timeout (default 120), --rank ... --master-port   as for eval
)"},
    {"merge", R"(  clusterppl-agent merge RESULT.json... [--json OUT]
      Merge the results of `eval --shard R/N` runs exactly (bit-identical to one rank).
)"},
    {"plan", R"(  clusterppl-agent plan (--tokens FILE | --text FILE --tokenizer bytes | --model DIR) [options]
      Show how a protocol windows the data and how the ranks share the windows: the global
      batches they claim as they go (dynamic), or fixed shards and sync rounds (static). With
      --model, the memory of one rank of a tensor-parallel group (docs/planning.md).
      --schedule dynamic|static   as for eval (default dynamic); dynamic also shows the static
                             split, for comparison
      --protocol hf-sliding|llama.cpp|lm-eval-rolling   (default hf-sliding)
      --context C            tokens per model call (default 512)
      --stride S             hf-sliding window step, 1..C (default C)
      --bos-first            llama.cpp: overwrite each chunk's first token with BOS (--bos-id)
      --ranks R              world size to shard for (default 1)
      --batch B              windows per forward pass (default 8)
      --sync-every-tokens T  sync about every T scored tokens per rank; 0 = every batch,
                             "end" = once (default 65536)
      --max-windows K        evaluate only the first K windows
      --json OUT             also write the plan as JSON
    The memory plan (from DIR/config.json alone; no weights are read):
      --model DIR            a Hugging Face model directory (every family eval takes; mixtral
                             and qwen2_moe: every expert counted)
      --tensor-parallel N    ranks per tensor-parallel group to show (default 1)
      --gpu-memory GiB       free memory of one GPU (default: none, figures without a verdict)
      --dtype float32|bfloat16|float16   the evaluation dtype (default bfloat16)
      --quantize none|int8|int4   the linear layers' weights (default none)
      --gpus-per-node G      GPUs of one node: N divides it (default 8); the candidates shown
      --batch, --context, --ranks   the pass's windows and tokens; the world size (default:
                             one node) for the data-parallel width
)"},
    {"tokenize", R"(  clusterppl-agent tokenize --tokenizer PATH --text FILE --out FILE.u32 [--bos auto|always|never]
      Tokenize a UTF-8 text file with a Hugging Face tokenizer.json, a SentencePiece .model, or a
      model directory holding one;
      writes little-endian uint32 ids and prints ids/s and MB/s (docs/tokenizers.md).
      --bos auto             BOS as the tokenizer's post_processor / tokenizer_config.json say (default)
      --bos always|never     force it on or off
      --quiet                print nothing but notes and errors
)"},
    {"preflight", R"(  clusterppl-agent preflight [--json] [--model P] [--data P] [--tokenizer P] [--master-addr A
                   --master-port P] [--backend nccl --slots N]
      What a launcher checks before starting ranks on this host: agent and LibTorch versions,
      CUDA devices, NCCL, free memory, hostname, readable paths, the master's reachability.
      Exit 0 when nothing is wrong, 1 with the problems listed.
)"},
    {"relay", R"(  clusterppl-agent relay --forward tcp://127.0.0.1:PORT --keys-file FILE --agent-keys-out FILE
                   --endpoint-out FILE [--bind tcp://0.0.0.0:0] [--advertise-host HOST]
      On a Slurm login node: receives the agents' telemetry (ZeroMQ PULL, CURVE with keys of its
      own, only the client key written to --agent-keys-out admitted) and forwards it to the
      collector at --forward with the run's keys from --keys-file (mode 0600, removed once read).
      Writes the endpoint agents send to (tcp://HOST:PORT) to --endpoint-out. Runs until SIGTERM.
)"},
};

constexpr const char *kUsageTail = R"(  clusterppl-agent --version
  clusterppl-agent --help
  clusterppl-agent COMMAND --help    one command's usage

Exit codes: docs/exit-codes.md.
)";

std::string usage()
{
    std::string text = kUsageHead;
    for (const auto &c : kCommandUsage)
        text += c.text;
    return text + kUsageTail;
}

/// The usage of one command, or nullptr when there is no such command.
const char *commandUsage(const std::string &command)
{
    for (const auto &c : kCommandUsage)
        if (command == c.name)
            return c.text;
    return nullptr;
}

/// `CMD --help` / `CMD -h` anywhere among the command's own flags (for `run`, before "--").
bool asksForHelp(const std::vector<std::string> &args)
{
    for (const auto &a : args) {
        if (a == "--")
            return false;
        if (a == "--help" || a == "-h")
            return true;
    }
    return false;
}

/// What `plan` is asked: the plan's options, the ranks and the rounds.
struct PlanRequest
{
    PlanOptions opts;
    int ranks = 1;
    std::int64_t batch = 8;
    std::int64_t sync = kDefaultSyncEveryTokens;
    std::int64_t maxWindows = 0;
    std::string schedule; ///< "dynamic" or "static"
    [[nodiscard]] bool dynamic() const { return schedule == "dynamic"; }
};

/// The global batches every schedule evaluates (the dynamic one's unit of work): batch b is
/// windows [b*batch, (b+1)*batch), the rows of a one-rank run.
struct GlobalBatches
{
    std::int64_t count = 0;
    std::int64_t minTokens = 0; ///< scored tokens of the lightest batch ...
    std::int64_t maxTokens = 0; ///< ... and of the heaviest
    std::int64_t lastWindows = 0;
};

/// Every flag checked before the data is touched: a bad flag is a bad argument.
PlanRequest parsePlanRequest(const Args &a)
{
    const auto protocolText = a.get("--protocol").value_or("hf-sliding");
    const auto protocol = parseProtocol(protocolText);
    if (!protocol)
        throw ConfigError("--protocol \"" + protocolText + "\" is unknown (expected hf-sliding, llama.cpp or lm-eval-rolling)");
    PlanRequest r;
    r.opts.protocol = *protocol;
    r.opts.context = a.integer("--context", 512, 2, std::int64_t{1} << 24);
    r.opts.stride = a.integer("--stride", 0, 1, std::int64_t{1} << 24);
    r.opts.bosFirst = a.has("--bos-first");
    r.opts.bosToken = a.integer("--bos-id", r.opts.bosFirst ? 0 : -1, -1, 0xffffffffLL);
    r.ranks = static_cast<int>(a.integer("--ranks", 1, 1, 1 << 20));
    r.batch = a.integer("--batch", 8, 1, 1 << 16);
    r.sync = a.syncEveryTokens();
    r.maxWindows = a.integer("--max-windows", 0, 0, INT64_MAX);
    r.schedule = a.get("--schedule").value_or("dynamic");
    if (r.schedule != "static" && r.schedule != "dynamic")
        throw ConfigError("--schedule \"" + r.schedule + "\" is not one of static, dynamic");
    validatePlanOptions(r.opts);
    if (a.has("--tokens") && a.has("--text"))
        throw ConfigError("give the data as either --tokens FILE or --text FILE (exactly one)");
    if (!a.has("--tokens") && !a.has("--text") && !a.has("--model"))
        throw ConfigError("give the data as --tokens FILE or --text FILE, or --model DIR for the memory plan");
    return r;
}

TokenStream readPlanData(const Args &a)
{
    if (a.has("--tokens"))
        return readTokenFile(*a.get("--tokens"));
    const auto tokenizer = a.get("--tokenizer").value_or("");
    if (tokenizer != "bytes")
        throw ConfigError("--text needs --tokenizer bytes (the only tokenizer in this release; got \"" + tokenizer + "\")");
    return readTextAsBytes(*a.get("--text"));
}

/// The protocol's windows over @p n tokens (lm-eval-rolling: the file as one document), the
/// first --max-windows of them.
WindowPlan planWindowsOf(const PlanRequest &r, std::int64_t n)
{
    WindowPlan plan = r.opts.protocol == Protocol::LmEvalRolling ? planDocuments(r.opts, std::vector<std::int64_t>{n}) : planStream(r.opts, n);
    if (r.maxWindows > 0 && r.maxWindows < static_cast<std::int64_t>(plan.windows.size())) {
        plan.windows.resize(static_cast<std::size_t>(r.maxWindows));
        plan.scoredTokens = 0;
        for (const Window &w : plan.windows)
            plan.scoredTokens += w.scored();
    }
    return plan;
}

GlobalBatches globalBatches(const WindowPlan &plan, std::int64_t batch)
{
    const auto nWindows = static_cast<std::int64_t>(plan.windows.size());
    GlobalBatches g;
    g.count = (nWindows + batch - 1) / batch;
    for (std::int64_t b = 0; b < g.count; ++b) {
        std::int64_t t = 0;
        for (std::int64_t w = b * batch; w < std::min(nWindows, (b + 1) * batch); ++w)
            t += plan.windows[static_cast<std::size_t>(w)].scored();
        g.minTokens = b == 0 ? t : std::min(g.minTokens, t);
        g.maxTokens = std::max(g.maxTokens, t);
    }
    g.lastWindows = g.count > 0 ? nWindows - (g.count - 1) * batch : 0;
    return g;
}

void printPlanHeader(std::ostream &out, const PlanRequest &r, const TokenStream &tokens, const WindowPlan &plan)
{
    const auto n = static_cast<std::int64_t>(tokens.ids.size());
    out << "ClusterPPL plan: " << protocolName(r.opts.protocol) << ", context " << r.opts.context;
    if (r.opts.protocol == Protocol::HfSliding)
        out << ", stride " << (r.opts.stride == 0 ? r.opts.context : r.opts.stride);
    out << "\n  data            " << tokens.path << " (" << tokens.format << ", " << n << " tokens)\n"
        << "  windows         " << plan.windows.size() << " (widest input " << plan.maxInput << " tokens)\n"
        << "  scored tokens   " << plan.scoredTokens << " (" << std::fixed << std::setprecision(1)
        << 100.0 * static_cast<double>(plan.scoredTokens) / static_cast<double>(n) << "% of the data; the rest is context only"
        << (r.opts.protocol == Protocol::LlamaCpp ? " or the dropped tail" : "") << ")\n";
}

std::string syncText(const PlanRequest &r)
{
    std::ostringstream o;
    if (r.sync == 0)
        o << "after every batch of " << r.batch;
    else if (r.sync == kSyncAtEnd)
        o << "once, at the end";
    else
        o << "about every " << r.sync << " scored tokens per rank, batch " << r.batch;
    return o.str();
}

/// Dynamic: the global batches the ranks claim from one counter as they go (batch_schedule.h),
/// and the static split for comparison. Static: the shards and their rounds.
void printSchedule(std::ostream &out, const PlanRequest &r, const WindowPlan &plan, const GlobalBatches &g, const RoundPlan &rounds)
{
    if (!r.dynamic()) {
        out << "  ranks           " << r.ranks << " (contiguous shards balanced by scored tokens; every window exactly once)\n"
            << "  sync rounds     " << rounds.rounds() << " (" << syncText(r) << "); every rank enters every round\n\n";
        return;
    }
    out << "  schedule        dynamic (the default): the ranks claim global batches from one counter as they go,\n"
        << "                  a slower rank takes fewer; every batch exactly once, on any number of ranks\n"
        << "  global batches  " << g.count << " of " << r.batch << " windows";
    if (g.count > 0 && g.lastWindows != r.batch)
        out << " (the last of " << g.lastWindows << ")";
    out << ", " << g.minTokens << ".." << g.maxTokens << " scored tokens each, " << (g.count > 0 ? plan.scoredTokens / g.count : 0) << " on average\n"
        << "  ranks           " << r.ranks << " (about " << (g.count + r.ranks - 1) / r.ranks << " batches each at equal speed)\n"
        << "  sync rounds     sized by the ranks' speeds: " << syncText(r) << "\n\n"
        << "  For comparison, the static split (--schedule static): " << rounds.rounds()
        << (rounds.rounds() == 1 ? " sync round" : " sync rounds") << ", every rank in every round\n";
}

void printShards(std::ostream &out, const WindowPlan &plan, const std::vector<Shard> &shards)
{
    out << "   rank   windows      first..last     scored   share\n";
    for (std::size_t r = 0; r < shards.size(); ++r) {
        const Shard &s = shards[r];
        char line[160];
        const double share = plan.scoredTokens > 0 ? 100.0 * static_cast<double>(s.scoredTokens) / static_cast<double>(plan.scoredTokens) : 0.0;
        if (s.windows() > 0)
            std::snprintf(line, sizeof line, " %6d %9lld %8lld..%-8lld %9lld  %5.1f%%\n", static_cast<int>(r), static_cast<long long>(s.windows()),
                          static_cast<long long>(s.firstWindow), static_cast<long long>(s.endWindow - 1), static_cast<long long>(s.scoredTokens),
                          share);
        else
            std::snprintf(line, sizeof line, " %6d %9d %19s %9d  %5.1f%%  (idle: more ranks than windows)\n", static_cast<int>(r), 0, "-", 0, 0.0);
        out << line;
    }
}

nlohmann::json windowPlanJson(const PlanRequest &r, const TokenStream &tokens, const WindowPlan &plan, const std::vector<Shard> &shards,
                              const RoundPlan &rounds, const GlobalBatches &g)
{
    nlohmann::json j;
    j["protocol"] = std::string(protocolName(r.opts.protocol));
    j["context"] = r.opts.context;
    j["stride"] = r.opts.stride == 0 ? r.opts.context : r.opts.stride;
    j["data"] = {{"path", tokens.path}, {"format", tokens.format}, {"tokens", static_cast<std::int64_t>(tokens.ids.size())}};
    j["windows"] = plan.windows.size();
    j["tokens_scored"] = plan.scoredTokens;
    j["max_input"] = plan.maxInput;
    j["world_size"] = r.ranks;
    j["rounds"] = rounds.rounds();
    j["sync_every_tokens"] = r.sync == kSyncAtEnd ? nlohmann::json("end") : nlohmann::json(r.sync);
    j["batch"] = r.batch;
    j["schedule"] = r.schedule;
    // The batches every schedule evaluates (the dynamic one's unit of work); "shards" and
    // "rounds" are the static split (with dynamic: for comparison; its rounds follow speed).
    j["global_batches"] = {{"count", g.count},
                           {"windows_per_batch", r.batch},
                           {"last_batch_windows", g.lastWindows},
                           {"tokens_scored_min", g.minTokens},
                           {"tokens_scored_max", g.maxTokens}};
    j["shards_are_static_split"] = true;
    auto &js = j["shards"] = nlohmann::json::array();
    for (int rank = 0; rank < r.ranks; ++rank) {
        const Shard &s = shards[static_cast<std::size_t>(rank)];
        nlohmann::json roundList = nlohmann::json::array();
        for (int k = 0; k < rounds.rounds(); ++k) {
            const Shard part = rounds.roundOf(rank, k);
            roundList.push_back({part.firstWindow, part.endWindow, part.scoredTokens});
        }
        js.push_back({{"rank", rank}, {"first_window", s.firstWindow}, {"end_window", s.endWindow}, {"tokens_scored", s.scoredTokens}, {"rounds", roundList}});
    }
    return j;
}

void writePlanJson(const std::string &path, nlohmann::json j)
{
    j["version"] = CLUSTERPPL_VERSION_STRING;
    std::ofstream f(path);
    if (!(f << j.dump(2) << '\n'))
        throw IoError(path + ": cannot write the plan JSON");
}

/// `plan`: how a protocol windows the data and how the ranks share the windows.
int planCommand(const std::vector<std::string> &argv, std::ostream &out)
{
    const Args a(argv,
                 {"--tokens", "--text", "--tokenizer", "--protocol", "--context", "--stride", "--ranks", "--batch",
                  "--sync-every-tokens", "--max-windows", "--json", "--bos-id", "--schedule", "--model", "--tensor-parallel",
                  "--gpu-memory", "--dtype", "--quantize", "--gpus-per-node"},
                 {"--bos-first"});
    const PlanRequest request = parsePlanRequest(a);
    // Every flag checked, config.json read, before the data.
    std::optional<MemoryPlanRequest> memory;
    if (a.has("--model"))
        memory = parseMemoryPlanRequest(a);
    nlohmann::json j = nlohmann::json::object();
    if (a.has("--tokens") || a.has("--text")) {
        const TokenStream tokens = readPlanData(a);
        const WindowPlan plan = planWindowsOf(request, static_cast<std::int64_t>(tokens.ids.size()));
        const auto shards = shardPlan(plan, request.ranks);
        const RoundPlan rounds(plan, shards, request.sync, request.batch);
        const GlobalBatches batches = globalBatches(plan, request.batch);
        printPlanHeader(out, request, tokens, plan);
        printSchedule(out, request, plan, batches, rounds);
        printShards(out, plan, shards);
        j = windowPlanJson(request, tokens, plan, shards, rounds, batches);
    }
    if (memory) {
        const MemoryPlan mp = planMemory(memory->input);
        printMemoryPlan(out, *memory, mp);
        j["memory"] = memoryPlanJson(*memory, mp);
    }
    if (const auto jsonPath = a.get("--json"))
        writePlanJson(*jsonPath, std::move(j));
    return kExitOk;
}

std::string readResultFile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError(path + ": cannot open the result file (does it exist and is it readable?)");
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad())
        throw IoError(path + ": read failed");
    return std::move(s).str();
}

// Merges per-shard result files exactly: the accumulators' integer limbs add, so the merged sum has
// the same bits as a one-rank run over the same windows.
int mergeCommand(const std::vector<std::string> &argv, std::ostream &out)
{
    std::vector<std::string> files;
    std::string jsonOut;
    for (std::size_t i = 0; i < argv.size(); ++i) {
        if (argv[i] == "--json") {
            if (i + 1 >= argv.size())
                throw ConfigError("--json needs a value");
            jsonOut = argv[++i];
        } else if (argv[i].starts_with("--")) {
            throw ConfigError("unknown argument \"" + argv[i] + "\" (merge takes result files and --json OUT)");
        } else {
            files.push_back(argv[i]);
        }
    }
    if (files.empty())
        throw ConfigError("merge needs the result files of every shard (clusterppl-agent eval --shard R/N --json FILE)");
    NllStats total;
    std::string firstText;
    ShardResult first;
    std::vector<int> seen;
    for (const auto &f : files) {
        const std::string text = readResultFile(f);
        const ShardResult r = parseResultJson(text, f);
        if (firstText.empty()) {
            firstText = text;
            first = r;
            seen.assign(static_cast<std::size_t>(r.count), 0);
        }
        for (const auto &[key, value] : r.runIdentity)
            if (value != first.runIdentity.at(key))
                throw ConfigError(f + ": \"" + key + "\" is " + value.substr(0, 80) + " but " + first.runIdentity.at(key).substr(0, 80) + " in "
                                  + files.front() + "; these shards are not one run");
        if (r.count != first.count)
            throw ConfigError(f + ": shard " + std::to_string(r.rank) + "/" + std::to_string(r.count) + " does not belong to a "
                              + std::to_string(first.count) + "-way run (" + files.front() + ")");
        if (seen[static_cast<std::size_t>(r.rank)]++)
            throw ConfigError(f + ": shard " + std::to_string(r.rank) + " is given twice");
        total.merge(r.stats);
    }
    const int count = first.count;
    for (int r = 0; r < count; ++r)
        if (!seen[static_cast<std::size_t>(r)])
            throw ConfigError("shard " + std::to_string(r) + "/" + std::to_string(count) + " is missing: every shard's result file is needed");
    const Perplexity ppl = computePerplexity(total);
    out << "merged " << count << " shards: " << total.tokens << " tokens, " << total.windows << " windows\n";
    out << "nll_sum_exact " << total.nll.toString() << '\n';
    out << formatFinalEstimate(ppl) << '\n';
    if (!jsonOut.empty()) {
        nlohmann::ordered_json j = nlohmann::ordered_json::parse(firstText); // validated by parseResultJson
        j["ppl"] = ppl.ppl;
        j["ppl_stderr"] = ppl.pplStderr;
        j["nll_sum"] = total.nll.toDouble();
        j["nll_sum_exact"] = total.nll.toString();
        j["nll_sq_sum_exact"] = total.nllSquared.toString();
        j["tokens_scored"] = total.tokens;
        j["windows"] = total.windows;
        j["world_size"] = count;
        j.erase("shard");
        std::ofstream f(jsonOut);
        if (!(f << j.dump(2) << '\n'))
            throw IoError(jsonOut + ": cannot write the merged result");
    }
    return kExitOk;
}

} // namespace

bool isTorchCommand(const std::string &command) noexcept
{
    return command == "eval" || command == "comm-check" || command == "preflight";
}

int agentMain(const std::vector<std::string> &args, std::ostream &out, std::ostream &err, const TorchCommandRunner &torchCommand)
{
    if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
        (args.empty() ? err : out) << usage();
        return args.empty() ? kExitBadArguments : kExitOk;
    }
    if (args[0] == "--version") {
        out << "clusterppl-agent " << CLUSTERPPL_VERSION_STRING << '\n';
        return kExitOk;
    }
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (const char *text = commandUsage(args[0]); text && asksForHelp(rest)) {
        out << "Usage:\n" << text << "Exit codes: docs/exit-codes.md.\n";
        return kExitOk;
    }
    // The one place where an exception becomes an exit code (exitCodeFor, docs/exit-codes.md).
    try {
        // The commands that open a socket per peer (or per client): the soft limit on open files up
        // to the hard one, for them and for the ranks `run` starts (fd_limit.h).
        if (args[0] == "eval" || args[0] == "run" || args[0] == "store" || args[0] == "comm-check")
            (void)raiseFileLimit();
        if (isTorchCommand(args[0]))
            return torchCommand(args, out, err);
        if (args[0] == "plan")
            return planCommand(rest, out);
        if (args[0] == "merge")
            return mergeCommand(rest, out);
        if (args[0] == "tokenize")
            return tokenizeCommand(rest, out, err);
        if (args[0] == "run")
            return dist::standaloneCommand(rest, out, err);
        if (args[0] == "store")
            return dist::rendezvousCommand(rest, out, err);
        if (args[0] == "relay") {
            const Args a(rest, {"--forward", "--keys-file", "--agent-keys-out", "--endpoint-out", "--bind", "--advertise-host"}, {});
            telemetry::RelayOptions o;
            o.forward = a.require("--forward", "the collector's endpoint, e.g. tcp://127.0.0.1:PORT");
            o.keysFile = a.require("--keys-file", "the run's key line (a file of mode 0600)");
            o.agentKeysOut = a.require("--agent-keys-out", "where to write the agents' key line");
            o.endpointOut = a.require("--endpoint-out", "where to write the endpoint agents send to");
            o.bind = a.get("--bind").value_or(o.bind);
            o.advertiseHost = a.get("--advertise-host").value_or(std::string());
            (void)telemetry::runRelay(o, err);
            return kExitOk;
        }
        err << "clusterppl-agent: unknown command \"" << args[0] << "\" (try --help)\n";
        return kExitBadArguments;
    } catch (const std::exception &e) {
        const std::string line = "clusterppl-agent: " + exitMessageFor(e);
        if (takeExitLine(line)) // not when the terminate guard printed it (process_exit.h)
            err << line << '\n' << std::flush;
        return exitCodeFor(e);
    }
}

} // namespace cppl::agent
