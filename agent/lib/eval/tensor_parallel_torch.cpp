// SPDX-License-Identifier: MIT
#include "tensor_parallel_torch.h"

#include "tensor_parallel.h"

#include "cppl/errors.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>

namespace cppl::agent {

namespace {

/// A GPU tensor's ordered sum: every member's float32 partial gathered on the device (NCCL), then
/// member 0's row plus member 1's ..., one element-wise float32 addition at a time, which rounds as
/// the host's `s += x` does: the same bits as the CPU's groupSum, on every member.
at::Tensor deviceOrderedSum(TensorParallelGroup &group, const at::Tensor &wide)
{
    if (!group.gathersOnDevice())
        throw ConfigError("tensor parallelism with the model on a GPU needs --backend nccl: a Gloo group reduces host memory only");
    at::Tensor all = at::empty({group.size(), wide.numel()}, wide.options());
    // The group's communicator runs on a stream of its own and the host polls it: the partial's
    // kernels finish first, and the additions below are enqueued once the gather is complete.
    const c10::impl::VirtualGuardImpl guard(wide.device().type());
    guard.getStream(wide.device()).synchronize();
    group.allGatherOnDevice(wide.data_ptr<float>(), all.data_ptr<float>(), wide.numel());
    at::Tensor sum = all[0].clone();
    for (int m = 1; m < group.size(); ++m)
        sum.add_(all[m]);
    return sum.view(wide.sizes());
}

} // namespace

at::Tensor groupSum(TensorParallelGroup *group, at::Tensor partial)
{
    if (!group)
        return partial;
    at::Tensor wide = partial.to(at::kFloat).contiguous();
    if (partial.is_cpu())
        group->allReduceSum(wide.data_ptr<float>(), wide.numel());
    else
        wide = deviceOrderedSum(*group, wide);
    return wide.scalar_type() == partial.scalar_type() ? wide : wide.to(partial.scalar_type());
}

} // namespace cppl::agent
