// SPDX-License-Identifier: MIT
// Rotary position embedding (RoPE) as transformers computes it, on both forward paths.
#pragma once

#include "model/model_config.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <utility>

namespace cppl::agent {

/// The inverse frequencies of one rotary embedding and the cos/sin tables built from them. Another
/// scaling (phi3's longrope) is another way of making the frequencies; a family whose layer types
/// rotate with different bases (gemma3) holds one Rotary per base.
class Rotary
{
public:
    Rotary() = default;
    /// inv_freq exactly as transformers computes it (float32: theta^(-2i/hd)), with llama3 scaling
    /// when configured; on `device`, like every table built from it.
    Rotary(const ModelConfig &c, c10::Device device);

    /// The agent's kernels: cos and sin [T][hd] of the float32 angles t * inv_freq, evaluated in
    /// double (LibTorch's vectorised cos gave other last bits at some positions depending on the threads).
    void tables(std::int64_t T, float *cos, float *sin) const;
    /// LibTorch: cos and sin [T, hd] of the angles in float32, then in `opts`' dtype.
    [[nodiscard]] std::pair<at::Tensor, at::Tensor> tables(std::int64_t T, const at::TensorOptions &opts) const;
    /// x * cos + rotate_half(x) * sin for x [..., T, hd].
    [[nodiscard]] static at::Tensor apply(const at::Tensor &x, const at::Tensor &cos, const at::Tensor &sin);

private:
    at::Tensor m_invFreq; ///< [hd / 2], float32
    std::int64_t m_hd = 0;
};

} // namespace cppl::agent
