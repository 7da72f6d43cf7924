// SPDX-License-Identifier: MIT
#include "batch_sizing.h"

#include <algorithm>
#include <cstdio>

namespace cppl::agent {

namespace {

std::string gib(std::int64_t bytes)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / double(std::int64_t{1} << 30));
    return buf;
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
    const std::int64_t left = mine - in.weightBytes - kBatchReserveBytes - in.ncclCommunicators * kNcclCommunicatorBytes;
    c.budgetBytes = left > 0 ? static_cast<std::int64_t>(static_cast<double>(left) * kBatchMemoryShare) : 0;
    c.memoryBatch = c.perWindowBytes > 0 ? floorPowerOfTwo(c.budgetBytes / c.perWindowBytes) : 0;
    applyBatchBounds(in, c);
    return c;
}

} // namespace cppl::agent
