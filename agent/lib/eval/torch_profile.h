// SPDX-License-Identifier: MIT
// `eval --profile PATH` (docs/speed.md, "Profiling"): a few batches before the clock under
// LibTorch's profiler, summed by operator (CPU) and kernel (GPU) name, so that a run on a lent GPU
// says where its time goes (GEMMs against norms, rotary, attention, the head's log-softmax) without
// Nsight. Where LibTorch has Kineto (pip's wheels) it also writes a Chrome trace.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cppl::agent {

/// One operator or kernel name's events in the profiled work.
struct ProfiledOp
{
    std::string name;
    std::string device;          ///< "cpu" (an operator on the host, its time inclusive of what it calls) or "cuda" (a kernel)
    std::int64_t calls = 0;
    double totalMicroseconds = 0;
};

/// What the profiler saw.
struct ProfileReport
{
    double wallSeconds = 0;          ///< the profiled work, start to end (device synchronised)
    double deviceMicroseconds = 0;   ///< the kernels' time summed (0 without device activities)
    bool deviceActivities = false;   ///< the GPU's kernels were recorded (Kineto and CUPTI)
    std::string tracePath;           ///< the Chrome trace written, empty when none could be
    std::string note;                ///< why something is missing (no Kineto, CUPTI refused)
    std::vector<ProfiledOp> ops;     ///< by total time, largest first
};

/**
 * @brief Runs @p work under LibTorch's profiler: CPU operators, and on a GPU (@p cuda) its kernels
 * where this LibTorch can record them. Writes a Chrome trace to @p tracePath when it can (Kineto);
 * otherwise says why in the report's note. @p work must leave the device idle (it ends with a copy
 * to the host).
 */
[[nodiscard]] ProfileReport profileWork(bool cuda, const std::function<void()> &work, const std::string &tracePath);

} // namespace cppl::agent
