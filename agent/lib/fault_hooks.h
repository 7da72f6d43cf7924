// SPDX-License-Identifier: MIT
// Fault injection for the tests: every CLUSTERPPL_TEST_* switch the agent knows, parsed in one
// place (fault_hooks.cpp) into one struct that the code consults.
//
// Why they are in the product at all: the tests drive real agent processes (several ranks, the
// launchers, sshd, Slurm), so a hook cannot live in a test binary; it must be in the agent that the
// test starts. A build configured with -DCLUSTERPPL_FAULT_HOOKS=OFF (config.h) leaves every hook
// out: faultHooks() is then empty, and a CLUSTERPPL_TEST_* variable in the environment is refused
// at once, so a test never passes against an agent that ignored what it asked for. The default build
// (the tests', CI's) has them; setting none costs one environment scan per process.
// docs/testing.md, "Fault hooks", lists them with the tests that use them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cppl::agent {

/// A hook that acts on one rank only ("R:MS"): that rank waits `ms` milliseconds.
struct RankHold
{
    int rank = -1; ///< -1: nobody
    std::chrono::milliseconds ms{0};

    [[nodiscard]] bool appliesTo(int r) const { return rank >= 0 && rank == r; }
    /// The wait for rank @p r: `ms` when the hook names it, else 0.
    [[nodiscard]] std::chrono::milliseconds forRank(int r) const { return appliesTo(r) ? ms : std::chrono::milliseconds(0); }
};

struct FaultHooks
{
    /// CLUSTERPPL_TEST_SLOW_COLLECTIVE=MS: each round's collective takes MS longer (a slow network,
    /// for tests of the overlap).
    std::chrono::milliseconds slowCollective{0};
    /// CLUSTERPPL_TEST_DIE=R:POINT[,...]: rank R kills itself (SIGKILL) at POINT of the closing
    /// gather: "closing" before it, "gather" inside it, "gathered" after it; or "tp-range": a
    /// member of a tensor-parallel group, after it scored its first range of windows.
    struct Death
    {
        int rank = -1;
        std::string point;
    };
    std::vector<Death> die;
    /// CLUSTERPPL_TEST_HOLD_CONNECT=R:MS: rank R waits before its process groups form (after the
    /// watchdog's star); R:collective (Gloo, formed in the background): until its first collective
    /// waits for them.
    RankHold holdConnect;
    int holdConnectUntilCollective = -1; ///< the rank of R:collective; -1: none
    /// CLUSTERPPL_TEST_HOLD_WATCHDOG=R:MS: rank R waits before it joins the watchdog's star.
    RankHold holdWatchdog;
    /// CLUSTERPPL_TEST_HOLD_FINISH=R:MS|R:hub[,...]: rank R waits before its watchdog hears that it
    /// finished; R:hub until its watchdog follows a hub other than rank 0 (up to 120 s).
    struct FinishHold
    {
        int rank = -1;
        std::chrono::milliseconds ms{0};
        bool untilHub = false;
    };
    std::vector<FinishHold> holdFinish;
    /// CLUSTERPPL_TEST_HOLD_WATCHDOG_STOP=R:MS: rank R, leaving without having finished, waits
    /// before its watchdog thread stops.
    RankHold holdWatchdogStop;
    /// CLUSTERPPL_TEST_HOLD_FAILURE=R:MS: rank R waits after it reported its failure, before it leaves.
    RankHold holdFailure;
    /// CLUSTERPPL_TEST_SLOW_LOAD=R:MS: rank R's model load takes MS ms longer (weights on a slow
    /// NFS): the load phase's own bound (--load-timeout), not --timeout, must cover it.
    RankHold slowLoad;
    /// CLUSTERPPL_TEST_HOLD_RESULT=R:MS: rank R, reporting, waits after its closing gather.
    RankHold holdResult;
    /// CLUSTERPPL_TEST_HOLD_FINGERPRINT=MS: the run's fingerprint is hashed MS ms late.
    std::chrono::milliseconds holdFingerprint{0};
    /// CLUSTERPPL_TEST_SLOW_RANK=R:MS or *:MS: rank R (every rank) sleeps MS ms per batch.
    int slowRank = -1;
    bool slowEveryRank = false;
    std::chrono::milliseconds slowMs{0};
    /// CLUSTERPPL_TEST_ROUND_LINES=all: the reporting rank's round line after every round.
    bool everyRoundLine = false;
    /// CLUSTERPPL_TEST_GPU_FREE_BYTES=B0[,B1...]: rank r sizes its default batch as if its GPU had
    /// B(r mod n) bytes free, on any device.
    std::vector<std::int64_t> gpuFreeBytes;
    /// CLUSTERPPL_TEST_MESH_CANDIDATES=K: the watchdog mesh's candidate hubs (0: the default).
    int meshCandidates = 0;
    /// CLUSTERPPL_TEST_TRACE_WATCHDOG=1: the watchdog's events on stderr.
    bool traceWatchdog = false;
    /// CLUSTERPPL_TEST_NO_GLOO=1: this agent behaves as one built without Gloo.
    bool noGloo = false;
    /// CLUSTERPPL_TEST_DEVICE_KIND=R:cuda: rank R says at the rendezvous that its model is on a GPU
    /// (this LibTorch may have no CUDA): the device-kind check (deviceKindProblem) sees a mix.
    int cudaKindRank = -1;
    /// CLUSTERPPL_TEST_LONG_LINES=BYTES: every checkpoint line carries a "test_padding" member of
    /// BYTES characters, kept in checkpoint.json (a line that srun -l cuts in pieces).
    std::size_t longLines = 0;
    /// CLUSTERPPL_TEST_STAGED_UPLOAD=BYTES: on the CPU, LibTorch's path reads every weight through
    /// a StagedUpload of BYTES per chunk whose copies a thread makes later (staged_upload.h): the
    /// pinned upload's order, run where no GPU is.
    std::int64_t stagedUploadChunk = 0;

    [[nodiscard]] bool slows(int rank) const { return slowMs.count() > 0 && (slowEveryRank || slowRank == rank); }
    /// The closing-gather point where @p rank kills itself; empty: nowhere.
    [[nodiscard]] std::string deathPoint(int rank) const;
};

/// Looks up one environment variable (nullptr: unset); the tests pass their own.
using EnvLookup = std::function<const char *(const char *name)>;

/// Every CLUSTERPPL_TEST_* variable read through @p env. Throws ConfigError naming the variable, its
/// value and the form it must have; with fault hooks compiled out, for any such variable that is set.
[[nodiscard]] FaultHooks parseFaultHooks(const EnvLookup &env);

/// The process's hooks, parsed from its environment at the first call (which throws what
/// parseFaultHooks throws; the eval command calls it while it reads its options).
[[nodiscard]] const FaultHooks &faultHooks();
/// Parses the environment again (a test process that set a hook after the first call).
void reloadFaultHooks();

/// A hook's note on stderr ("clusterppl-agent: rank R: holding ... (CLUSTERPPL_TEST_...)"), written
/// with one write(2) so that lines of several threads never mix.
void sayHook(const std::string &line);

} // namespace cppl::agent
