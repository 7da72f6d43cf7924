// SPDX-License-Identifier: MIT
// The vocabulary head's exact log-softmax at the target, in the steps of Megatron-LM's
// vocab-parallel cross entropy (core/tensor_parallel/cross_entropy.py): row maximum, sum of
// exponentials, target logit, combination. Each step works on one slice of the vocabulary (the
// logits a rank's head computes), so tensor parallelism only inserts the three reductions between
// them, which logSoftmaxAt shows; with one rank holding all of it they are the identity.
#pragma once

#include "cpu_gemm.h"

#include <cstdint>

namespace cppl::agent {
class TensorParallelGroup;
}

namespace cppl::agent::cpu {

/// Vocabulary entries [begin, begin + size): the columns of the logits one rank holds.
struct VocabSlice
{
    std::int64_t begin = 0;
    std::int64_t size = 0;
};

/// max[r] = the largest of the n logits of row r (rows `ld` floats apart), in float32.
void rowMax(const float *logits, std::int64_t rows, std::int64_t n, std::int64_t ld, float *max, const ParallelFor &parallel);
/// sum[r] = sum_j exp(z[r][j] - max[r]) over the n logits of row r: each exponential in float32,
/// summed in double in a fixed order. max is the whole vocabulary's (after the group's reduction).
void sumExp(const float *logits, std::int64_t rows, std::int64_t n, std::int64_t ld, const float *max, double *sum,
            const ParallelFor &parallel);
/// logit[r] = z[r][targets[r]] widened to double where this slice holds the target, else 0 (the
/// group's sum then leaves the owner's value). targets are ids in the whole vocabulary.
void targetLogit(const float *logits, std::int64_t rows, VocabSlice slice, std::int64_t ld, const std::int64_t *targets, double *logit);
/// out[r] = (logit[r] - max[r]) - log(sum[r]), in double: log softmax at the target.
void combineLogSoftmax(const double *logit, const float *max, const double *sum, std::int64_t rows, double *out);

/// out[r] = log softmax(z[r])[targets[r]] for rows z[r] = logits + r * ld holding the vocabulary slice
/// `slice` (all of it: {0, V}): the steps above strung together, the row maxima and the sums reduced
/// over `group` between them (null: one rank, no reduction). The logits are never written.
void logSoftmaxAt(const float *logits, std::int64_t rows, VocabSlice slice, std::int64_t ld, const std::int64_t *targets, double *out,
                  const ParallelFor &parallel, TensorParallelGroup *group = nullptr);

} // namespace cppl::agent::cpu
