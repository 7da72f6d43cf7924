// SPDX-License-Identifier: MIT
#include "tensor_parallel_torch.h"

#include "tensor_parallel.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>

namespace cppl::agent {

at::Tensor groupSum(TensorParallelGroup *group, at::Tensor partial)
{
    if (!group)
        return partial;
    CPPL_ENFORCE(partial.is_cpu(), "tensor-parallel reductions of host tensors (GPUs are refused before loading)");
    at::Tensor wide = partial.to(at::kFloat).contiguous();
    group->allReduceSum(wide.data_ptr<float>(), wide.numel());
    return wide.scalar_type() == partial.scalar_type() ? wide : wide.to(partial.scalar_type());
}

} // namespace cppl::agent
