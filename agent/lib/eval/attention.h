// SPDX-License-Identifier: MIT
// Causal attention on LibTorch's kernels: the forward passes for GPUs, bfloat16/float16 and the
// BLAS/oneDNN back ends (the agent's own float32 kernel is cpu::causalAttention).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace cppl::agent {

/// Query rows per block of causalAttention.
inline constexpr std::int64_t kAttentionBlock = 128;

/// -inf above the diagonal of [T, T]. transformers uses the dtype's lowest finite value; after
/// softmax both give exactly 0, and -inf exists in every dtype (bfloat16/float16 included). A sliding
/// window W > 0 also masks the keys s <= t - W: query t sees max(0, t - W + 1)..t, W keys with itself
/// (transformers' masking_utils: causal and kv_idx > q_idx - W).
[[nodiscard]] at::Tensor causalMask(std::int64_t T, const at::TensorOptions &opts, std::int64_t window = 0);

/// What a family changes in attention: the scores' scale (0: 1 / sqrt(head_dim)), Gemma 2's
/// soft-capping of the scaled scores (cap tanh(s / cap), before the mask; 0: none), and whether the
/// mask has a sliding window (then CUDA's fused attention is given the mask).
struct AttentionOptions
{
    double scale = 0;
    double softcap = 0;
    bool windowed = false;
};

/// Whether causalAttention on @p device with @p options takes at::scaled_dot_product_attention:
/// then it reads no mask unless windowed (the caller need not build [T, T] causal masks).
[[nodiscard]] bool usesFusedAttention(const c10::Device &device, const AttentionOptions &options);

/**
 * Causal attention over query blocks: block i attends only to keys 0..end of block i, so the
 * masked upper triangle is mostly never computed (37% less work at T = 512 with 128-row blocks) and
 * the score matrix never exists in full (a quarter of the memory). Grouped-query heads are folded
 * into the rows of one GEMM per KV head instead of copying K/V per query head. On CUDA with a
 * LibTorch that has it (2.0 and later), at::scaled_dot_product_attention instead (given the mask when
 * windowed, else its own causal mask; not with another scale or soft-capping).
 * q [B, H, T, hd], k and v [B, KV, T, hd], mask from causalMask (undefined allowed where
 * usesFusedAttention and not windowed) -> [B, T, H * hd].
 */
[[nodiscard]] at::Tensor causalAttention(const at::Tensor &q, const at::Tensor &k, const at::Tensor &v, const at::Tensor &mask,
                                         const AttentionOptions &options = {}, std::int64_t block = kAttentionBlock);

} // namespace cppl::agent
