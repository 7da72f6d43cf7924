// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 7 (eval_session.h): the reporting rank prints the estimate and writes
// the result contract (docs/result-json.md) to --json, --result-line and telemetry.
#include "eval_session.h"

#include "result_json.h"
#include "model/mapped_file.h"

#include "cppl/agent_lines.h"
#include "cppl/config.h"

#include <filesystem>
#include <fstream>

namespace cppl::agent {

/// Step 7: rank 0 (after its loss, the lowest survivor) prints the estimate and writes the result contract (docs/result-json.md).
int EvalSession::writeResult(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome)
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
        j["warmup_seconds"] = outcome.warmupSeconds;
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
            out << cppl::lines::encode(cppl::lines::Result{j.dump()}) << '\n' << std::flush;
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

} // namespace cppl::agent
