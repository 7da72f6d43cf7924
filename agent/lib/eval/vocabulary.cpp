// SPDX-License-Identifier: MIT
#include "vocabulary.h"

#include "intra_op.h"
#include "language_model.h"
#include "tensor_parallel.h"
#include "tensor_parallel_torch.h"

#include "cppl/errors.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>

namespace cppl::agent {

namespace {

// Vocabulary rows per chunk of the fused head: 2^20 logits (4 MiB of float32), at least one 64-row block.
constexpr std::int64_t kHeadChunkElements = std::int64_t{1} << 20;

at::Tensor longContiguous(const at::Tensor &t) { return t.to(at::kLong).contiguous(); }

// The scored positions and their targets, each checked against the batch and the vocabulary.
void checkScored(const at::Tensor &flat, const at::Tensor &targets, std::int64_t rows, std::int64_t vocab)
{
    const std::int64_t n = flat.numel();
    CPPL_ENFORCE(targets.numel() == n, "one target per scored position");
    const std::int64_t *fi = flat.data_ptr<std::int64_t>(), *ti = targets.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < n; ++i) {
        if (fi[i] < 0 || fi[i] >= rows)
            throw ConfigError("scored position " + std::to_string(fi[i]) + " is outside the batch of " + std::to_string(rows) + " positions");
        if (ti[i] < 0 || ti[i] >= vocab)
            throw ConfigError("target token " + std::to_string(ti[i]) + " is outside the model's vocabulary of " + std::to_string(vocab));
    }
}

// in[i] = hidden[flat[i]] for the m rows of a chunk.
void gatherRows(const float *hidden, std::int64_t width, const std::int64_t *flat, std::int64_t m, float *in)
{
    for (std::int64_t i = 0; i < m; ++i)
        std::memcpy(in + i * width, hidden + flat[i] * width, static_cast<std::size_t>(width) * sizeof(float));
}

} // namespace

Embedding::Embedding(at::Tensor table) : m_table(std::move(table)), m_vocab(m_table.size(0)), m_slice{0, m_vocab} {}

Embedding::Embedding(at::Tensor table, std::int64_t vocab, cpu::VocabSlice slice) : m_table(std::move(table)), m_vocab(vocab), m_slice(slice) {}

void Embedding::lookup(const at::Tensor &ids, float *x, TensorParallelGroup *group) const
{
    const std::int64_t vocab = m_vocab, width = m_table.size(1);
    const at::Tensor idx = longContiguous(ids);
    const std::int64_t *id = idx.data_ptr<std::int64_t>();
    const float *table = m_packedHead.loaded() ? nullptr : m_table.data_ptr<float>();
    for (std::int64_t r = 0; r < idx.numel(); ++r) {
        if (id[r] < 0 || id[r] >= vocab)
            throw ConfigError("token id " + std::to_string(id[r]) + " is outside the model's vocabulary of " + std::to_string(vocab));
        float *row = x + r * width;
        const std::int64_t local = id[r] - m_slice.begin;
        if (local < 0 || local >= m_slice.size)
            std::fill(row, row + width, 0.0F); // another rank's row
        else if (!table)
            (void)m_packedHead.unpackRow(local, row);
        else
            std::memcpy(row, table + local * width, static_cast<std::size_t>(width) * sizeof(float));
    }
    reduceSum(group, x, idx.numel() * width);
}

at::Tensor Embedding::operator()(const at::Tensor &ids, TensorParallelGroup *group) const
{
    if (!group)
        return at::embedding(m_table, ids);
    // Clamped ids keep the lookup inside the slice; the mask then zeros other ranks' rows. The
    // range check reads the ids on the host (a batch's ids, not its activations).
    const at::Tensor idx = longContiguous(ids.to(at::kCPU));
    const std::int64_t *id = idx.data_ptr<std::int64_t>();
    for (std::int64_t r = 0; r < idx.numel(); ++r)
        if (id[r] < 0 || id[r] >= m_vocab)
            throw ConfigError("token id " + std::to_string(id[r]) + " is outside the model's vocabulary of " + std::to_string(m_vocab));
    const at::Tensor local = ids.sub(m_slice.begin);
    const at::Tensor mine = local.ge(0).logical_and(local.lt(m_slice.size)).unsqueeze(-1);
    const at::Tensor rows = at::embedding(m_table, local.clamp(0, std::max<std::int64_t>(m_slice.size - 1, 0)));
    return groupSum(group, at::where(mine, rows, at::zeros({}, rows.options())));
}

std::int64_t HeadScratch::chunkRows(std::int64_t n, std::int64_t vocab)
{
    return std::min(std::max<std::int64_t>(n, 1), std::max<std::int64_t>(64, kHeadChunkElements / vocab / 64 * 64));
}

void HeadScratch::reserve(std::int64_t n, std::int64_t w, std::int64_t v)
{
    const std::int64_t r = chunkRows(n, v);
    if (r <= rows && w == width && v == vocab)
        return;
    in = cpu::allocateFloats(r * w);
    logits = cpu::allocateFloats(r * v);
    rows = r, width = w, vocab = v;
}

VocabHead::VocabHead(Linear projection, std::int64_t vocab, std::int64_t first)
    : m_projection(std::move(projection)), m_vocab(vocab), m_slice{first, m_projection.outFeatures()}
{
}

at::Tensor VocabHead::targetLogProbs(const float *hidden, std::int64_t rows, std::int64_t width, const at::Tensor &flat, const at::Tensor &targets,
                                     const std::function<void(float *, std::int64_t)> &finish, TensorParallelGroup *group)
{
    const at::Tensor f = longContiguous(flat), t = longContiguous(targets);
    checkScored(f, t, rows, m_vocab);
    const std::int64_t n = f.numel(), v = m_slice.size;
    at::Tensor out = at::empty({n, 1}, at::TensorOptions().dtype(at::kDouble));
    // Chunks by the whole vocabulary: every member of a tensor-parallel group reduces the same rows
    // together, whatever its slice's size (the last one is shorter).
    const std::int64_t chunk = HeadScratch::chunkRows(n, m_vocab);
    m_scratch.reserve(n, width, v);
    float *in = m_scratch.in.get(), *logits = m_scratch.logits.get();
    const std::int64_t *fi = f.data_ptr<std::int64_t>(), *ti = t.data_ptr<std::int64_t>();
    double *lp = out.data_ptr<double>();
    for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
        const std::int64_t m = std::min(chunk, n - r0);
        gatherRows(hidden, width, fi + r0, m, in);
        if (finish)
            finish(in, m);
        m_projection.into(in, width, m, logits, v, false);
        if (m_softcap > 0)
            cpu::softcapRows(logits, m, v, static_cast<float>(m_softcap), intraOp());
        cpu::logSoftmaxAt(logits, m, m_slice, v, ti + r0, lp + r0, intraOp(), group);
    }
    return out;
}

at::Tensor VocabHead::targetLogProbs(const at::Tensor &hidden, const at::Tensor &targets, TensorParallelGroup *group)
{
    const at::Tensor t = longContiguous(targets.to(at::kCPU));
    const std::int64_t n = t.numel(), v = m_slice.size;
    const at::Tensor positions = at::arange(n, t.options()); // hidden holds the scored rows only
    checkScored(positions, t, n, m_vocab);
    at::Tensor out = at::empty({n, 1}, at::TensorOptions().dtype(at::kDouble));
    // Chunks by the whole vocabulary, as on the agent's kernels: every member reduces the same rows.
    const std::int64_t chunk = std::max<std::int64_t>(1, logitsChunkRows(m_vocab, hidden.is_cuda()));
    for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
        const std::int64_t m = std::min(chunk, n - r0);
        const at::Tensor logits = (*this)(hidden.narrow(0, r0, m)).to(at::kCPU, at::kFloat).contiguous();
        cpu::logSoftmaxAt(logits.data_ptr<float>(), m, m_slice, v, t.data_ptr<std::int64_t>() + r0, out.data_ptr<double>() + r0, intraOp(), group);
    }
    return out;
}

const float *VocabHead::projectRows(const float *hidden, std::int64_t width, const std::int64_t *flat, std::int64_t m,
                                    const std::function<void(float *, std::int64_t)> &finish)
{
    const std::int64_t v = m_slice.size;
    m_scratch.reserve(m, width, v);
    CPPL_ENFORCE(m <= m_scratch.rows, "a chunk of at most HeadScratch::chunkRows rows");
    float *in = m_scratch.in.get(), *logits = m_scratch.logits.get();
    gatherRows(hidden, width, flat, m, in);
    if (finish)
        finish(in, m);
    m_projection.into(in, width, m, logits, v, false);
    if (m_softcap > 0)
        cpu::softcapRows(logits, m, v, static_cast<float>(m_softcap), intraOp());
    return logits;
}

at::Tensor VocabHead::operator()(const at::Tensor &hidden) const
{
    const at::Tensor logits = m_projection(hidden);
    return m_softcap > 0 ? logits.div(m_softcap).tanh().mul(m_softcap) : logits;
}

} // namespace cppl::agent
