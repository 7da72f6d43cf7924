// SPDX-License-Identifier: MIT
#include "evaluator.h"

#include "compute_spec_c10.h"
#include "cpu_log_softmax.h"
#include "intra_op.h"
#include "language_model.h"
#include "reference_compare.h"
#include "reference_stats.h"

#include "cppl/errors.h"
#include "distributed/communicator.h"
#include "gpu/batch_sizing.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <functional>

namespace cppl::agent {

namespace {

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
    /// @p headChunk: headLogProbs' rows per chunk, 0 until the first batch's head sets it; the
    /// evaluator's, so that every run() of it (each round, the warm-up) uses the same chunks.
    explicit ChunkedLogSoftmax(std::int64_t &headChunk) : m_headChunk(headChunk) {}

    /// Narrower logits are widened a chunk at a time (the conversion is exact, so the bits are those
    /// of widening them all at once): a float32 copy of every scored position's logits would double
    /// their memory on a GPU. The log-softmax of every scored position at once was a second tensor
    /// as large as the logits (batch x context x vocabulary: 200 MB for GPT-2's vocabulary at
    /// context 128, GBs for long contexts), newly allocated and page-faulted every batch; that, not
    /// the arithmetic, made the time. Rows in chunks reuse one small buffer; each row is the same
    /// kernel on the same numbers, so the bits do not change. Returns double [n, 1] on the logits' device.
    at::Tensor targetLogProbs(const at::Tensor &logits, const at::Tensor &targets)
    {
        const std::int64_t n = targets.size(0);
        // Rows of 2^22 logits on the CPU (the buffer stays in cache), 2^25 on a GPU, where each chunk
        // costs a few kernel launches (a 32000-word vocabulary: 63 chunks per 8192 tokens, 8 now;
        // docs/speed.md, "On a GPU"); the buffer and its float32 copy fit in the batch sizing's reserve.
        const std::int64_t chunk = logitsChunkRows(logits.size(1), logits.is_cuda());
        const at::Tensor tgt = targets.to(logits.device());
        const at::Tensor logp = at::empty({n, 1}, logits.options().dtype(at::kDouble));
        for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
            const std::int64_t m = std::min(chunk, n - r0);
            into(logits.narrow(0, r0, m), tgt.narrow(0, r0, m), logp.narrow(0, r0, m), std::min(chunk, n));
        }
        return logp;
    }

    /// The same from the final hidden states of the scored rows ([n, hidden], LanguageModel::
    /// scoredHidden): each chunk of rows goes through the model's head, then the log-softmax, so
    /// only a chunk's logits ever exist (a batch of 32 windows of 2048 tokens over Llama 3's
    /// 128,256 words was 16 GiB of bfloat16 logits). The rows of a chunk are the rows the whole
    /// product gave (a GEMM's row does not depend on the other rows), on the CPU in the same chunks
    /// as targetLogProbs(logits), so the bits are those of projecting the batch at once.
    /// @p each, if set, is handed each chunk's logits and first row (a reference's comparison).
    using EachChunk = std::function<void(std::int64_t, const at::Tensor &)>;
    at::Tensor headLogProbs(LanguageModel &model, const at::Tensor &rows, const at::Tensor &targets, const EachChunk &each = {})
    {
        const std::int64_t n = rows.size(0), vocab = model.info().vocab;
        if (m_headChunk == 0)
            m_headChunk = headChunk(vocab, rows);
        const at::Tensor logp = at::empty({n, 1}, rows.options().dtype(at::kDouble));
        for (std::int64_t r0 = 0; r0 < n; r0 += m_headChunk) {
            const std::int64_t m = std::min(m_headChunk, n - r0);
            const at::Tensor logits = model.headLogits(rows.narrow(0, r0, m));
            into(logits, targets.narrow(0, r0, m), logp.narrow(0, r0, m), std::min(m_headChunk, n));
            if (each)
                each(r0, logits);
        }
        return logp;
    }

    /// Rows of the head per chunk: on the CPU those of targetLogProbs(logits); on a GPU sized from its
    /// free memory once per evaluator, at the first batch's head (batch_sizing.h, headChunkRows).
    static std::int64_t headChunk(std::int64_t vocab, const at::Tensor &rows)
    {
        if (!rows.is_cuda())
            return logitsChunkRows(vocab, false);
        std::int64_t freeBytes = 0, totalBytes = 0;
        if (!dist::cudaMemoryInfo(rows.device().index(), freeBytes, totalBytes))
            freeBytes = 0; // unknown: the cap
        return headChunkRows(vocab, static_cast<int>(rows.element_size()), freeBytes);
    }

private:
    /// log p(target) of @p logits [m, V] into @p logp (double [m, 1]) through the reused buffer,
    /// which holds @p rowsMost rows (the largest chunk of this batch).
    void into(const at::Tensor &logits, const at::Tensor &targets, at::Tensor logp, std::int64_t rowsMost)
    {
        const bool wide = logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kDouble;
        const at::ScalarType softmaxType = wide ? logits.scalar_type() : at::kFloat;
        const std::int64_t m = logits.size(0), vocab = logits.size(1);
        if (!m_buffer.defined() || m_buffer.size(0) < rowsMost || m_buffer.size(1) != vocab || m_buffer.scalar_type() != softmaxType
            || m_buffer.device() != logits.device())
            m_buffer = at::empty({rowsMost, vocab}, logits.options().dtype(softmaxType));
        at::Tensor out = m_buffer.narrow(0, 0, m);
        at::_log_softmax_out(out, wide ? logits : logits.to(at::kFloat), -1, false);
        logp.copy_(out.gather(1, targets));
    }

    at::Tensor m_buffer; ///< the log-softmax of a chunk of rows, reused by every batch
    std::int64_t &m_headChunk;
};

/// The exact accumulation, one batch behind: batch i is added while the device computes batch i + 1.
class LaggingAccount
{
public:
    LaggingAccount(NllStats &stats, ReferenceStats *reference, const WindowScorer::Progress &progress, EvalProgress totals)
        : m_stats(stats), m_reference(reference), m_progress(progress), m_p(totals), m_start(std::chrono::steady_clock::now())
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
        if (m_compared.defined() && m_reference) {
            const double *lp = m_logp.data_ptr<double>(), *c = m_compared.data_ptr<double>();
            for (std::int64_t i = 0; i < m_compared.size(0); ++i, c += kComparedColumns)
                m_reference->add({-lp[i], -c[kRefLogProb], c[kKld], c[kSameTop] != 0});
        }
        m_stats.windows += m_rows;
        m_p.windowsDone += m_rows;
        m_p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
        m_logp = m_compared = at::Tensor();
        m_rows = 0;
        if (m_progress)
            m_progress(m_p, m_stats);
    }

    /// Holds back a batch of @p rows windows: @p logp, double [n, 1] on the host (undefined when
    /// the batch scored nothing), and with a reference @p compared, double [n, kComparedColumns].
    void hold(at::Tensor logp, at::Tensor compared, std::int64_t rows)
    {
        m_logp = std::move(logp);
        m_compared = std::move(compared);
        m_rows = rows;
    }

private:
    NllStats &m_stats;
    ReferenceStats *m_reference;
    const WindowScorer::Progress &m_progress;
    EvalProgress m_p;
    std::chrono::steady_clock::time_point m_start;
    at::Tensor m_logp, m_compared;
    std::int64_t m_rows = 0;
};

/// One batch's scores, its device work queued: the model's log p(target), double [n, 1], and with a
/// reference the comparison, double [n, kComparedColumns].
struct BatchScores
{
    at::Tensor logp, compared;
};

/// The model's own where it scores the targets itself (the native CPU path, and tensor parallelism's
/// vocabulary-parallel head), else its head a chunk of rows at a time (LibTorch's path), else a
/// log-softmax of its logits (TorchScript).
BatchScores scoreBatch(LanguageModel &model, const BatchInput &in, std::int64_t n, ChunkedLogSoftmax &softmax)
{
    const at::Tensor ids = in.ids();
    const at::Tensor positions = in.positions();
    const at::Tensor targets = in.targets();
    at::Tensor fused = model.targetLogProbs(ids, positions, targets.view({n}));
    if (fused.defined())
        return {fused, {}};
    const at::Tensor rows = model.scoredHidden(ids, positions);
    if (rows.defined())
        return {softmax.headLogProbs(model, rows, targets), {}};
    return {softmax.targetLogProbs(model.logitsAt(ids, positions), targets), {}};
}

/// A model on LibTorch's path against its reference: its head in its own chunks, as without a
/// reference (the same rows, products and bits), each chunk's logits compared with the reference's
/// in pieces of at most the reference's chunk.
BatchScores scoreHeadWithReference(LanguageModel &model, const at::Tensor &rows, LanguageModel &reference, const BatchInput &in, std::int64_t n,
                                   ChunkedLogSoftmax &softmax)
{
    const at::Tensor ids = in.ids(), positions = in.positions(), targets = in.targets();
    const std::unique_ptr<ScoredLogits> theirs = reference.scoredLogits(ids, positions, LogitsLayout::Chunks);
    BatchScores s;
    s.compared = at::empty({n, kComparedColumns}, at::TensorOptions().dtype(at::kDouble).device(targets.device()));
    const std::int64_t piece = theirs->chunkRows();
    s.logp = softmax.headLogProbs(model, rows, targets, [&](std::int64_t r0, const at::Tensor &logits) {
        for (std::int64_t p0 = 0; p0 < logits.size(0); p0 += piece) {
            const std::int64_t m = std::min(piece, logits.size(0) - p0);
            compareChunk(theirs->chunk(r0 + p0, m), logits.narrow(0, p0, m), targets.narrow(0, r0 + p0, m), s.compared.narrow(0, r0 + p0, m));
        }
    });
    return s;
}

/// Both models on the batch, their logits compared chunk by chunk. The model's log p(target) has
/// the bits it has without a reference: on the agent's kernels each chunk's rows are the fused
/// head's (cpu::logSoftmaxAt of the same logits), on LibTorch's path its own chunked head
/// (scoreHeadWithReference), for TorchScript the logits kept whole through the chunked
/// log-softmax; the reference's come in chunks.
BatchScores scoreBatchWithReference(LanguageModel &model, LanguageModel &reference, const BatchInput &in, std::int64_t n, ChunkedLogSoftmax &softmax)
{
    const at::Tensor ids = in.ids(), positions = in.positions(), targets = in.targets();
    if (const at::Tensor rows = model.scoredHidden(ids, positions); rows.defined())
        return scoreHeadWithReference(model, rows, reference, in, n, softmax);
    const std::unique_ptr<ScoredLogits> mine = model.scoredLogits(ids, positions, LogitsLayout::Whole);
    const std::unique_ptr<ScoredLogits> theirs = reference.scoredLogits(ids, positions, LogitsLayout::Chunks);
    BatchScores s;
    s.logp = mine->whole().defined() ? softmax.targetLogProbs(mine->whole(), targets)
                                     : at::empty({n, 1}, at::TensorOptions().dtype(at::kDouble));
    s.compared = at::empty({n, kComparedColumns}, at::TensorOptions().dtype(at::kDouble).device(targets.device()));
    const std::int64_t chunk = std::min(mine->chunkRows(), theirs->chunkRows());
    for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
        const std::int64_t m = std::min(chunk, n - r0);
        const at::Tensor logits = mine->chunk(r0, m);
        const at::Tensor t = targets.narrow(0, r0, m);
        if (mine->native())
            cpu::logSoftmaxAt(logits.data_ptr<float>(), m, {0, logits.size(1)}, logits.size(1), t.data_ptr<std::int64_t>(),
                              s.logp.data_ptr<double>() + r0, intraOp());
        compareChunk(theirs->chunk(r0, m), logits, t, s.compared.narrow(0, r0, m));
    }
    return s;
}

} // namespace

Evaluator::Evaluator(LanguageModel &model, std::span<const std::uint32_t> flatTokens, const WindowPlan &plan, std::int64_t batch,
                     LanguageModel *reference)
    : m_model(model), m_reference(reference), m_tokens(flatTokens), m_plan(plan), m_batch(batch)
{
    CPPL_ENFORCE(static_cast<std::int64_t>(flatTokens.size()) >= plan.flatLength, "token array shorter than the plan");
}

void Evaluator::run(std::int64_t first, std::int64_t end, NllStats &stats, ReferenceStats *reference, const Progress &progress)
{
    c10::InferenceMode guard;
    EvalProgress totals;
    totals.windowsTotal = end - first;
    for (std::int64_t w = first; w < end; ++w)
        totals.tokensTotal += m_plan.windows[static_cast<std::size_t>(w)].scored();
    LaggingAccount account(stats, reference, progress, totals);
    BatchInput in(m_batch, m_plan.maxInput, toDevice(m_model.info().device));
    ChunkedLogSoftmax softmax(m_headChunk);
    for (std::int64_t b0 = first; b0 < end; b0 += m_batch) {
        const std::int64_t rows = std::min(m_batch, end - b0);
        const std::int64_t n = in.fill(m_plan, m_tokens, b0, rows);
        BatchScores scores;
        if (n > 0)
            scores = m_reference ? scoreBatchWithReference(m_model, *m_reference, in, n, softmax) : scoreBatch(m_model, in, n, softmax);
        account.settle(); // the previous batch, while the device works on this one
        // Blocking (a no-op for the CPU's): this batch, and its copies from the host, are complete after it.
        const auto host = [](const at::Tensor &t) { return t.defined() ? t.to(at::kCPU) : at::Tensor(); };
        account.hold(host(scores.logp), host(scores.compared), rows);
        if (m_firstBatchAt == 0)
            m_firstBatchAt = steadySeconds();
    }
    account.settle();
}

double steadySeconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Evaluator::warmUp()
{
    const auto start = std::chrono::steady_clock::now();
    NllStats scratch;
    ReferenceStats referenceScratch;
    run(0, std::min<std::int64_t>(m_batch, static_cast<std::int64_t>(m_plan.windows.size())), scratch, m_reference ? &referenceScratch : nullptr);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::int64_t Evaluator::scratchPass(std::int64_t batches)
{
    NllStats scratch;
    ReferenceStats referenceScratch;
    run(0, std::min<std::int64_t>(batches * m_batch, static_cast<std::int64_t>(m_plan.windows.size())), scratch,
        m_reference ? &referenceScratch : nullptr);
    return scratch.tokens;
}

} // namespace cppl::agent
