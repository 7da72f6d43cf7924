// SPDX-License-Identifier: MIT
#pragma once

#include "cpu_gemm.h"

namespace cppl::agent {

/**
 * @brief The intra-op pool that runs the native kernels' tasks: LibTorch's (its thread count is
 * `--threads`, at::set_num_threads).
 *
 * Tasks are handed out in small chunks from a shared counter rather than as one fixed share per
 * thread: a thread the OS delays (other work on the host, a sibling hyperthread) then takes fewer
 * chunks instead of making the others wait for its share. Which thread runs a task never changes
 * its bits.
 *
 * LibTorch's at::parallel_for is a header template; with LibTorch's OpenMP backend (Debian's, and
 * the official builds) it is a `#pragma omp parallel` region that runs on one thread unless the
 * translation unit that instantiates it is compiled with OpenMP. Only intra_op.cpp instantiates it
 * for the agent's own kernels, and CMake compiles it with OpenMP (agent/CMakeLists.txt).
 */
[[nodiscard]] const cpu::ParallelFor &intraOp();

} // namespace cppl::agent
