// SPDX-License-Identifier: MIT
// Rotary position embedding (RoPE) as transformers computes it, on both forward paths.
#pragma once

#include "model/model_config.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <utility>

namespace cppl::agent {

/// The inverse frequencies of one rotary embedding and the cos/sin tables built from them: transformers'
/// default, linear (gemma3's global layers), llama3 and longrope (phi3: short and long factors, cos and
/// sin x the attention factor) scalings, over the head's first rotary width features (phi3's
/// partial_rotary_factor). A family whose layer types rotate with different bases (gemma3) holds one
/// Rotary per base.
class Rotary
{
public:
    Rotary() = default;
    /// inv_freq exactly as transformers computes it (float32: theta^(-2i/rot)), scaled as configured;
    /// `local`: gemma3's sliding layers (rope_local_base_freq, unscaled). On `device`, like every table built from it.
    Rotary(const ModelConfig &c, c10::Device device, bool local = false);

    /// The agent's kernels: cos and sin [T][width()] of the float32 angles t * inv_freq, evaluated in
    /// double (LibTorch's vectorised cos gave other last bits at some positions depending on the threads).
    void tables(std::int64_t T, float *cos, float *sin) const;
    /// LibTorch: cos and sin [T, width()] of the angles in float32, then in `opts`' dtype.
    [[nodiscard]] std::pair<at::Tensor, at::Tensor> tables(std::int64_t T, const at::TensorOptions &opts) const;
    /// x * cos + rotate_half(x) * sin for x [..., T, hd] on its first cos.size(-1) features (the rest as they are).
    [[nodiscard]] static at::Tensor apply(const at::Tensor &x, const at::Tensor &cos, const at::Tensor &sin);
    /// The rotated features of each head.
    [[nodiscard]] std::int64_t width() const { return m_rot; }

private:
    /// longrope: the long factors' frequencies past the pre-training length (transformers' dynamic
    /// update, on the forward pass's length T: a padded batch's width, as transformers sees it).
    [[nodiscard]] const at::Tensor &invFreq(std::int64_t T) const { return m_longInvFreq.defined() && static_cast<double>(T) > m_original ? m_longInvFreq : m_invFreq; }

    at::Tensor m_invFreq;     ///< [rot / 2], float32
    at::Tensor m_longInvFreq; ///< longrope's long factors; undefined otherwise
    double m_original = 0;    ///< longrope: original_max_position_embeddings
    double m_attention = 1;   ///< longrope: cos and sin x this
    std::int64_t m_rot = 0;
};

} // namespace cppl::agent
