// SPDX-License-Identifier: MIT
// Tensor parallelism on LibTorch's path (docs/models.md, "Tensor parallelism"): the group's
// reductions (tensor_parallel.h) on tensors of any dtype, for the row-parallel products, the
// vocabulary-parallel embedding and the head's log-softmax.
#pragma once

#include <ATen/core/Tensor.h>

namespace cppl::agent {

class TensorParallelGroup;

/**
 * The group's ordered sum of @p partial (each member's share of a row-parallel product or of the
 * embedding's rows), in float32 whatever its dtype: each element is member 0's value widened, plus
 * member 1's, ..., then rounded once to @p partial's dtype. So every member of every group holds the
 * same bits, and a bfloat16 sum is rounded once, as a one-rank bfloat16 product rounds its float32
 * accumulation once. Null group: @p partial as it is. The result has @p partial's shape; a float32
 * contiguous @p partial is reduced in place on the CPU. On a GPU (an NCCL group) the partials are
 * gathered on the device and added there in member order: the same bits, no host copy.
 */
[[nodiscard]] at::Tensor groupSum(TensorParallelGroup *group, at::Tensor partial);

} // namespace cppl::agent
