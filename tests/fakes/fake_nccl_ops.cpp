// SPDX-License-Identifier: MIT
// The fake NCCL's collectives: int64 SUM all-reduce and reduce, float MAX all-reduce, broadcast and
// all-gather, as NCCL defines them.
// A call connects the communicator on its first use (NCCL's lazy connection, on the calling
// thread: the call itself blocks until every member connected), then puts a "kernel" on the
// stream that exchanges the data through rank 0's process; the stream stays busy until the kernel
// returns, which a scripted hang or error never does before the communicator is aborted.
#include "fake_cuda_stream.h"
#include "fake_nccl_net.h"
#include "fake_nccl_state.h"

#include <poll.h>

#include <cstring>

namespace cppl::fakes::nccl {

namespace {

enum class Kind : std::int32_t { AllReduce = 1, Reduce, Broadcast, AllGather };

const char *kindName(Kind k)
{
    return k == Kind::AllReduce ? "all-reduce" : k == Kind::Reduce ? "reduce" : k == Kind::Broadcast ? "broadcast" : "all-gather";
}

std::atomic<long long> g_collectives{0}; ///< every collective this process enqueued, numbered from 0

struct OpWork
{
    std::shared_ptr<CommState> comm;
    Kind kind;
    const void *send;
    void *recv;
    std::size_t bytes;
    std::size_t count;
    int root;
    long long index; ///< the process's index of this collective (scripts)
    ncclDataType_t type;
    ncclRedOp_t op;
    std::size_t recvBytes; ///< bytes, or an all-gather's size * bytes
};

std::string where(const CommState &c, const OpWork &w)
{
    return std::string(kindName(w.kind)) + " #" + std::to_string(w.index) + " on '" + c.name + "' (rank " + std::to_string(c.rank) + " of "
           + std::to_string(c.size) + ")";
}

/// What this rank puts on the wire: its data, except a broadcast's non-roots, which send none.
std::vector<unsigned char> contribution(const CommState &c, const OpWork &w)
{
    net::Writer out;
    out.i32(static_cast<std::int32_t>(w.kind)).u64(w.count).i32(w.root);
    if (w.kind != Kind::Broadcast || c.rank == w.root)
        out.bytes(w.send, w.bytes);
    return out.take();
}

/// Rank 0: every member's frame, whichever comes first; false (with @p why) when one is gone.
bool gather(CommState &c, std::vector<std::vector<unsigned char>> &frames, std::string &why)
{
    std::vector<int> waiting;
    for (int r = 1; r < c.size; ++r)
        waiting.push_back(r);
    while (!waiting.empty()) {
        std::vector<pollfd> fds;
        for (int r : waiting)
            fds.push_back({c.fds[static_cast<std::size_t>(r)], POLLIN, 0});
        if (::poll(fds.data(), fds.size(), 50) < 0 && errno != EINTR)
            return false;
        if (c.aborted.load())
            return false;
        for (std::size_t i = fds.size(); i-- > 0;) {
            if (!fds[i].revents)
                continue;
            const int r = waiting[i];
            net::Frame f;
            if (!net::recvFrame(fds[i].fd, f) || f.type != net::FrameType::Op) {
                why = "rank " + std::to_string(r) + " closed its connection";
                return false;
            }
            frames[static_cast<std::size_t>(r)] = std::move(f.payload);
            waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }
    return true;
}

/// @p data's elements into @p acc: int64 SUM (two's complement), or float32/float64 MAX.
void reduceInto(const OpWork &w, std::vector<unsigned char> &acc, const unsigned char *data, bool first)
{
    if (first) {
        std::memcpy(acc.data(), data, w.bytes);
        return;
    }
    for (std::size_t i = 0; i < w.count; ++i) {
        if (w.type == ncclFloat32) {
            float a = 0, b = 0;
            std::memcpy(&a, acc.data() + 4 * i, 4);
            std::memcpy(&b, data + 4 * i, 4);
            a = b > a ? b : a;
            std::memcpy(acc.data() + 4 * i, &a, 4);
        } else if (w.type == ncclFloat64) {
            double a = 0, b = 0;
            std::memcpy(&a, acc.data() + 8 * i, 8);
            std::memcpy(&b, data + 8 * i, 8);
            a = b > a ? b : a;
            std::memcpy(acc.data() + 8 * i, &a, 8);
        } else {
            std::uint64_t a = 0, b = 0;
            std::memcpy(&a, acc.data() + 8 * i, 8);
            std::memcpy(&b, data + 8 * i, 8);
            a += b;
            std::memcpy(acc.data() + 8 * i, &a, 8);
        }
    }
}

/// Int64 (two's complement) sums, added in rank order: exact, as NCCL's integer reductions; float
/// maxima; an all-gather's members' data, in rank order.
std::vector<unsigned char> combine(const CommState &c, const OpWork &w, const std::vector<std::vector<unsigned char>> &frames, std::string &why)
{
    std::vector<unsigned char> acc(w.recvBytes);
    std::vector<unsigned char> root;
    for (int r = 0; r < c.size; ++r) {
        net::Reader in(frames[static_cast<std::size_t>(r)]);
        const auto kind = static_cast<Kind>(in.i32());
        const std::uint64_t count = in.u64();
        const int theirRoot = in.i32();
        if (!in.ok() || kind != w.kind || count != w.count || theirRoot != w.root) {
            why = "mismatched collectives: rank " + std::to_string(r) + " called " + kindName(kind) + " of " + std::to_string(count) + " (root "
                  + std::to_string(theirRoot) + "), rank 0 " + kindName(w.kind) + " of " + std::to_string(w.count) + " (root " + std::to_string(w.root) + ")";
            return {};
        }
        if (w.kind == Kind::Broadcast && r != w.root)
            continue;
        const unsigned char *data = in.bytes(w.bytes);
        if (!data) {
            why = "rank " + std::to_string(r) + " sent fewer than " + std::to_string(w.bytes) + " bytes";
            return {};
        }
        if (w.kind == Kind::Broadcast) {
            root.assign(data, data + w.bytes);
            continue;
        }
        if (w.kind == Kind::AllGather)
            std::memcpy(acc.data() + static_cast<std::size_t>(r) * w.bytes, data, w.bytes);
        else
            reduceInto(w, acc, data, r == 0);
    }
    return w.kind == Kind::Broadcast ? root : acc;
}

/// Rank 0's part: gather, combine, answer; false (with @p why) on a lost member or a mismatch.
bool exchangeAsRoot(CommState &c, const OpWork &w, std::string &why)
{
    std::vector<std::vector<unsigned char>> frames(static_cast<std::size_t>(c.size));
    frames[0] = contribution(c, w);
    if (!gather(c, frames, why))
        return false;
    const std::vector<unsigned char> result = combine(c, w, frames, why);
    if (!why.empty())
        return false;
    for (int r = 1; r < c.size; ++r) {
        const bool gets = w.kind != Kind::Reduce || r == w.root; // a reduce's result goes to its root only
        if (!net::sendFrame(c.fds[static_cast<std::size_t>(r)], net::FrameType::Result, gets ? result : std::vector<unsigned char>())) {
            why = "rank " + std::to_string(r) + " closed its connection";
            return false;
        }
    }
    if (w.kind != Kind::Reduce || w.root == 0)
        std::memcpy(w.recv, result.data(), w.recvBytes);
    return true;
}

bool exchangeAsMember(CommState &c, const OpWork &w, std::string &why)
{
    net::Frame f;
    if (!net::sendFrame(c.fds[0], net::FrameType::Op, contribution(c, w)) || !net::waitReadable(c.fds[0], c.aborted) || !net::recvFrame(c.fds[0], f)
        || f.type != net::FrameType::Result) {
        why = "rank 0 closed its connection";
        return false;
    }
    if (w.kind != Kind::Reduce || c.rank == w.root) {
        if (f.payload.size() != w.recvBytes) {
            why = "rank 0 sent " + std::to_string(f.payload.size()) + " bytes, expected " + std::to_string(w.recvBytes);
            return false;
        }
        std::memcpy(w.recv, f.payload.data(), w.recvBytes);
    }
    return true;
}

/// The kernel: runs on the stream's thread; returns once the collective is done, or aborted.
void opKernel(void *arg)
{
    auto *w = static_cast<OpWork *>(arg);
    CommState &c = *w->comm;
    if (scripted(script().hang, w->index)) {
        note(where(c, *w) + " never completes (CPPL_FAKE_NCCL_HANG)");
        waitAborted(c);
    } else if (scripted(script().asyncError, w->index)) {
        note(where(c, *w) + " fails with an asynchronous ncclSystemError (CPPL_FAKE_NCCL_ASYNC_ERROR)");
        setAsyncError(c, ncclSystemError, "fake nccl: scripted asynchronous error in " + where(c, *w));
        waitAborted(c);
    } else {
        std::string why;
        bool ok = true;
        if (c.size > 1) {
            const std::lock_guard lock(c.wire);
            ok = c.rank == 0 ? exchangeAsRoot(c, *w, why) : exchangeAsMember(c, *w, why);
        } else if (w->recv != w->send) {
            std::memcpy(w->recv, w->send, w->bytes); // one member: an all-gather's result is its own data
        }
        if (!ok && !c.aborted.load()) { // as NCCL's kernel: the error is reported, the kernel stays until the abort
            trace(where(c, *w) + " failed: " + why);
            setAsyncError(c, ncclRemoteError, "fake nccl: " + where(c, *w) + ": " + why + " (remote process exited or there was a network error)");
            waitAborted(c);
        }
    }
    endOp(c);
    delete w;
}

/// NCCL's lazy connection at a communicator's first collective: every member connects to rank 0
/// before any of them returns from the call (CPPL_FAKE_NCCL_CONNECT delays a rank's part).
ncclResult_t connectFirst(CommState &c)
{
    const std::lock_guard lock(c.wire);
    if (c.connected || c.size == 1) {
        c.connected = true;
        return ncclSuccess;
    }
    if (const RankPoint *p = scripted(script().connect, -1)) {
        note("the first collective on '" + c.name + "' connects " + (p->never ? std::string("never") : std::to_string(p->value) + " ms late")
             + " (CPPL_FAKE_NCCL_CONNECT)");
        if (p->never)
            waitAborted(c);
        else
            sleepUnlessAborted(c, p->value);
    }
    net::Frame f;
    bool ok = true;
    if (c.rank != 0) {
        ok = net::sendFrame(c.fds[0], net::FrameType::Connect, {}) && net::waitReadable(c.fds[0], c.aborted) && net::recvFrame(c.fds[0], f)
             && f.type == net::FrameType::Connected;
    } else {
        for (int r = 1; r < c.size && ok; ++r)
            ok = net::waitReadable(c.fds[static_cast<std::size_t>(r)], c.aborted) && net::recvFrame(c.fds[static_cast<std::size_t>(r)], f)
                 && f.type == net::FrameType::Connect;
        for (int r = 1; r < c.size && ok; ++r)
            ok = net::sendFrame(c.fds[static_cast<std::size_t>(r)], net::FrameType::Connected, {});
    }
    if (!ok)
        return failWith(c.aborted.load() ? ncclInvalidUsage : ncclRemoteError,
                        "fake nccl: connecting communicator '" + c.name + "' at its first collective failed"
                            + std::string(c.aborted.load() ? ": it was aborted" : ": a member is gone"));
    c.connected = true;
    return ncclSuccess;
}

std::size_t elementSize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

ncclResult_t enqueue(Kind kind, const void *send, void *recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op, int root, ncclComm_t comm,
                     cudaStream_t stream)
{
    if (!comm)
        return failWith(ncclInvalidArgument, std::string(kindName(kind)) + ": null communicator");
    const std::shared_ptr<CommState> &c = comm->state;
    if (c->aborted.load())
        return failWith(ncclInvalidUsage, std::string(kindName(kind)) + " on '" + c->name + "': the communicator was aborted");
    if (c->asyncError.load() == ncclInProgress)
        return failWith(ncclInvalidUsage, std::string(kindName(kind)) + " on '" + c->name + "': the communicator is still being made");
    const bool reduces = kind == Kind::AllReduce || kind == Kind::Reduce;
    const bool integerSum = op == ncclSum && (type == ncclInt64 || type == ncclUint64);
    const bool floatMax = kind == Kind::AllReduce && op == ncclMax && (type == ncclFloat32 || type == ncclFloat64);
    if (reduces && !integerSum && !floatMax)
        return failWith(ncclInvalidArgument, "this fake NCCL reduces only int64/uint64 with ncclSum and all-reduces float32/float64 with ncclMax "
                                             "(what clusterppl-agent uses)");
    if (elementSize(type) == 0 || (kind != Kind::AllReduce && kind != Kind::AllGather && (root < 0 || root >= c->size)))
        return failWith(ncclInvalidArgument, std::string(kindName(kind)) + " on '" + c->name + "': bad data type or root " + std::to_string(root));
    const long long index = g_collectives++;
    trace(std::string(kindName(kind)) + " #" + std::to_string(index) + " on '" + c->name + "', " + std::to_string(count) + " elements");
    if (const ncclResult_t rc = connectFirst(*c); rc != ncclSuccess)
        return rc;
    beginOp(*c);
    const std::size_t bytes = count * elementSize(type);
    auto *w = new OpWork{c, kind, send, recv, bytes, count, root, index, type, op,
                         kind == Kind::AllGather ? bytes * static_cast<std::size_t>(c->size) : bytes};
    if (cpplFakeCudaLaunch(stream, opKernel, w) != cudaSuccess) {
        endOp(*c);
        delete w;
        return failWith(ncclUnhandledCudaError, "cannot launch on the stream");
    }
    return ncclSuccess;
}

} // namespace

} // namespace cppl::fakes::nccl

using cppl::fakes::nccl::Kind;
using cppl::fakes::nccl::enqueue;

extern "C" {

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return enqueue(Kind::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(Kind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm, stream);
}

ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
    return enqueue(Kind::Broadcast, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

} // extern "C"
