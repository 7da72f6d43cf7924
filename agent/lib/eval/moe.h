// SPDX-License-Identifier: MIT
// A mixture-of-experts MLP: Mixtral's block_sparse_moe and Qwen2-MoE's sparse mlp (with its shared
// expert), the step that replaces a Llama layer's MLP (llama_model.cpp) on both forward paths.
#pragma once

#include "cpu_gemm.h"
#include "linear.h"
#include "model/model_config.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cppl::agent {

class TensorParallelGroup;
class WeightSource;

/// Each token's experts and their weights, topK per row: the experts in descending order of router
/// logit, equal logits by the lower expert index.
struct MoeRouting
{
    std::int64_t topK = 0;
    std::vector<std::int32_t> expert; ///< [rows * topK]
    std::vector<float> weight;        ///< [rows * topK]
};

/// The native path's buffers, shared by a model's MoE layers, each grown to the largest batch seen.
class MoeScratch
{
public:
    /// Buffer `i` with room for at least `floats` floats (its contents are not kept when it grows).
    float *buffer(std::size_t i, std::int64_t floats);

private:
    std::vector<cpu::FloatBuffer> m_buffers;
    std::vector<std::int64_t> m_floats;
};

/**
 * One sparse MLP. The router's logits are dot products in double of each token's hidden state with
 * the router's rows (the float32 products are exact in double; the sum in a fixed order, so equal
 * router rows give equal logits and tie exactly); in double too are the softmax over every expert,
 * the top-k (descending logit, ties to the lower expert index: a strict order, so the choice
 * never depends on the batch, the threads or the rank) and the renormalisation of the k weights
 * (mixtral always, qwen2_moe with norm_topk_prob): the float64 reference's order
 * (families_reference.py), each weight rounded to float32 once. A token's row is then
 * Σ over its experts, in expert order, of weight × w2(silu(w1 x) * w3 x) (qwen2_moe:
 * gate_proj/up_proj/down_proj), plus (qwen2_moe) sigmoid(shared_expert_gate x) × shared_expert(x).
 *
 * The agent's kernels: the tokens routed to each expert are gathered (no padding, no other expert's
 * tokens), multiplied as one product per expert, and added back expert by expert; every output
 * element of a product is one FMA chain whatever the rows beside it (cpu_gemm.h), so a token's bits
 * do not depend on how many tokens share its experts. LibTorch: index_select, the expert's product,
 * index_add_ in expert order (a token appears at most once per expert, so no two adds collide).
 *
 * Tensor parallelism (docs/models.md, "Tensor parallelism"): every expert (and the shared expert)
 * is split as a dense MLP is, w1/w3 (gate/up) by this member's rows of the intermediate width,
 * w2 (down) by the same columns; the router and the shared expert's gate are replicated. The hidden
 * state entering the block is the same bits on every member (the attention's output is the group's
 * ordered sum), so every member routes every token identically. Each member accumulates its chosen
 * experts' weighted partial outputs (and the shared expert's) in expert order, as one rank does the
 * whole outputs, and the block ends in ONE ordered group sum of that accumulator (float32).
 */
class MoeMlp
{
public:
    /// Loads the sparse MLP of the layer whose tensors start with `prefix` ("model.layers.N."): with
    /// a group, this member's slices of each expert (checkTensorParallel first).
    MoeMlp(WeightSource &w, const ModelConfig &c, const std::string &prefix, const LinearPlan &plan, TensorParallelGroup *tp = nullptr);

    /// Refuses, before any weight loads, experts (or a shared expert) whose intermediate width the
    /// group's size N does not divide; names the config.json field and the figures.
    static void checkTensorParallel(const ModelConfig &c, int tpSize);

    /// x[r] += moe(h[r]) for `rows` float32 rows of width hidden (the agent's kernels).
    void addNative(const float *h, std::int64_t rows, float *x, MoeScratch &s) const;
    /// moe(h) for h [..., hidden] (LibTorch's operators, any dtype and device).
    [[nodiscard]] at::Tensor forward(const at::Tensor &h) const;
    /// Each row's experts and weights (float32 rows of width hidden).
    [[nodiscard]] MoeRouting route(const float *h, std::int64_t rows) const;

private:
    void expertNative(std::int64_t e, const std::vector<std::int64_t> &tokens, const std::vector<float> &weights, const float *h, float *acc,
                      MoeScratch &s) const;
    void sharedNative(const float *h, std::int64_t rows, float *acc, MoeScratch &s) const;
    [[nodiscard]] at::Tensor expertTorch(std::int64_t e, const at::Tensor &x) const;

    /// m_width and m_sharedWidth: this member's columns of each expert's (all of them on one rank).
    std::int64_t m_hidden = 0, m_experts = 0, m_topK = 0, m_width = 0, m_sharedWidth = 0;
    bool m_normTopK = false;
    at::Tensor m_router;        ///< [experts, hidden] float32 on the CPU (the agent's kernels)
    at::Tensor m_sharedGate;    ///< [1, hidden] likewise (qwen2_moe)
    at::Tensor m_routerRows;    ///< LibTorch: the router's distinct rows in double on the device ...
    at::Tensor m_routerInverse; ///< ... and each expert's row among them, so equal rows tie exactly
    at::Tensor m_sharedGateDouble;
    std::vector<Linear> m_gateUp, m_down; ///< per expert: w1 and w3 stacked (gate, up), w2
    Linear m_sharedGateUp, m_sharedDown;  ///< qwen2_moe's shared expert
    TensorParallelGroup *m_tp = nullptr;  ///< the members splitting the experts; null: one rank
};

} // namespace cppl::agent
