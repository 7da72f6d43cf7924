// SPDX-License-Identifier: MIT
// NCCL through its C API, loaded at run time: the agent links neither libnccl nor libcudart, so a
// build with NCCL support still starts (and runs Gloo) on hosts without a GPU stack.
#include "communicator.h"
#include "store.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#if CLUSTERPPL_HAVE_NCCL
#include <nccl.h>
#include <dlfcn.h>
#endif

namespace cppl::agent::dist {

#if !CLUSTERPPL_HAVE_NCCL

std::string ncclUnavailableReason()
{
    return "this agent was built without NCCL support (configure with the CUDA toolkit and nccl.h present, "
           "-DCLUSTERPPL_WITH_NCCL=ON); use --backend gloo";
}

Communicators makeNcclCommunicators(Store &, const BackendOptions &)
{
    throw CollectiveError("the nccl backend is unavailable: " + ncclUnavailableReason());
}

std::vector<GpuInfo> cudaDevices()
{
    return {};
}

#else

namespace {

/// The entry points we use, resolved with dlsym from whichever libcudart / libnccl the host has.
struct Api
{
    void *cudart = nullptr;
    void *nccl = nullptr;
    std::string error; ///< why loading failed; empty when every symbol resolved

    cudaError_t (*getDeviceCount)(int *) = nullptr;
    cudaError_t (*setDevice)(int) = nullptr;
    cudaError_t (*malloc)(void **, size_t) = nullptr;
    cudaError_t (*memcpy)(void *, const void *, size_t, cudaMemcpyKind) = nullptr;
    cudaError_t (*streamCreate)(cudaStream_t *) = nullptr;
    cudaError_t (*streamQuery)(cudaStream_t) = nullptr;
    const char *(*cudaErrorString)(cudaError_t) = nullptr;

    ncclResult_t (*getVersion)(int *) = nullptr;
    ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
    ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
    ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *) = nullptr;
    ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
    ncclResult_t (*getAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
    ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
    const char *(*ncclErrorString)(ncclResult_t) = nullptr;
};

void *openFirst(std::initializer_list<const char *> names, std::string &tried)
{
    for (const char *n : names) {
        if (void *h = dlopen(n, RTLD_NOW | RTLD_GLOBAL))
            return h;
        tried += std::string(tried.empty() ? "" : "; ") + dlerror();
    }
    return nullptr;
}

template<typename T>
bool resolve(void *lib, const char *name, T &fn, std::string &error)
{
    fn = reinterpret_cast<T>(dlsym(lib, name));
    if (!fn && error.empty())
        error = std::string("symbol ") + name + " is missing (library too old?)";
    return fn != nullptr;
}

const Api &api()
{
    static const Api a = [] {
        Api x;
        std::string tried;
        // A CUDA build of LibTorch has loaded its libcudart already; dlopen then returns that one.
        x.cudart = openFirst({"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", CLUSTERPPL_CUDART_FALLBACK}, tried);
        if (!x.cudart) {
            x.error = "cannot load the CUDA runtime (" + tried + ")";
            return x;
        }
        std::string e;
        resolve(x.cudart, "cudaGetDeviceCount", x.getDeviceCount, e);
        resolve(x.cudart, "cudaSetDevice", x.setDevice, e);
        resolve(x.cudart, "cudaMalloc", x.malloc, e);
        resolve(x.cudart, "cudaMemcpy", x.memcpy, e);
        resolve(x.cudart, "cudaStreamCreate", x.streamCreate, e);
        resolve(x.cudart, "cudaStreamQuery", x.streamQuery, e);
        resolve(x.cudart, "cudaGetErrorString", x.cudaErrorString, e);
        if (!e.empty()) {
            x.error = "CUDA runtime: " + e;
            return x;
        }
        tried.clear();
        x.nccl = openFirst({"libnccl.so.2", "libnccl.so", CLUSTERPPL_NCCL_FALLBACK}, tried);
        if (!x.nccl) {
            x.error = "cannot load NCCL (" + tried + ")";
            return x;
        }
        resolve(x.nccl, "ncclGetVersion", x.getVersion, e);
        resolve(x.nccl, "ncclGetUniqueId", x.getUniqueId, e);
        resolve(x.nccl, "ncclCommInitRank", x.commInitRank, e);
        resolve(x.nccl, "ncclCommSplit", x.commSplit, e);
        resolve(x.nccl, "ncclAllReduce", x.allReduce, e);
        resolve(x.nccl, "ncclReduce", x.reduce, e);
        resolve(x.nccl, "ncclBroadcast", x.broadcast, e);
        resolve(x.nccl, "ncclCommGetAsyncError", x.getAsyncError, e);
        resolve(x.nccl, "ncclCommAbort", x.commAbort, e);
        resolve(x.nccl, "ncclGetErrorString", x.ncclErrorString, e);
        if (!e.empty())
            x.error = "NCCL: " + e + " (ncclCommSplit needs NCCL >= 2.18)";
        return x;
    }();
    return a;
}

std::string deviceProblem()
{
    const Api &a = api();
    if (!a.error.empty())
        return a.error;
    int n = 0;
    if (const cudaError_t rc = a.getDeviceCount(&n); rc != cudaSuccess)
        return std::string("CUDA: ") + a.cudaErrorString(rc);
    if (n == 0)
        return "CUDA: no GPU is visible (check CUDA_VISIBLE_DEVICES)";
    return {};
}

void check(ncclResult_t rc, const char *what)
{
    if (rc != ncclSuccess)
        throw CollectiveError(std::string("nccl: ") + what + " failed: " + api().ncclErrorString(rc));
}

void checkCuda(cudaError_t rc, const char *what)
{
    if (rc != cudaSuccess)
        throw CollectiveError(std::string("CUDA: ") + what + " failed: " + api().cudaErrorString(rc));
}

/**
 * One NCCL communicator. Words are staged through a device buffer; completion is polled on the
 * stream so that a collective that exceeds the timeout (a stopped peer) aborts the communicator
 * instead of spinning forever inside the kernel.
 */
class NcclCommunicator final : public Communicator
{
public:
    NcclCommunicator(ncclComm_t comm, int rank, int size, std::chrono::milliseconds timeout, std::string name)
        : m_comm(comm), m_rank(rank), m_size(size), m_timeout(timeout), m_name(std::move(name))
    {
        checkCuda(api().streamCreate(&m_stream), "cudaStreamCreate");
    }
    int rank() const override { return m_rank; }
    int size() const override { return m_size; }
    void abort() noexcept override
    {
        if (!m_aborted.exchange(true))
            api().commAbort(m_comm);
    }
    void allReduceSum(std::span<std::int64_t> w) override
    {
        stage(w);
        check(api().allReduce(m_buffer, m_buffer, w.size(), ncclInt64, ncclSum, m_comm, m_stream), "ncclAllReduce");
        finish("all-reduce", w);
    }
    void reduceSum(std::span<std::int64_t> w, int root) override
    {
        stage(w);
        check(api().reduce(m_buffer, m_buffer, w.size(), ncclInt64, ncclSum, root, m_comm, m_stream), "ncclReduce");
        finish("reduce", w);
    }
    void broadcast(std::span<std::int64_t> w, int root) override
    {
        stage(w);
        check(api().broadcast(m_buffer, m_buffer, w.size(), ncclInt64, root, m_comm, m_stream), "ncclBroadcast");
        finish("broadcast", w);
    }

private:
    void stage(std::span<const std::int64_t> w)
    {
        const std::size_t bytes = w.size_bytes();
        if (bytes > m_capacity) {
            checkCuda(api().malloc(&m_buffer, bytes), "cudaMalloc"); // small and few: freed at exit
            m_capacity = bytes;
        }
        checkCuda(api().memcpy(m_buffer, w.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    void finish(const char *what, std::span<std::int64_t> w)
    {
        const auto deadline = std::chrono::steady_clock::now() + m_timeout;
        for (;;) {
            const cudaError_t q = api().streamQuery(m_stream);
            if (q == cudaSuccess)
                break;
            if (q != cudaErrorNotReady)
                checkCuda(q, "cudaStreamQuery");
            ncclResult_t async = ncclSuccess;
            api().getAsyncError(m_comm, &async);
            if (async != ncclSuccess && async != ncclInProgress) {
                abort();
                throw CollectiveError(std::string("nccl ") + what + " in the " + m_name + " group failed: " + api().ncclErrorString(async));
            }
            if (std::chrono::steady_clock::now() > deadline) {
                abort();
                throw TimeoutError(std::string("nccl ") + what + " in the " + m_name + " group did not finish within "
                                   + std::to_string(m_timeout.count() / 1000) + " s; the communicator was aborted");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        checkCuda(api().memcpy(w.data(), m_buffer, w.size_bytes(), cudaMemcpyDeviceToHost), "cudaMemcpy");
    }

    ncclComm_t m_comm;
    std::atomic<bool> m_aborted{false};
    int m_rank, m_size;
    std::chrono::milliseconds m_timeout;
    std::string m_name;
    cudaStream_t m_stream = nullptr;
    void *m_buffer = nullptr;
    std::size_t m_capacity = 0;
};

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

} // namespace

std::string ncclUnavailableReason()
{
    return deviceProblem();
}

std::vector<GpuInfo> cudaDevices()
{
    const Api &a = api();
    std::vector<GpuInfo> out;
    int n = 0;
    if (!a.cudart || !a.getDeviceCount || a.getDeviceCount(&n) != cudaSuccess)
        return out;
    using PropsFn = cudaError_t (*)(cudaDeviceProp *, int);
    const auto props = reinterpret_cast<PropsFn>(dlsym(a.cudart, "cudaGetDeviceProperties"));
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp p{};
        if (props && props(&p, d) == cudaSuccess)
            out.push_back({p.name, static_cast<std::int64_t>(p.totalGlobalMem)});
        else
            out.push_back({"device " + std::to_string(d), 0});
    }
    return out;
}

Communicators makeNcclCommunicators(Store &store, const BackendOptions &o)
{
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError("the nccl backend is unavailable on this host: " + why + "; use --backend gloo");
    const Api &a = api();
    int devices = 0;
    checkCuda(a.getDeviceCount(&devices), "cudaGetDeviceCount");
    checkCuda(a.setDevice(o.localRank % devices), "cudaSetDevice");

    ncclUniqueId id{};
    const std::string key = "cppl/nccl/unique-id";
    if (o.rank == 0) {
        check(a.getUniqueId(&id), "ncclGetUniqueId");
        store.set(key, toHex(id));
    } else {
        const auto text = store.get(key, o.timeout);
        if (!text)
            throw TimeoutError("nccl: rank 0 did not publish its unique id within " + std::to_string(o.timeout.count() / 1000) + " s");
        id = fromHex(*text, o.rank);
    }
    ncclComm_t world = nullptr;
    check(a.commInitRank(&world, o.worldSize, id, o.rank), "ncclCommInitRank");

    Communicators c;
    c.backend = "nccl";
    if (o.topology == Topology::Flat) {
        c.world = std::make_unique<NcclCommunicator>(world, o.rank, o.worldSize, o.timeout, "world");
        return c;
    }
    const int g = o.groups.groupOf[static_cast<std::size_t>(o.rank)];
    const auto &members = o.groups.groups[static_cast<std::size_t>(g)];
    const int local = static_cast<int>(std::find(members.begin(), members.end(), o.rank) - members.begin());
    ncclComm_t group = nullptr, leaders = nullptr;
    check(a.commSplit(world, g, o.rank, &group, nullptr), "ncclCommSplit (node group)");
    check(a.commSplit(world, local == 0 ? 0 : NCCL_SPLIT_NOCOLOR, g, &leaders, nullptr), "ncclCommSplit (leaders)");
    c.group = std::make_unique<NcclCommunicator>(group, local, static_cast<int>(members.size()), o.timeout,
                                                 "node group " + std::to_string(g));
    if (local == 0)
        c.leaders = std::make_unique<NcclCommunicator>(leaders, g, static_cast<int>(o.groups.groups.size()), o.timeout, "leaders");
    return c;
}

#endif

} // namespace cppl::agent::dist
