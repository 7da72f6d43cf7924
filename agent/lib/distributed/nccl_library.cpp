// SPDX-License-Identifier: MIT
// NCCL and the CUDA runtime, loaded at run time: the agent links neither libnccl nor libcudart, so a
// build with NCCL support still starts (and runs Gloo) on hosts without a GPU stack. The libraries'
// entry points (nccl_library.h), the GPU queries pre-flight and batch sizing ask, device buffers.
#include "nccl_device.h"
#include "nccl_library.h"
#include "nccl_recovery.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#if CLUSTERPPL_HAVE_NCCL
#include <dlfcn.h>
#include <link.h>
#endif

namespace cppl::agent::dist {

std::string describe(const GpuLibraries &l)
{
    if (l.cudartPath.empty() && l.ncclPath.empty())
        return "GPU libraries: " + (l.error.empty() ? std::string("none loaded") : l.error);
    auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }; // CUDA: 12040 = 12.4
    std::string s = "CUDA runtime " + version(l.runtimeVersion) + " [" + l.cudartPath + ", " + l.cudartHow + "], driver: "
                    + (l.driverVersion > 0 ? "CUDA " + version(l.driverVersion) : std::string("none"));
    if (!l.ncclPath.empty()) {
        const int v = l.ncclVersion; // NCCL_VERSION: major * 10000 + minor * 100 + patch since 2.9
        s += "; NCCL " + std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100) + " [" + l.ncclPath
             + ", " + l.ncclHow + "]" + (l.ncclShrink ? " with ncclCommShrink" : "");
    }
    if (!l.error.empty())
        s += "; " + l.error;
    return s;
}

#if !CLUSTERPPL_HAVE_NCCL

std::string ncclUnavailableReason()
{
    return "this agent was built without NCCL support (configure with the CUDA toolkit and nccl.h present, "
           "-DCLUSTERPPL_WITH_NCCL=ON); use --backend gloo";
}

std::vector<GpuInfo> cudaDevices()
{
    return {};
}

DeviceBuffer::DeviceBuffer(int device, std::size_t) : m_device(device)
{
    throw CollectiveError("GPU memory is unavailable: " + ncclUnavailableReason());
}
DeviceBuffer::~DeviceBuffer() = default;
void DeviceBuffer::upload(const void *, std::size_t) {}
void DeviceBuffer::download(void *, std::size_t) const {}

GpuLibraries gpuLibraries()
{
    GpuLibraries l;
    l.error = ncclUnavailableReason();
    return l;
}

bool cudaMemoryInfo(int, std::int64_t &, std::int64_t &)
{
    return false;
}

std::string cudaPciBusId(int)
{
    return {};
}

#else

namespace nccl_lib {

namespace {

/// The path the loader actually mapped for @p handle.
std::string mappedPath(void *handle)
{
    link_map *map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name && *map->l_name)
        return map->l_name;
    return "?";
}

/**
 * A CUDA build of LibTorch has loaded its own CUDA runtime (and NCCL) already: use those
 * (RTLD_NOLOAD finds a loaded library by its soname), never a second copy with its own state.
 * Else the loader's search, else the path found at build time.
 */
void *openLibrary(std::initializer_list<const char *> sonames, const char *fallback, std::string &path, std::string &how, std::string &tried)
{
    for (const char *n : sonames)
        if (void *h = dlopen(n, RTLD_NOW | RTLD_NOLOAD)) {
            path = mappedPath(h);
            how = "already loaded (LibTorch's)";
            return h;
        }
    for (const char *n : sonames)
        if (void *h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) {
            path = mappedPath(h);
            how = "loader search";
            return h;
        } else {
            tried += std::string(tried.empty() ? "" : "; ") + dlerror();
        }
    if (fallback && *fallback) {
        if (void *h = dlopen(fallback, RTLD_NOW | RTLD_LOCAL)) {
            path = mappedPath(h);
            how = "build-time path";
            return h;
        }
        tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    }
    return nullptr;
}

/// Resolves every (name, slot) pair; returns the first missing name, empty when all resolved.
std::string bind(void *lib, std::initializer_list<std::pair<const char *, void *>> symbols)
{
    for (const auto &[name, slot] : symbols) {
        void *fn = dlsym(lib, name);
        if (!fn)
            return name;
        *static_cast<void **>(slot) = fn; // the slot is a function pointer; POSIX guarantees the round trip
    }
    return {};
}
} // namespace

const Api &api()
{
    static const Api a = [] {
        Api x;
        GpuLibraries &l = x.info;
        std::string tried;
        x.cudart = openLibrary({"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}, CLUSTERPPL_CUDART_FALLBACK,
                               l.cudartPath, l.cudartHow, tried);
        if (!x.cudart) {
            l.error = "cannot load the CUDA runtime (" + tried + ")";
            return x;
        }
        if (const std::string missing = bind(x.cudart, {{"cudaGetDeviceCount", &x.getDeviceCount},
                                                        {"cudaSetDevice", &x.setDevice},
                                                        {"cudaMalloc", &x.malloc},
                                                        {"cudaFree", &x.free},
                                                        {"cudaMemcpyAsync", &x.memcpyAsync},
                                                        {"cudaStreamCreateWithFlags", &x.streamCreateWithFlags},
                                                        {"cudaStreamDestroy", &x.streamDestroy},
                                                        {"cudaStreamQuery", &x.streamQuery},
                                                        {"cudaStreamSynchronize", &x.streamSynchronize},
                                                        {"cudaDeviceGetPCIBusId", &x.pciBusId},
                                                        {"cudaMemGetInfo", &x.memGetInfo},
                                                        {"cudaRuntimeGetVersion", &x.runtimeVersion},
                                                        {"cudaDriverGetVersion", &x.driverVersion},
                                                        {"cudaGetErrorString", &x.cudaErrorString}});
            !missing.empty()) {
            l.error = "the CUDA runtime " + l.cudartPath + " lacks " + missing;
            x.cudart = nullptr;
            return x;
        }
        x.runtimeVersion(&l.runtimeVersion);
        x.driverVersion(&l.driverVersion);
        tried.clear();
        x.nccl = openLibrary({"libnccl.so.2", "libnccl.so"}, CLUSTERPPL_NCCL_FALLBACK, l.ncclPath, l.ncclHow, tried);
        if (!x.nccl) {
            l.error = "cannot load NCCL (" + tried + ")";
            return x;
        }
        if (const std::string missing = bind(x.nccl, {{"ncclGetVersion", &x.getVersion},
                                                      {"ncclGetUniqueId", &x.getUniqueId},
                                                      {"ncclCommInitRankConfig", &x.commInitRankConfig},
                                                      {"ncclCommSplit", &x.commSplit},
                                                      {"ncclAllReduce", &x.allReduce},
                                                      {"ncclAllGather", &x.allGather},
                                                      {"ncclReduce", &x.reduce},
                                                      {"ncclBroadcast", &x.broadcast},
                                                      {"ncclCommGetAsyncError", &x.getAsyncError},
                                                      {"ncclCommFinalize", &x.commFinalize},
                                                      {"ncclCommDestroy", &x.commDestroy},
                                                      {"ncclCommAbort", &x.commAbort},
                                                      {"ncclGetErrorString", &x.ncclErrorString},
                                                      {"ncclGetLastError", &x.lastError},
                                                      {"ncclCommUserRank", &x.userRank},
                                                      {"ncclCommCount", &x.commCount}});
            !missing.empty()) {
            l.error = "NCCL " + l.ncclPath + " lacks " + missing + " (ncclCommSplit needs NCCL >= 2.18)";
            x.nccl = nullptr;
            return x;
        }
        x.getVersion(&l.ncclVersion);
        if (l.ncclVersion < kNcclMinVersion) { // an NCCL that exports the symbols but says it is older
            l.error = "NCCL " + l.ncclPath + " is version " + ncclVersionText(l.ncclVersion) + ", older than "
                      + ncclVersionText(kNcclMinVersion) + ", the oldest this agent uses (ncclCommSplit, ncclCommInitRankConfig); "
                      + "install NCCL 2.18 or newer";
            x.nccl = nullptr;
            return x;
        }
        if (void *fn = dlsym(x.nccl, "ncclCommShrink"); fn && l.ncclVersion >= kNcclShrinkVersion) {
            void *slot = &x.commShrink; // as bind() does: the slot is a function pointer
            *static_cast<void **>(slot) = fn;
            l.ncclShrink = true;
        }
        return x;
    }();
    return a;
}

std::string deviceProblem()
{
    const Api &a = api();
    if (!a.info.error.empty())
        return a.info.error;
    int n = 0;
    if (const cudaError_t rc = a.getDeviceCount(&n); rc != cudaSuccess)
        return std::string("CUDA: ") + a.cudaErrorString(rc);
    if (n == 0)
        return "CUDA: no GPU is visible (check CUDA_VISIBLE_DEVICES)";
    return {};
}

[[noreturn]] void fail(ncclResult_t rc, const std::string &what, ncclComm_t comm)
{
    std::string msg = "nccl: " + what + " failed: " + api().ncclErrorString(rc);
    if (const char *last = api().lastError(comm); last && *last)
        msg += " (NCCL says: " + std::string(last) + ")";
    throw CollectiveError(msg + "; NCCL_DEBUG=WARN shows more");
}

void check(ncclResult_t rc, const std::string &what, ncclComm_t comm)
{
    if (rc != ncclSuccess)
        fail(rc, what, comm);
}

void checkCuda(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess)
        throw CollectiveError(std::string("CUDA: ") + what + " failed: " + api().cudaErrorString(rc));
}

ncclConfig_t blockingConfig(const char *name, Channels channels)
{
    ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
    c.blocking = 1;
    c.commName = name; // shows in NCCL's own logs (NCCL_DEBUG=INFO)
    // No resources shared with a parent (NCCL_COMM_SPLIT_SHARE_RESOURCES / ..._SHRINK_... in a
    // user's environment would otherwise turn it on): after a lost rank the node group and leaders
    // are aborted while their parent lives on to be shrunk, and a shrunk world outlives its
    // aborted parent.
    c.splitShare = 0;
#ifdef NCCL_SHRINK_ABORT // nccl.h >= 2.27 has the field
    c.shrinkShare = 0;
#endif
    if (channels == Channels::One) {
        // The sums fit in one channel's buffers whatever the world size, and NCCL gives a message
        // of a few KiB one channel anyway; the limit keeps it from allocating every channel's
        // buffers up front (up to 32 over NVLink, and NVLS's multicast buffers on NVSwitch
        // systems: the bulk of a default communicator's memory). Both bounds, so that a user's
        // NCCL_MIN_CTAS cannot contradict it.
        c.minCTAs = 1;
        c.maxCTAs = 1;
    }
    return c;
}

} // namespace nccl_lib

using namespace nccl_lib;

std::string ncclUnavailableReason()
{
    return deviceProblem();
}

GpuLibraries gpuLibraries()
{
    return api().info;
}

bool cudaMemoryInfo(int device, std::int64_t &freeBytes, std::int64_t &totalBytes)
{
    const Api &a = api();
    size_t f = 0, t = 0;
    if (!a.cudart || a.setDevice(device) != cudaSuccess || a.memGetInfo(&f, &t) != cudaSuccess)
        return false;
    freeBytes = static_cast<std::int64_t>(f);
    totalBytes = static_cast<std::int64_t>(t);
    return true;
}

std::string cudaPciBusId(int device)
{
    const Api &a = api();
    char bus[64] = {};
    if (!a.cudart || a.pciBusId(bus, sizeof bus, device) != cudaSuccess)
        return {};
    return bus;
}

std::vector<GpuInfo> cudaDevices()
{
    const Api &a = api();
    std::vector<GpuInfo> out;
    int n = 0;
    if (!a.cudart || a.getDeviceCount(&n) != cudaSuccess)
        return out;
    // cudaDeviceProp's layout changes between CUDA versions (12 renamed the call to _v2, 13 dropped
    // fields), while the runtime may be another version than our header: fill a buffer larger than
    // any version's struct and read only the leading fields, which every version keeps in place.
    using PropsFn = cudaError_t (*)(void *, int);
    auto props = reinterpret_cast<PropsFn>(dlsym(a.cudart, "cudaGetDeviceProperties_v2"));
    if (!props)
        props = reinterpret_cast<PropsFn>(dlsym(a.cudart, "cudaGetDeviceProperties"));
    static_assert(offsetof(cudaDeviceProp, name) == 0 && offsetof(cudaDeviceProp, totalGlobalMem) == 288);
    std::vector<std::uint64_t> buffer(8192); // 64 KiB, aligned for any field
    for (int d = 0; d < n; ++d) {
        std::fill(buffer.begin(), buffer.end(), 0);
        if (props && props(buffer.data(), d) == cudaSuccess) {
            const auto *bytes = reinterpret_cast<const char *>(buffer.data());
            out.push_back({std::string(bytes, strnlen(bytes, 256)), static_cast<std::int64_t>(buffer[288 / 8]), cudaPciBusId(d)});
        } else {
            out.push_back({"device " + std::to_string(d), 0, cudaPciBusId(d)});
        }
    }
    return out;
}

DeviceBuffer::DeviceBuffer(int device, std::size_t bytes) : m_device(device)
{
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError("GPU memory is unavailable: " + why);
    if (device >= 0)
        checkCuda(api().setDevice(device), "cudaSetDevice");
    checkCuda(api().malloc(&m_data, bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer()
{
    if (m_data) {
        if (m_device >= 0)
            api().setDevice(m_device);
        api().free(m_data);
    }
}

void DeviceBuffer::upload(const void *host, std::size_t bytes)
{
    if (m_device >= 0)
        checkCuda(api().setDevice(m_device), "cudaSetDevice");
    checkCuda(api().memcpyAsync(m_data, host, bytes, cudaMemcpyHostToDevice, nullptr), "cudaMemcpyAsync (to the GPU)");
    checkCuda(api().streamSynchronize(nullptr), "cudaStreamSynchronize");
}

void DeviceBuffer::download(void *host, std::size_t bytes) const
{
    if (m_device >= 0)
        checkCuda(api().setDevice(m_device), "cudaSetDevice");
    checkCuda(api().memcpyAsync(host, m_data, bytes, cudaMemcpyDeviceToHost, nullptr), "cudaMemcpyAsync (from the GPU)");
    checkCuda(api().streamSynchronize(nullptr), "cudaStreamSynchronize");
}
#endif

} // namespace cppl::agent::dist
