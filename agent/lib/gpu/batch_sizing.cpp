// SPDX-License-Identifier: MIT
#include "batch_sizing.h"

#include <algorithm>
#include <cstdio>

namespace cppl::agent {

std::string gibNumber(std::int64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(bytes) / double(std::int64_t{1} << 30));
    return buf;
}

namespace {

std::string gib(std::int64_t bytes)
{
    return gibNumber(bytes) + " GiB";
}

} // namespace

std::int64_t floorPowerOfTwo(std::int64_t n)
{
    if (n < 1)
        return 0;
    std::int64_t p = 1;
    while (p <= n / 2)
        p *= 2;
    return p;
}

std::int64_t windowFootprintBytes(const BatchSizingInput &in)
{
    const ModelShape &m = in.shape;
    if (m.hidden <= 0 || m.intermediate <= 0 || m.heads <= 0 || m.vocab <= 0 || in.width <= 0)
        return 0;
    const std::int64_t s = in.elementBytes, H = m.hidden, I = m.intermediate, nh = m.heads;
    const std::int64_t kv = m.kvHeads > 0 ? m.kvHeads : nh, hd = m.headDim > 0 ? m.headDim : H / nh, W = in.width;
    // One decoder layer, per token, as llama_model.cpp's LibTorch path holds it: x, its norm and
    // q, k, v live through the layer; on top of them the largest of
    //   norm:      x in float32, its square, the normalised float32 and dtype copies
    //   attention: rotate_half's temporaries for q and k, K/V repeated per query head, the output
    //              and its transposed copy, o_proj's output and the new x
    //   MLP:       the second norm, gate, silu(gate), up and their product, down_proj's output, the new x
    const std::int64_t base = (2 * H + (nh + 2 * kv) * hd) * s;
    const std::int64_t norm = 3 * H * 4 + H * s;
    const std::int64_t attention = (2 * H + 7 * nh * hd) * s;
    const std::int64_t mlp = (3 * H + 3 * I) * s;
    std::int64_t layer = W * (base + std::max({norm, attention, mlp}));
    // Without fused attention each 128-query block holds its scores in the dtype, in float32 for
    // the softmax, and the softmax back in the dtype.
    if (!in.fusedAttention)
        layer += nh * std::min<std::int64_t>(128, W) * W * (2 * s + 4);
    // The scored positions: the final hidden states, those picked, their logits in the dtype and
    // the log-probabilities in double (the evaluator widens logits to float32 a 128 MiB chunk at a
    // time on a GPU, which the reserve covers).
    const std::int64_t n = std::clamp<std::int64_t>(in.scoredPerWindow, 1, W);
    const std::int64_t logits = W * H * s + n * H * s + n * m.vocab * s + n * 8;
    return std::max(layer, logits);
}

std::int64_t headChunkRows(std::int64_t vocab, int elementBytes, std::int64_t freeBytes)
{
    // A row's logits in the dtype, their float32 copy where the dtype is narrower, and the float32
    // log-softmax (float32 logits need no copy).
    const std::int64_t perRow = std::max<std::int64_t>(vocab, 1) * (elementBytes < 4 ? elementBytes + 8 : 8);
    const std::int64_t budget = freeBytes > 0 ? std::min(kHeadChunkMaxBytes, freeBytes / 16) : kHeadChunkMaxBytes;
    return std::max<std::int64_t>(1, floorPowerOfTwo(budget / perRow));
}

void applyBatchBounds(const BatchSizingInput &in, BatchChoice &c)
{
    const std::int64_t W = std::max<std::int64_t>(in.width, 1);
    const std::int64_t tokenCap = std::max<std::int64_t>(1, floorPowerOfTwo(kMaxTokensPerPass / W));
    const int ranks = std::max(in.ranks, 1);
    const std::int64_t perRank = std::max<std::int64_t>(1, (in.windows + ranks - 1) / ranks);
    c.batch = std::max<std::int64_t>(c.memoryBatch, 1);
    c.limitedBy = c.memoryBatch >= 1 ? "memory" : "one window";
    if (tokenCap < c.batch) {
        c.batch = tokenCap;
        c.limitedBy = "tokens per pass";
    }
    if (perRank < c.batch) {
        c.batch = perRank;
        c.limitedBy = "windows per rank";
    }
    std::string r = "batch " + std::to_string(c.batch) + " from free GPU memory: " + gib(in.freeBytes) + " free of " + gib(in.totalBytes);
    if (in.ranksPerDevice > 1)
        r += " shared by " + std::to_string(in.ranksPerDevice) + " ranks";
    r += ", weights " + gib(in.weightBytes) + ", ~" + gib(c.perWindowBytes) + " per window of " + std::to_string(W) + " tokens -> ";
    if (c.limitedBy == "one window")
        r += "not even one window fits the estimate (budget " + gib(c.budgetBytes) + "); evaluating one at a time, which may run out of memory";
    else
        r += std::to_string(c.memoryBatch) + " windows fit";
    if (c.limitedBy == "tokens per pass")
        r += "; at most " + std::to_string(kMaxTokensPerPass) + " tokens per pass";
    else if (c.limitedBy == "windows per rank")
        r += "; " + std::to_string(in.windows) + " windows over " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s");
    c.reason = r + " (--batch N sets it)";
}

BatchChoice chooseBatch(const BatchSizingInput &in)
{
    BatchChoice c;
    c.perWindowBytes = windowFootprintBytes(in);
    const std::int64_t mine = in.freeBytes / std::max(in.ranksPerDevice, 1);
    const std::int64_t left = mine - in.weightBytes - kBatchReserveBytes - ncclBuffersBytes(in.ncclCommunicators, in.ncclWideCommunicators);
    c.budgetBytes = left > 0 ? static_cast<std::int64_t>(static_cast<double>(left) * kBatchMemoryShare) : 0;
    c.memoryBatch = c.perWindowBytes > 0 ? floorPowerOfTwo(c.budgetBytes / c.perWindowBytes) : 0;
    applyBatchBounds(in, c);
    return c;
}

} // namespace cppl::agent

namespace cppl::agent {

namespace {

std::int64_t ceilDiv(std::int64_t a, std::int64_t b)
{
    return (a + b - 1) / b;
}

/// Weights of one rank of @p n, in bytes: sharded and replicated parts (the largest rank's:
/// member 0, which also loads the row-parallel biases, and the vocabulary's full first ranges).
void weightsOf(const MemoryPlanInput &in, std::int64_t n, RankMemory &r)
{
    const PlanModel &pm = in.model;
    const ModelShape &m = pm.shape;
    const std::int64_t H = m.hidden, L = m.layers, nh = m.heads, I = m.intermediate;
    const std::int64_t kv = m.kvHeads > 0 ? m.kvHeads : nh, hd = m.headDim > 0 ? m.headDim : H / nh, qd = nh * hd;
    const bool kvSplit = kv % n == 0;
    const double b = linearBytesPerWeight(in.elementBytes, in.quantize);
    const std::int64_t e = in.elementBytes;
    // Linear weights: column-parallel q/k/v and gate/up (or c_attn, c_fc), row-parallel o/down (c_proj).
    double shardedLinear = 0, replicatedLinear = 0;
    std::int64_t shardedVec = 0, replicatedVec = 0; // biases, norms, tables: in the evaluation dtype
    std::int64_t replicatedRouterBytes = 0;
    if (pm.gpt2) {
        shardedLinear = static_cast<double>(L * (4 * H * H + 2 * H * I)) / double(n);
        shardedVec = L * (3 * H + I) / n;
        replicatedVec = L * (2 * H + 4 * H) + 2 * H + pm.positions * H; // c_proj biases (member 0), LayerNorms, the position table
    } else {
        // The MLPs: dense layers of I, sparse ones of every expert and the shared expert, split by
        // their intermediate columns; the routers (and shared experts' gates) replicated, in double
        // on the device as LibTorch's path routes (moe.h).
        const std::int64_t dense = L - pm.sparseLayers;
        const std::int64_t mlps = dense * 3 * H * I + pm.sparseLayers * 3 * H * (pm.experts * pm.expertIntermediate + pm.sharedIntermediate);
        shardedLinear = static_cast<double>(L * 2 * H * qd + mlps) / double(n);
        replicatedRouterBytes = pm.sparseLayers * (pm.experts + (pm.sharedIntermediate > 0 ? 1 : 0)) * H * 8;
        const auto kvLinear = static_cast<double>(L * 2 * H * hd);
        if (kvSplit)
            shardedLinear += kvLinear * static_cast<double>(kv) / double(n);
        else
            replicatedLinear += kvLinear; // the one K/V head its query heads read
        if (pm.qkvBias) {
            shardedVec += L * qd / n + (kvSplit ? L * 2 * kv * hd / n : 0);
            replicatedVec += kvSplit ? 0 : L * 2 * hd;
        }
        if (pm.oBias)
            replicatedVec += L * H;
        if (pm.mlpBias) {
            shardedVec += dense * 2 * I / n;
            replicatedVec += dense * H;
        }
        replicatedVec += L * 2 * H + H; // the RMSNorms
    }
    // The vocabulary: contiguous ranges of ceil(V/N) rows, for the embedding and (untied) the head.
    shardedVec += ceilDiv(m.vocab, n) * H * (pm.tied ? 1 : 2);
    r.shardedWeightBytes = static_cast<std::int64_t>(shardedLinear * b) + shardedVec * e;
    r.replicatedWeightBytes = static_cast<std::int64_t>(replicatedLinear * b) + replicatedVec * e + replicatedRouterBytes;
    r.weightBytes = r.shardedWeightBytes + r.replicatedWeightBytes;
}

/// The widest MLP a layer runs: a dense layer's, or an expert's or the shared expert's (whose
/// activations the plan takes at the whole batch's tokens: an expert may be chosen by every one).
std::int64_t mlpWidth(const PlanModel &pm)
{
    const std::int64_t dense = pm.sparseLayers < pm.shape.layers ? pm.shape.intermediate : 0;
    return std::max({dense, pm.expertIntermediate, pm.sharedIntermediate});
}

/// The sizes one rank of @p n computes with: its heads, K/V heads, intermediate columns and vocabulary range.
BatchSizingInput rankShape(const MemoryPlanInput &in, std::int64_t n)
{
    const ModelShape &m = in.model.shape;
    BatchSizingInput s;
    s.elementBytes = in.elementBytes;
    s.shape = m;
    s.shape.heads = m.heads / n;
    const std::int64_t kv = m.kvHeads > 0 ? m.kvHeads : m.heads;
    s.shape.kvHeads = kv % n == 0 ? kv / n : 1;
    s.shape.headDim = m.headDim > 0 ? m.headDim : m.hidden / m.heads;
    s.shape.intermediate = mlpWidth(in.model) / n;
    s.shape.vocab = ceilDiv(m.vocab, n);
    s.width = in.context;
    s.scoredPerWindow = in.context; // the first window scores all of it
    return s;
}

std::string recommendation(const MemoryPlanInput &in, const MemoryPlan &p)
{
    const int ranks = in.ranks > 0 ? in.ranks : in.gpusPerNode;
    if (in.freeBytes <= 0)
        return "no GPU memory given (--gpu-memory GiB): the figures without a verdict";
    const std::string load = std::to_string(in.batch) + " windows of " + std::to_string(in.context) + " tokens in " + gib(in.freeBytes);
    if (p.recommended > 0)
        return "N = " + std::to_string(p.recommended) + ": the smallest that fits " + load + " per GPU; data-parallel width "
               + std::to_string(p.dataParallelWidth) + " (" + std::to_string(ranks) + " ranks / " + std::to_string(p.recommended) + ")";
    const RankMemory *largest = nullptr;
    std::string refusals;
    for (const RankMemory &c : p.candidates) {
        if (c.splittable())
            largest = &c;
        else if (refusals.empty())
            refusals = c.refusal;
    }
    if (!largest)
        return "no N this node allows splits the model: " + refusals;
    std::string why = "nothing fits " + load + ": at N = " + std::to_string(largest->n) + " (the largest this node allows) a rank needs "
                      + gib(largest->totalBytes) + " (weights " + gib(largest->weightBytes) + ", activations "
                      + gib(largest->activationBytes) + ", reserve " + gib(largest->reserveBytes) + ")";
    if (largest->maxBatch >= 1)
        return why + "; a batch of " + std::to_string(largest->maxBatch) + " fits there (--batch)";
    return why + "; the weights alone leave no room: quantize (--quantize int8|int4), or use GPUs with more memory or more per node";
}

} // namespace

double linearBytesPerWeight(int elementBytes, const std::string &quantize)
{
    if (quantize == "int8")
        return 1.0 + 2.0 / 32.0;
    if (quantize == "int4")
        return 0.5 + 2.0 / 32.0;
    return elementBytes;
}

std::string tensorParallelRefusal(const PlanModel &pm, int n)
{
    const ModelShape &m = pm.shape;
    const std::string what = "--tensor-parallel " + std::to_string(n) + ": ";
    const std::int64_t kv = m.kvHeads > 0 ? m.kvHeads : m.heads;
    if (m.heads % n != 0)
        return what + "the model's " + std::to_string(m.heads) + " attention heads do not divide by it";
    if (kv % n != 0 && n % kv != 0)
        return what + "the model's " + std::to_string(kv) + " key/value heads can be neither split by it nor replicated to it";
    if (pm.expertIntermediate % n != 0)
        return what + "the experts' intermediate size " + std::to_string(pm.expertIntermediate) + " does not divide by it";
    if (pm.sharedIntermediate % n != 0)
        return what + "the shared expert's intermediate size " + std::to_string(pm.sharedIntermediate) + " does not divide by it";
    if (m.intermediate % n != 0)
        return what + "the MLP's intermediate size " + std::to_string(m.intermediate) + " does not divide by it";
    return {};
}

PlanParams planParams(const PlanModel &pm)
{
    const ModelShape &m = pm.shape;
    const std::int64_t H = m.hidden, L = m.layers, I = m.intermediate, V = m.vocab;
    const std::int64_t kv = m.kvHeads > 0 ? m.kvHeads : m.heads, hd = m.headDim > 0 ? m.headDim : H / m.heads, qd = m.heads * hd;
    std::int64_t common = V * H * (pm.tied ? 1 : 2); // the embedding and an untied head
    if (pm.gpt2) {
        const std::int64_t all = common + pm.positions * H + L * (4 * H * H + 2 * H * I + 9 * H + I) + 2 * H; // with the biases and LayerNorms
        return {all, all};
    }
    common += L * (2 * H * qd + 2 * H * kv * hd) + L * 2 * H + H; // attention and the RMSNorms
    common += (pm.qkvBias ? L * (qd + 2 * kv * hd) : 0) + (pm.oBias ? L * H : 0);
    const std::int64_t dense = L - pm.sparseLayers;
    common += dense * (3 * H * I + (pm.mlpBias ? 2 * I + H : 0));
    const std::int64_t perExpert = 3 * H * pm.expertIntermediate;
    const std::int64_t shared = pm.sharedIntermediate > 0 ? 3 * H * pm.sharedIntermediate + H : 0; // and its gate
    common += pm.sparseLayers * (pm.experts * H + shared);                                          // the routers
    return {common + pm.sparseLayers * pm.experts * perExpert, common + pm.sparseLayers * pm.topK * perExpert};
}

/// NCCL's buffers in a run of this shape, as the agent's batch sizing reserves them for a run over
/// NCCL (eval_command.cpp): with more than one rank, the sums' two one-channel communicators of the
/// default hierarchical topology (a flat run reserves one), and the group's own where n > 1.
std::int64_t ncclReserveBytes(const MemoryPlanInput &in, int n)
{
    const int ranks = in.ranks > 0 ? in.ranks : in.gpusPerNode;
    return ncclBuffersBytes(ranks > 1 ? 2 : 0, n > 1 ? 1 : 0);
}

RankMemory rankMemory(const MemoryPlanInput &in, int n)
{
    RankMemory r;
    r.n = n;
    r.refusal = tensorParallelRefusal(in.model, n);
    if (!r.splittable())
        return r;
    weightsOf(in, n, r);
    r.reserveBytes = kBatchReserveBytes + ncclReserveBytes(in, n);
    const BatchSizingInput s = rankShape(in, n);
    r.kvBytes = in.batch * in.context * 2 * s.shape.kvHeads * s.shape.headDim * in.elementBytes;
    const std::int64_t perWindow = windowFootprintBytes(s);
    r.activationBytes = in.batch * perWindow;
    r.totalBytes = r.weightBytes + r.activationBytes + r.reserveBytes;
    // As chooseBatch judges it, so the plan and the agents' "auto" batch agree.
    const std::int64_t left = in.freeBytes - r.weightBytes - r.reserveBytes;
    const auto budget = left > 0 ? static_cast<std::int64_t>(static_cast<double>(left) * kBatchMemoryShare) : 0;
    // And at most kMaxTokensPerPass tokens a pass, as applyBatchBounds caps it.
    const std::int64_t tokenCap = std::max<std::int64_t>(1, floorPowerOfTwo(kMaxTokensPerPass / std::max<std::int64_t>(in.context, 1)));
    r.maxBatch = perWindow > 0 ? std::min(floorPowerOfTwo(budget / perWindow), tokenCap) : 0;
    r.fits = in.freeBytes > 0 && perWindow > 0 && r.activationBytes <= budget;
    return r;
}

MemoryPlan planMemory(const MemoryPlanInput &in)
{
    MemoryPlan p;
    p.asked = rankMemory(in, in.tensorParallel);
    const int ranks = in.ranks > 0 ? in.ranks : in.gpusPerNode;
    for (int n = 1; n <= in.gpusPerNode; ++n) {
        if (in.gpusPerNode % n != 0 || ranks % n != 0)
            continue;
        p.candidates.push_back(rankMemory(in, n));
        const RankMemory &c = p.candidates.back();
        if (p.recommended == 0 && c.splittable() && c.fits) {
            p.recommended = n;
            p.dataParallelWidth = ranks / n;
        }
    }
    p.why = recommendation(in, p);
    return p;
}

} // namespace cppl::agent
