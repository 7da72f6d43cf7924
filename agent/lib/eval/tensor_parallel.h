// SPDX-License-Identifier: MIT
// The seam for tensor parallelism (Megatron style; not built yet): docs/models.md, "Where tensor
// parallelism plugs in". Torch-free, so the kernels' layer can name it.
#pragma once

#include <cstdint>

namespace cppl::agent {

/**
 * The ranks of one host that would split a model: attention heads and the MLP's intermediate
 * columns (column-parallel q/k/v and gate/up, row-parallel o_proj and down_proj) and the vocabulary
 * (embedding and head). The steps that need a collective take one; null everywhere today, which is
 * one rank holding the whole model: every reduction below is then the identity and the arithmetic
 * is exactly the one-rank arithmetic.
 */
class TensorParallelGroup
{
public:
    virtual ~TensorParallelGroup() = default;
    /// Element-wise sums over the group, in place: row-parallel outputs and the embedding's rows
    /// (float), the vocabulary's sums of exponentials and target logits (double).
    virtual void allReduceSum(float *data, std::int64_t n) = 0;
    virtual void allReduceSum(double *data, std::int64_t n) = 0;
    /// Element-wise maximum over the group, in place: the vocabulary's row maxima.
    virtual void allReduceMax(float *data, std::int64_t n) = 0;
};

/// The reductions of a step; with no group (one rank) they do nothing.
inline void reduceSum(TensorParallelGroup *group, float *data, std::int64_t n)
{
    if (group)
        group->allReduceSum(data, n);
}
inline void reduceSum(TensorParallelGroup *group, double *data, std::int64_t n)
{
    if (group)
        group->allReduceSum(data, n);
}
inline void reduceMax(TensorParallelGroup *group, float *data, std::int64_t n)
{
    if (group)
        group->allReduceMax(data, n);
}

} // namespace cppl::agent
