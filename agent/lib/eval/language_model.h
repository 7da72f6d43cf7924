// SPDX-License-Identifier: MIT
#pragma once

// ATen only: <torch/torch.h> costs ~40 s and 1.3 GB per translation unit here, ATen ~5 s.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "model_info.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cppl::agent {

class TensorParallelGroup;

struct LoadOptions
{
    c10::ScalarType dtype = c10::ScalarType::Float;
    c10::Device device = c10::Device(c10::DeviceType::CPU);
    GemmBackend gemm = GemmBackend::Auto;
    QuantRequest quant; ///< --quantize (none by default)
    /// The ranks splitting the model (tensor_parallel.h), outliving it; null: this rank holds all of it.
    TensorParallelGroup *tp = nullptr;
    WeightUpload upload = WeightUpload::Auto; ///< --weight-upload: how weights reach a GPU
};

/// @brief One batch's logits at its scored positions, handed out in chunks of rows: what a
/// reference model's comparison reads from both models side by side (never the [N, V] logits of
/// both at once).
class ScoredLogits
{
public:
    virtual ~ScoredLogits() = default;
    /// Rows per chunk() at most.
    [[nodiscard]] virtual std::int64_t chunkRows() const = 0;
    /// Logits [m, V] of scored rows [r0, r0 + m): float32 rows on the CPU for the agent's own
    /// kernels (a buffer valid until the next call), else in the model's dtype on its device.
    [[nodiscard]] virtual at::Tensor chunk(std::int64_t r0, std::int64_t m) = 0;
    /// Every row at once where they were computed whole (LibTorch's path, kept whole, and
    /// TorchScript); undefined where the rows come chunk by chunk.
    [[nodiscard]] virtual at::Tensor whole() const { return {}; }
    /// Whether chunk() gives float32 rows from the agent's fused head (log p(target) of a row is
    /// then cpu::logSoftmaxAt of its logits, the same bits as targetLogProbs()).
    [[nodiscard]] virtual bool native() const { return false; }
};

/// Rows of `vocab` logits per chunk on LibTorch's path: 2^22 logits on the CPU, 2^25 on a GPU.
[[nodiscard]] std::int64_t logitsChunkRows(std::int64_t vocab, bool gpu);

/// How scoredLogits() keeps the logits on LibTorch's path: whole (the model being evaluated: its
/// log-probabilities are then the bits of a run without a reference) or projected chunk by chunk
/// (a reference: less memory).
enum class LogitsLayout { Whole, Chunks };

/// @brief A causal language model: int64 ids [B, T] -> next-token logits.
class LanguageModel
{
public:
    virtual ~LanguageModel() = default;
    [[nodiscard]] virtual const ModelInfo &info() const = 0;
    /// @brief Logits [B, T, V] for every position (tests, small inputs).
    [[nodiscard]] virtual at::Tensor logits(const at::Tensor &ids) = 0;
    /// @brief Logits [N, V] only for the flattened positions (b * T + t) listed; native models
    /// skip the vocabulary projection for every position that is not scored.
    [[nodiscard]] virtual at::Tensor logitsAt(const at::Tensor &ids, const at::Tensor &flatPositions);
    /// @brief log p(target) as double [N, 1] on the CPU for the flattened positions and their target
    /// ids ([N] int64 each), where the model computes them itself: the native float32 CPU path projects
    /// chunks of rows onto the vocabulary and reduces each row at once, so the [N, V] logits never
    /// exist. An undefined tensor otherwise (the caller then uses logitsAt and a log-softmax).
    [[nodiscard]] virtual at::Tensor targetLogProbs(const at::Tensor & /*ids*/, const at::Tensor & /*flatPositions*/, const at::Tensor & /*targets*/)
    {
        return {};
    }
    /// @brief The final normed hidden states [N, hidden] at the flattened positions, where the
    /// caller applies headLogits() a chunk of rows at a time (LibTorch's path on one rank: the
    /// batch's [N, V] logits then never exist). Undefined where the model has no separate head
    /// (TorchScript) or scores the targets itself (targetLogProbs).
    [[nodiscard]] virtual at::Tensor scoredHidden(const at::Tensor & /*ids*/, const at::Tensor & /*flatPositions*/) { return {}; }
    /// @brief Logits [m, V] of rows [m, hidden] of scoredHidden(), in the model's dtype on its device.
    [[nodiscard]] virtual at::Tensor headLogits(const at::Tensor &rows);
    /// @brief The forward pass of ids and the logits at the flattened positions listed, chunk by
    /// chunk (valid until the model's next forward pass). This default computes logitsAt() whole.
    [[nodiscard]] virtual std::unique_ptr<ScoredLogits> scoredLogits(const at::Tensor &ids, const at::Tensor &flatPositions, LogitsLayout layout);
    /// @brief Called once with the fixed batch shape before evaluation. A TorchScript module learns
    /// its vocabulary here (a traced module may accept only the shape it was traced with).
    virtual void prepare(std::int64_t /*batch*/, std::int64_t /*width*/) {}
};

/// @brief A Hugging Face directory (config.json + safetensors), weights memory-mapped.
[[nodiscard]] std::unique_ptr<LanguageModel> loadNativeModel(const std::string &dir, const LoadOptions &options);
/// @brief A TorchScript module mapping int64 ids [B, T] to logits [B, T, V].
[[nodiscard]] std::unique_ptr<LanguageModel> loadTorchScriptModel(const std::string &path, const LoadOptions &options);
/// @brief Directory -> native, file -> TorchScript. Throws IoError/ConfigError naming the problem.
[[nodiscard]] std::unique_ptr<LanguageModel> loadModel(const std::string &path, const LoadOptions &options);

/// @brief Whether this LibTorch has at::scaled_dot_product_attention (2.0 and later; Debian's 1.13
/// does not): the native models use it, causal, on the GPU.
[[nodiscard]] bool hasFusedAttention();

} // namespace cppl::agent
