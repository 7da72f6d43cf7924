// SPDX-License-Identifier: MIT
// Compiled with OpenMP (agent/CMakeLists.txt): at::parallel_for below is instantiated here, and with
// LibTorch's OpenMP backend its parallel region is this file's `#pragma omp parallel`.
#include "intra_op.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "intra_op.cpp must be compiled with OpenMP: LibTorch's at::parallel_for would run the native kernels on one thread"
#endif

namespace cppl::agent {

const cpu::ParallelFor &intraOp()
{
    static const cpu::ParallelFor pf = [](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)> &f) {
        const std::int64_t threads = at::get_num_threads();
        if (n <= 1 || threads <= 1 || at::in_parallel_region()) {
            f(0, n);
            return;
        }
        const std::int64_t chunk = std::max<std::int64_t>(1, n / (threads * 16));
        std::atomic<std::int64_t> next{0};
        at::parallel_for(0, threads, 1, [&](std::int64_t, std::int64_t) {
            for (std::int64_t b = next.fetch_add(chunk); b < n; b = next.fetch_add(chunk))
                f(b, std::min(n, b + chunk));
        });
    };
    return pf;
}

} // namespace cppl::agent
