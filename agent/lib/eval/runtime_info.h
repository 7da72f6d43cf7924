// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>

namespace cppl::agent {

struct RuntimeInfo
{
    std::string blas;     ///< e.g. "OpenBLAS 0.3.21 (openblas-pthread)"
    std::string blasPath; ///< shared object providing sgemm_
    int blasThreads = 0;  ///< 0 = unknown
    int intraOpThreads = 0;
    std::string torchVersion;
};

/// @brief Sets LibTorch's intra-op threads and, when the BLAS is OpenBLAS, its thread count.
/// blasThreads <= 0 leaves the BLAS as it is.
void setThreads(int intraOp, int blasThreads);
/// @brief Which BLAS actually runs (found through the sgemm_ symbol), and the thread counts.
[[nodiscard]] RuntimeInfo runtimeInfo();
[[nodiscard]] std::string describe(const RuntimeInfo &info);
/// @brief This process's resident set in bytes (/proc/self/statm), 0 where it cannot be read.
[[nodiscard]] std::int64_t residentBytes();
/// @brief Resets the kernel's peak resident set (VmHWM) to the current one (/proc/self/clear_refs,
/// "5"), so that peakResidentBytes() then gives the peak of what follows; false where it cannot.
bool resetPeakResident();
/// @brief VmHWM of /proc/self/status in bytes: the peak resident set since the start or the last
/// resetPeakResident(); 0 where it cannot be read.
[[nodiscard]] std::int64_t peakResidentBytes();

} // namespace cppl::agent
