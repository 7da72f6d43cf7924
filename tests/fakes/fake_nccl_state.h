// SPDX-License-Identifier: MIT
// The fake NCCL's communicators and what its two halves share: lifecycle (fake_nccl_comm.cpp:
// init, split, shrink, finalize, destroy, abort) and collectives (fake_nccl_ops.cpp).
#pragma once

#include "fake_script.h"

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cppl::fakes::nccl {

/// One communicator as one member sees it. Topology: a star around rank 0, whose process
/// combines every collective; members know each other's bootstrap listeners for a shrink, which
/// must work without the old rank 0.
struct CommState
{
    int rank = 0;
    int size = 0;
    std::uint64_t key = 0;             ///< names it on the wire
    std::string name;                  ///< ncclConfig_t::commName, for messages
    int device = 0;                    ///< the CUDA device current when it was made
    bool blocking = true;
    int maxCTAs = 0;                   ///< ncclConfig_t::maxCTAs, 0 where NCCL chooses (traced)
    std::vector<int> fds;              ///< rank 0: one socket per member (fds[0] = -1); others: fds[0] to rank 0
    std::vector<std::string> listens;  ///< every member's bootstrap listener
    std::atomic<bool> aborted{false};  ///< ncclCommAbort, or a shrink with NCCL_SHRINK_ABORT: kernels end, waits give up
    std::atomic<int> asyncError{ncclSuccess};
    std::atomic<int> inFlight{0};      ///< collectives enqueued and not finished (under the registry's lock)
    std::mutex wire;                   ///< one exchange at a time over fds
    bool connected = false;            ///< under wire: the first collective's lazy connection is made
    int shrinks = 0;                   ///< shrinks of this communicator so far (the same count on every survivor)
    std::mutex messageMutex;
    std::string asyncMessage;          ///< under messageMutex: why asyncError is set
};

} // namespace cppl::fakes::nccl

/// The handle NCCL's API hands out (ncclComm_t); the state outlives it while kernels still use it.
struct ncclComm
{
    std::shared_ptr<cppl::fakes::nccl::CommState> state;
};

namespace cppl::fakes::nccl {

/// What the environment scripted, read once (tests/fakes/README.md).
struct Script
{
    int version = NCCL_VERSION_CODE;
    std::vector<RankPoint> hang;       ///< CPPL_FAKE_NCCL_HANG: R:K, the K-th collective of process rank R never completes
    std::vector<RankPoint> asyncError; ///< CPPL_FAKE_NCCL_ASYNC_ERROR: R:K, ... reports ncclSystemError and never completes
    std::vector<RankPoint> connect;    ///< CPPL_FAKE_NCCL_CONNECT: R:MS or R:never, each first collective connects late
    bool abortBlocks = false;          ///< CPPL_FAKE_NCCL_ABORT_BLOCKS=1
    bool trace = false;                ///< CPPL_FAKE_NCCL_TRACE=1
};
const Script &script();

/// The rank this process took in its first communicator (its world rank): scripts name it.
int processRank();
void setProcessRank(int rank);

/// A line on stderr, "cppl fake nccl: rank R: TEXT" (scripted events always, calls with trace).
void note(const std::string &text);
void trace(const std::string &text);

/// The calling thread's last error text (ncclGetLastError), and the result to return with it.
ncclResult_t failWith(ncclResult_t rc, const std::string &text);
void setAsyncError(CommState &c, ncclResult_t rc, const std::string &text);

/// In-flight accounting across the process's communicators (the abort-order hazard needs all).
void beginOp(CommState &c);
void endOp(CommState &c);
/// Blocks until @p c is aborted: a stuck kernel, or a connection that never comes.
void waitAborted(CommState &c);
/// Sleeps @p ms, ending early (false) when @p c is aborted.
bool sleepUnlessAborted(CommState &c, long long ms);

/// Whether the script names this process for its @p index-th event in @p points.
const RankPoint *scripted(const std::vector<RankPoint> &points, long long index);

} // namespace cppl::fakes::nccl
