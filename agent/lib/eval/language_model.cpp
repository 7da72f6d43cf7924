// SPDX-License-Identifier: MIT
#include "language_model.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>

#include <algorithm>

namespace cppl::agent {

namespace {

/// The logits of every scored row, computed at once; chunks are views.
class WholeLogits final : public ScoredLogits
{
public:
    explicit WholeLogits(at::Tensor logits) : m_logits(std::move(logits)) {}
    std::int64_t chunkRows() const override { return logitsChunkRows(m_logits.size(1), m_logits.is_cuda()); }
    at::Tensor chunk(std::int64_t r0, std::int64_t m) override { return m_logits.narrow(0, r0, m); }
    at::Tensor whole() const override { return m_logits; }

private:
    at::Tensor m_logits;
};

} // namespace

std::int64_t logitsChunkRows(std::int64_t vocab, bool gpu)
{
    // 2^22 logits (16 MiB of float32) on the CPU, where the buffer stays in cache; 2^25 on a GPU,
    // where each chunk costs kernel launches (the evaluator's log-softmax chunk, docs/speed.md).
    const std::int64_t elements = std::int64_t{1} << (gpu ? 25 : 22);
    return std::max<std::int64_t>(1, elements / std::max<std::int64_t>(vocab, 1));
}

std::unique_ptr<ScoredLogits> LanguageModel::scoredLogits(const at::Tensor &ids, const at::Tensor &flat, LogitsLayout /*layout*/)
{
    return std::make_unique<WholeLogits>(logitsAt(ids, flat));
}

at::Tensor LanguageModel::headLogits(const at::Tensor & /*rows*/)
{
    CPPL_ENFORCE(false, "headLogits of a model without a separate vocabulary head (its scoredHidden is undefined)");
    return {};
}

at::Tensor LanguageModel::logitsAt(const at::Tensor &ids, const at::Tensor &flat)
{
    const at::Tensor l = logits(ids);
    return l.reshape({-1, l.size(-1)}).index_select(0, flat.to(l.device()));
}

} // namespace cppl::agent
