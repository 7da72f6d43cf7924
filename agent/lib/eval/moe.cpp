// SPDX-License-Identifier: MIT
#include "moe.h"

#include "intra_op.h"
#include "tensor_parallel.h"
#include "tensor_parallel_torch.h"
#include "weight_source.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace cppl::agent {

namespace {

// The scratch buffers of the native path.
enum Buffer : std::size_t { kAcc, kGathered, kGateUp, kOut };

// Σ a[i] b[i] in double in a fixed order (four running sums, then the tail): each float32 product is
// exact in double, and the same rows give the same bits whatever else is multiplied.
double dotDouble(const float *a, const float *b, std::int64_t n)
{
    double s[4] = {0, 0, 0, 0};
    std::int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; ++j)
            s[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[i + j]);
    double t = (s[0] + s[1]) + (s[2] + s[3]);
    for (; i < n; ++i)
        t += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    return t;
}

// One row's top-k of `z` (descending, ties to the lower index) and their softmax weights over every
// expert, renormalised over the k when asked.
void routeRow(const std::vector<double> &z, std::int64_t k, bool normalise, std::vector<std::int32_t> &order, std::int32_t *expert, float *weight)
{
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&z](std::int32_t a, std::int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
    const double top = z[static_cast<std::size_t>(order[0])];
    double sum = 0;
    for (const double v : z)
        sum += std::exp(v - top);
    double chosen = 0;
    for (std::int64_t s = 0; s < k; ++s)
        chosen += std::exp(z[static_cast<std::size_t>(order[s])] - top) / sum;
    for (std::int64_t s = 0; s < k; ++s) {
        const double p = std::exp(z[static_cast<std::size_t>(order[s])] - top) / sum;
        expert[s] = order[s];
        weight[s] = static_cast<float>(normalise ? p / chosen : p);
    }
}

// The tensor `name` [rows, hidden] as float32 on the CPU, owned (not a view of the mapping).
at::Tensor floatRows(WeightSource &w, const std::string &name, std::int64_t rows, std::int64_t hidden)
{
    return w.getFloat(name, {rows, hidden}).contiguous().clone();
}

} // namespace

float *MoeScratch::buffer(std::size_t i, std::int64_t floats)
{
    if (m_buffers.size() <= i) {
        m_buffers.resize(i + 1);
        m_floats.resize(i + 1, 0);
    }
    if (m_floats[i] < floats) {
        m_buffers[i] = cpu::allocateFloats(floats);
        m_floats[i] = floats;
    }
    return m_buffers[i].get();
}

MoeMlp::MoeMlp(WeightSource &w, const ModelConfig &c, const std::string &prefix, const LinearPlan &plan, TensorParallelGroup *tp)
    : m_hidden(c.hidden), m_experts(c.moe.experts), m_topK(c.moe.topK), m_normTopK(c.moe.normTopK), m_tp(tp)
{
    const std::int64_t n = tp ? tp->size() : 1, r = tp ? tp->rank() : 0;
    checkTensorParallel(c, static_cast<int>(n));
    m_width = c.moe.intermediate / n;
    m_sharedWidth = c.moe.sharedIntermediate / n;
    const bool mixtral = c.moe.kind == MoeConfig::Kind::Mixtral;
    const std::string p = prefix + (mixtral ? "block_sparse_moe." : "mlp.");
    const char *gate = mixtral ? "w1" : "gate_proj", *up = mixtral ? "w3" : "up_proj", *down = mixtral ? "w2" : "down_proj";
    const std::int64_t H = m_hidden, I = m_width, all = c.moe.intermediate, S = m_sharedWidth, sharedAll = c.moe.sharedIntermediate;
    m_router = floatRows(w, p + "gate.weight", m_experts, H); // replicated: every member routes alike
    // Column-parallel gate/up (this member's rows of the width), row-parallel down (the same columns).
    for (std::int64_t e = 0; e < m_experts; ++e) {
        const std::string x = p + "experts." + std::to_string(e) + ".";
        m_gateUp.push_back(Linear::load(w, {{{x + gate, I, r * I, all}, {x + up, I, r * I, all}}, H, false}, plan));
        m_down.push_back(Linear::load(w, {{{x + down, H}}, I, false, false, r * I, all}, plan));
    }
    if (S > 0) {
        const std::string x = p + "shared_expert.";
        m_sharedGateUp = Linear::load(w, {{{x + "gate_proj", S, r * S, sharedAll}, {x + "up_proj", S, r * S, sharedAll}}, H, false}, plan);
        m_sharedDown = Linear::load(w, {{{x + "down_proj", H}}, S, false, false, r * S, sharedAll}, plan);
        m_sharedGate = floatRows(w, p + "shared_expert_gate.weight", 1, H);
    }
    if (plan.native())
        return;
    // LibTorch: the distinct router rows, so that equal rows give equal logits on any GEMM.
    const auto [rows, inverse, counts] = at::unique_dim(m_router.to(at::kDouble), 0, true, true, false);
    m_routerRows = rows.to(plan.device);
    m_routerInverse = inverse.to(plan.device);
    if (S > 0)
        m_sharedGateDouble = m_sharedGate.to(at::kDouble).to(plan.device);
}

void MoeMlp::checkTensorParallel(const ModelConfig &c, int tpSize)
{
    if (c.moe.kind == MoeConfig::Kind::None || tpSize == 1)
        return;
    const bool mixtral = c.moe.kind == MoeConfig::Kind::Mixtral;
    const auto refuse = [&](const char *what, const char *field, std::int64_t width) {
        throw ConfigError("--tensor-parallel " + std::to_string(tpSize) + ": " + c.modelType + "'s " + what + " intermediate size " + std::to_string(width)
                          + " (" + field + " in config.json) does not divide by it, and each expert is split by its intermediate columns; use"
                          + " an N that divides " + std::to_string(width));
    };
    if (c.moe.intermediate % tpSize != 0)
        refuse("experts'", mixtral ? "intermediate_size" : "moe_intermediate_size", c.moe.intermediate);
    if (c.moe.sharedIntermediate % tpSize != 0)
        refuse("shared expert's", "shared_expert_intermediate_size", c.moe.sharedIntermediate);
}

MoeRouting MoeMlp::route(const float *h, std::int64_t rows) const
{
    MoeRouting r{m_topK, std::vector<std::int32_t>(static_cast<std::size_t>(rows * m_topK)), std::vector<float>(static_cast<std::size_t>(rows * m_topK))};
    const float *router = m_router.data_ptr<float>();
    intraOp()(rows, [&](std::int64_t begin, std::int64_t end) {
        std::vector<double> z(static_cast<std::size_t>(m_experts));
        std::vector<std::int32_t> order(static_cast<std::size_t>(m_experts));
        for (std::int64_t t = begin; t < end; ++t) {
            for (std::int64_t e = 0; e < m_experts; ++e)
                z[static_cast<std::size_t>(e)] = dotDouble(h + t * m_hidden, router + e * m_hidden, m_hidden);
            routeRow(z, m_topK, m_normTopK, order, r.expert.data() + t * m_topK, r.weight.data() + t * m_topK);
        }
    });
    return r;
}

void MoeMlp::addNative(const float *h, std::int64_t rows, float *x, MoeScratch &s) const
{
    const MoeRouting r = route(h, rows);
    // Each expert's tokens in row order, with their weights: no expert sees another's tokens.
    std::vector<std::vector<std::int64_t>> tokens(static_cast<std::size_t>(m_experts));
    std::vector<std::vector<float>> weights(static_cast<std::size_t>(m_experts));
    for (std::int64_t t = 0; t < rows; ++t)
        for (std::int64_t k = 0; k < m_topK; ++k) {
            const auto e = static_cast<std::size_t>(r.expert[static_cast<std::size_t>(t * m_topK + k)]);
            tokens[e].push_back(t);
            weights[e].push_back(r.weight[static_cast<std::size_t>(t * m_topK + k)]);
        }
    // Every buffer at the batch's size at once (an expert may take every row), so that none grows,
    // and is zeroed by the kernel page by page again, when a later expert gets more tokens.
    s.buffer(kGathered, rows * m_hidden);
    s.buffer(kGateUp, rows * 2 * std::max(m_width, m_sharedWidth));
    s.buffer(kOut, rows * m_hidden);
    float *acc = s.buffer(kAcc, rows * m_hidden);
    std::fill(acc, acc + rows * m_hidden, 0.0F);
    for (std::int64_t e = 0; e < m_experts; ++e) // in expert order: each token's sum in the same order
        if (!tokens[static_cast<std::size_t>(e)].empty())
            expertNative(e, tokens[static_cast<std::size_t>(e)], weights[static_cast<std::size_t>(e)], h, acc, s);
    if (m_sharedWidth > 0)
        sharedNative(h, rows, acc, s);
    // Under tensor parallelism acc holds this member's partial outputs, each weighted and added in
    // expert order: one ordered group sum for the whole block, not one per expert.
    reduceSum(m_tp, acc, rows * m_hidden);
    cpu::addRows(x, acc, rows, m_hidden, intraOp());
}

// Gathers the expert's tokens, w2(silu(w1 x) * w3 x) on them, and adds weight x output to each
// token's row (the weight multiplied first, as transformers' expert output times its weight).
void MoeMlp::expertNative(std::int64_t e, const std::vector<std::int64_t> &tokens, const std::vector<float> &weights, const float *h, float *acc,
                          MoeScratch &s) const
{
    const std::int64_t n = static_cast<std::int64_t>(tokens.size()), H = m_hidden, I = m_width;
    float *in = s.buffer(kGathered, n * H);
    for (std::int64_t j = 0; j < n; ++j)
        std::memcpy(in + j * H, h + tokens[static_cast<std::size_t>(j)] * H, static_cast<std::size_t>(H) * sizeof(float));
    float *gu = s.buffer(kGateUp, n * 2 * I);
    m_gateUp[static_cast<std::size_t>(e)].into(in, H, n, gu, 2 * I, false);
    cpu::siluMul(gu, n, I, intraOp());
    float *out = s.buffer(kOut, n * H);
    m_down[static_cast<std::size_t>(e)].into(gu, 2 * I, n, out, H, false);
    intraOp()(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t j = begin; j < end; ++j) { // distinct tokens: no two threads write one row
            const float w = weights[static_cast<std::size_t>(j)];
            float *dst = acc + tokens[static_cast<std::size_t>(j)] * H;
            const float *y = out + j * H;
            for (std::int64_t c = 0; c < H; ++c)
                dst[c] += y[c] * w;
        }
    });
}

// qwen2_moe: acc += sigmoid(shared_expert_gate x) * shared_expert(x), the gate's logit a dot product
// in double rounded to float32, its sigmoid in float32.
void MoeMlp::sharedNative(const float *h, std::int64_t rows, float *acc, MoeScratch &s) const
{
    const std::int64_t H = m_hidden, S = m_sharedWidth;
    float *gu = s.buffer(kGateUp, rows * 2 * S);
    m_sharedGateUp.into(h, H, rows, gu, 2 * S, false);
    cpu::siluMul(gu, rows, S, intraOp());
    float *out = s.buffer(kOut, rows * H);
    m_sharedDown.into(gu, 2 * S, rows, out, H, false);
    const float *gate = m_sharedGate.data_ptr<float>();
    intraOp()(rows, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t t = begin; t < end; ++t) {
            const auto logit = static_cast<float>(dotDouble(h + t * H, gate, H));
            const float g = 1.0F / (1.0F + std::exp(-logit));
            for (std::int64_t c = 0; c < H; ++c)
                acc[t * H + c] += g * out[t * H + c];
        }
    });
}

at::Tensor MoeMlp::expertTorch(std::int64_t e, const at::Tensor &x) const
{
    const std::vector<at::Tensor> gu = m_gateUp[static_cast<std::size_t>(e)].parts(x);
    return m_down[static_cast<std::size_t>(e)](at::silu(gu[0]) * gu[1]);
}

at::Tensor MoeMlp::forward(const at::Tensor &hidden) const
{
    const at::Tensor h = hidden.reshape({-1, m_hidden});
    // The router in double, as on the agent's kernels: top-k by logit (a stable descending sort: ties
    // to the lower index), weights from the softmax over every expert.
    const at::Tensor logits = at::matmul(h.to(at::kDouble), m_routerRows.t()).index_select(1, m_routerInverse);
    const auto [sorted, order] = at::sort(logits, true, -1, true);
    const at::Tensor chosen = order.narrow(1, 0, m_topK);
    at::Tensor weights = at::softmax(logits, -1).gather(1, chosen);
    if (m_normTopK)
        weights = weights / weights.sum(-1, true);
    weights = weights.to(h.scalar_type()).reshape(-1);
    // Each expert's (token, slot) pairs, tokens ascending: the flat choices (token * k + slot) sorted
    // stably by expert, cut by the experts' counts. One host synchronisation a block (the counts),
    // not one per expert (a nonzero each); on a GPU the experts' launches then queue without a stall.
    const at::Tensor flat = chosen.reshape(-1);
    const at::Tensor byExpert = std::get<1>(at::sort(flat, true, 0, false));
    // (scatter_add_, not bincount: CUDA's bincount reads the input's maximum on the host first)
    const at::Tensor counts = at::zeros({m_experts}, flat.options()).scatter_add_(0, flat, at::ones_like(flat)).to(at::kCPU);
    const std::int64_t *count = counts.data_ptr<std::int64_t>();
    at::Tensor out = at::zeros_like(h);
    for (std::int64_t e = 0, first = 0; e < m_experts; first += count[e], ++e) {
        if (count[e] == 0)
            continue;
        const at::Tensor slots = byExpert.narrow(0, first, count[e]);
        const at::Tensor tokens = slots.div(m_topK, "floor");
        const at::Tensor w = weights.index_select(0, slots).unsqueeze(1);
        out.index_add_(0, tokens, expertTorch(e, h.index_select(0, tokens)) * w);
    }
    if (m_sharedWidth > 0) {
        const std::vector<at::Tensor> gu = m_sharedGateUp.parts(h);
        const at::Tensor shared = m_sharedDown(at::silu(gu[0]) * gu[1]);
        const at::Tensor gate = at::sigmoid(at::matmul(h.to(at::kDouble), m_sharedGateDouble.t()).to(at::kFloat)).to(h.scalar_type());
        out = out + gate * shared;
    }
    return groupSum(m_tp, out).view(hidden.sizes()); // one group sum per block, as on the agent's kernels
}

} // namespace cppl::agent
