// SPDX-License-Identifier: MIT
// A fake NCCL (soname libnccl.so.2) for tests without a GPU: real collectives between the ranks'
// processes over TCP (fake_nccl_net.h), communicators made from a unique id, split and shrunk as
// NCCL does, and the failures tests script (tests/fakes/README.md). This file: the scripts, the
// communicators' lifecycle and the small queries; fake_nccl_ops.cpp: the collectives.
#include "fake_nccl_net.h"
#include "fake_nccl_state.h"

#include <cuda_runtime_api.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <thread>

namespace cppl::fakes::nccl {

namespace {

constexpr const char *kIdMagic = "cpplfake1";

struct Registry
{
    std::mutex mutex;
    std::condition_variable changed;
    int inFlight = 0; ///< every communicator's collectives in flight, together
};
Registry &registry()
{
    static auto *r = new Registry; // never destroyed: stream threads may outlive static destructors
    return *r;
}

std::atomic<int> g_processRank{-1};
thread_local std::string t_lastError;

std::string hostId()
{
    if (const char *id = std::getenv("NCCL_HOSTID"); id && *id) // NCCL's own switch: each process its own "host"
        return id;
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return name;
}

/// The PCI bus id of @p device, through the (fake) CUDA runtime.
std::string busIdOf(int device)
{
    char bus[64] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess)
        return {};
    return bus;
}

/// Rank 0 of a new communicator: every member's hello, refusals, then everyone's welcome.
ncclResult_t establishAsRoot(CommState &c, const net::Hello &mine)
{
    std::vector<std::pair<int, net::Hello>> got;
    if (!net::awaitHellos(c.key, c.size - 1, c.aborted, got))
        return failWith(ncclInvalidUsage, "communicator '" + c.name + "' was aborted while it was being made");
    c.fds.assign(static_cast<std::size_t>(c.size), -1);
    c.listens.assign(static_cast<std::size_t>(c.size), std::string());
    c.listens[0] = mine.listen;
    std::vector<net::Hello> members(static_cast<std::size_t>(c.size));
    members[0] = mine;
    std::string problem;
    for (const auto &[fd, h] : got) {
        if (h.rank <= 0 || h.rank >= c.size || c.fds[static_cast<std::size_t>(h.rank)] >= 0 || h.size != c.size) {
            problem = "rank " + std::to_string(h.rank) + " joined communicator '" + c.name + "' as one of " + std::to_string(h.size)
                      + " ranks, rank 0 expects " + std::to_string(c.size) + " distinct ranks";
            ::close(fd);
            continue;
        }
        c.fds[static_cast<std::size_t>(h.rank)] = fd;
        c.listens[static_cast<std::size_t>(h.rank)] = h.listen;
        members[static_cast<std::size_t>(h.rank)] = h;
    }
    for (int a = 0; a < c.size && problem.empty(); ++a)
        for (int b = a + 1; b < c.size && problem.empty(); ++b)
            if (members[a].host == members[b].host && members[a].busId == members[b].busId)
                problem = "Duplicate GPU detected : rank " + std::to_string(a) + " and rank " + std::to_string(b) + " both on CUDA device "
                          + members[a].busId + " of host " + members[a].host;
    net::Writer w;
    w.str(problem).u64(c.listens.size());
    for (const auto &l : c.listens)
        w.str(l);
    const std::vector<unsigned char> welcome = w.take();
    for (int r = 1; r < c.size; ++r)
        if (c.fds[static_cast<std::size_t>(r)] >= 0)
            (void)net::sendFrame(c.fds[static_cast<std::size_t>(r)], net::FrameType::Welcome, welcome);
    if (!problem.empty())
        return failWith(ncclInvalidUsage, problem);
    return ncclSuccess;
}

ncclResult_t establishAsMember(CommState &c, const net::Hello &mine, const std::string &rootListen)
{
    std::string why;
    const int fd = net::connectTo(rootListen, mine, c.aborted, why);
    if (fd < 0)
        return failWith(ncclRemoteError, why + " (communicator '" + c.name + "', rank " + std::to_string(c.rank) + ")");
    c.fds = {fd};
    net::Frame f;
    if (!net::waitReadable(fd, c.aborted) || !net::recvFrame(fd, f) || f.type != net::FrameType::Welcome)
        return failWith(ncclRemoteError, "communicator '" + c.name + "': rank 0 at " + rootListen + " closed the connection before welcoming rank "
                                             + std::to_string(c.rank));
    net::Reader r(f.payload);
    const std::string problem = r.str();
    const std::uint64_t n = r.u64();
    for (std::uint64_t i = 0; i < n && r.ok(); ++i)
        c.listens.push_back(r.str());
    if (!problem.empty())
        return failWith(ncclInvalidUsage, problem);
    return r.ok() ? ncclSuccess : failWith(ncclInternalError, "malformed welcome from rank 0");
}

/// Joins @p c (rank, size, key set) to its members: rank 0 waits for them, the others connect to
/// @p rootListen.
ncclResult_t establish(CommState &c, const std::string &rootListen)
{
    std::string why;
    net::Hello mine;
    mine.key = c.key;
    mine.rank = c.rank;
    mine.size = c.size;
    mine.listen = net::listenAddress(why);
    if (mine.listen.empty())
        return failWith(ncclSystemError, why);
    mine.host = hostId();
    mine.busId = busIdOf(c.device); // the device current where the communicator was asked for (a non-blocking one is made on a thread of its own)
    if (mine.busId.empty())
        return failWith(ncclUnhandledCudaError, "cudaDeviceGetPCIBusId failed while making communicator '" + c.name + "'");
    trace("making communicator '" + c.name + "' (rank " + std::to_string(c.rank) + " of " + std::to_string(c.size) + ") on cuda:" + std::to_string(c.device)
          + " (PCI " + mine.busId + ") of " + mine.host + ", " + (c.maxCTAs > 0 ? "at most " + std::to_string(c.maxCTAs) + " CTAs" : std::string("CTAs of NCCL's choice")));
    const ncclResult_t rc = c.size == 1 ? ncclSuccess : c.rank == 0 ? establishAsRoot(c, mine) : establishAsMember(c, mine, rootListen);
    if (c.size == 1)
        c.listens = {mine.listen};
    return rc;
}

std::shared_ptr<CommState> newState(int rank, int size, std::uint64_t key, const ncclConfig_t *config, const char *fallbackName)
{
    auto s = std::make_shared<CommState>();
    s->rank = rank;
    s->size = size;
    s->key = key;
    s->name = config && config->commName ? config->commName : fallbackName;
    const char *envBlocking = std::getenv("NCCL_COMM_BLOCKING");
    s->blocking = config && config->blocking != NCCL_CONFIG_UNDEF_INT ? config->blocking != 0 : !(envBlocking && std::string(envBlocking) == "0");
    s->maxCTAs = config && config->maxCTAs != NCCL_CONFIG_UNDEF_INT ? config->maxCTAs : 0;
    if (cudaGetDevice(&s->device) != cudaSuccess)
        s->device = -1; // refused with the runtime's error when the communicator is made
    return s;
}

/// Makes the handle; blocking: established before returning, else in the background
/// (ncclCommGetAsyncError says ncclInProgress until then).
ncclResult_t start(std::shared_ptr<CommState> s, const std::string &rootListen, ncclComm_t *out)
{
    if (s->blocking) {
        const ncclResult_t rc = establish(*s, rootListen);
        if (rc != ncclSuccess) {
            for (int fd : s->fds)
                if (fd >= 0)
                    ::close(fd);
            *out = nullptr;
            return rc;
        }
        *out = new ncclComm{std::move(s)};
        return ncclSuccess;
    }
    s->asyncError = ncclInProgress;
    *out = new ncclComm{s};
    std::thread([s, rootListen] {
        const ncclResult_t rc = establish(*s, rootListen);
        if (rc != ncclSuccess)
            setAsyncError(*s, rc, t_lastError);
        else
            s->asyncError = ncclSuccess;
    }).detach();
    return ncclInProgress;
}

/// Ends the kernels and waits in progress on @p c (ncclCommAbort, NCCL_SHRINK_ABORT).
void stopOps(CommState &c)
{
    {
        Registry &r = registry();
        const std::lock_guard lock(r.mutex);
        c.aborted = true;
        r.changed.notify_all();
    }
    for (int fd : c.fds)
        if (fd >= 0)
            ::shutdown(fd, SHUT_RDWR); // wakes a kernel blocked on the wire
}

/// Blocks until @p c has nothing in flight (NCCL's finalize flushes; an abort's kernels end).
void drain(CommState &c)
{
    Registry &r = registry();
    std::unique_lock lock(r.mutex);
    r.changed.wait(lock, [&] { return c.inFlight.load() == 0; });
}

void closeAll(CommState &c)
{
    const std::lock_guard lock(c.wire);
    for (int &fd : c.fds)
        if (fd >= 0) {
            ::close(fd);
            fd = -1;
        }
}

/// CPPL_FAKE_NCCL_ABORT_BLOCKS: like an abort that needs the device while another
/// communicator's kernel occupies it.
void blockWhileOthersInFlight(CommState &c)
{
    Registry &r = registry();
    std::unique_lock lock(r.mutex);
    if (r.inFlight - c.inFlight.load() == 0)
        return;
    lock.unlock();
    note("ncclCommAbort of '" + c.name + "' blocks while another communicator of this process has a collective in flight (CPPL_FAKE_NCCL_ABORT_BLOCKS)");
    const auto t0 = std::chrono::steady_clock::now();
    lock.lock();
    r.changed.wait(lock, [&] { return r.inFlight - c.inFlight.load() == 0; });
    lock.unlock();
    note("ncclCommAbort of '" + c.name + "' unblocked after "
         + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()) + " ms");
}

[[maybe_unused]] std::uint64_t mix(std::uint64_t x) // the shrink's key (not in the lib-noshrink build)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/// Rank 0's answer to every member of a split: new size, rank, key and the new rank 0's listener
/// (members of a color sorted by key, then by old rank; NCCL_SPLIT_NOCOLOR: size 0).
std::vector<std::vector<unsigned char>> splitReplies(const CommState &p, const std::vector<std::pair<int, int>> &wishes)
{
    std::vector<std::vector<unsigned char>> replies;
    std::vector<std::pair<int, std::uint64_t>> keys; // color -> the new communicator's key
    for (int r = 0; r < p.size; ++r) {
        const int color = wishes[static_cast<std::size_t>(r)].first;
        std::vector<int> members;
        for (int m = 0; m < p.size; ++m)
            if (color != NCCL_SPLIT_NOCOLOR && wishes[static_cast<std::size_t>(m)].first == color)
                members.push_back(m);
        std::stable_sort(members.begin(), members.end(),
                         [&](int a, int b) { return wishes[static_cast<std::size_t>(a)].second < wishes[static_cast<std::size_t>(b)].second; });
        auto k = std::find_if(keys.begin(), keys.end(), [&](const auto &e) { return e.first == color; });
        if (k == keys.end())
            k = keys.insert(keys.end(), {color, net::randomKey()});
        const auto at = std::find(members.begin(), members.end(), r);
        net::Writer w;
        w.i32(static_cast<std::int32_t>(members.size())).i32(static_cast<std::int32_t>(at - members.begin())).u64(k->second);
        w.str(members.empty() ? std::string() : p.listens[static_cast<std::size_t>(members.front())]);
        replies.push_back(w.take());
    }
    return replies;
}

/// Every member tells rank 0 its color and key; each gets its reply (splitReplies). Under p.wire.
bool exchangeSplit(CommState &p, int color, int key, std::vector<unsigned char> &reply)
{
    net::Frame f;
    if (p.rank != 0) {
        if (!net::sendFrame(p.fds[0], net::FrameType::Split, net::Writer().i32(color).i32(key).take()) || !net::waitReadable(p.fds[0], p.aborted)
            || !net::recvFrame(p.fds[0], f) || f.type != net::FrameType::SplitReply)
            return false;
        reply = std::move(f.payload);
        return true;
    }
    std::vector<std::pair<int, int>> wishes(static_cast<std::size_t>(p.size));
    wishes[0] = {color, key};
    for (int r = 1; r < p.size; ++r) {
        const int fd = p.fds[static_cast<std::size_t>(r)];
        if (!net::waitReadable(fd, p.aborted) || !net::recvFrame(fd, f) || f.type != net::FrameType::Split)
            return false;
        net::Reader in(f.payload);
        const int c = in.i32();
        wishes[static_cast<std::size_t>(r)] = {c, in.i32()};
    }
    std::vector<std::vector<unsigned char>> replies = splitReplies(p, wishes);
    for (int r = 1; r < p.size; ++r)
        if (!net::sendFrame(p.fds[static_cast<std::size_t>(r)], net::FrameType::SplitReply, replies[static_cast<std::size_t>(r)]))
            return false;
    reply = std::move(replies[0]);
    return true;
}

} // namespace

const Script &script()
{
    static const Script *s = [] {
        auto *x = new Script;
        x->version = static_cast<int>(envInteger("CPPL_FAKE_NCCL_VERSION", 1000, 99999, "an NCCL version code, e.g. 22809 for 2.28.9").value_or(NCCL_VERSION_CODE));
        x->hang = envRankPoints("CPPL_FAKE_NCCL_HANG", false, "R:K[,R:K], K the process's K-th collective from 0");
        x->asyncError = envRankPoints("CPPL_FAKE_NCCL_ASYNC_ERROR", false, "R:K[,R:K], K the process's K-th collective from 0");
        x->connect = envRankPoints("CPPL_FAKE_NCCL_CONNECT", true, "R:MS or R:never[,...]");
        x->abortBlocks = envInteger("CPPL_FAKE_NCCL_ABORT_BLOCKS", 0, 1, "0 or 1").value_or(0) == 1;
        x->trace = envInteger("CPPL_FAKE_NCCL_TRACE", 0, 1, "0 or 1").value_or(0) == 1;
        return x;
    }();
    return *s;
}

int processRank()
{
    return g_processRank.load();
}

void setProcessRank(int rank)
{
    int unset = -1;
    g_processRank.compare_exchange_strong(unset, rank);
}

void note(const std::string &text)
{
    const std::string line = "cppl fake nccl: rank " + std::to_string(processRank()) + ": " + text + "\n";
    (void)!::write(2, line.data(), line.size());
}

void trace(const std::string &text)
{
    if (script().trace)
        note(text);
}

ncclResult_t failWith(ncclResult_t rc, const std::string &text)
{
    t_lastError = text;
    trace("error: " + text);
    return rc;
}

void setAsyncError(CommState &c, ncclResult_t rc, const std::string &text)
{
    {
        const std::lock_guard lock(c.messageMutex);
        c.asyncMessage = text;
    }
    c.asyncError = rc;
}

void beginOp(CommState &c)
{
    Registry &r = registry();
    const std::lock_guard lock(r.mutex);
    ++c.inFlight;
    ++r.inFlight;
}

void endOp(CommState &c)
{
    Registry &r = registry();
    const std::lock_guard lock(r.mutex);
    --c.inFlight;
    --r.inFlight;
    r.changed.notify_all();
}

void waitAborted(CommState &c)
{
    Registry &r = registry();
    std::unique_lock lock(r.mutex);
    r.changed.wait(lock, [&] { return c.aborted.load(); });
}

bool sleepUnlessAborted(CommState &c, long long ms)
{
    Registry &r = registry();
    std::unique_lock lock(r.mutex);
    return !r.changed.wait_for(lock, std::chrono::milliseconds(ms), [&] { return c.aborted.load(); });
}

const RankPoint *scripted(const std::vector<RankPoint> &points, long long index)
{
    for (const RankPoint &p : points)
        if (p.rank == processRank() && (index < 0 || p.value == index))
            return &p;
    return nullptr;
}

} // namespace cppl::fakes::nccl

using namespace cppl::fakes;
using namespace cppl::fakes::nccl;

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
    *version = script().version;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    std::string why;
    const std::string listen = net::listenAddress(why);
    if (listen.empty())
        return failWith(ncclSystemError, why);
    std::memset(id->internal, 0, sizeof id->internal);
    std::snprintf(id->internal, sizeof id->internal, "%s %s %016llx", kIdMagic, listen.c_str(), static_cast<unsigned long long>(net::randomKey()));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return failWith(ncclInvalidArgument, "ncclCommInitRankConfig: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
    char magic[16] = {}, listen[96] = {};
    unsigned long long key = 0;
    commId.internal[sizeof commId.internal - 1] = 0;
    if (std::sscanf(commId.internal, "%15s %95s %llx", magic, listen, &key) != 3 || std::string(magic) != kIdMagic)
        return failWith(ncclInvalidArgument, "ncclCommInitRankConfig: the unique id was not made by this fake NCCL");
    std::string why;
    if (rank == 0 && net::listenAddress(why) != listen)
        return failWith(ncclInvalidUsage, "ncclCommInitRankConfig: this fake NCCL needs rank 0 to make the unique id in its own process");
    setProcessRank(rank);
    auto s = newState(rank, nranks, key, config, "world");
    trace("ncclCommInitRankConfig '" + s->name + "' rank " + std::to_string(rank) + " of " + std::to_string(nranks));
    return start(std::move(s), listen, comm);
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
    if (!comm || !newcomm)
        return failWith(ncclInvalidArgument, "ncclCommSplit: null communicator");
    CommState &p = *comm->state;
    trace("ncclCommSplit of '" + p.name + "' color " + std::to_string(color) + " key " + std::to_string(key));
    std::vector<unsigned char> reply;
    {
        const std::lock_guard lock(p.wire);
        if (!exchangeSplit(p, color, key, reply))
            return failWith(ncclRemoteError, "ncclCommSplit of '" + p.name + "': a member is gone (remote process exited or there was a network error)");
    }
    net::Reader in(reply);
    const int size = in.i32();
    const int rank = in.i32();
    const std::uint64_t childKey = in.u64();
    const std::string rootListen = in.str();
    if (size == 0) {
        *newcomm = nullptr; // NCCL_SPLIT_NOCOLOR
        return ncclSuccess;
    }
    return start(newState(rank, size, childKey, config, "split"), rootListen, newcomm);
}

#if CPPL_FAKE_NCCL_SHRINK
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
    if (!comm || !newcomm || excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
        return failWith(ncclInvalidArgument, "ncclCommShrink: bad arguments");
    CommState &p = *comm->state;
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    std::sort(excluded.begin(), excluded.end());
    if (std::adjacent_find(excluded.begin(), excluded.end()) != excluded.end() || (!excluded.empty() && (excluded.front() < 0 || excluded.back() >= p.size))
        || std::binary_search(excluded.begin(), excluded.end(), p.rank))
        return failWith(ncclInvalidArgument, "ncclCommShrink of '" + p.name + "': the exclude list is not a set of other ranks of the communicator");
    trace("ncclCommShrink of '" + p.name + "' without " + std::to_string(excluded.size()) + " ranks" + ((shrinkFlags & NCCL_SHRINK_ABORT) ? " (abort first)" : ""));
    if (shrinkFlags & NCCL_SHRINK_ABORT)
        stopOps(p);
    drain(p);
    std::vector<int> members;
    for (int r = 0; r < p.size; ++r)
        if (!std::binary_search(excluded.begin(), excluded.end(), r))
            members.push_back(r);
    // The survivors agree without rank 0 (it may be the one lost): the key from the parent's, the
    // exclude list and how many shrinks came before; the new rank 0 is the lowest survivor.
    std::uint64_t key = mix(p.key ^ static_cast<std::uint64_t>(++p.shrinks));
    for (int r : excluded)
        key = mix(key ^ static_cast<std::uint64_t>(r));
    const int rank = static_cast<int>(std::find(members.begin(), members.end(), p.rank) - members.begin());
    return start(newState(rank, static_cast<int>(members.size()), key, config, "shrink"), p.listens[static_cast<std::size_t>(members.front())], newcomm);
}
#endif

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    if (!comm)
        return failWith(ncclInvalidArgument, "ncclCommFinalize: null communicator");
    trace("ncclCommFinalize of '" + comm->state->name + "'");
    drain(*comm->state); // flushes: a stuck collective keeps it waiting, as NCCL's does
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    trace("ncclCommDestroy of '" + comm->state->name + "'");
    drain(*comm->state);
    closeAll(*comm->state);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclSuccess;
    CommState &c = *comm->state;
    trace("ncclCommAbort of '" + c.name + "'");
    if (script().abortBlocks)
        blockWhileOthersInFlight(c);
    stopOps(c);
    drain(c);
    closeAll(c);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm || !asyncError)
        return ncclInvalidArgument;
    *asyncError = static_cast<ncclResult_t>(comm->state->asyncError.load());
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    if (!comm || !count)
        return ncclInvalidArgument;
    *count = comm->state->size;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    if (!comm || !rank)
        return ncclInvalidArgument;
    *rank = comm->state->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
    if (!comm || !device)
        return ncclInvalidArgument;
    *device = comm->state->device;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

/// The communicator's asynchronous error when it has one, else this thread's last failed call.
const char *ncclGetLastError(ncclComm_t comm)
{
    if (comm && comm->state->asyncError.load() != ncclSuccess && comm->state->asyncError.load() != ncclInProgress) {
        const std::lock_guard lock(comm->state->messageMutex);
        t_lastError = comm->state->asyncMessage;
    }
    return t_lastError.c_str();
}

ncclResult_t ncclGroupStart()
{
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd()
{
    return ncclSuccess;
}

} // extern "C"
