// SPDX-License-Identifier: MIT
#include "evaluator.h"

#include "compute_spec_c10.h"
#include "language_model.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>

namespace cppl::agent {

namespace {
/// Log-softmax rows per chunk: 2^22 elements (16 MiB of float32) whatever the vocabulary, on the CPU
/// (the buffer stays in cache); 2^25 (128 MiB) on a GPU, where each chunk costs a few kernel launches
/// (a 32000-word vocabulary: 63 chunks per 8192 tokens, 8 now; docs/speed.md, "On a GPU"). The
/// buffer and its float32 copy of the logits fit in the batch sizing's 1 GiB reserve.
constexpr std::int64_t kLogSoftmaxChunkElements = std::int64_t{1} << 22;
constexpr std::int64_t kLogSoftmaxChunkElementsGpu = std::int64_t{1} << 25;

/// One batch's input, built on the host and sent to the model's device. On a GPU the host side is
/// pinned and copied without blocking; reusing it for the next batch is safe because each batch
/// ends with a blocking copy of its results, which waits for the whole stream.
class BatchInput
{
public:
    BatchInput(std::int64_t batch, std::int64_t width, const c10::Device &device)
        : m_width(width), m_onDevice(at::TensorOptions().device(device))
    {
        const auto host = at::TensorOptions().dtype(at::kLong).pinned_memory(device.is_cuda());
        m_ids = at::zeros({batch, width}, host);
        m_positions = at::empty({batch * width}, host);
        m_targets = at::empty({batch * width}, host);
    }

    /// Windows [first, first + rows) as rows of ids (right-padded with zeros), and every scored
    /// position (b * width + t) with its target id; returns how many positions are scored.
    std::int64_t fill(const WindowPlan &plan, std::span<const std::uint32_t> tokens, std::int64_t first, std::int64_t rows)
    {
        m_ids.zero_();
        auto acc = m_ids.accessor<std::int64_t, 2>();
        std::int64_t *pos = m_positions.data_ptr<std::int64_t>();
        std::int64_t *tgt = m_targets.data_ptr<std::int64_t>();
        std::int64_t n = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
            const Window &win = plan.windows[static_cast<std::size_t>(first + r)];
            for (std::int64_t i = 0; i < win.inputLength(); ++i)
                acc[r][i] = tokens[static_cast<std::size_t>(win.inputBegin + i)];
            if (win.bosFirst)
                acc[r][0] = plan.options.bosToken;
            for (std::int64_t t = win.scoredBegin; t < win.scoredEnd; ++t, ++n) {
                pos[n] = r * m_width + (t - 1 - win.inputBegin);
                tgt[n] = tokens[static_cast<std::size_t>(t)];
            }
        }
        m_scored = n;
        return n;
    }

    [[nodiscard]] at::Tensor ids() const { return m_ids.to(m_onDevice, /*non_blocking=*/true); }
    [[nodiscard]] at::Tensor positions() const { return m_positions.narrow(0, 0, m_scored).to(m_onDevice, /*non_blocking=*/true); }
    /// [n, 1], the shape gather() takes.
    [[nodiscard]] at::Tensor targets() const { return m_targets.narrow(0, 0, m_scored).view({m_scored, 1}).to(m_onDevice, /*non_blocking=*/true); }

private:
    std::int64_t m_width;
    at::TensorOptions m_onDevice;
    at::Tensor m_ids;
    at::Tensor m_positions;
    at::Tensor m_targets;
    std::int64_t m_scored = 0;
};

/// log p(target) of each row of logits, in float32 or wider whatever the logits are.
class ChunkedLogSoftmax
{
public:
    /// Narrower logits are widened a chunk at a time (the conversion is exact, so the bits are those
    /// of widening them all at once): a float32 copy of every scored position's logits would double
    /// their memory on a GPU. The log-softmax of every scored position at once was a second tensor
    /// as large as the logits (batch x context x vocabulary: 200 MB for GPT-2's vocabulary at
    /// context 128, GBs for long contexts), newly allocated and page-faulted every batch; that, not
    /// the arithmetic, made the time. Rows in chunks reuse one small buffer; each row is the same
    /// kernel on the same numbers, so the bits do not change. Returns double [n, 1] on the logits' device.
    at::Tensor targetLogProbs(const at::Tensor &logits, const at::Tensor &targets)
    {
        const bool wide = logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kDouble;
        const at::ScalarType softmaxType = wide ? logits.scalar_type() : at::kFloat;
        const std::int64_t n = targets.size(0);
        const std::int64_t vocab = logits.size(1);
        const std::int64_t chunkElements = logits.is_cuda() ? kLogSoftmaxChunkElementsGpu : kLogSoftmaxChunkElements;
        const std::int64_t chunk = std::max<std::int64_t>(1, chunkElements / std::max<std::int64_t>(vocab, 1));
        if (!m_buffer.defined() || m_buffer.size(0) < std::min(chunk, n) || m_buffer.size(1) != vocab || m_buffer.scalar_type() != softmaxType
            || m_buffer.device() != logits.device())
            m_buffer = at::empty({std::min(chunk, n), vocab}, logits.options().dtype(softmaxType));
        const at::Tensor tgtLogits = targets.to(logits.device());
        const at::Tensor logp = at::empty({n, 1}, logits.options().dtype(at::kDouble));
        for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
            const std::int64_t rowsNow = std::min(chunk, n - r0);
            at::Tensor out = m_buffer.narrow(0, 0, rowsNow);
            const at::Tensor rowsIn = logits.narrow(0, r0, rowsNow);
            at::_log_softmax_out(out, wide ? rowsIn : rowsIn.to(at::kFloat), -1, false);
            logp.narrow(0, r0, rowsNow).copy_(out.gather(1, tgtLogits.narrow(0, r0, rowsNow)));
        }
        return logp;
    }

private:
    at::Tensor m_buffer; ///< the log-softmax of a chunk of rows, reused by every batch
};

/// The exact accumulation, one batch behind: batch i is added while the device computes batch i + 1.
class LaggingAccount
{
public:
    LaggingAccount(NllStats &stats, const WindowScorer::Progress &progress, EvalProgress totals)
        : m_stats(stats), m_progress(progress), m_p(totals), m_start(std::chrono::steady_clock::now())
    {
    }

    /// Adds the batch held back, if any, to the totals and reports progress.
    void settle()
    {
        if (m_rows == 0)
            return; // nothing before the first batch
        if (m_logp.defined()) {
            const double *lp = m_logp.data_ptr<double>();
            for (std::int64_t i = 0; i < m_logp.size(0); ++i)
                m_stats.addToken(-lp[i]);
            m_p.tokensDone += m_logp.size(0);
        }
        m_stats.windows += m_rows;
        m_p.windowsDone += m_rows;
        m_p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
        m_logp = at::Tensor();
        m_rows = 0;
        if (m_progress)
            m_progress(m_p, m_stats);
    }

    /// Holds back a batch of @p rows windows: @p logp, double [n, 1] on the host (undefined when
    /// the batch scored nothing).
    void hold(at::Tensor logp, std::int64_t rows)
    {
        m_logp = std::move(logp);
        m_rows = rows;
    }

private:
    NllStats &m_stats;
    const WindowScorer::Progress &m_progress;
    EvalProgress m_p;
    std::chrono::steady_clock::time_point m_start;
    at::Tensor m_logp;
    std::int64_t m_rows = 0;
};

/// The batch's log p(target), its device work queued: the model's own where it scores the targets
/// itself (the native float32 CPU path, no [n, V] logits), else a log-softmax of its logits.
at::Tensor scoreBatch(LanguageModel &model, const BatchInput &in, std::int64_t n, ChunkedLogSoftmax &softmax)
{
    const at::Tensor ids = in.ids();
    const at::Tensor positions = in.positions();
    const at::Tensor targets = in.targets();
    at::Tensor fused = model.targetLogProbs(ids, positions, targets.view({n}));
    if (fused.defined())
        return fused;
    return softmax.targetLogProbs(model.logitsAt(ids, positions), targets);
}

} // namespace

Evaluator::Evaluator(LanguageModel &model, std::span<const std::uint32_t> flatTokens, const WindowPlan &plan, std::int64_t batch)
    : m_model(model), m_tokens(flatTokens), m_plan(plan), m_batch(batch)
{
    CPPL_ENFORCE(static_cast<std::int64_t>(flatTokens.size()) >= plan.flatLength, "token array shorter than the plan");
}

void Evaluator::run(std::int64_t first, std::int64_t end, NllStats &stats, const Progress &progress)
{
    c10::InferenceMode guard;
    EvalProgress totals;
    totals.windowsTotal = end - first;
    for (std::int64_t w = first; w < end; ++w)
        totals.tokensTotal += m_plan.windows[static_cast<std::size_t>(w)].scored();
    LaggingAccount account(stats, progress, totals);
    BatchInput in(m_batch, m_plan.maxInput, toDevice(m_model.info().device));
    ChunkedLogSoftmax softmax;
    for (std::int64_t b0 = first; b0 < end; b0 += m_batch) {
        const std::int64_t rows = std::min(m_batch, end - b0);
        const std::int64_t n = in.fill(m_plan, m_tokens, b0, rows);
        const at::Tensor logp = n > 0 ? scoreBatch(m_model, in, n, softmax) : at::Tensor();
        account.settle(); // the previous batch, while the device works on this one
        // Blocking (a no-op for the CPU's): this batch, and its copies from the host, are complete after it.
        account.hold(logp.defined() ? logp.to(at::kCPU) : at::Tensor(), rows);
    }
    account.settle();
}

double Evaluator::warmUp()
{
    const auto start = std::chrono::steady_clock::now();
    NllStats scratch;
    run(0, std::min<std::int64_t>(m_batch, static_cast<std::int64_t>(m_plan.windows.size())), scratch); // ends with a blocking copy
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace cppl::agent
