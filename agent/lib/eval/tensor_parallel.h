// SPDX-License-Identifier: MIT
// Tensor parallelism's collectives (Megatron style): docs/models.md, "Tensor parallelism". Torch-free,
// so the kernels' layer can name it; the Gloo group is dist::makeGlooTensorParallelGroup (c10d.h).
#pragma once

#include "cppl/errors.h"

#include <cstdint>

namespace cppl::agent {

/**
 * The ranks of one host that would split a model: attention heads and the MLP's intermediate
 * columns (column-parallel q/k/v and gate/up, row-parallel o_proj and down_proj) and the vocabulary
 * (embedding and head). The steps that need a collective take one; null everywhere today, which is
 * one rank holding the whole model: every reduction below is then the identity and the arithmetic
 * is exactly the one-rank arithmetic.
 *
 * Every reduction must give the same bits on every member of every group for the same inputs,
 * whatever the backend's algorithm (the exact sums are bit-identical for a fixed N at any
 * data-parallel width): sums are "ordered", each element summed in member order.
 */
class TensorParallelGroup
{
public:
    virtual ~TensorParallelGroup() = default;
    /// This member (tp_rank) and the group's size N.
    [[nodiscard]] virtual int rank() const = 0;
    [[nodiscard]] virtual int size() const = 0;
    /// Element-wise sums over the group, in place: row-parallel outputs and the embedding's rows
    /// (float), the vocabulary's sums of exponentials and target logits (double).
    virtual void allReduceSum(float *data, std::int64_t n) = 0;
    virtual void allReduceSum(double *data, std::int64_t n) = 0;
    /// Element-wise maximum over the group, in place: the vocabulary's row maxima.
    virtual void allReduceMax(float *data, std::int64_t n) = 0;
    /// Whether allGatherOnDevice() works: an NCCL group on GPUs. The pointers of the reductions
    /// above are host memory on every backend (NCCL stages them through its device buffer).
    [[nodiscard]] virtual bool gathersOnDevice() const { return false; }
    /// Every member's @p n floats at @p in into @p out (size() * n, member order), both in this
    /// member's GPU memory, written by work the caller has waited for: the ordered sum of
    /// LibTorch's GPU tensors (groupSum) adds the rows in member order on the device.
    virtual void allGatherOnDevice(const float *in, float *out, std::int64_t n);
    /// Member 0's @p n words to every member, in place: the leader's commands to its followers
    /// (tensor_parallel_driver.h). Not bounded by --timeout: a follower waits for its next command
    /// while its leader takes part in the data-parallel rounds, whose own collectives are bounded;
    /// the watchdog ends a follower whose leader died or stopped.
    virtual void broadcastCommand(std::int64_t *words, std::int64_t n) = 0;
    /// The seconds this member spent in the reductions above (not the commands): the
    /// tensor-parallel collective time that telemetry and the result show apart from the
    /// data-parallel rounds' wait and transfer.
    [[nodiscard]] virtual double collectiveSeconds() const = 0;
};

inline void TensorParallelGroup::allGatherOnDevice(const float *, float *, std::int64_t)
{
    throw CollectiveError("this tensor-parallel group reduces host memory only (Gloo): run tensors on a GPU with --backend nccl");
}

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
