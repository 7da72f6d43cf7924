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
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

#include "nccl_library.h"
namespace cppl::agent::dist {

#if !CLUSTERPPL_HAVE_NCCL

Communicators makeNcclCommunicators(RendezvousStore &, const BackendOptions &)
{
    throw CollectiveError("the nccl backend is unavailable: " + ncclUnavailableReason());
}

Communicators regroupNcclCommunicators(RendezvousStore &, const BackendOptions &, Communicators, const std::vector<int> &, const std::vector<int> &)
{
    throw CollectiveError("the nccl backend is unavailable: " + ncclUnavailableReason());
}

std::unique_ptr<DeviceCommunicator> makeNcclTensorParallelCommunicator(RendezvousStore &, const BackendOptions &, const std::string &, int, int,
                                                                       const std::string &name)
{
    throw CollectiveError(name + " over nccl is unavailable: " + ncclUnavailableReason());
}

#else

using namespace nccl_lib;

namespace {

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
          m_epoch(o.epoch), m_givingUp(o.givingUp)
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
    /// This rank gives up on its own (a timeout, an error), before its abort breaks the peers'
    /// connections: the cause goes where they can read it (bounded by the callback).
    void sayCause(const std::string &what) const
    {
        if (m_givingUp && !m_lossEpoch)
            m_givingUp(what);
    }
    /// NCCL allocates a communicator's connection buffers in its first collective: the GPU's free
    /// memory once it connected, beside what the creation took (logCommunicatorMemory).
    void logConnectedMemory() const
    {
        size_t f = 0, t = 0;
        if (api().memGetInfo(&f, &t) == cudaSuccess)
            std::cerr << "nccl: rank " << m_rank << " of the " << m_name << " communicator: cuda:" << m_device << " has "
                      << static_cast<std::int64_t>(f) / (1024 * 1024) << " MiB free once it connected" << std::endl;
    }

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
        if (!m_abortRequested && !lossReported())
            sayCause(why);
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
        if (!m_connected)
            logConnectedMemory();
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
                sayCause(msg);
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
                sayCause(msg + "; the communicator was aborted");
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
    std::function<void(const std::string &)> m_givingUp; ///< before this rank aborts on its own error (BackendOptions::givingUp)
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
        std::string current;
        std::vector<std::unique_ptr<Communicator>> comms;
    };
    const auto st = std::make_shared<State>();
    st->comms = std::move(comms);
    const bool done = finishesWithin(
        [st] {
            for (const auto &c : st->comms)
                if (auto *n = dynamic_cast<NcclCommunicator *>(c.get())) {
                    {
                        const std::lock_guard lock(st->m);
                        st->current = n->name();
                    }
                    n->abortNow();
                }
            st->comms.clear(); // aborted: their destructors neither finalize nor wait
        },
        bound);
    if (done)
        return;
    std::string current;
    {
        const std::lock_guard lock(st->m);
        current = st->current;
    }
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
    const std::string host = ncclHostId(); // as NCCL tells hosts apart: NCCL_HOSTID, else the name
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
                          + "ranks per host, or use --backend gloo (" + kNcclShareGpuVariable + "=1 lets ranks share a GPU as a test mode)");
    }
}
} // namespace

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
    p.shareGpu = ncclShareGpuRequested();
    p.host = localHostName();
    return chooseCudaDevice(p);
}

/// Free memory of the current device, -1 when unknown.
std::int64_t freeDeviceBytes()
{
    size_t f = 0, t = 0;
    return api().memGetInfo(&f, &t) == cudaSuccess ? static_cast<std::int64_t>(f) : -1;
}

/// What making the communicators took of the GPU's memory, as cudaMemGetInfo sees it (with ranks
/// sharing a GPU, their allocations at the same moment count too): the reserve the automatic batch
/// size must keep (issue 43, point 5).
void logCommunicatorMemory(const BackendOptions &o, int device, std::int64_t before, std::int64_t after)
{
    if (before < 0 || after < 0)
        return;
    constexpr double kMiB = 1024.0 * 1024.0;
    char line[200];
    std::snprintf(line, sizeof line, "nccl: rank %d: the communicators took %.1f MiB of cuda:%d (free %.1f -> %.1f MiB)", o.rank,
                  static_cast<double>(before - after) / kMiB, device, static_cast<double>(before) / kMiB, static_cast<double>(after) / kMiB);
    std::cerr << line << std::endl;
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
    ncclConfig_t config = blockingConfig("clusterppl world", Channels::One);
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
    ncclConfig_t groupConfig = blockingConfig("clusterppl node group", Channels::One);
    ncclConfig_t leadersConfig = blockingConfig("clusterppl leaders", Channels::One);
    check(api().commSplit(world, g, o.rank, &group, &groupConfig), "ncclCommSplit (node group " + std::to_string(g) + ")", world);
    check(api().commSplit(world, local == 0 ? 0 : NCCL_SPLIT_NOCOLOR, g, &leaders, &leadersConfig), "ncclCommSplit (leaders)", world);
    c.group = std::make_unique<NcclCommunicator>(group, local, static_cast<int>(members.size()), device, o, "node group " + std::to_string(g));
    if (local == 0)
        c.leaders = std::make_unique<NcclCommunicator>(leaders, g, static_cast<int>(o.groups.groups.size()), device, o, "leaders");
    return c;
}

/// The shared-GPU test mode's environment (prepareNcclGpuSharing), set before this process's first
/// NCCL communicator, whichever that is (a tensor-parallel follower's is its group's), from the
/// rank it started as: the same NCCL_HOSTID whichever comes first, unique in the run.
void announceGpuSharing(const BackendOptions &o)
{
    if (const std::string said = prepareNcclGpuSharing(o.processRank >= 0 ? o.processRank : o.rank); !said.empty())
        std::cerr << said << std::endl;
}

} // namespace

Communicators makeNcclCommunicators(RendezvousStore &store, const BackendOptions &o)
{
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError("the nccl backend is unavailable on this host: " + why + "; use --backend gloo");
    const int device = rankDevice(o);
    checkCuda(api().setDevice(device), "cudaSetDevice");
    announceGpuSharing(o);
    refuseSharedGpus(store, o, device);
    const std::int64_t before = freeDeviceBytes();
    Communicators c = withSplits(openWorld(store, o, device), o, device);
    logCommunicatorMemory(o, device, before, freeDeviceBytes());
    return c;
}

std::unique_ptr<DeviceCommunicator> makeNcclTensorParallelCommunicator(RendezvousStore &store, const BackendOptions &o, const std::string &prefix,
                                                                       int rank, int size, const std::string &name)
{
    if (const std::string why = deviceProblem(); !why.empty())
        throw CollectiveError(name + " over nccl is unavailable on this host: " + why);
    const int device = rankDevice(o);
    checkCuda(api().setDevice(device), "cudaSetDevice");
    announceGpuSharing(o); // a follower makes no data-parallel communicator: its NCCL_HOSTID is set here
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
    ncclConfig_t config = blockingConfig(commName.c_str(), Channels::NcclsOwn);
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
        ncclConfig_t config = blockingConfig("clusterppl world", Channels::One);
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
