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

struct EvalProgress
{
    std::int64_t windowsDone = 0;
    std::int64_t windowsTotal = 0;
    std::int64_t tokensDone = 0;
    std::int64_t tokensTotal = 0;
    double seconds = 0;
};

/// What the round loop (round_loop.h) asks of a model: windows [first, end) of the plan scored
/// into NllStats, with a call after each batch. Evaluator is the model's; a second model scored
/// on the same windows (a reference) would be a second implementation beside it.
class WindowScorer
{
public:
    using Progress = std::function<void(const EvalProgress &, const NllStats &)>;

    virtual ~WindowScorer() = default;
    /// @brief Evaluates windows [first, end) and adds them to `stats`; calls `progress` after each batch.
    virtual void run(std::int64_t first, std::int64_t end, NllStats &stats, const Progress &progress) = 0;
};

/**
 * @brief Runs windows of a plan through a model and adds every scored token's NLL to NllStats.
 *
 * Every forward pass has the same shape [batch, plan.maxInput]: windows are right-padded (causal
 * models never look right) and a short final batch is padded with empty rows, so a window's logits
 * do not depend on which batch it landed in. Only scored positions reach the vocabulary projection;
 * log-softmax runs in float32 (or wider), and each NLL is widened to double into the exact sums.
 */
class Evaluator final : public WindowScorer
{
public:
    Evaluator(LanguageModel &model, std::span<const std::uint32_t> flatTokens, const WindowPlan &plan, std::int64_t batch);
    void run(std::int64_t first, std::int64_t end, NllStats &stats, const Progress &progress = {}) override;
    /// Evaluates the first batch's windows and forgets the result: on a GPU each kernel's module
    /// loads at its first launch and cuBLAS makes its handle and workspaces at its first product,
    /// a one-off cost that belongs to no batch. Run before the clock starts, so that tokens per
    /// second (which scaling efficiency compares across node counts) measures the evaluation.
    /// Returns its seconds; every kernel has finished when it returns.
    double warmUp();

private:
    LanguageModel &m_model;
    std::span<const std::uint32_t> m_tokens;
    const WindowPlan &m_plan;
    std::int64_t m_batch;
};

} // namespace cppl::agent
