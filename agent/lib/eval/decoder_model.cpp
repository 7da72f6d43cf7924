// SPDX-License-Identifier: MIT
#include "decoder_model.h"

#include "compute_spec_c10.h"
#include "quant_linear.h"
#include "tensor_parallel.h"
#include "weight_source.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <functional>

namespace cppl::agent {

namespace {

/// Chunks made by a function of (first row, rows).
class ChunkedLogits final : public ScoredLogits
{
public:
    using Chunk = std::function<at::Tensor(std::int64_t, std::int64_t)>;
    ChunkedLogits(std::int64_t rows, bool native, Chunk chunk) : m_rows(rows), m_native(native), m_chunk(std::move(chunk)) {}
    std::int64_t chunkRows() const override { return m_rows; }
    at::Tensor chunk(std::int64_t r0, std::int64_t m) override { return m_chunk(r0, m); }
    bool native() const override { return m_native; }

private:
    std::int64_t m_rows;
    bool m_native;
    Chunk m_chunk;
};

} // namespace

bool Workspace::reserve(std::int64_t rows, std::int64_t T, const std::vector<std::int64_t> &floats)
{
    if (rows == m_rows && T == m_T)
        return false;
    m_buffers.clear(); // the old buffers go first
    m_rows = m_T = 0;
    for (const std::int64_t n : floats)
        m_buffers.push_back(cpu::allocateFloats(n));
    m_rows = rows;
    m_T = T;
    return true;
}

DecoderModel::DecoderModel(const std::string &dir, ModelConfig c, const LoadOptions &o)
    : m_c(std::move(c)), m_opts(o), m_linears(linearPlanFor(o, quant::loadQuantizationConfig(dir)))
{
}

LoadOptions DecoderModel::sourceOptions() const
{
    if (!native())
        return m_opts;
    LoadOptions f = m_opts;
    f.dtype = at::kFloat;
    f.device = at::Device(at::kCPU);
    return f;
}

at::Tensor DecoderModel::logits(const at::Tensor &ids)
{
    return m_head(hidden(ids));
}

at::Tensor DecoderModel::logitsAt(const at::Tensor &ids, const at::Tensor &flat)
{
    const at::Tensor h = hidden(ids);
    return m_head(h.reshape({-1, m_c.hidden}).index_select(0, flat.to(h.device()))); // the caller's index may be on the CPU
}

void DecoderModel::prepare(std::int64_t batch, std::int64_t width)
{
    if (!native())
        return;
    ensureWorkspace(batch, width);
    m_head.reserve(batch * width, m_c.hidden);
}

at::Tensor DecoderModel::targetLogProbs(const at::Tensor &ids, const at::Tensor &flat, const at::Tensor &targets)
{
    if (!native())
        return {};
    forwardNative(ids);
    const auto finish = [this](float *rows, std::int64_t n) { m_finalNorm(rows, n, rows); };
    return m_head.targetLogProbs(m_ws[kResidual], m_ws.rows(), m_c.hidden, flat, targets, finish, m_tp);
}

std::unique_ptr<ScoredLogits> DecoderModel::scoredLogits(const at::Tensor &ids, const at::Tensor &flat, LogitsLayout layout)
{
    const at::Tensor f = flat.to(at::kLong).contiguous();
    if (!native()) {
        if (layout == LogitsLayout::Whole)
            return LanguageModel::scoredLogits(ids, f, layout);
        const at::Tensor rows = hidden(ids).reshape({-1, m_c.hidden}).index_select(0, f.to(m_opts.device));
        return std::make_unique<ChunkedLogits>(logitsChunkRows(m_c.vocab, m_opts.device.is_cuda()), false,
                                               [this, rows](std::int64_t r0, std::int64_t m) { return m_head(rows.narrow(0, r0, m)); });
    }
    forwardNative(ids);
    const std::int64_t total = m_ws.rows();
    const std::int64_t *fi = f.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < f.numel(); ++i)
        CPPL_ENFORCE(fi[i] >= 0 && fi[i] < total, "scored positions inside the batch");
    const std::int64_t vocab = m_head.vocabSize();
    return std::make_unique<ChunkedLogits>(HeadScratch::chunkRows(f.numel(), vocab), true, [this, f, vocab](std::int64_t r0, std::int64_t m) {
        const auto finish = [this](float *rows, std::int64_t n) { m_finalNorm(rows, n, rows); };
        const float *logits = m_head.projectRows(m_ws[kResidual], m_c.hidden, f.data_ptr<std::int64_t>() + r0, m, finish);
        return at::from_blob(const_cast<float *>(logits), {m, vocab}, at::TensorOptions().dtype(at::kFloat));
    });
}

at::Tensor DecoderModel::hidden(const at::Tensor &ids)
{
    if (!native())
        return m_finalNorm(forwardLibTorch(ids));
    forwardNative(ids);
    const at::Tensor out = at::empty({m_ws.rows(), m_c.hidden}, at::TensorOptions().dtype(at::kFloat));
    m_finalNorm(m_ws[kResidual], m_ws.rows(), out.data_ptr<float>());
    return out.view({ids.size(0), ids.size(1), m_c.hidden});
}

void DecoderModel::setVocabulary(WeightSource &w, const std::string &embedding, const std::string &untiedHead)
{
    const at::Tensor table = w.get(embedding, {m_c.vocab, m_c.hidden});
    m_embedding = Embedding(table);
    LinearSpec untied{{{untiedHead, m_c.vocab}}, m_c.hidden};
    untied.head = true;
    const Linear head = m_c.tied ? Linear::tied(w, embedding, table, m_linears) : Linear::load(w, untied, m_linears);
    const bool quantizedHead = m_linears.scheme && m_linears.head; // its rows are not the embedding's: the table stays
    if (m_c.tied && native() && !quantizedHead)
        m_embedding.readFromPackedHead(head); // its table's mapped pages were released while packing
    m_head = VocabHead(head, m_c.vocab);
}

void DecoderModel::setInfo(const std::string &dir, const WeightSource &w)
{
    m_info.path = dir;
    m_info.format = "hf";
    m_info.arch = m_c.modelType;
    m_info.params = w.params();
    m_info.vocab = m_c.vocab;
    m_info.maxPositions = m_c.maxPositions;
    m_info.bosTokenId = m_c.bosTokenId;
    m_info.weightFiles = w.checkpoint().files();
    const LinearTally &t = *m_linears.tally;
    if (m_linears.buffer)
        m_linears.buffer->reserve(t.bufferElements);
    m_info.weightBytes = w.bytes() + t.quantizedBytes + t.packedBytes;
    m_info.shape = {m_c.hidden, m_c.intermediate, m_c.layers, m_c.heads, m_c.kvHeads, m_c.headDim, m_c.vocab};
    m_info.gemm = m_linears.gemmName(m_opts);
    m_info.quantization = {m_linears.quantName(), m_linears.scheme ? m_linears.group : (m_linears.checkpoint ? m_linears.checkpoint->groupSize : 0),
                           m_linears.scheme && m_linears.head, t.quantizedLayers, t.quantizedParams, t.quantizedBytes, t.denseLayers, t.denseReason,
                           m_linears.buffer ? m_linears.buffer->bytes() : 0};
    m_info.weightBytes += m_info.quantization.bufferBytes;
    m_info.device = toDeviceSpec(m_opts.device);
}

void DecoderModel::addRowParallel(const Linear &l, const float *in, std::int64_t ldin, std::int64_t rows, float *x) const
{
    CPPL_ENFORCE(m_tp == nullptr, "row-parallel products need the group's reduction, which is not built (docs/models.md)");
    l.into(in, ldin, rows, x, m_c.hidden, true);
}

at::Tensor DecoderModel::rowParallel(const Linear &l, const at::Tensor &in) const
{
    CPPL_ENFORCE(m_tp == nullptr, "row-parallel products need the group's reduction, which is not built (docs/models.md)");
    return l(in);
}

} // namespace cppl::agent
