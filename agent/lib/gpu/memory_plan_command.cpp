// SPDX-License-Identifier: MIT
#include "gpu/memory_plan_command.h"

#include "args.h"
#include "eval/compute_spec.h"
#include "model/model_config.h"

#include "cppl/errors.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cppl::agent {

namespace {

PlanModel planModelOf(const ModelConfig &c)
{
    PlanModel m;
    m.shape = {c.hidden, c.intermediate, c.layers, c.heads, c.kvHeads, c.headDim, c.vocab};
    m.gpt2 = c.arch == ModelConfig::Arch::Gpt2;
    m.positions = m.gpt2 ? c.maxPositions : 0;
    m.tied = c.tied;
    m.qkvBias = c.qkvBias;
    m.oBias = c.oBias;
    m.mlpBias = c.mlpBias;
    if (c.moe.kind != MoeConfig::Kind::None) {
        m.experts = c.moe.experts;
        m.topK = c.moe.topK;
        m.expertIntermediate = c.moe.intermediate;
        m.sharedIntermediate = c.moe.sharedIntermediate;
        for (std::int64_t i = 0; i < c.layers; ++i)
            m.sparseLayers += c.moe.sparse(i) ? 1 : 0;
    }
    return m;
}

std::string expertsOf(const PlanModel &m)
{
    if (m.experts == 0)
        return {};
    return ", top " + std::to_string(m.topK) + " of " + std::to_string(m.experts) + " experts of " + std::to_string(m.expertIntermediate)
           + (m.sharedIntermediate > 0 ? " and a shared expert of " + std::to_string(m.sharedIntermediate) : std::string()) + " in "
           + std::to_string(m.sparseLayers) + " layers";
}

std::string quantizeOf(const std::string &q)
{
    if (q == "none" || q == "int8")
        return q;
    if (q == "int4" || q == "int4-sym" || q == "int4-asym") // the zero points of asym are not counted
        return "int4";
    throw ConfigError("--quantize \"" + q + "\" is not one of none, int8, int4");
}

std::int64_t gpuMemoryOf(const Args &a)
{
    const auto text = a.get("--gpu-memory");
    if (!text)
        return 0;
    char *end = nullptr;
    const double gib = std::strtod(text->c_str(), &end);
    if (text->empty() || *end != '\0' || !std::isfinite(gib) || gib <= 0 || gib > 1e6)
        throw ConfigError("--gpu-memory \"" + *text + "\": expected the free memory of one GPU in GiB, a number > 0 (e.g. 79.2)");
    return static_cast<std::int64_t>(gib * double(std::int64_t{1} << 30));
}

nlohmann::json rankJson(const RankMemory &r)
{
    nlohmann::json j = {{"tensor_parallel", r.n}};
    if (!r.splittable()) {
        j["refusal"] = r.refusal;
        return j;
    }
    j.update({{"weights_bytes", r.weightBytes},
              {"weights_sharded_bytes", r.shardedWeightBytes},
              {"weights_replicated_bytes", r.replicatedWeightBytes},
              {"kv_bytes", r.kvBytes},
              {"activation_bytes", r.activationBytes},
              {"reserve_bytes", r.reserveBytes},
              {"total_bytes", r.totalBytes},
              {"fits", r.fits},
              {"max_batch", r.maxBatch}});
    return j;
}

void printRank(std::ostream &out, const RankMemory &r, bool memoryKnown)
{
    char line[200];
    if (!r.splittable()) {
        std::snprintf(line, sizeof line, "  %4d  refused: %s\n", r.n, r.refusal.c_str());
        out << line;
        return;
    }
    std::snprintf(line, sizeof line, "  %4d  %8s  %8s  %8s  %8s  %8s  %8s  %-4s  %s\n", r.n, gibNumber(r.weightBytes).c_str(),
                  gibNumber(r.shardedWeightBytes).c_str(), gibNumber(r.replicatedWeightBytes).c_str(), gibNumber(r.kvBytes).c_str(),
                  gibNumber(r.activationBytes).c_str(), gibNumber(r.totalBytes).c_str(), memoryKnown ? (r.fits ? "yes" : "no") : "-",
                  memoryKnown ? std::to_string(r.maxBatch).c_str() : "-");
    out << line;
}

} // namespace

MemoryPlanRequest parseMemoryPlanRequest(const Args &a)
{
    MemoryPlanRequest r;
    r.modelDir = *a.get("--model");
    r.dtype = a.get("--dtype").value_or("bfloat16");
    MemoryPlanInput &in = r.input;
    in.elementBytes = bytesPerElement(dtypeFromName(r.dtype)); // the evaluation dtype: bfloat16 on a GPU, or float32
    in.quantize = quantizeOf(a.get("--quantize").value_or("none"));
    in.batch = a.integer("--batch", 8, 1, 1 << 16);
    in.context = a.integer("--context", 512, 2, std::int64_t{1} << 24);
    in.tensorParallel = static_cast<int>(a.integer("--tensor-parallel", 1, 1, 1024));
    in.gpusPerNode = static_cast<int>(a.integer("--gpus-per-node", 8, 1, 1024));
    in.ranks = static_cast<int>(a.integer("--ranks", 0, 1, 1 << 20));
    in.freeBytes = gpuMemoryOf(a);
    const ModelConfig c = loadModelConfig(r.modelDir); // config.json only: no weights are read
    r.modelType = c.modelType;
    in.model = planModelOf(c);
    return r;
}

void printMemoryPlan(std::ostream &out, const MemoryPlanRequest &r, const MemoryPlan &p)
{
    const MemoryPlanInput &in = r.input;
    const ModelShape &m = in.model.shape;
    const PlanParams params = planParams(in.model);
    out << "Memory plan: " << r.modelType << " (" << r.modelDir << "): hidden " << m.hidden << ", " << m.layers << " layers, "
        << m.heads << " heads (" << (m.kvHeads > 0 ? m.kvHeads : m.heads) << " K/V), intermediate " << m.intermediate << expertsOf(in.model)
        << ", vocabulary " << m.vocab << "\n  " << params.total << " parameters, " << params.activePerToken << " active per token\n  " << r.dtype
        << (in.quantize == "none" ? std::string() : ", linear layers " + in.quantize) << ", batch "
        << in.batch << " x " << in.context << " tokens, "
        << (in.freeBytes > 0 ? gibNumber(in.freeBytes) + " GiB free per GPU" : std::string("GPU memory not given (--gpu-memory GiB)"))
        << ", " << in.gpusPerNode << " GPUs per node\n"
        << "     N   weights   sharded   replic.       K/V    activ.     total  fits  auto batch\n";
    for (const RankMemory &c : p.candidates)
        printRank(out, c, in.freeBytes > 0);
    bool listed = false;
    for (const RankMemory &c : p.candidates)
        listed = listed || c.n == in.tensorParallel;
    if (!listed) {
        out << "  asked:\n";
        printRank(out, p.asked, in.freeBytes > 0);
    }
    out << "  Per rank, in GiB; K/V: one layer's for the batch (a pass holds one layer's at a time), within activ.; total:\n"
           "  weights + activ. + a reserve of " << gibNumber(kBatchReserveBytes)
        << " GiB and NCCL's buffers (with more than one rank, "
        << gibNumber(ncclBuffersBytes(2, 0)) << " GiB; in groups of N > 1, " << gibNumber(ncclBuffersBytes(0, 1))
        << " GiB more); auto batch: what --batch auto would take.\n"
        << "  --tensor-parallel " << in.tensorParallel << ": "
        << (p.asked.splittable() ? (in.freeBytes <= 0 ? std::string("memory not known") : p.asked.fits ? std::string("fits") : std::string("does not fit"))
                                 : p.asked.refusal)
        << "\n  Recommended: " << p.why << "\n";
}

nlohmann::json memoryPlanJson(const MemoryPlanRequest &r, const MemoryPlan &p)
{
    const MemoryPlanInput &in = r.input;
    nlohmann::json j = {{"model", r.modelDir},
                        {"model_type", r.modelType},
                        {"params", planParams(in.model).total},
                        {"active_params_per_token", planParams(in.model).activePerToken},
                        {"dtype", r.dtype},
                        {"quantize", in.quantize},
                        {"batch", in.batch},
                        {"context", in.context},
                        {"gpus_per_node", in.gpusPerNode},
                        {"gpu_memory_bytes", in.freeBytes > 0 ? nlohmann::json(in.freeBytes) : nlohmann::json()},
                        {"asked", rankJson(p.asked)},
                        {"recommended", p.recommended > 0 ? nlohmann::json(p.recommended) : nlohmann::json()},
                        {"data_parallel_width", p.recommended > 0 ? nlohmann::json(p.dataParallelWidth) : nlohmann::json()},
                        {"why", p.why}};
    auto &list = j["candidates"] = nlohmann::json::array();
    for (const RankMemory &c : p.candidates)
        list.push_back(rankJson(c));
    return j;
}

} // namespace cppl::agent
