// SPDX-License-Identifier: MIT
// The two ends of a decoder that see the vocabulary: the token embedding and the output head with
// its fused, exact log-softmax. Both are vocabulary-parallel under tensor parallelism (each rank
// holds a slice of the vocabulary's rows; docs/models.md, "Tensor parallelism"); with
// one rank the slice is the whole vocabulary and the group null.
#pragma once

#include "cpu_gemm.h"
#include "cpu_log_softmax.h"
#include "linear.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

namespace cppl::agent {

class TensorParallelGroup;

/// Token ids -> rows of the embedding table [vocab, width].
class Embedding
{
public:
    Embedding() = default;
    /// The whole vocabulary's table.
    explicit Embedding(at::Tensor table);
    /// Vocabulary-parallel: `table` holds rows [slice.begin, slice.begin + slice.size) of a vocabulary of `vocab`.
    Embedding(at::Tensor table, std::int64_t vocab, cpu::VocabSlice slice);
    /// A head tied to this embedding packed a copy of it: the native lookup reads rows from there,
    /// so the table's mapped pages can be released (a tied model holds its embedding once).
    void readFromPackedHead(const Linear &head) { m_packedHead = head; }

    /// The agent's kernels: x[r] = row ids[r] (rows of `width` floats), each id checked against the
    /// vocabulary. Vocabulary-parallel: a rank writes the rows of the ids it holds and zeros for the
    /// others, and the group's sum completes every row.
    void lookup(const at::Tensor &ids, float *x, TensorParallelGroup *group) const;
    /// LibTorch: ids [B, T] on the table's device -> [B, T, width]. Vocabulary-parallel, as
    /// lookup(): the rows of the ids this rank holds, zeros for the others, the group's sum.
    [[nodiscard]] at::Tensor operator()(const at::Tensor &ids, TensorParallelGroup *group = nullptr) const;

private:
    at::Tensor m_table; ///< the slice's rows
    Linear m_packedHead;
    std::int64_t m_vocab = 0;
    cpu::VocabSlice m_slice; ///< the vocabulary's rows this rank holds (all of them on one rank)
};

/// Buffers of the fused head, reused by every batch.
struct HeadScratch
{
    std::int64_t rows = 0, width = 0, vocab = 0;
    cpu::FloatBuffer in, logits;

    /// Rows per chunk for n scored positions: 2^20 logits (4 MiB of float32), at least one 64-row
    /// block, at most n.
    static std::int64_t chunkRows(std::int64_t n, std::int64_t vocab);
    void reserve(std::int64_t n, std::int64_t width, std::int64_t vocab);
};

/// The projection onto the vocabulary and, on the agent's kernels, log p(target) without the [N, V] logits.
class VocabHead
{
public:
    VocabHead() = default;
    /// The projection's outputs are the vocabulary's entries [first, first + outputs) of `vocab`.
    VocabHead(Linear projection, std::int64_t vocab, std::int64_t first = 0);

    /// Logits [..., V] of hidden states [..., width] (after the final norm), soft-capped when set.
    [[nodiscard]] at::Tensor operator()(const at::Tensor &hidden) const;
    /// Gemma 2's final_logit_softcapping: every logit becomes cap tanh(logit / cap) before the
    /// log-softmax, on both paths; 0 = none.
    void setSoftcap(double cap) { m_softcap = cap; }
    /// Sizes the scratch for n positions of `width` before evaluation starts.
    void reserve(std::int64_t n, std::int64_t width) { m_scratch.reserve(n, width, m_slice.size); }

    /// log p(target) [N, 1] (double) at the listed rows `flat` of the last hidden states (rows of
    /// `width` floats, before the final norm) for their `targets`. Rows go in chunks through one
    /// reused buffer: gathered, finished by `finish` (the final norm, a per-row function, so
    /// norm(x)[flat] = norm(x[flat])), projected onto the vocabulary, reduced by cpu::logSoftmaxAt.
    /// Every step is per row or split over rows and panels: no bit depends on the threads.
    [[nodiscard]] at::Tensor targetLogProbs(const float *hidden, std::int64_t rows, std::int64_t width, const at::Tensor &flat,
                                            const at::Tensor &targets, const std::function<void(float *, std::int64_t)> &finish,
                                            TensorParallelGroup *group);
    /// One chunk of that: the logits [m, V] of rows flat[0..m) (at most chunkRows(n) of n scored
    /// rows) in the scratch, valid until the next call; the same products, so the same bits.
    /// LibTorch's path under tensor parallelism: log p(target) [n, 1] (double, on the host) of
    /// `hidden` [n, width] (after the final norm), each chunk of rows projected onto this rank's
    /// slice, widened to float32 and reduced by cpu::logSoftmaxAt over the group, so the whole
    /// vocabulary's logits never exist on one rank.
    [[nodiscard]] at::Tensor targetLogProbs(const at::Tensor &hidden, const at::Tensor &targets, TensorParallelGroup *group);
    [[nodiscard]] const float *projectRows(const float *hidden, std::int64_t width, const std::int64_t *flat, std::int64_t m,
                                           const std::function<void(float *, std::int64_t)> &finish);
    [[nodiscard]] std::int64_t vocabSize() const { return m_slice.size; }

private:
    Linear m_projection;
    std::int64_t m_vocab = 0;
    cpu::VocabSlice m_slice; ///< the vocabulary's rows this head holds (all of them on one rank)
    HeadScratch m_scratch;
    double m_softcap = 0;
};

} // namespace cppl::agent
