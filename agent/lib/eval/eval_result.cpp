// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 7 (eval_session.h): the reporting rank prints the estimate and writes
// the result contract (docs/result-json.md) to --json, --result-line and telemetry. The contract's
// keys in order: the totals, the settings, the times, the model and the data, the distribution.
#include "eval_session.h"

#include "model_info.h"
#include "result_json.h"
#include "model/mapped_file.h"

#include "cppl/agent_lines.h"
#include "cppl/config.h"

#include <bit>
#include <filesystem>
#include <fstream>

namespace cppl::agent {

namespace {

using Json = nlohmann::ordered_json;

/// The exact sums and what follows from them; the byte and word figures of text input.
void addTotals(Json &j, const NllStats &stats, const EvalInput &input)
{
    const Perplexity ppl = computePerplexity(stats);
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
}

void addTimes(Json &j, const EvalOutcome &outcome, double loadSeconds)
{
    j["seconds"] = outcome.seconds;
    j["load_seconds"] = loadSeconds;
    j["warmup_seconds"] = outcome.warmupSeconds;
    j["tokens_per_second"] = outcome.seconds > 0 ? static_cast<double>(outcome.stats.tokens) / outcome.seconds : 0.0;
}

/// How fast the weights arrived: the weight files' bytes over load_seconds (page cache or disk to
/// the model's device, in GB/s), and the time to the first batch's scores (issue 44).
void addLoadSpeed(Json &j, const ModelInfo &mi, double loadSeconds, const EvalOutcome &outcome)
{
    std::int64_t bytes = 0;
    for (const auto &f : mi.weightFiles) {
        std::error_code ec;
        const auto n = std::filesystem::file_size(f, ec);
        bytes += ec ? 0 : static_cast<std::int64_t>(n);
    }
    j["model"]["weight_file_bytes"] = bytes;
    j["load_gb_per_second"] = loadSeconds > 0 ? static_cast<double>(bytes) / loadSeconds / 1e9 : 0.0;
    j["first_token_seconds"] = outcome.firstTokenSeconds;
}

/// How the weights reached the device: "host" (the CPU), "pageable", or pinned with its figures.
Json uploadJson(const WeightUploadInfo &u)
{
    Json j = {{"method", u.method}};
    if (!u.note.empty())
        j["note"] = u.note;
    if (u.buffers == 0)
        return j;
    j["buffers"] = u.buffers;
    j["chunk_bytes"] = u.chunkBytes;
    j["chunks"] = u.chunks;
    j["bytes"] = u.bytes;
    j["host_seconds"] = u.hostSeconds; // reading the mapping into the buffers (page faults, conversion)
    j["wait_seconds"] = u.waitSeconds; // the host waiting for the device's copies
    return j;
}

Json modelJson(const ModelInfo &mi)
{
    Json hashes = Json::object();
    for (const auto &f : mi.weightFiles)
        hashes[f] = sha256File(f);
    Json j = {{"path", mi.path}, {"format", mi.format}, {"arch", mi.arch}, {"params", mi.params}, {"sha256", hashes}, {"weight_bytes", mi.weightBytes}};
    if (!mi.upload.method.empty())
        j["weight_upload"] = uploadJson(mi.upload);
    return j;
}

/// What of the weights is stored quantized, and in how many bits per weight (scales included).
Json quantizationJson(const QuantizationInfo &q)
{
    Json j = {{"method", q.method}};
    if (q.method == "none")
        return j;
    j["group"] = q.group;
    j["head"] = q.head;
    j["layers"] = q.layers;
    j["params"] = q.params;
    j["bytes"] = q.bytes;
    j["bits_per_weight"] = q.params > 0 ? 8.0 * static_cast<double>(q.bytes) / static_cast<double>(q.params) : 0.0;
    if (q.denseLayers > 0)
        j["dense_layers"] = {{"count", q.denseLayers}, {"first", q.denseReason}};
    if (q.bufferBytes > 0)
        j["dequant_buffer_bytes"] = q.bufferBytes;
    return j;
}

/// The reference's own exact sums, so that results can be merged and checked bit for bit.
Json referenceSums(const ReferenceStats &s)
{
    Json histogram = Json::array();
    for (std::int64_t c : s.histogram)
        histogram.push_back(c);
    return {{"reference_nll_sum_exact", s.refNll.toString()}, {"reference_nll_sq_sum_exact", s.refNllSquared.toString()},
            {"diff_sum_exact", s.diff.toString()},            {"diff_sq_sum_exact", s.diffSquared.toString()},
            {"kld_sum_exact", s.kld.toString()},              {"kld_sq_sum_exact", s.kldSquared.toString()},
            {"dp_sum_exact", s.dp.toString()},                {"dp_sq_sum_exact", s.dpSquared.toString()},
            {"tokens", s.tokens},                             {"same_top", s.sameTop},
            {"kld_max_bits", std::bit_cast<std::int64_t>(s.kldMax)}, {"kld_histogram", histogram}};
}

Json dataJson(const EvalInput &input)
{
    Json source = {{"path", input.path}, {"format", input.format}, {"documents", input.documents.size()}};
    if (std::filesystem::is_regular_file(input.path))
        source["sha256"] = sha256File(input.path);
    if (!input.dataset.empty()) {
        source["dataset"] = input.dataset;
        source["tokenizer"] = input.tokenizer;
        source["replaced_invalid_utf8"] = input.replacedUtf8;
        source["bos"] = {{"mode", input.bosMode}, {"added", input.bosAdded}, {"id", input.bosId}, {"reason", input.bosReason}};
    }
    return source;
}

Json lostRanksJson(const EvalOutcome &outcome, const dist::DistributedRun &run)
{
    Json lost = Json::array();
    for (const auto &l : outcome.lostRanks)
        lost.push_back({{"rank", l.rank}, {"host", run.hosts()[static_cast<std::size_t>(l.rank)]}, {"round", l.round}, {"cause", l.cause}});
    return lost;
}

} // namespace

/// Step 7: rank 0 (after its loss, the lowest survivor) prints the estimate and writes the result contract (docs/result-json.md).
int EvalSession::writeResult(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome)
{
    if (m_o.distributed && !m_run->reporter()) {
        if (m_tel) {
            m_tel->result();
            m_tel->close(kExitOk);
        }
        return kExitOk; // rank 0 (or, once it is lost, the lowest survivor) reports for the run
    }
    m_out << formatFinalEstimate(computePerplexity(outcome.stats)) << '\n' << std::flush;
    const auto jsonPath = m_a.get("--json");
    const bool resultLine = m_a.has("--result-line");
    if (jsonPath || resultLine || m_tel) {
        const Json j = resultJson(input, mi, loadSeconds, p, outcome);
        if (m_tel)
            m_tel->result(j.dump());
        if (resultLine) // for launchers that collect rank 0's stdout (SSH): one line, no file to fetch
            m_out << cppl::lines::encode(cppl::lines::Result{j.dump()}) << '\n' << std::flush;
        if (jsonPath) {
            std::ofstream f(*jsonPath);
            if (!(f << j.dump(2) << '\n'))
                throw ExitError(kExitRuntime, *jsonPath + ": cannot write the result JSON");
        }
    }
    if (m_tel)
        m_tel->close(kExitOk);
    return kExitOk;
}

/// The result contract (docs/result-json.md).
Json EvalSession::resultJson(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome) const
{
    Json j;
    addTotals(j, outcome.stats, input);
    addSettings(j);
    j["gemm"] = mi.gemm;
    addTimes(j, outcome, loadSeconds);
    j["model"] = modelJson(mi);
    j["model"]["rss_load_bytes"] = m_rssLoad;
    j["model"]["rss_load_peak_bytes"] = m_rssLoadPeak;
    addLoadSpeed(j, mi, loadSeconds, outcome);
    j["quantization"] = quantizationJson(mi.quantization);
    j["data"] = dataJson(input);
    addReference(j, outcome);
    addDistribution(j, p, outcome);
    if (m_o.tensorParallel > 1) // the reporting rank's weights: its slices and what every member replicates
        j["tensor_parallel"] = {{"size", m_o.tensorParallel}, {"data_parallel_width", m_o.shardCount}, {"weights_bytes_per_rank", mi.weightBytes}};
    j["version"] = CLUSTERPPL_VERSION_STRING;
    return j;
}

/// How the windows were cut and evaluated: protocol, batch, number format, device, threads, BLAS.
void EvalSession::addSettings(Json &j) const
{
    const PlanOptions &opts = m_o.plan;
    j["protocol"] = std::string(protocolName(opts.protocol));
    j["context"] = opts.context;
    j["stride"] = opts.protocol == Protocol::HfSliding ? (opts.stride == 0 ? opts.context : opts.stride) : opts.context;
    j["batch"] = m_o.batch;
    j["batch_from"] = m_batchFrom.is_null() ? Json{{"source", m_a.has("--batch") ? "--batch" : "default"}} : m_batchFrom;
    j["max_windows"] = m_o.maxWindows;
    j["dtype"] = dtypeName(m_o.dtype);
    j["device"] = m_o.device.str();
    j["tf32"] = m_o.tf32;
    j["threads"] = m_runtime.intraOpThreads;
    j["cpus"] = {{"allowed", m_cpu.allowedCpus}, {"local_ranks", m_cpu.localRanks}, {"pinned", cpuListText(m_cpu.pinned)}, {"threads_from", m_cpu.why}};
    j["blas_threads"] = m_runtime.blasThreads;
    j["blas"] = m_runtime.blas;
}

/// --reference-model: the comparison's figures (docs/result-json.md, "reference"), its exact sums,
/// the reference itself, and each rank's own figures.
void EvalSession::addReference(Json &j, const EvalOutcome &outcome) const
{
    if (!outcome.reference || !m_referenceInfo)
        return;
    Json r = Json::parse(figuresJson(referenceFigures(*outcome.reference)));
    r["model"] = modelJson(*m_referenceInfo);
    r["dtype"] = dtypeName(m_o.reference.dtype);
    r["gemm"] = m_referenceInfo->gemm;
    r["quantization"] = quantizationJson(m_referenceInfo->quantization);
    r["load_seconds"] = m_referenceLoadSeconds;
    r["exact"] = referenceSums(*outcome.reference);
    Json ranks = Json::array();
    for (const auto &row : outcome.referenceRanks)
        if (!row.empty())
            ranks.push_back(Json::parse(row));
    r["ranks"] = ranks;
    j["reference"] = r;
}

/// Who evaluated: the world, this shard (one rank) or the ranks, their rounds and losses (distributed).
void EvalSession::addDistribution(Json &j, const EvalPlan &p, const EvalOutcome &outcome) const
{
    const bool distributed = m_o.distributed;
    j["world_size"] = m_o.identity.worldSize;
    if (!distributed) {
        const Shard &shard = p.shards[static_cast<std::size_t>(m_o.shardRank)];
        j["shard"] = {{"rank", m_o.shardRank}, {"count", m_o.shardCount}, {"first_window", shard.firstWindow}, {"end_window", shard.endWindow}};
    }
    j["backend"] = distributed ? m_run->backend() : "none";
    j["topology"] = distributed ? dist::topologyName(m_run->topology()) : "none";
    j["sync_every_tokens"] = m_o.syncEvery == kSyncAtEnd ? Json("end") : Json(m_o.syncEvery);
    j["rounds"] = outcome.rounds;
    if (const auto &resume = m_o.resume)
        j["resumed"] = {{"from_round", resume->round},
                        {"batches_done", resume->batchesDone()},
                        {"tokens_done", outcome.resumedBase.tokens},
                        {"world_size_before", resume->worldSize}};
    if (!distributed)
        return;
    j["schedule"] = dist::scheduleName(m_o.schedule);
    j["overlap_sync"] = outcome.overlapRan; // what ran: the rounds' collectives behind the next round's compute
    j["batch_count"] = (static_cast<std::int64_t>(p.windows.windows.size()) + m_o.batch - 1) / m_o.batch;
    j["groups"] = m_run->groups().groups;
    j["rendezvous"] = {{"source", m_o.identity.source}, {"store", m_run->storeAddress()}};
    j["ranks"] = ranksJson(outcome.reports, outcome.batchRuns, m_o.tensorParallel > 1);
    if (m_o.distOptions.tolerateRankLoss) {
        j["on_rank_loss"] = "continue";
        j["lost_ranks"] = lostRanksJson(outcome, *m_run);
        j["batches_redone"] = outcome.batchesRedone;
    }
}

} // namespace cppl::agent
