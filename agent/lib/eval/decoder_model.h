// SPDX-License-Identifier: MIT
// What every native decoder shares: the embedding, the final norm and the vocabulary head, the
// native path's workspace, and the LanguageModel entry points built on them.
#pragma once

#include "cpu_gemm.h"
#include "language_model.h"
#include "linear.h"
#include "norm.h"
#include "vocabulary.h"

#include "model/model_config.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cppl::agent {

class TensorParallelGroup;
class WeightSource;

/// Activations of a native forward pass, reused while the batch shape stays the same: fresh buffers
/// (~85 MB per batch at the 18M bench shape) cost a page fault per 4 KiB on every batch. Allocated (and
/// touched) by the model's prepare() before evaluation starts, else by the first forward pass. Each
/// model names its buffers by index and gives their sizes in floats for a shape.
class Workspace
{
public:
    /// Reallocates every buffer when [rows = batch x T, T] changed; true when it did (the caller then
    /// fills its per-shape tables).
    bool reserve(std::int64_t rows, std::int64_t T, const std::vector<std::int64_t> &floats);
    [[nodiscard]] float *operator[](std::size_t i) const { return m_buffers[i].get(); }
    [[nodiscard]] std::int64_t rows() const { return m_rows; }

private:
    std::int64_t m_rows = 0, m_T = 0;
    std::vector<cpu::FloatBuffer> m_buffers;
};

/**
 * A decoder-only model over a memory-mapped checkpoint, on one of two forward paths chosen by its
 * Linears' kind: the agent's own float32 kernels (activations row-major in the workspace, the fused
 * head) or LibTorch's operators (BLAS, oneDNN, other dtypes, GPUs). A family supplies its layers'
 * steps on both paths (llama_model.cpp, gpt2_model.cpp); docs/models.md, "How to add a family".
 */
class DecoderModel : public LanguageModel
{
public:
    [[nodiscard]] const ModelInfo &info() const override { return m_info; }
    [[nodiscard]] at::Tensor logits(const at::Tensor &ids) override;
    [[nodiscard]] at::Tensor logitsAt(const at::Tensor &ids, const at::Tensor &flat) override;
    void prepare(std::int64_t batch, std::int64_t width) override;
    [[nodiscard]] at::Tensor targetLogProbs(const at::Tensor &ids, const at::Tensor &flat, const at::Tensor &targets) override;
    /// LibTorch's path on one rank: the scored rows of the final norm's output, for the evaluator's
    /// chunked head (headLogits); undefined on the agent's kernels and under tensor parallelism,
    /// whose targetLogProbs() scores the targets itself, and for a quantized head (dequantized per
    /// product: once per chunk would cost more than its logits).
    [[nodiscard]] at::Tensor scoredHidden(const at::Tensor &ids, const at::Tensor &flat) override;
    [[nodiscard]] at::Tensor headLogits(const at::Tensor &rows) override { return m_head(rows); }
    /// The agent's kernels: the forward pass, then each chunk through the fused head's projection
    /// (the rows of targetLogProbs(), the same bits). LibTorch: whole as logitsAt(), or each chunk
    /// projected from the kept hidden states of the scored rows.
    [[nodiscard]] std::unique_ptr<ScoredLogits> scoredLogits(const at::Tensor &ids, const at::Tensor &flat, LogitsLayout layout) override;

protected:
    /// The Linears' plan from the options and the checkpoint's quantization_config (GPTQ/AWQ), if any.
    DecoderModel(const std::string &dir, ModelConfig c, const LoadOptions &o);

    /// The workspace's buffer 0 is the residual stream [B * T, hidden], where forwardNative leaves the
    /// last layer's output (before the final norm).
    static constexpr std::size_t kResidual = 0;
    /// Sizes the workspace for a batch shape (Workspace::reserve) and fills any per-shape tables.
    virtual void ensureWorkspace(std::int64_t batch, std::int64_t T) = 0;
    /// The forward pass on the agent's own kernels, into the workspace's residual stream.
    virtual void forwardNative(const at::Tensor &ids) = 0;
    /// The forward pass on LibTorch's operators: the residual stream [B, T, hidden] before the final norm.
    [[nodiscard]] virtual at::Tensor forwardLibTorch(const at::Tensor &ids) = 0;

    [[nodiscard]] bool native() const { return m_linears.native(); }
    /// What the WeightSource hands out: the evaluation dtype and device on LibTorch's path; float32
    /// on the CPU for the agent's kernels (whose activations are float32 whatever the products).
    [[nodiscard]] LoadOptions sourceOptions() const;
    /// The vocabulary's two ends and the final norm, loaded by the family's constructor. A tied head
    /// is the embedding's table; on the agent's kernels the lookup then reads the packed head.
    void setVocabulary(WeightSource &w, const std::string &embedding, const std::string &untiedHead);
    /// ModelInfo from the config and what the load read; the last step of a family's constructor.
    void setInfo(const std::string &dir, const WeightSource &w);

    /// Tensor parallelism (docs/models.md, "Tensor parallelism"): this rank's member number and the
    /// group's size (0 and 1 without a group).
    [[nodiscard]] int tpRank() const;
    [[nodiscard]] int tpSize() const;
    /// Refuses, before any weight loads, a split the group cannot make: query heads and the MLP's
    /// intermediate width must divide by N, K/V heads divide by N (split) or divide N (replicated).
    void checkTensorParallel(std::int64_t heads, std::int64_t kvHeads, std::int64_t intermediate) const;
    /// This rank's K/V heads: [first, first + count) of kvHeads (split, or the one its query heads read).
    [[nodiscard]] std::pair<std::int64_t, std::int64_t> kvHeadSlice(std::int64_t heads, std::int64_t kvHeads) const;
    /// This rank's vocabulary: contiguous ranges of ceil(V / N), the last shorter (no padding).
    [[nodiscard]] cpu::VocabSlice vocabSlice() const;

    /// A row-parallel product (o_proj, down_proj) joins the residual stream x here. One rank:
    /// accumulated in place (the kernel's sums start from x). Under tensor parallelism each rank's
    /// product covers only its slice of the input columns: the partial outputs (member 0's with the
    /// bias, which the others do not load) are summed over the group in member order, then added to x.
    void addRowParallel(const Linear &l, const float *in, std::int64_t ldin, std::int64_t rows, float *x) const;
    /// The same on LibTorch's path: the output to add to the residual stream (the group's sum of
    /// the partial outputs, groupSum()).
    [[nodiscard]] at::Tensor rowParallel(const Linear &l, const at::Tensor &in) const;

    ModelConfig m_c;
    LoadOptions m_opts;
    LinearPlan m_linears; ///< how every Linear of the model is stored (linear.h)
    ModelInfo m_info;
    Embedding m_embedding;
    Norm m_finalNorm;
    VocabHead m_head;
    Workspace m_ws;
    /// The ranks splitting this model; null: one rank holds all of it.
    TensorParallelGroup *m_tp = nullptr;
    /// Tensor parallelism: the partial row-parallel outputs before the group's sum.
    mutable cpu::FloatBuffer m_partial;
    mutable std::int64_t m_partialFloats = 0;

private:
    /// Hidden states after the final norm, [B, T, hidden].
    at::Tensor hidden(const at::Tensor &ids);
};

} // namespace cppl::agent
