// SPDX-License-Identifier: MIT
#include "decoder_model.h"

#include "compute_spec_c10.h"
#include "quant_linear.h"
#include "tensor_parallel.h"
#include "tensor_parallel_torch.h"
#include "weight_source.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <functional>

#include <algorithm>

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
    : m_c(std::move(c)), m_opts(o), m_linears(linearPlanFor(o, quant::loadQuantizationConfig(dir))), m_tp(o.tp)
{
    if (!m_tp)
        return;
    if (!m_opts.device.is_cpu() && !m_tp->gathersOnDevice()) // Gloo's groups move host memory: GPU tensors are refused, not staged
        throw ConfigError("tensor parallelism with the model on a GPU runs over NCCL: use --backend nccl (or auto), or --device cpu for Gloo");
    if (m_linears.kind == LinearKind::PackedBf16)
        throw ConfigError("tensor parallelism with bfloat16 runs on LibTorch's path (--gemm blas), not on the agent's bfloat16 kernels");
    if (m_linears.checkpoint)
        throw ConfigError("tensor parallelism does not split a GPTQ/AWQ checkpoint's layers in this version: their packed codes, zero points and "
                          "(desc_act) g_idx order the input columns the row-parallel split cuts; evaluate it with --tensor-parallel 1, or "
                          "quantize the float checkpoint at load (--quantize)");
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

namespace {

void refuseWholeVocabulary(const TensorParallelGroup *tp)
{
    if (tp)
        throw ConfigError("under tensor parallelism no rank holds the whole vocabulary's logits; the evaluation uses targetLogProbs");
}

} // namespace

at::Tensor DecoderModel::logits(const at::Tensor &ids)
{
    refuseWholeVocabulary(m_tp);
    return m_head(hidden(ids));
}

at::Tensor DecoderModel::logitsAt(const at::Tensor &ids, const at::Tensor &flat)
{
    refuseWholeVocabulary(m_tp);
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
    if (!native()) {
        if (!m_tp)
            return {}; // the evaluator's chunked head over scoredHidden()
        const at::Tensor h = hidden(ids).reshape({-1, m_c.hidden});
        return m_head.targetLogProbs(h.index_select(0, flat.to(at::kLong).to(h.device())), targets, m_tp);
    }
    forwardNative(ids);
    const auto finish = [this](float *rows, std::int64_t n) { m_finalNorm(rows, n, rows); };
    return m_head.targetLogProbs(m_ws[kResidual], m_ws.rows(), m_c.hidden, flat, targets, finish, m_tp);
}

at::Tensor DecoderModel::scoredHidden(const at::Tensor &ids, const at::Tensor &flat)
{
    // A quantized head (--quantize-head) is dequantized for each product on LibTorch's path: in
    // chunks it would be dequantized once per chunk, so it keeps the whole product (logitsAt).
    if (native() || m_tp || (m_linears.scheme && m_linears.head))
        return {};
    const at::Tensor h = hidden(ids).reshape({-1, m_c.hidden});
    return h.index_select(0, flat.to(at::kLong).to(h.device()));
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
    if (!m_tp) {
        const at::Tensor table = w.get(embedding, {m_c.vocab, m_c.hidden});
        m_embedding = Embedding(table);
        LinearSpec untied{{{untiedHead, m_c.vocab}}, m_c.hidden};
        untied.head = true;
        const Linear head = m_c.tied ? Linear::tied(w, embedding, table, m_linears) : Linear::load(w, untied, m_linears);
        const bool quantizedHead = m_linears.scheme && m_linears.head; // its rows are not the embedding's: the table stays
        if (m_c.tied && native() && !quantizedHead)
            m_embedding.readFromPackedHead(head); // its table's mapped pages were released while packing
        m_head = VocabHead(head, m_c.vocab);
        return;
    }
    // Vocabulary-parallel: this rank's rows of the embedding and of the head.
    const cpu::VocabSlice v = vocabSlice();
    const at::Tensor table = w.getRows(embedding, {m_c.vocab, m_c.hidden}, v.begin, v.size);
    m_embedding = Embedding(table, m_c.vocab, v);
    const Linear head = m_c.tied ? Linear::tied(w, embedding, table, m_linears, v.begin)
                                 : Linear::load(w, LinearSpec{{{untiedHead, v.size, v.begin, m_c.vocab}}, m_c.hidden, false, false, 0, 0, true}, m_linears);
    if (m_c.tied && native() && !(m_linears.scheme && m_linears.head))
        m_embedding.readFromPackedHead(head);
    m_head = VocabHead(head, m_c.vocab, v.begin);
}

int DecoderModel::tpRank() const
{
    return m_tp ? m_tp->rank() : 0;
}

int DecoderModel::tpSize() const
{
    return m_tp ? m_tp->size() : 1;
}

void DecoderModel::checkTensorParallel(std::int64_t heads, std::int64_t kvHeads, std::int64_t intermediate) const
{
    const std::int64_t n = tpSize();
    if (n == 1)
        return;
    const std::string what = "--tensor-parallel " + std::to_string(n) + ": ";
    if (heads % n != 0)
        throw ConfigError(what + "the model's " + std::to_string(heads) + " attention heads do not divide by it (config.json); use an N that divides them");
    if (kvHeads % n != 0 && n % kvHeads != 0)
        throw ConfigError(what + "the model's " + std::to_string(kvHeads) + " key/value heads can be neither split by it nor replicated to it "
                          + "(one divides the other); use an N that divides " + std::to_string(kvHeads) + " or a multiple of it");
    if (intermediate % n != 0)
        throw ConfigError(what + "the MLP's intermediate size " + std::to_string(intermediate)
                          + " does not divide by it (config.json); use an N that divides it");
}

std::pair<std::int64_t, std::int64_t> DecoderModel::kvHeadSlice(std::int64_t heads, std::int64_t kvHeads) const
{
    const std::int64_t n = tpSize(), r = tpRank();
    if (kvHeads % n == 0)
        return {r * (kvHeads / n), kvHeads / n};
    // Replicated: this rank's query heads [r H/N, (r+1) H/N) all read K/V head (r H/N) / (H/KV).
    return {(r * (heads / n)) / (heads / kvHeads), 1};
}

cpu::VocabSlice DecoderModel::vocabSlice() const
{
    const std::int64_t n = tpSize(), each = (m_c.vocab + n - 1) / n, begin = std::min(m_c.vocab, tpRank() * each);
    return {begin, std::min(each, m_c.vocab - begin)};
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
    m_info.upload = w.uploadInfo();
}

void DecoderModel::addRowParallel(const Linear &l, const float *in, std::int64_t ldin, std::int64_t rows, float *x) const
{
    if (!m_tp) {
        l.into(in, ldin, rows, x, m_c.hidden, true);
        return;
    }
    const std::int64_t n = rows * m_c.hidden;
    if (m_partialFloats < n) {
        m_partial = cpu::allocateFloats(n);
        m_partialFloats = n;
    }
    float *partial = m_partial.get();
    l.into(in, ldin, rows, partial, m_c.hidden, false);
    m_tp->allReduceSum(partial, n);
    for (std::int64_t i = 0; i < n; ++i)
        x[i] += partial[i];
}

at::Tensor DecoderModel::rowParallel(const Linear &l, const at::Tensor &in) const
{
    return groupSum(m_tp, l(in));
}

} // namespace cppl::agent
