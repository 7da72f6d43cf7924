// SPDX-License-Identifier: MIT
#include "runtime_info.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/api/include/torch/version.h>

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>

namespace cppl::agent {

namespace {

template<typename F>
F symbol(const char *name)
{
    return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

} // namespace

std::int64_t residentBytes()
{
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0, resident = 0;
    if (!(statm >> size >> resident))
        return 0;
    return resident * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

bool resetPeakResident()
{
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    return static_cast<bool>(clear);
}

std::int64_t peakResidentBytes()
{
    std::ifstream status("/proc/self/status");
    std::string key;
    std::int64_t kib = 0;
    while (status >> key)
        if (key == "VmHWM:" && status >> kib)
            return kib * 1024;
    return 0;
}

void setThreads(int intraOp, int blasThreads)
{
    if (intraOp > 0)
        at::set_num_threads(intraOp);
    if (blasThreads > 0)
        if (auto set = symbol<void (*)(int)>("openblas_set_num_threads"))
            set(blasThreads);
}

RuntimeInfo runtimeInfo()
{
    RuntimeInfo info;
    info.intraOpThreads = at::get_num_threads();
    info.torchVersion = TORCH_VERSION;
    if (void *sgemm = ::dlsym(RTLD_DEFAULT, "sgemm_")) {
        Dl_info dl{};
        if (::dladdr(sgemm, &dl) && dl.dli_fname)
            info.blasPath = dl.dli_fname;
    }
    if (auto config = symbol<char *(*)()>("openblas_get_config")) {
        info.blas = config(); // "OpenBLAS 0.3.21 ... DYNAMIC_ARCH ... <build target>"
        if (auto core = symbol<char *(*)()>("openblas_get_corename"))
            info.blas += ", running " + std::string(core()) + " kernels";
        if (auto threads = symbol<int (*)()>("openblas_get_num_threads"))
            info.blasThreads = threads();
    } else if (info.blasPath.find("mkl") != std::string::npos) {
        info.blas = "MKL";
    } else if (at::hasMKL()) {
        info.blas = "MKL (linked into LibTorch, as pip wheels have it)"; // its sgemm_, if exported, is LibTorch's
    } else if (info.blasPath.find("blis") != std::string::npos) {
        info.blas = "BLIS";
    } else if (!info.blasPath.empty()) {
        info.blas = "reference BLAS (slow: install libopenblas0-pthread)";
    } else {
        info.blas = "unknown";
    }
    return info;
}

std::string describe(const RuntimeInfo &info)
{
    std::string s = "BLAS: " + info.blas;
    if (!info.blasPath.empty())
        s += " [" + info.blasPath + "]";
    if (info.blasThreads > 0)
        s += ", " + std::to_string(info.blasThreads) + " BLAS threads";
    s += "; LibTorch " + info.torchVersion + ", " + std::to_string(info.intraOpThreads) + " intra-op threads";
    if (info.blas.find("running Prescott kernels") != std::string::npos && __builtin_cpu_supports("avx2"))
        s += "\nWARNING: OpenBLAS did not recognise this CPU and runs generic SSE3 (Prescott) kernels, about 4x slower "
             "than this CPU allows. If your OpenBLAS supports it, export OPENBLAS_CORETYPE=Haswell (AVX2) or SkylakeX "
             "(AVX-512) before starting the agent.";
    return s;
}

} // namespace cppl::agent
