// SPDX-License-Identifier: MIT
#include "evaluator.h"

#include "language_model.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <chrono>

namespace cppl::agent {

Evaluator::Evaluator(LanguageModel &model, std::span<const std::uint32_t> flatTokens, const WindowPlan &plan, std::int64_t batch)
    : m_model(model), m_tokens(flatTokens), m_plan(plan), m_batch(batch)
{
    CPPL_ENFORCE(static_cast<std::int64_t>(flatTokens.size()) >= plan.flatLength, "token array shorter than the plan");
}

void Evaluator::run(std::int64_t first, std::int64_t end, NllStats &stats, const Progress &progress)
{
    c10::InferenceMode guard;
    const std::int64_t W = m_plan.maxInput;
    const auto start = std::chrono::steady_clock::now();
    EvalProgress p;
    p.windowsTotal = end - first;
    for (std::int64_t w = first; w < end; ++w)
        p.tokensTotal += m_plan.windows[static_cast<std::size_t>(w)].scored();

    at::Tensor ids = at::zeros({m_batch, W}, at::TensorOptions().dtype(at::kLong));
    std::vector<std::int64_t> flat;
    std::vector<std::int64_t> targets;
    for (std::int64_t b0 = first; b0 < end; b0 += m_batch) {
        const std::int64_t rows = std::min(m_batch, end - b0);
        ids.zero_();
        auto acc = ids.accessor<std::int64_t, 2>();
        flat.clear();
        targets.clear();
        for (std::int64_t r = 0; r < rows; ++r) {
            const Window &win = m_plan.windows[static_cast<std::size_t>(b0 + r)];
            for (std::int64_t i = 0; i < win.inputLength(); ++i)
                acc[r][i] = m_tokens[static_cast<std::size_t>(win.inputBegin + i)];
            if (win.bosFirst)
                acc[r][0] = m_plan.options.bosToken;
            for (std::int64_t t = win.scoredBegin; t < win.scoredEnd; ++t) {
                flat.push_back(r * W + (t - 1 - win.inputBegin));
                targets.push_back(m_tokens[static_cast<std::size_t>(t)]);
            }
        }
        if (!flat.empty()) {
            const auto longOpts = at::TensorOptions().dtype(at::kLong);
            const at::Tensor pos = at::from_blob(flat.data(), {static_cast<std::int64_t>(flat.size())}, longOpts).clone();
            const at::Tensor tgt = at::from_blob(targets.data(), {static_cast<std::int64_t>(targets.size()), 1}, longOpts).clone();
            at::Tensor logits = m_model.logitsAt(ids, pos);
            if (logits.scalar_type() != at::kFloat && logits.scalar_type() != at::kDouble)
                logits = logits.to(at::kFloat); // log-softmax in float32 or wider, always
            const at::Tensor logp = at::log_softmax(logits, -1).gather(1, tgt.to(logits.device())).to(at::kCPU, at::kDouble);
            const double *lp = logp.data_ptr<double>();
            for (std::int64_t i = 0; i < logp.size(0); ++i)
                stats.addToken(-lp[i]);
        }
        stats.windows += rows;
        p.windowsDone += rows;
        p.tokensDone += static_cast<std::int64_t>(flat.size());
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (progress)
            progress(p, stats);
    }
}

} // namespace cppl::agent
