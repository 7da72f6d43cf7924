// SPDX-License-Identifier: MIT
#include "evaluator.h"

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
} // namespace

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

    // Every tensor a batch needs is built here on the host and sent to the model's device. On a GPU
    // the host side is pinned and copied without blocking; reusing it for the next batch is safe
    // because each batch ends with a blocking copy of its results, which waits for the whole stream.
    const c10::Device device = m_model.info().device;
    const auto host = at::TensorOptions().dtype(at::kLong).pinned_memory(device.is_cuda());
    const auto onDevice = at::TensorOptions().device(device);
    at::Tensor ids = at::zeros({m_batch, W}, host);
    at::Tensor flat = at::empty({m_batch * W}, host);
    at::Tensor targets = at::empty({m_batch * W}, host);
    at::Tensor logpBuffer; // the log-softmax of a chunk of rows, reused by every batch

    // The exact accumulation of batch i runs while the device computes batch i + 1.
    struct Done
    {
        at::Tensor logp; ///< double [n, 1] on the host
        std::int64_t rows = 0;
    } done;
    auto account = [&](Done &d) {
        if (d.rows == 0)
            return; // nothing before the first batch
        if (d.logp.defined()) {
            const double *lp = d.logp.data_ptr<double>();
            for (std::int64_t i = 0; i < d.logp.size(0); ++i)
                stats.addToken(-lp[i]);
            p.tokensDone += d.logp.size(0);
        }
        stats.windows += d.rows;
        p.windowsDone += d.rows;
        p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        d = Done{};
        if (progress)
            progress(p, stats);
    };
    for (std::int64_t b0 = first; b0 < end; b0 += m_batch) {
        const std::int64_t rows = std::min(m_batch, end - b0);
        ids.zero_();
        auto acc = ids.accessor<std::int64_t, 2>();
        std::int64_t *pos = flat.data_ptr<std::int64_t>();
        std::int64_t *tgt = targets.data_ptr<std::int64_t>();
        std::int64_t n = 0;
        for (std::int64_t r = 0; r < rows; ++r) {
            const Window &win = m_plan.windows[static_cast<std::size_t>(b0 + r)];
            for (std::int64_t i = 0; i < win.inputLength(); ++i)
                acc[r][i] = m_tokens[static_cast<std::size_t>(win.inputBegin + i)];
            if (win.bosFirst)
                acc[r][0] = m_plan.options.bosToken;
            for (std::int64_t t = win.scoredBegin; t < win.scoredEnd; ++t, ++n) {
                pos[n] = r * W + (t - 1 - win.inputBegin);
                tgt[n] = m_tokens[static_cast<std::size_t>(t)];
            }
        }
        Done next{{}, rows};
        if (n > 0) {
            const at::Tensor idsDev = ids.to(onDevice, /*non_blocking=*/true);
            const at::Tensor posDev = flat.narrow(0, 0, n).to(onDevice, /*non_blocking=*/true);
            const at::Tensor tgtDev = targets.narrow(0, 0, n).view({n, 1}).to(onDevice, /*non_blocking=*/true);
            // The native float32 CPU path scores the targets itself (no [n, V] logits); others give logits.
            at::Tensor fused = m_model.targetLogProbs(idsDev, posDev, tgtDev.view({n}));
            if (fused.defined()) {
                account(done);
                next.logp = std::move(fused);
                done = std::move(next);
                continue;
            }
            const at::Tensor logits = m_model.logitsAt(idsDev, posDev);
            // Log-softmax in float32 or wider, always. Narrower logits are widened a chunk at a time
            // (the conversion is exact, so the bits are those of widening them all at once): a
            // float32 copy of every scored position's logits would double their memory on a GPU.
            const bool wide = logits.scalar_type() == at::kFloat || logits.scalar_type() == at::kDouble;
            const at::ScalarType softmaxType = wide ? logits.scalar_type() : at::kFloat;
            // The log-softmax of every scored position at once was a second tensor as large as the
            // logits (batch x context x vocabulary: 200 MB for GPT-2's vocabulary at context 128,
            // GBs for long contexts), newly allocated and page-faulted every batch; that, not the
            // arithmetic, made the time. Rows in chunks reuse one small buffer; each row is the
            // same kernel on the same numbers, so the bits do not change.
            const std::int64_t vocab = logits.size(1);
            const std::int64_t chunkElements = logits.is_cuda() ? kLogSoftmaxChunkElementsGpu : kLogSoftmaxChunkElements;
            const std::int64_t chunk = std::max<std::int64_t>(1, chunkElements / std::max<std::int64_t>(vocab, 1));
            if (!logpBuffer.defined() || logpBuffer.size(0) < std::min(chunk, n) || logpBuffer.size(1) != vocab
                || logpBuffer.scalar_type() != softmaxType || logpBuffer.device() != logits.device())
                logpBuffer = at::empty({std::min(chunk, n), vocab}, logits.options().dtype(softmaxType));
            const at::Tensor tgtLogits = tgtDev.to(logits.device());
            const at::Tensor logp = at::empty({n, 1}, logits.options().dtype(at::kDouble));
            for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
                const std::int64_t rowsNow = std::min(chunk, n - r0);
                at::Tensor out = logpBuffer.narrow(0, 0, rowsNow);
                const at::Tensor rowsIn = logits.narrow(0, r0, rowsNow);
                at::_log_softmax_out(out, wide ? rowsIn : rowsIn.to(at::kFloat), -1, false);
                logp.narrow(0, r0, rowsNow).copy_(out.gather(1, tgtLogits.narrow(0, r0, rowsNow)));
            }
            account(done); // the previous batch, while the device works on this one
            next.logp = logp.to(at::kCPU); // blocking: this batch (and its copies) are complete after it
        } else {
            account(done);
        }
        done = std::move(next);
    }
    account(done);
}

double Evaluator::warmUp()
{
    const auto start = std::chrono::steady_clock::now();
    NllStats scratch;
    run(0, std::min<std::int64_t>(m_batch, static_cast<std::int64_t>(m_plan.windows.size())), scratch); // ends with a blocking copy
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace cppl::agent
