// SPDX-License-Identifier: MIT
// The normalisations of a decoder's residual stream, on both forward paths.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace cppl::agent {

/// RMSNorm (Llama), Gemma's RMSNorm with (1 + w), or LayerNorm (GPT-2) over rows of the weight's width;
/// an RMSNorm also over each head of a row (qwen3's q/k norms). A family with another norm adds a kind here.
class Norm
{
public:
    Norm() = default;
    /// weight * x / sqrt(mean(x^2) + eps), as transformers' LlamaRMSNorm (float32 inside).
    [[nodiscard]] static Norm rms(at::Tensor weight, double eps);
    /// Gemma: x / sqrt(mean(x^2) + eps) * (1 + w), (1 + w) formed and multiplied in float32 (Gemma2RMSNorm).
    [[nodiscard]] static Norm rmsOnePlus(const at::Tensor &weight, double eps);
    /// (x - mean) / sqrt(var + eps) * weight + bias (torch.nn.LayerNorm).
    [[nodiscard]] static Norm layer(at::Tensor weight, at::Tensor bias, double eps);

    /// The agent's kernels on `rows` float32 rows (x may equal out).
    void operator()(const float *x, std::int64_t rows, float *out) const;
    /// An RMSNorm's kernels in place on `heads` pieces of the weight's width at the start of each of
    /// `rows` rows of stride ld (the q or k heads of a q/k/v row).
    void heads(float *x, std::int64_t rows, std::int64_t ld, std::int64_t heads) const;
    /// LibTorch's operators, in x's dtype and device, over x's last dimension.
    [[nodiscard]] at::Tensor operator()(const at::Tensor &x) const;

private:
    enum class Kind { Rms, RmsOnePlus, Layer };
    Norm(Kind kind, at::Tensor weight, at::Tensor bias, double eps);
    Kind m_kind = Kind::Rms;
    at::Tensor m_weight, m_bias;
    double m_eps = 0;
};

} // namespace cppl::agent
