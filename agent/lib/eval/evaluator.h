// SPDX-License-Identifier: MIT
// Windows of a plan through a model into exact NllStats. The interface (WindowScorer) is torch-free,
// so that the round loop that drives it compiles without LibTorch; Evaluator, the model's, is
// defined in evaluator.cpp, on ATen.
#pragma once

#include "cppl/statistics.h"
#include "cppl/window_plan.h"

#include <cstdint>
#include <functional>
#include <span>

namespace cppl::agent {

class LanguageModel;
struct ReferenceStats;

struct EvalProgress
{
    std::int64_t windowsDone = 0;
    std::int64_t windowsTotal = 0;
    std::int64_t tokensDone = 0;
    std::int64_t tokensTotal = 0;
    double seconds = 0;
};

/// What the round loop (round_loop.h) asks of a model: windows [first, end) of the plan scored
/// into NllStats, with a call after each batch, and with a reference model (--reference-model)
/// the comparison of the two on the same windows, in the same pass, into ReferenceStats.
class WindowScorer
{
public:
    using Progress = std::function<void(const EvalProgress &, const NllStats &)>;

    virtual ~WindowScorer() = default;
    /// @brief Evaluates windows [first, end) and adds them to `stats` (and, where it compares with
    /// a reference, to `reference`: null when there is none); calls `progress` after each batch.
    virtual void run(std::int64_t first, std::int64_t end, NllStats &stats, ReferenceStats *reference, const Progress &progress) = 0;
    /// @brief Whether run() compares with a reference (then the caller passes its ReferenceStats).
    [[nodiscard]] virtual bool comparesReference() const { return false; }
};

/**
 * @brief Runs windows of a plan through a model and adds every scored token's NLL to NllStats.
 *
 * Every forward pass has the same shape [batch, plan.maxInput]: windows are right-padded (causal
 * models never look right) and a short final batch is padded with empty rows, so a window's logits
 * do not depend on which batch it landed in. Only scored positions reach the vocabulary projection;
 * log-softmax runs in float32 (or wider), and each NLL is widened to double into the exact sums.
 *
 * With a reference model both run on each batch, and their logits are compared chunk by chunk
 * (reference_compare.h); the model's own log-probabilities keep the bits of a run without one.
 */
class Evaluator final : public WindowScorer
{
public:
    Evaluator(LanguageModel &model, std::span<const std::uint32_t> flatTokens, const WindowPlan &plan, std::int64_t batch,
              LanguageModel *reference = nullptr);
    void run(std::int64_t first, std::int64_t end, NllStats &stats, ReferenceStats *reference, const Progress &progress = {}) override;
    [[nodiscard]] bool comparesReference() const override { return m_reference != nullptr; }
    /// Evaluates the first batch's windows and forgets the result: on a GPU each kernel's module
    /// loads at its first launch and cuBLAS makes its handle and workspaces at its first product,
    /// a one-off cost that belongs to no batch. Run before the clock starts, so that tokens per
    /// second (which scaling efficiency compares across node counts) measures the evaluation.
    /// Returns its seconds; every kernel has finished when it returns.
    double warmUp();
    /// Evaluates the first @p batches batches and forgets the result (--profile's pass, before the
    /// clock like warmUp()); returns the tokens it scored. Every kernel has finished when it returns.
    std::int64_t scratchPass(std::int64_t batches);
    /// steadySeconds() when the first batch's log-probabilities reached the host (the warm-up's on
    /// a GPU); 0 before any batch. The result's first_token_seconds.
    [[nodiscard]] double firstBatchAt() const { return m_firstBatchAt; }

private:
    LanguageModel &m_model;
    LanguageModel *m_reference;
    std::span<const std::uint32_t> m_tokens;
    const WindowPlan &m_plan;
    std::int64_t m_batch;
    double m_firstBatchAt = 0;
    std::int64_t m_headChunk = 0; ///< rows per chunk of the vocabulary head on LibTorch's path, once known
};

/// @brief The steady clock's seconds since its epoch (first_token_seconds' clock).
[[nodiscard]] double steadySeconds();

} // namespace cppl::agent
