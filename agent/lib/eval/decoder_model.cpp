// SPDX-License-Identifier: MIT
#include "decoder_model.h"

#include "compute_spec_c10.h"
#include "tensor_parallel.h"
#include "weight_source.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

namespace cppl::agent {

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

DecoderModel::DecoderModel(ModelConfig c, const LoadOptions &o) : m_c(std::move(c)), m_opts(o), m_kind(linearKindFor(o)) {}

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
    const Linear head = m_c.tied ? Linear::tied(w, embedding, table, m_kind)
                                 : Linear::load(w, LinearSpec{{{untiedHead, m_c.vocab}}, m_c.hidden}, m_kind);
    if (m_c.tied && native())
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
    m_info.weightBytes = w.bytes();
    m_info.shape = {m_c.hidden, m_c.intermediate, m_c.layers, m_c.heads, m_c.kvHeads, m_c.headDim, m_c.vocab};
    m_info.gemm = linearKindName(m_kind);
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
