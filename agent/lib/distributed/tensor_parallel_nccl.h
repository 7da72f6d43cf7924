// SPDX-License-Identifier: MIT
// The tensor-parallel group over NCCL (tensor_parallel_nccl.cpp). Torch-free.
#pragma once

#include "communicator.h"

#include <memory>
#include <string>

namespace cppl::agent {
class TensorParallelGroup;
}

namespace cppl::agent::dist {

/**
 * @brief This rank's tensor-parallel group over NCCL (member @p rank of @p size), on its own
 * communicator (makeNcclTensorParallelCommunicator: keys under @p prefix of @p store, @p name in
 * its errors). Sums gather the partials and add them in member order (host data on the host, GPU
 * tensors on the device through TensorParallelGroup::allGatherOnDevice), so every member of every
 * group has the same bits; maxima are NCCL's MAX.
 */
[[nodiscard]] std::unique_ptr<TensorParallelGroup> makeNcclTensorParallelGroup(RendezvousStore &store, const BackendOptions &options,
                                                                               const std::string &prefix, int rank, int size,
                                                                               const std::string &name);

} // namespace cppl::agent::dist
