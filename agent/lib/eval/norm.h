// SPDX-License-Identifier: MIT
// The normalisations of a decoder's residual stream, on both forward paths.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace cppl::agent {

/// RMSNorm (Llama) or LayerNorm (GPT-2) over rows of the weight's width. A family with another norm
/// (Gemma's (1 + w) RMSNorm, per-head q/k norms) adds a kind here.
class Norm
{
public:
    Norm() = default;
    /// weight * x / sqrt(mean(x^2) + eps), as transformers' LlamaRMSNorm (float32 inside).
    [[nodiscard]] static Norm rms(at::Tensor weight, double eps);
    /// (x - mean) / sqrt(var + eps) * weight + bias (torch.nn.LayerNorm).
    [[nodiscard]] static Norm layer(at::Tensor weight, at::Tensor bias, double eps);

    /// The agent's kernels on `rows` float32 rows (x may equal out).
    void operator()(const float *x, std::int64_t rows, float *out) const;
    /// LibTorch's operators, in x's dtype and device.
    [[nodiscard]] at::Tensor operator()(const at::Tensor &x) const;

private:
    enum class Kind { Rms, Layer };
    Norm(Kind kind, at::Tensor weight, at::Tensor bias, double eps);
    Kind m_kind = Kind::Rms;
    at::Tensor m_weight, m_bias;
    double m_eps = 0;
};

} // namespace cppl::agent
