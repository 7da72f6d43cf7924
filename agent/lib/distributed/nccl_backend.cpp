// SPDX-License-Identifier: MIT
// NCCL through its C API, loaded at run time: the agent links neither libnccl nor libcudart, so a
// build with NCCL support still starts (and runs Gloo) on hosts without a GPU stack.
#include "communicator.h"
#include "nccl_device.h"
#include "nccl_recovery.h"
#include "rendezvous_store.h"

#include "gpu/device_choice.h"
#include "process_exit.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/host.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

#if CLUSTERPPL_HAVE_NCCL
#include <nccl.h>
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

Communicators makeNcclCommunicators(RendezvousStore &, const BackendOptions &)
{
    throw CollectiveError("the nccl backend is unavailable: " + ncclUnavailableReason());
}

Communicators regroupNcclCommunicators(RendezvousStore &, const BackendOptions &, Communicators, const std::vector<int> &, const std::vector<int> &)
{
    throw CollectiveError("the nccl backend is unavailable: " + ncclUnavailableReason());
}

std::vector<GpuInfo> cudaDevices()
{
    return {};
}

std::unique_ptr<DeviceCommunicator> makeNcclTensorParallelCommunicator(RendezvousStore &, const BackendOptions &, const std::string &, int, int,
                                                                       const std::string &name)
{
    throw CollectiveError(name + " over nccl is unavailable: " + ncclUnavailableReason());
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

namespace {

/// The entry points we use, resolved with dlsym from whichever libcudart / libnccl the host has.
struct Api
{
    GpuLibraries info;
    void *cudart = nullptr;
    void *nccl = nullptr;

    cudaError_t (*getDeviceCount)(int *) = nullptr;
    cudaError_t (*setDevice)(int) = nullptr;
    cudaError_t (*malloc)(void **, size_t) = nullptr;
    cudaError_t (*free)(void *) = nullptr;
    cudaError_t (*memcpyAsync)(void *, const void *, size_t, cudaMemcpyKind, cudaStream_t) = nullptr;
    cudaError_t (*streamCreateWithFlags)(cudaStream_t *, unsigned int) = nullptr;
    cudaError_t (*streamDestroy)(cudaStream_t) = nullptr;
    cudaError_t (*streamQuery)(cudaStream_t) = nullptr;
    cudaError_t (*streamSynchronize)(cudaStream_t) = nullptr;
    cudaError_t (*pciBusId)(char *, int, int) = nullptr;
    cudaError_t (*memGetInfo)(size_t *, size_t *) = nullptr;
    cudaError_t (*runtimeVersion)(int *) = nullptr;
    cudaError_t (*driverVersion)(int *) = nullptr;
    const char *(*cudaErrorString)(cudaError_t) = nullptr;

    ncclResult_t (*getVersion)(int *) = nullptr;
    ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
    ncclResult_t (*commInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *) = nullptr;
    ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *) = nullptr;
    ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*getAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
    ncclResult_t (*commFinalize)(ncclComm_t) = nullptr;
    ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
    ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
    const char *(*ncclErrorString)(ncclResult_t) = nullptr;
    const char *(*lastError)(ncclComm_t) = nullptr;
    ncclResult_t (*userRank)(const ncclComm_t, int *) = nullptr;
    ncclResult_t (*commCount)(const ncclComm_t, int *) = nullptr;
    /// NCCL >= 2.27 only (null before): the survivors' communicator after a lost rank. Declared
    /// here rather than taken from nccl.h, so that an agent built against an older header still
    /// uses it where the runtime library has it.
    ncclResult_t (*commShrink)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int) = nullptr;
};

#ifdef NCCL_SHRINK_ABORT
constexpr int kShrinkAbort = NCCL_SHRINK_ABORT;
#else
constexpr int kShrinkAbort = 0x01; // nccl.h 2.27: first end the parent's operations in flight, then shrink
#endif

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

/// NCCL's code says little ("unhandled system error"); ncclGetLastError says which call and why.
[[noreturn]] void fail(ncclResult_t rc, const std::string &what, ncclComm_t comm)
{
    std::string msg = "nccl: " + what + " failed: " + api().ncclErrorString(rc);
    if (const char *last = api().lastError(comm); last && *last)
        msg += " (NCCL says: " + std::string(last) + ")";
    throw CollectiveError(msg + "; NCCL_DEBUG=WARN shows more");
}

void check(ncclResult_t rc, const std::string &what, ncclComm_t comm = nullptr)
{
    if (rc != ncclSuccess)
        fail(rc, what, comm);
}

void checkCuda(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess)
        throw CollectiveError(std::string("CUDA: ") + what + " failed: " + api().cudaErrorString(rc));
}

/// blocking = 1 explicitly: NCCL_COMM_BLOCKING=0 in a user's environment would otherwise make
/// init and split return ncclInProgress, which this code (blocking calls, polled streams) never expects.
ncclConfig_t blockingConfig(const char *name)
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
    return c;
}

/**
 * One NCCL communicator. Words are staged through a device buffer on a stream of its own
 * (non-blocking: it never waits for the model's kernels); completion is polled so that a
 * collective that exceeds the timeout (a stopped peer) aborts the communicator instead of
 * spinning forever inside the kernel.
 *
 * NCCL forbids concurrent calls on one communicator: the thread that runs a collective (the main
 * thread, or a RoundPipeline's communication thread: round_pipeline.h) holds m_use for each call;
 * abort() from another thread only takes it when free, and otherwise leaves a flag that the
 * polling thread acts on. The watchdog's way out makes no NCCL call (distributed_setup.cpp).
 *
 * A communicator's first collective connects its members inside the call (NCCL's lazy
 * connection), before anything is on the stream: that call runs on a thread of its own, bounded
 * by the same timeout as the poll, and an abort ends a connection that never comes (issue 43,
 * point 5).
 *
 * Tolerant runs (`--on-rank-loss continue`, BackendOptions::lossEpoch set): the poll also ends
 * when the watchdog reports a lost rank (RankLostError), and an error or a timeout is thrown
 * without aborting: the regrouping (regroupNcclCommunicators) decides, on the main thread, whether
 * the world communicator is shrunk (ncclCommShrink with NCCL_SHRINK_ABORT ends what is in flight)
 * or aborted, and aborts the others.
 */
class NcclCommunicator final : public DeviceCommunicator
{
public:
    NcclCommunicator(ncclComm_t comm, int rank, int size, int device, const BackendOptions &o, std::string name)
        : m_comm(comm), m_rank(rank), m_size(size), m_device(device), m_timeout(o.timeout), m_name(std::move(name)), m_lossEpoch(o.lossEpoch),
          m_epoch(o.epoch)
    {
        checkCuda(api().streamCreateWithFlags(&m_stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    }
    ~NcclCommunicator() override
    {
        const std::lock_guard lock(m_use);
        api().setDevice(m_device);
        if (m_failed || m_inFlight) // after an error, or with an operation abandoned: abort, never finalize (it would wait for it)
            abortLocked();
        if (!m_aborted) { // the normal path: flush, then free; an error here is reported, not thrown
            const ncclResult_t finalized = api().commFinalize(m_comm);
            const ncclResult_t rc = finalized == ncclSuccess ? api().commDestroy(m_comm) : finalized;
            if (rc != ncclSuccess) {
                const char *last = api().lastError(m_comm);
                const std::string line = "clusterppl-agent: nccl: closing the " + m_name + " communicator: " + api().ncclErrorString(rc)
                                         + (last && *last ? std::string(" (NCCL says: ") + last + ")" : std::string())
                                         + (finalized != ncclSuccess ? "; finalize failed, aborted instead" : "") + "\n";
                (void)!::write(2, line.data(), line.size());
            }
            if (finalized != ncclSuccess)
                abortLocked(); // a communicator that could not be finalized is neither destroyed nor left behind
        }
        // An operation abandoned in flight (a lost rank) may have left its kernel reading the
        // buffer until the abort ended it; cudaFree would synchronize with the device to free it.
        // A few bytes are left to the process's end instead.
        if (m_buffer && !m_inFlight)
            api().free(m_buffer);
        if (m_stream)
            api().streamDestroy(m_stream); // returns at once; the stream's resources go when its work is over
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    [[nodiscard]] int device() const noexcept { return m_device; }
    [[nodiscard]] const std::string &name() const noexcept { return m_name; }
    void abort() noexcept override
    {
        m_abortRequested = true;
        const std::unique_lock lock(m_use, std::try_to_lock);
        if (lock.owns_lock())
            abortLocked();
    }
    /// @brief Main thread, regrouping: ncclCommAbort now (waits for nothing but m_use).
    void abortNow() noexcept
    {
        const std::lock_guard lock(m_use);
        api().setDevice(m_device);
        abortLocked();
    }
    /// @brief An operation enqueued and not seen complete, or one running now on another thread.
    [[nodiscard]] bool busy() noexcept override
    {
        const std::unique_lock lock(m_use, std::try_to_lock);
        return !lock.owns_lock() || m_inFlight;
    }
    /// @brief Not aborted: ncclCommShrink may still use it (an error only is fine: NCCL_SHRINK_ABORT).
    [[nodiscard]] bool intact()
    {
        const std::lock_guard lock(m_use);
        return !m_aborted && !m_abortRequested;
    }
    /// @brief ncclCommShrink(NCCL_SHRINK_ABORT) without @p exclude (this communicator's ranks):
    /// ends the operations in flight here, returns the survivors' communicator. Main thread.
    ncclResult_t shrink(std::vector<int> exclude, ncclComm_t *out, ncclConfig_t *config)
    {
        const std::lock_guard lock(m_use);
        api().setDevice(m_device);
        return api().commShrink(m_comm, exclude.data(), static_cast<int>(exclude.size()), out, config, kShrinkAbort);
    }
    [[nodiscard]] ncclComm_t handle() const noexcept { return m_comm; }
    void allReduceSum(std::span<std::int64_t> w) override
    {
        run("all-reduce", w, [&] { return api().allReduce(m_buffer, m_buffer, w.size(), ncclInt64, ncclSum, m_comm, m_stream); });
    }
    void reduceSum(std::span<std::int64_t> w, int root) override
    {
        run("reduce", w, [&] { return api().reduce(m_buffer, m_buffer, w.size(), ncclInt64, ncclSum, root, m_comm, m_stream); });
    }
    void broadcast(std::span<std::int64_t> w, int root) override
    {
        run("broadcast", w, [&] { return api().broadcast(m_buffer, m_buffer, w.size(), ncclInt64, root, m_comm, m_stream); });
    }
    // Tensor parallelism's (nccl_device.h).
    void allGatherOnDevice(const void *in, void *out, std::size_t count, DeviceElement type) override
    {
        const std::lock_guard lock(m_use);
        const std::string where = whereOf("all-gather");
        prepare(where);
        complete(where, [&] { return api().allGather(in, out, count, ncclType(type), m_comm, m_stream); }, m_timeout);
    }
    void allGatherHost(const void *in, void *out, std::size_t count, DeviceElement type) override
    {
        const std::size_t bytes = count * elementBytes(type);
        staged("all-gather", in, bytes, out, bytes * static_cast<std::size_t>(m_size), m_timeout,
               [&](void *send, void *recv) { return api().allGather(send, recv, count, ncclType(type), m_comm, m_stream); });
    }
    void allReduceMaxHost(float *data, std::size_t count) override
    {
        staged("max all-reduce", data, count * sizeof(float), data, count * sizeof(float), m_timeout,
               [&](void *send, void *recv) { return api().allReduce(send, recv, count, ncclFloat32, ncclMax, m_comm, m_stream); });
    }
    void broadcastWaiting(std::span<std::int64_t> w, int root, std::chrono::milliseconds wait) override
    {
        staged("broadcast", w.data(), w.size_bytes(), w.data(), w.size_bytes(), wait,
               [&](void *send, void *recv) { return api().broadcast(send, recv, w.size(), ncclInt64, root, m_comm, m_stream); });
    }

private:
    void abortLocked() noexcept
    {
        if (!m_aborted)
            api().commAbort(m_comm); // also frees the communicator: never finalized or destroyed after this
        m_aborted = true;
    }
    [[nodiscard]] bool lossReported() const noexcept { return m_lossEpoch && m_lossEpoch->load() > m_epoch; }

    /// The first collective's call, in which NCCL connects the members, on a thread of its own:
    /// this one polls it as it polls the kernel, and past @p deadline (or on an abort request or a
    /// lost rank) aborts the communicator, which ends the connection's wait, and throws. Under m_use.
    template<typename Enqueue>
    ncclResult_t enqueueFirst(const std::string &where, Enqueue &enqueue, std::chrono::steady_clock::time_point deadline)
    {
        struct Call
        {
            std::mutex m;
            std::condition_variable cv;
            bool done = false;
            ncclResult_t rc = ncclSuccess;
        };
        const auto call = std::make_shared<Call>();
        std::thread caller([&enqueue, call, device = m_device] {
            api().setDevice(device); // the current device is per thread
            const ncclResult_t rc = enqueue();
            const std::lock_guard lock(call->m);
            call->rc = rc;
            call->done = true;
            call->cv.notify_all();
        });
        std::string why;
        {
            std::unique_lock lock(call->m);
            while (!call->done && why.empty()) {
                call->cv.wait_for(lock, std::chrono::milliseconds(20));
                if (call->done)
                    break;
                if (m_abortRequested)
                    why = where + " was aborted while its members connected: the run is stopping";
                else if (lossReported())
                    why = where + " abandoned while its members connected: a rank was lost";
                else if (std::chrono::steady_clock::now() > deadline)
                    why = where + " did not finish within " + std::to_string(m_timeout.count() / 1000)
                          + " s: its members did not all connect (NCCL connects at a communicator's first collective); the communicator was aborted";
            }
        }
        if (why.empty()) {
            caller.join();
            return call->rc;
        }
        abortLocked(); // ends the connection's wait: the call returns an error and the thread ends
        bool ended = false;
        {
            std::unique_lock lock(call->m);
            ended = call->cv.wait_for(lock, std::chrono::seconds(10), [&] { return call->done; });
        }
        if (ended) {
            caller.join();
        } else { // an NCCL whose abort did not end the call: the thread is left to the process's exit
            caller.detach();
            noteThreadLeftRunning();
        }
        m_failed = true;
        if (lossReported())
            throw RankLostError(why);
        if (m_abortRequested)
            throw CollectiveError(why);
        throw TimeoutError(why);
    }

    /// "nccl all-reduce in the world group", "... in the tensor-parallel group 0".
    [[nodiscard]] std::string whereOf(const char *what) const
    {
        return std::string("nccl ") + what + " in the " + m_name + (m_name.find("group") == std::string::npos ? " group" : "");
    }
    static ncclDataType_t ncclType(DeviceElement t) { return t == DeviceElement::Float32 ? ncclFloat32 : ncclFloat64; }
    static std::size_t elementBytes(DeviceElement t) { return t == DeviceElement::Float32 ? sizeof(float) : sizeof(double); }

    /// The int64 words through the device buffer, in place.
    template<typename Enqueue>
    void run(const char *what, std::span<std::int64_t> w, Enqueue enqueue)
    {
        staged(what, w.data(), w.size_bytes(), w.data(), w.size_bytes(), m_timeout, [&](void *, void *) { return enqueue(); });
    }

    /// Refuses an operation on a communicator that cannot take one; makes its device current. Under m_use.
    void prepare(const std::string &where)
    {
        if (m_aborted)
            throw CollectiveError(where + ": the communicator was aborted earlier");
        if (m_failed)
            throw CollectiveError(where + ": the communicator failed earlier");
        if (lossReported()) // never start an operation the lost rank would have to join
            throw RankLostError(where + " not started: a rank was lost");
        if (m_inFlight)
            throw CollectiveError(where + ": an earlier operation was abandoned in flight; the communicator must be rebuilt");
        checkCuda(api().setDevice(m_device), "cudaSetDevice"); // the current device is per thread: this may be a communication thread
    }

    /// Host data through the device buffer: @p inBytes of @p in up, @p enqueue(send, recv) on the
    /// buffer (in place when @p in is @p out), @p outBytes of the result down to @p out.
    template<typename Enqueue>
    void staged(const char *what, const void *in, std::size_t inBytes, void *out, std::size_t outBytes, std::chrono::milliseconds timeout,
                Enqueue enqueue)
    {
        const std::lock_guard lock(m_use);
        const std::string where = whereOf(what);
        prepare(where);
        const bool inPlace = in == out;
        const std::size_t bytes = inPlace ? inBytes : inBytes + outBytes;
        if (bytes > m_capacity) {
            if (m_buffer)
                checkCuda(api().free(m_buffer), "cudaFree");
            m_buffer = nullptr;
            m_capacity = 0;
            checkCuda(api().malloc(&m_buffer, bytes), "cudaMalloc");
            m_capacity = bytes;
        }
        char *send = static_cast<char *>(m_buffer);
        char *recv = inPlace ? send : send + inBytes;
        checkCuda(api().memcpyAsync(send, in, inBytes, cudaMemcpyHostToDevice, m_stream), "cudaMemcpyAsync (to the GPU)");
        complete(where, [&] { return enqueue(send, recv); }, timeout);
        // Pageable host memory: the copy back returns when done, and the data is already there.
        checkCuda(api().memcpyAsync(out, recv, outBytes, cudaMemcpyDeviceToHost, m_stream), "cudaMemcpyAsync (from the GPU)");
        checkCuda(api().streamSynchronize(m_stream), "cudaStreamSynchronize");
    }

    /// Enqueues the collective and polls it to completion, within @p timeout. Under m_use.
    template<typename Enqueue>
    void complete(const std::string &where, Enqueue enqueue, std::chrono::milliseconds timeout)
    {
        const bool tolerant = m_lossEpoch != nullptr;
        // The connection (first call only) and the kernel are each bounded by --timeout: the
        // kernel's deadline starts when the call returns, as on every rank at about the same
        // moment once all connected, so the first to give up names the timeout.
        if (const ncclResult_t rc = m_connected ? enqueue() : enqueueFirst(where, enqueue, std::chrono::steady_clock::now() + timeout);
            rc != ncclSuccess) {
            m_failed = tolerant;
            fail(rc, where, m_comm);
        }
        m_connected = true;
        m_inFlight = true;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const cudaError_t q = api().streamQuery(m_stream);
            if (q == cudaSuccess)
                break;
            if (q != cudaErrorNotReady)
                checkCuda(q, "cudaStreamQuery");
            ncclResult_t async = ncclSuccess;
            api().getAsyncError(m_comm, &async);
            if (async != ncclSuccess && async != ncclInProgress) {
                const std::string last = api().lastError(m_comm) ? api().lastError(m_comm) : "";
                const std::string msg = where + " failed: " + api().ncclErrorString(async) + (last.empty() ? "" : " (NCCL says: " + last + ")");
                if (tolerant) { // the regrouping aborts or shrinks it; the caller waits for the watchdog's verdict
                    m_failed = true;
                    throw CollectiveError(msg);
                }
                abortLocked();
                throw CollectiveError(msg);
            }
            if (m_abortRequested) {
                abortLocked();
                throw CollectiveError(where + " was aborted: the run is stopping");
            }
            if (lossReported()) // the kernel may still run: the regrouping's shrink or abort ends it
                throw RankLostError(where + " abandoned: a rank was lost");
            if (std::chrono::steady_clock::now() > deadline) {
                const std::string msg = where + " did not finish within " + std::to_string(timeout.count() / 1000) + " s";
                if (tolerant) {
                    m_failed = true;
                    throw TimeoutError(msg + "; the communicator is left to the regrouping");
                }
                abortLocked();
                throw TimeoutError(msg + "; the communicator was aborted");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        m_inFlight = false;
    }

    ncclComm_t m_comm;
    std::mutex m_use;
    std::atomic<bool> m_abortRequested{false};
    bool m_aborted = false;  ///< under m_use
    bool m_failed = false;   ///< under m_use: a tolerant run's error or timeout, left for the regrouping
    bool m_inFlight = false; ///< under m_use: an operation was enqueued and not seen complete
    bool m_connected = false; ///< under m_use: a collective's call returned, so NCCL has connected the members
    int m_rank, m_size, m_device;
    std::chrono::milliseconds m_timeout;
    std::string m_name;
    const std::atomic<int> *m_lossEpoch;
    int m_epoch;
    cudaStream_t m_stream = nullptr;
    void *m_buffer = nullptr;
    std::size_t m_capacity = 0;
};

/**
 * Aborts a regrouping's old node group and leaders, those with an operation in flight first: an
 * NCCL abort can block while another communicator of the process has a kernel in flight (issue
 * 43, point 4), so the stuck one goes first and the others then find nothing running. On a thread
 * of its own, bounded by @p bound: an abort that still blocks ends the regrouping with an error
 * (the thread is left to the process's exit).
 */
void abortBounded(std::vector<std::unique_ptr<Communicator>> comms, std::chrono::milliseconds bound)
{
    std::stable_partition(comms.begin(), comms.end(), [](const std::unique_ptr<Communicator> &c) { return c->busy(); });
    struct State
    {
        std::mutex m;
        std::condition_variable cv;
        bool done = false;
        std::string current;
        std::vector<std::unique_ptr<Communicator>> comms;
    };
    const auto st = std::make_shared<State>();
    st->comms = std::move(comms);
    std::thread aborter([st] {
        for (const auto &c : st->comms)
            if (auto *n = dynamic_cast<NcclCommunicator *>(c.get())) {
                {
                    const std::lock_guard lock(st->m);
                    st->current = n->name();
                }
                n->abortNow();
            }
        st->comms.clear(); // aborted: their destructors neither finalize nor wait
        const std::lock_guard lock(st->m);
        st->done = true;
        st->cv.notify_all();
    });
    std::unique_lock lock(st->m);
    if (st->cv.wait_for(lock, bound, [&] { return st->done; })) {
        lock.unlock();
        aborter.join();
        return;
    }
    const std::string current = st->current;
    lock.unlock();
    aborter.detach();
    noteThreadLeftRunning();
    throw CollectiveError("nccl regrouping: ncclCommAbort of the " + current + " communicator did not return within "
                          + std::to_string(bound.count() / 1000) + " s; this rank cannot rebuild its communicators");
}

std::string toHex(const ncclUniqueId &id)
{
    static const char *digits = "0123456789abcdef";
    std::string s;
    for (char c : id.internal) {
        const auto b = static_cast<unsigned char>(c);
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

// The id comes from the store, which any process that reaches MASTER_ADDR:MASTER_PORT can write:
// a malformed one is a protocol error with a cause, not a broken invariant.
ncclUniqueId fromHex(const std::string &s, int rank)
{
    ncclUniqueId id{};
    auto nibble = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
    const bool hex = std::all_of(s.begin(), s.end(), [&](char c) { return nibble(c) >= 0; });
    if (s.size() != 2 * sizeof id.internal || !hex)
        throw ProtocolError("nccl: rank " + std::to_string(rank) + ": the unique id rank 0 published in the store is malformed ("
                            + std::to_string(s.size()) + " characters, expected " + std::to_string(2 * sizeof id.internal)
                            + " hex digits); is another run or program using the same MASTER_ADDR:MASTER_PORT?");
    for (std::size_t i = 0; i < sizeof id.internal; ++i)
        id.internal[i] = static_cast<char>(nibble(s[2 * i]) << 4 | nibble(s[2 * i + 1]));
    return id;
}

std::string waitFor(RendezvousStore &store, const std::string &key, const BackendOptions &o, const std::string &what)
{
    const auto text = store.get(key, o.timeout);
    if (!text)
        throw TimeoutError("nccl: rank " + std::to_string(o.rank) + ": " + what + " did not arrive within " + std::to_string(o.timeout.count() / 1000) + " s");
    return *text;
}

/// Every rank says which GPU it drives; two ranks on one GPU are refused here, with their names,
/// instead of failing inside NCCL's init.
void refuseSharedGpus(RendezvousStore &store, const BackendOptions &o, int device)
{
    char bus[64] = {};
    checkCuda(api().pciBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId");
    const std::string host = localHostName();
    store.set("cppl/nccl/gpu/" + std::to_string(o.rank), host + "\t" + bus + "\t" + std::to_string(device));
    std::vector<RankGpu> all;
    std::vector<std::string> devices;
    for (int r = 0; r < o.worldSize; ++r) {
        const std::string v = waitFor(store, "cppl/nccl/gpu/" + std::to_string(r), o, "the GPU of rank " + std::to_string(r));
        const auto t1 = v.find('\t'), t2 = v.find('\t', t1 == std::string::npos ? 0 : t1 + 1);
        all.push_back({v.substr(0, t1), t1 == std::string::npos ? v : v.substr(t1 + 1, t2 - t1 - 1)});
        devices.push_back(t2 == std::string::npos ? "?" : v.substr(t2 + 1));
    }
    if (const auto shared = findSharedGpu(all)) {
        const auto [a, b] = *shared;
        const char *cvd = std::getenv("CUDA_VISIBLE_DEVICES");
        throw ConfigError("nccl: ranks " + std::to_string(a) + " and " + std::to_string(b) + " on host " + all[static_cast<std::size_t>(a)].host
                          + " both use the GPU at PCI " + all[static_cast<std::size_t>(a)].busId + " (cuda:" + devices[static_cast<std::size_t>(a)]
                          + " and cuda:" + devices[static_cast<std::size_t>(b)] + " in their processes; this rank has CUDA_VISIBLE_DEVICES="
                          + (cvd ? cvd : "unset") + "); NCCL needs a GPU of its own for every rank: give each rank its own GPU, start fewer "
                          + "ranks per host, or use --backend gloo");
    }
}

} // namespace

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

namespace {

/// The GPU this rank drives: eval's choice, else (model on the CPU) the same rules.
int rankDevice(const BackendOptions &o)
{
    if (o.cudaDevice >= 0)
        return o.cudaDevice;
    DevicePlacement p;
    p.localRank = o.localRank;
    p.localWorldSize = o.localWorldSize;
    checkCuda(api().getDeviceCount(&p.visibleDevices), "cudaGetDeviceCount");
    if (const char *v = std::getenv("CUDA_VISIBLE_DEVICES"))
        p.cudaVisibleDevices = v;
    p.hostDevices = o.hostDevices;
    p.nccl = true;
    p.host = localHostName();
    return chooseCudaDevice(p);
}

/// A world communicator over o.worldSize ranks from a unique id that rank 0 (of this epoch)
/// publishes under ncclKeyPrefix(o.epoch): a regrouping never meets an older epoch's id.
ncclComm_t openWorld(RendezvousStore &store, const BackendOptions &o, int device)
{
    ncclUniqueId id{};
    const std::string key = ncclKeyPrefix(o.epoch) + "unique-id";
    if (o.rank == 0) {
        check(api().getUniqueId(&id), "ncclGetUniqueId");
        store.set(key, toHex(id));
    } else {
        id = fromHex(waitFor(store, key, o, "rank 0's NCCL unique id"), o.rank);
    }
    ncclConfig_t config = blockingConfig("clusterppl world");
    ncclComm_t world = nullptr;
    check(api().commInitRankConfig(&world, o.worldSize, id, o.rank, &config),
          "ncclCommInitRankConfig (rank " + std::to_string(o.rank) + " of " + std::to_string(o.worldSize) + ", cuda:" + std::to_string(device)
              + (o.epoch ? ", epoch " + std::to_string(o.epoch) : std::string()) + ")");
    return world;
}

/// The world communicator, and for a hierarchical run its node group and leaders split off it.
/// Hierarchical runs keep the parent too (never used for data): it is finalized and destroyed
/// after its children, and aborted with them.
Communicators withSplits(ncclComm_t world, const BackendOptions &o, int device)
{
    Communicators c;
    c.backend = "nccl";
    c.world = std::make_unique<NcclCommunicator>(world, o.rank, o.worldSize, device, o, "world");
    if (o.topology == Topology::Flat)
        return c;
    const int g = o.groups.groupOf[static_cast<std::size_t>(o.rank)];
    const auto &members = o.groups.groups[static_cast<std::size_t>(g)];
    const int local = static_cast<int>(std::find(members.begin(), members.end(), o.rank) - members.begin());
    ncclComm_t group = nullptr, leaders = nullptr;
    ncclConfig_t groupConfig = blockingConfig("clusterppl node group");
    ncclConfig_t leadersConfig = blockingConfig("clusterppl leaders");
    check(api().commSplit(world, g, o.rank, &group, &groupConfig), "ncclCommSplit (node group " + std::to_string(g) + ")", world);
    check(api().commSplit(world, local == 0 ? 0 : NCCL_SPLIT_NOCOLOR, g, &leaders, &leadersConfig), "ncclCommSplit (leaders)", world);
    c.group = std::make_unique<NcclCommunicator>(group, local, static_cast<int>(members.size()), device, o, "node group " + std::to_string(g));
    if (local == 0)
        c.leaders = std::make_unique<NcclCommunicator>(leaders, g, static_cast<int>(o.groups.groups.size()), device, o, "leaders");
    return c;
}

} // namespace

Communicators makeNcclCommunicators(RendezvousStore &store, const BackendOptions &o)
{
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError("the nccl backend is unavailable on this host: " + why + "; use --backend gloo");
    const int device = rankDevice(o);
    checkCuda(api().setDevice(device), "cudaSetDevice");
    refuseSharedGpus(store, o, device);
    return withSplits(openWorld(store, o, device), o, device);
}

std::unique_ptr<DeviceCommunicator> makeNcclTensorParallelCommunicator(RendezvousStore &store, const BackendOptions &o, const std::string &prefix,
                                                                       int rank, int size, const std::string &name)
{
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError(name + " over nccl is unavailable on this host: " + why);
    const int device = rankDevice(o);
    checkCuda(api().setDevice(device), "cudaSetDevice");
    // Its own unique id, not a split of the world: the data-parallel world holds the leaders only.
    ncclUniqueId id{};
    const std::string key = prefix + "nccl/unique-id";
    if (rank == 0) {
        check(api().getUniqueId(&id), "ncclGetUniqueId (" + name + ")");
        store.set(key, toHex(id));
    } else {
        id = fromHex(waitFor(store, key, o, "the NCCL unique id of " + name), o.rank);
    }
    const std::string commName = "clusterppl " + name;
    ncclConfig_t config = blockingConfig(commName.c_str());
    ncclComm_t comm = nullptr;
    check(api().commInitRankConfig(&comm, size, id, rank, &config),
          "ncclCommInitRankConfig (" + name + ", member " + std::to_string(rank) + " of " + std::to_string(size) + ", cuda:" + std::to_string(device) + ")");
    BackendOptions own = o;
    own.lossEpoch = nullptr; // a loss elsewhere leaves this group whole; one inside it ends this process (the watchdog)
    auto c = std::make_unique<NcclCommunicator>(comm, rank, size, device, own, name);
    // NCCL connects the members inside the first collective: here, bounded by --timeout, so that
    // no later one (a follower's wait for a command is longer) has to.
    std::int64_t word = rank;
    std::vector<std::int64_t> all(static_cast<std::size_t>(size));
    c->allGatherHost(&word, all.data(), 1, DeviceElement::Float64); // 8 bytes each: the type only sizes them
    for (int m = 0; m < size; ++m)
        if (all[static_cast<std::size_t>(m)] != m)
            throw ProtocolError("nccl: " + name + ": member " + std::to_string(m) + " answered as member " + std::to_string(all[static_cast<std::size_t>(m)])
                                + " when the members connected; do all ranks run the same agent version?");
    return c;
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

Communicators regroupNcclCommunicators(RendezvousStore &store, const BackendOptions &o, Communicators old, const std::vector<int> &oldMembers,
                                       const std::vector<int> &newMembers)
{
    CPPL_ENFORCE(o.epoch > 0 && static_cast<int>(newMembers.size()) == o.worldSize, "an NCCL regrouping without a new epoch");
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError("nccl regrouping: " + why);
    auto *oldWorld = dynamic_cast<NcclCommunicator *>(old.world.get());
    // However this ends, the old world communicator is aborted (idempotent), never finalized: a peer is gone.
    struct AbortOldWorld
    {
        std::unique_ptr<Communicator> &world;
        ~AbortOldWorld()
        {
            if (auto *n = dynamic_cast<NcclCommunicator *>(world.get()))
                n->abortNow();
        }
    } abortOldWorld{old.world};
    const int device = oldWorld ? oldWorld->device() : rankDevice(o);
    checkCuda(api().setDevice(device), "cudaSetDevice");
    // 1. The node group and leaders go first: they may include the lost rank and hold an
    //    operation abandoned in flight; ncclCommAbort ends it (that one first, bounded). The world
    //    communicator is kept for a shrink (hierarchical runs never use it for data; flat ones
    //    abandoned theirs in it).
    std::vector<std::unique_ptr<Communicator>> children;
    for (auto *child : {&old.group, &old.leaders})
        if (*child)
            children.push_back(std::move(*child));
    abortBounded(std::move(children), o.timeout);
    // 2. Shrink or a new communicator: every survivor says what it can, all decide alike.
    const std::string prefix = ncclKeyPrefix(o.epoch);
    const ShrinkAbility mine{api().info.ncclVersion, api().commShrink != nullptr, oldWorld && oldWorld->intact()};
    store.set(prefix + "shrink/" + std::to_string(o.rank), formatShrinkAbility(mine));
    std::vector<ShrinkAbility> all;
    for (int r = 0; r < o.worldSize; ++r) {
        const std::string text = waitFor(store, prefix + "shrink/" + std::to_string(r), o,
                                         "what rank " + std::to_string(newMembers[static_cast<std::size_t>(r)]) + " can rebuild with (regrouping)");
        const auto a = parseShrinkAbility(text);
        if (!a)
            throw ProtocolError("nccl regrouping: rank " + std::to_string(newMembers[static_cast<std::size_t>(r)]) + " published \"" + text.substr(0, 40)
                                + "\" as its NCCL abilities: do all ranks run the same agent version?");
        all.push_back(*a);
    }
    const NcclRebuildPlan plan = planNcclRebuild(oldMembers, newMembers, all);
    if (o.rank == 0)
        std::cerr << "nccl regrouping (epoch " << o.epoch << ", " << o.worldSize << " ranks): " << plan.reason << std::endl;
    ncclComm_t world = nullptr;
    if (plan.shrink) {
        ncclConfig_t config = blockingConfig("clusterppl world");
        check(oldWorld->shrink(plan.exclude, &world, &config), "ncclCommShrink (epoch " + std::to_string(o.epoch) + ", without "
                                                                  + std::to_string(plan.exclude.size()) + " of " + std::to_string(oldMembers.size()) + " ranks)");
        oldWorld->abortNow(); // the parent's operations ended in the shrink; this frees it
        // ncclCommShrink keeps the parent's order (nccl.h): each survivor's rank is its place among them.
        int rank = -1, count = -1;
        check(api().userRank(world, &rank), "ncclCommUserRank", world);
        check(api().commCount(world, &count), "ncclCommCount", world);
        if (rank != o.rank || count != o.worldSize) {
            api().commAbort(world);
            throw ProtocolError("nccl regrouping: ncclCommShrink made this rank " + std::to_string(rank) + " of " + std::to_string(count)
                                + ", the survivors' order says " + std::to_string(o.rank) + " of " + std::to_string(o.worldSize));
        }
    } else {
        if (oldWorld)
            oldWorld->abortNow();
        world = openWorld(store, o, device);
    }
    old.world.reset();
    return withSplits(world, o, device);
}

#endif

} // namespace cppl::agent::dist
