// SPDX-License-Identifier: MIT
// A fake CUDA runtime (soname libcudart.so.13) for tests on machines without a GPU: the entry
// points clusterppl-agent binds (agent/lib/distributed/nccl_library.cpp, api()) and a few more,
// with a scripted number of devices whose memory is host memory and streams that are real: each
// stream is a thread that runs its work in order, so a "kernel" that never returns keeps its
// stream busy exactly as a stuck NCCL kernel does. Scripts: tests/fakes/README.md.
#include "fake_cuda_stream.h"
#include "fake_script.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using cppl::fakes::envInteger;
using cppl::fakes::envIntegerList;

namespace {

/// What the environment scripted, read once.
struct Script
{
    int physicalDevices = 1;
    std::vector<int> visible;             ///< CUDA_VISIBLE_DEVICES and CPPL_FAKE_CUDA_ORDER applied: visible index -> physical index
    std::vector<long long> memory;        ///< total bytes per physical device
    int runtimeVersion = 13000;
    int driverVersion = 13000;            ///< 0: no driver
    int pciBusBase = 0x18;
};

/// CUDA_VISIBLE_DEVICES as the real runtime reads it: indices up to the first one that is not a
/// valid device; unset means every device, empty means none.
std::vector<int> visibleDevices(int physical)
{
    std::vector<int> out;
    const char *v = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!v) {
        for (int d = 0; d < physical; ++d)
            out.push_back(d);
        return out;
    }
    const std::string text = v;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        char *end = nullptr;
        const long n = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end || n < 0 || n >= physical || std::find(out.begin(), out.end(), n) != out.end())
            break;
        out.push_back(static_cast<int>(n));
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return out;
}

/// CPPL_FAKE_CUDA_ORDER, the physical device behind each CUDA index before CUDA_VISIBLE_DEVICES
/// (CUDA_DEVICE_ORDER=FASTEST_FIRST, the default, may count devices otherwise than PCI bus order,
/// which NVML keeps); unset: PCI bus order.
std::vector<int> cudaOrder(int physical)
{
    std::vector<int> order;
    for (const long long d : envIntegerList("CPPL_FAKE_CUDA_ORDER", 0, 63, "a permutation of the device numbers, e.g. 1,0"))
        order.push_back(static_cast<int>(d));
    if (order.empty())
        for (int d = 0; d < physical; ++d)
            order.push_back(d);
    std::vector<int> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int d = 0; d < physical; ++d)
        if (sorted.size() != static_cast<std::size_t>(physical) || sorted[static_cast<std::size_t>(d)] != d)
            cppl::fakes::scriptError("CPPL_FAKE_CUDA_ORDER", std::getenv("CPPL_FAKE_CUDA_ORDER"), "a permutation of 0..CPPL_FAKE_CUDA_DEVICES-1");
    return order;
}

const Script &script()
{
    static const Script *s = [] {
        auto *x = new Script; // never destroyed: stream threads may outlive static destructors
        const cppl::fakes::FakeDevices devices = cppl::fakes::readFakeDevices();
        x->physicalDevices = devices.count;
        const std::vector<int> order = cudaOrder(devices.count);
        for (const int cudaIndex : visibleDevices(x->physicalDevices))
            x->visible.push_back(order[static_cast<std::size_t>(cudaIndex)]);
        x->memory = devices.memory;
        x->runtimeVersion = static_cast<int>(envInteger("CPPL_FAKE_CUDA_RUNTIME_VERSION", 1000, 99000, "a CUDA version code, e.g. 12040").value_or(13000));
        x->driverVersion = static_cast<int>(envInteger("CPPL_FAKE_CUDA_DRIVER_VERSION", 0, 99000, "a CUDA version code, e.g. 13000, or 0 (no driver)").value_or(13000));
        x->pciBusBase = devices.pciBusBase;
        return x;
    }();
    return *s;
}

/// The real runtime refuses every device call when the driver is older than itself.
cudaError_t driverProblem()
{
    const Script &s = script();
    if (s.driverVersion == 0)
        return cudaErrorNoDevice;
    if (s.driverVersion < s.runtimeVersion)
        return cudaErrorInsufficientDriver;
    return cudaSuccess;
}

thread_local int t_device = 0;

/// Device memory is host memory; what each device has handed out is counted for cudaMemGetInfo.
struct Allocations
{
    std::mutex mutex;
    std::map<void *, std::pair<int, std::size_t>> blocks; ///< pointer -> (physical device, bytes)
    std::map<int, long long> used;                        ///< physical device -> bytes
};
Allocations &allocations()
{
    static auto *a = new Allocations;
    return *a;
}

int physical(int visibleIndex)
{
    return script().visible[static_cast<std::size_t>(visibleIndex)];
}

} // namespace

/// A stream: a thread running its work in order. Destroyed streams finish their work, then go.
struct CUstream_st
{
    struct Work
    {
        void (*kernel)(void *);
        void *arg;
    };
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<Work> queue;
    bool running = false;   ///< a kernel is executing now
    bool destroyed = false; ///< cudaStreamDestroy was called: leave once the queue is empty
    int device = 0;

    [[nodiscard]] bool idle() const { return queue.empty() && !running; }

    void loop()
    {
        std::unique_lock lock(mutex);
        for (;;) {
            changed.wait(lock, [&] { return !queue.empty() || destroyed; });
            if (queue.empty())
                break;
            const Work w = queue.front();
            queue.pop_front();
            running = true;
            lock.unlock();
            t_device = device;
            w.kernel(w.arg);
            lock.lock();
            running = false;
            changed.notify_all();
        }
        lock.unlock();
        delete this;
    }
};

namespace {

struct CopyWork
{
    void *dst;
    std::vector<unsigned char> staged; ///< host-to-device: the source as it was when the call returned
    const void *src;
    std::size_t bytes;
    bool done = false;
};

void copyKernel(void *arg)
{
    auto *c = static_cast<CopyWork *>(arg);
    std::memcpy(c->dst, c->staged.empty() ? c->src : c->staged.data(), c->bytes);
}

void stagedCopyKernel(void *arg)
{
    copyKernel(arg);
    delete static_cast<CopyWork *>(arg);
}

/// Blocks until @p stream has run everything enqueued so far.
void waitIdle(cudaStream_t stream)
{
    std::unique_lock lock(stream->mutex);
    stream->changed.wait(lock, [&] { return stream->idle(); });
}

} // namespace

extern "C" {

cudaError_t cpplFakeCudaLaunch(cudaStream_t stream, void (*kernel)(void *), void *arg)
{
    if (!stream) {
        kernel(arg);
        return cudaSuccess;
    }
    const std::lock_guard lock(stream->mutex);
    stream->queue.push_back({kernel, arg});
    stream->changed.notify_all();
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess) {
        *count = 0;
        return e;
    }
    *count = static_cast<int>(script().visible.size());
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    if (device < 0 || device >= static_cast<int>(script().visible.size()))
        return cudaErrorInvalidDevice;
    t_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    *device = t_device;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **ptr, size_t size)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    Allocations &a = allocations();
    const int dev = physical(t_device);
    const std::lock_guard lock(a.mutex);
    if (a.used[dev] + static_cast<long long>(size) > script().memory[static_cast<std::size_t>(dev)])
        return cudaErrorMemoryAllocation;
    void *p = std::aligned_alloc(256, (std::max<std::size_t>(size, 1) + 255) / 256 * 256);
    if (!p)
        return cudaErrorMemoryAllocation;
    a.blocks[p] = {dev, size};
    a.used[dev] += static_cast<long long>(size);
    *ptr = p;
    return cudaSuccess;
}

cudaError_t cudaFree(void *ptr)
{
    if (!ptr)
        return cudaSuccess;
    Allocations &a = allocations();
    const std::lock_guard lock(a.mutex);
    const auto it = a.blocks.find(ptr);
    if (it == a.blocks.end())
        return cudaErrorInvalidValue;
    a.used[it->second.first] -= static_cast<long long>(it->second.second);
    a.blocks.erase(it);
    std::free(ptr);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *totalBytes)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    Allocations &a = allocations();
    const int dev = physical(t_device);
    const std::lock_guard lock(a.mutex);
    const long long total = script().memory[static_cast<std::size_t>(dev)];
    *totalBytes = static_cast<size_t>(total);
    *freeBytes = static_cast<size_t>(total - a.used[dev]);
    return cudaSuccess;
}

/// Pageable host memory, as the agent uses: a copy to the device is staged and returns at once,
/// in stream order; a copy to the host returns when it is done, after the stream's earlier work.
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    if (kind == cudaMemcpyHostToDevice) {
        auto *c = new CopyWork{dst, std::vector<unsigned char>(static_cast<const unsigned char *>(src), static_cast<const unsigned char *>(src) + count),
                               nullptr, count};
        return cpplFakeCudaLaunch(stream, stagedCopyKernel, c);
    }
    CopyWork c{dst, {}, src, count};
    const cudaError_t rc = cpplFakeCudaLaunch(stream, copyKernel, &c);
    if (stream)
        waitIdle(stream);
    return rc;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, count, kind, nullptr);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    auto *s = new CUstream_st;
    s->device = t_device;
    std::thread([s] { s->loop(); }).detach();
    *stream = s;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, 0);
}

/// Returns at once; the stream's thread ends once its work is over (never, for a stuck kernel).
cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
    if (!stream)
        return cudaErrorInvalidResourceHandle;
    const std::lock_guard lock(stream->mutex);
    stream->destroyed = true;
    stream->changed.notify_all();
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
    if (!stream)
        return cudaSuccess;
    const std::lock_guard lock(stream->mutex);
    return stream->idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
    if (stream)
        waitIdle(stream);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    return cudaSuccess; // streams are waited for one by one; nothing here owns a list of them
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    if (device < 0 || device >= static_cast<int>(script().visible.size()))
        return cudaErrorInvalidDevice;
    if (len < 13)
        return cudaErrorInvalidValue;
    std::snprintf(pciBusId, static_cast<std::size_t>(len), "0000:%02x:00.0", script().pciBusBase + physical(device));
    return cudaSuccess;
}

/// Only the leading fields every CUDA version keeps in place (name, totalGlobalMem): the caller's
/// struct may be another version's.
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (const cudaError_t e = driverProblem(); e != cudaSuccess)
        return e;
    if (device < 0 || device >= static_cast<int>(script().visible.size()))
        return cudaErrorInvalidDevice;
    std::snprintf(prop->name, sizeof prop->name, "Fake GPU %d (cppl tests)", physical(device));
    prop->totalGlobalMem = static_cast<size_t>(script().memory[static_cast<std::size_t>(physical(device))]);
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *version)
{
    *version = script().runtimeVersion;
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *version)
{
    *version = script().driverVersion;
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorNotReady:
        return "device not ready";
    default:
        return "unknown error (fake CUDA runtime)";
    }
}

cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

} // extern "C"
