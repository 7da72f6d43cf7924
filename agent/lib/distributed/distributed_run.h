// SPDX-License-Identifier: MIT
#pragma once

#include "c10d.h"
#include "communicator.h"
#include "watchdog.h"

#include "cppl/rank_env.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace cppl::agent::dist {

class ConnectLog;
class RendezvousStore;

/// Why tensor-parallel group @p group (ranks [group * size, (group + 1) * size)) cannot be formed on
/// @p hosts (every rank's, from the rendezvous): its ranks are on several hosts, named. Empty: one host.
/// Why the ranks cannot run together when their models are on different kinds of device (@p kinds:
/// "cuda" or "cpu" by rank, from the rendezvous; @p hosts by rank): --backend auto would pick NCCL
/// on some and Gloo on others, and the bits would differ anyway. Names the ranks and hosts of each
/// kind. Empty: one kind (issue 43, point 3).
[[nodiscard]] std::string deviceKindProblem(const std::vector<std::string> &kinds, const std::vector<std::string> &hosts,
                                            const std::string &backend);
[[nodiscard]] std::string tensorParallelHostProblem(const std::vector<std::string> &hosts, int group, int size);

/// @p groups (original numbering) among @p members only, renumbered in their order (a group left
/// empty disappears): the data-parallel communicators' node groups after a loss, and of the
/// tensor-parallel leaders.
[[nodiscard]] RankGroups groupsAmong(const RankGroups &groups, const std::vector<int> &members);

class DistributedRun;
/// Tolerant runs: @p group whose failed collectives first wait for the watchdog's verdict
/// (DistributedRun::awaitGroupVerdict), so that a survivor of a lost group leaves with that
/// verdict's message and exit code, not Gloo's.
[[nodiscard]] std::unique_ptr<TensorParallelGroup> watchTensorParallelGroup(std::unique_ptr<TensorParallelGroup> group, DistributedRun &run);

struct DistributedOptions
{
    RankIdentity identity;
    std::string groups = "by-host";     ///< --groups
    Topology topology = Topology::Hierarchical;
    std::string backend = "auto";       ///< auto | gloo | nccl
    bool cudaDevice = false;            ///< auto picks nccl when the model runs on a GPU
    int cudaDeviceIndex = -1;           ///< the rank's GPU (chooseCudaDevice), -1: the model is on the CPU
    std::vector<int> hostDevices;       ///< --devices: this host's GPUs by local rank (NCCL's, with the model on the CPU too)
    std::chrono::milliseconds timeout{300000};
    bool storeServedElsewhere = false;  ///< TORCHELASTIC_USE_AGENT_STORE=True: the launcher serves the store
    std::string glooInterface;          ///< GLOO_SOCKET_IFNAME
    std::string hostname;               ///< this rank's host name (default: gethostname)
    /// `--on-rank-loss continue`: a lost rank (not rank 0) does not end the run; collectives throw
    /// RankLostError instead and the dynamic schedule regroups the survivors (gloo or nccl).
    bool tolerateRankLoss = false;
    /// Gloo: the process groups form on a thread of this rank's while the caller goes on (loads,
    /// computes round 0); the first collective waits for them. False: in the constructor (comm-check).
    /// NCCL's always form in the constructor.
    bool connectInBackground = true;
    /// --tensor-parallel N: groups of N consecutive ranks; only each group's leader (rank % N == 0)
    /// takes part in the data-parallel communicators, node groups and members (docs/models.md,
    /// "Tensor parallelism"); the rendezvous and the watchdog cover every rank.
    int tensorParallel = 1;
};

/// What this rank spent in collectives (docs/communication.md says how each figure is measured).
/// wait + transfer is the time this rank's main thread was blocked by the rounds' collectives:
/// the whole collective when it runs on the main thread, only the part not hidden behind the next
/// round's compute when a RoundPipeline overlaps them (round_pipeline.h).
struct CommStats
{
    double waitSeconds = 0;     ///< blocked before the last rank's arrival (straggler skew)
    double transferSeconds = 0; ///< blocked after it: moving and adding the words
    double collectiveSeconds = 0; ///< the collectives' own duration, on whichever thread ran them (>= wait + transfer)
    std::int64_t collectives = 0;
    std::int64_t payloadBytes = 0; ///< words this rank contributed, x 8
    double connectSeconds = 0;  ///< the first collective's wait for the process groups formed in the background (in collectiveSeconds)
};

/// One collective as allReduce() measured it; the accounting into CommStats is separate (account()).
struct CollectiveTiming
{
    std::int64_t arrivalNs = 0;     ///< this rank's arrival, on rank 0's clock
    std::int64_t lastArrivalNs = 0; ///< the last rank's arrival, on rank 0's clock
    double seconds = 0;             ///< the call's duration
    std::int64_t payloadBytes = 0;
    double connectSeconds = 0;      ///< of it, waiting for the process groups formed in the background
};

/// One rank's line in the result's `ranks` array.
struct RankReport
{
    int rank = 0;
    std::string host;
    int group = 0;
    std::int64_t tokens = 0;
    std::int64_t windows = 0;
    std::int64_t rounds = 0;
    std::int64_t payloadBytes = 0;
    double computeSeconds = 0;
    double waitSeconds = 0;
    double transferSeconds = 0;
    double collectiveSeconds = 0;       ///< the collectives' own duration (overlapped: mostly hidden, not in wait + transfer)
    double tensorParallelSeconds = 0;   ///< --tensor-parallel: in the group's reductions inside the forward passes (in computeSeconds)
    int tpRank = 0;                     ///< --tensor-parallel: the member of its group (0: the leader, whose row has the group's tokens)
    double wallSeconds = 0;
    double clockOffsetSeconds = 0;      ///< the watchdog hub's clock minus this rank's (0 on the hub; rank 0 until it is lost)
    double clockUncertaintySeconds = 0; ///< half the fastest round trip it was measured with
    bool lost = false;                  ///< lost during the run: only its committed tokens and windows count
    [[nodiscard]] double commShare() const { return wallSeconds > 0 ? (waitSeconds + transferSeconds) / wallSeconds : 0; }
};

/**
 * @brief One rank's membership in a distributed run: rendezvous on the TCPStore (naming the ranks
 * that never arrived), node groups, the backend's communicators, and the watchdog. Joining is the
 * constructor's four steps (distributed_setup.cpp): connect the store, rendezvous, start the
 * watchdog, make the communicators.
 *
 * allReduce() is the only data collective: an exact SUM of int64 words over all ranks, through
 * the topology (hierarchical: reduce to each group's leader, all-reduce among leaders, broadcast
 * back; flat: one all-reduce). Integer sums do not depend on order, so both give the same bits.
 */
class DistributedRun
{
public:
    /// @brief Joins the run through LibTorch's @p c10d (libtorchC10d(): its store client and Gloo).
    /// Throws TimeoutError (rendezvous incomplete: names the missing ranks) or CollectiveError.
    DistributedRun(const DistributedOptions &options, const C10d &c10d);
    ~DistributedRun();
    DistributedRun(const DistributedRun &) = delete;
    DistributedRun &operator=(const DistributedRun &) = delete;

    /// @brief This rank and the world size as the run started (names, keys, the result).
    [[nodiscard]] int rank() const noexcept { return m_rank; }
    [[nodiscard]] int worldSize() const noexcept { return m_world; }
    /// @brief The ranks still in the run (original numbering, ascending), this rank's place among
    /// them and their count: what the collectives use. All ranks until a rank is lost.
    [[nodiscard]] const std::vector<int> &members() const noexcept { return m_members; }
    [[nodiscard]] int epochRank() const noexcept { return m_epochRank; }
    /// @brief Whether this rank speaks for the run (prints the rounds, writes the result): the
    /// lowest rank still in it, rank 0 until it is lost.
    [[nodiscard]] bool reporter() const noexcept { return !m_members.empty() && m_members.front() == m_rank; }
    [[nodiscard]] int epochSize() const noexcept { return static_cast<int>(m_members.size()); }
    [[nodiscard]] int epoch() const noexcept { return m_epoch; }
    [[nodiscard]] bool tolerant() const noexcept { return m_tolerant; }
    [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return m_timeout; }
    /// @brief The watchdog reported a lost rank this run has not regrouped around yet.
    [[nodiscard]] bool lossPending() const noexcept { return m_lossEpoch.load() > m_epoch; }
    /// @brief The watchdog is settling the hub's loss (electing a new hub, reconnecting): its verdict follows, or this process exits.
    [[nodiscard]] bool hubElection() const noexcept { return m_watchdog && m_watchdog->electing(); }
    /**
     * @brief After a collective error in a tolerant run: waits for the watchdog to report a loss
     * newer than @p epoch, up to --timeout + 2 s, and for as long as it is electing a new hub
     * (hubElection(): that takes up to --timeout more when a survivor of the old hub is gone too,
     * and ends with the verdict). True when such a loss was reported.
     */
    [[nodiscard]] bool awaitLossAfter(int epoch);
    /// @brief Every loss the watchdog reported after epoch @p since, oldest first (the last one holds the membership).
    [[nodiscard]] std::vector<Watchdog::Loss> lossesSince(int since);
    /// @brief New communicators over @p members (renumbered in order; each keeps its node group
    /// minus the lost, led by its lowest member) on a fresh store prefix. Gloo: the old ones are
    /// abandoned, never destroyed (a Gloo thread may still wait in them). NCCL: they are aborted
    /// or shrunk (regroupNcclCommunicators); a further loss during that blocking rebuild is fatal.
    void regroup(int epoch, const std::vector<int> &members);
    [[nodiscard]] const RankGroups &groups() const noexcept { return m_groups; }
    /**
     * @brief This rank's tensor-parallel group of @p size ranks: [g * size, (g + 1) * size), on one
     * host, over the run's backend (Gloo, or an NCCL communicator of its own), its keys under
     * cppl/tp/<g>/ (docs/communication.md, "Tensor-parallel groups"). Blocks until every member
     * joined (--timeout). Throws ConfigError when the world is not a multiple of @p size or the
     * group spans hosts (named).
     */
    [[nodiscard]] std::unique_ptr<TensorParallelGroup> formTensorParallelGroup(int size);
    /// @brief Tolerant, --tensor-parallel: one of the group's collectives failed (a member died:
    /// Gloo's closed connection comes before the watchdog's word). Waits up to --timeout + 2 s for
    /// the watchdog's verdict, whose handler ends this process when the loss is in this rank's
    /// group (tensorParallelGroupLost); returns when none came, for the caller to fail.
    void awaitGroupVerdict();
    [[nodiscard]] const std::vector<std::string> &hosts() const noexcept { return m_hosts; }
    [[nodiscard]] const std::string &backend() const noexcept { return m_comms.backend; }
    [[nodiscard]] Topology topology() const noexcept { return m_topology; }
    [[nodiscard]] const std::string &storeAddress() const noexcept { return m_storeAddress; }
    /// @brief Whether this process serves the store (rank 0 without TORCHELASTIC_USE_AGENT_STORE): it leaves with it.
    [[nodiscard]] bool servesStore() const noexcept { return m_servesStore; }
    /// @brief The rendezvous store (the dynamic schedule's counter lives there); main thread only.
    [[nodiscard]] RendezvousStore &store() noexcept { return *m_store; }

    /// @brief The model's load as a phase of its own (--load-timeout; docs/communication.md,
    /// "The load phase"): this rank says "loading" in the store now and "loaded" at endLoad().
    /// The first collective waits (awaitLoaded) for every rank's "loaded" within @p bound from
    /// here, not within --timeout: a node reading its weights from NFS is not a stalled collective.
    void beginLoad(std::chrono::milliseconds bound);
    void endLoad();
    /// @brief Until every rank of the run said "loaded" (once; nothing without beginLoad()). Main
    /// thread (the store): RoundPipeline::submit, the dynamic schedule's sync and the closing
    /// gather call it before their collective. Throws TimeoutError naming the ranks still loading
    /// (rank, host, seconds) past the bound; RankLostError when a loss is reported meanwhile.
    void awaitLoaded();

    /// @brief Exact SUM of @p words over all ranks, result on every rank; timed into comm() (the
    /// whole call counts as blocked), or with @p timing only measured into it, for the caller to
    /// account() (a RoundPipeline, whose collectives run on its own thread).
    void allReduce(std::span<std::int64_t> words, CollectiveTiming *timing = nullptr);
    /// @brief Adds a collective that blocked this rank's main thread from @p blockedFromNs (rank 0's
    /// clock) for @p blockedSeconds: the part before the last arrival is wait, the rest transfer.
    void account(const CollectiveTiming &timing, std::int64_t blockedFromNs, double blockedSeconds);
    /// @brief Now, on rank 0's clock (ns since the epoch): what arrival times are measured in.
    [[nodiscard]] std::int64_t nowOnRank0Ns() const;
    [[nodiscard]] const CommStats &comm() const noexcept { return m_comm; }
    /// @brief This rank's clock offset to the watchdog's hub (rank 0, or the hub elected after it) and its uncertainty, in seconds.
    [[nodiscard]] double clockOffsetSeconds() const;
    [[nodiscard]] double clockUncertaintySeconds() const;

    /// @brief Every rank's report, on every rank (one more all-reduce, not counted in comm()).
    /// --tensor-parallel: each leader also brings its @p followers' rows (tp_rank 1 .. N-1).
    [[nodiscard]] std::vector<RankReport> gather(const RankReport &mine, const std::vector<RankReport> &followers = {});
    /// @brief --tensor-parallel N (1 without): the size of every tensor-parallel group.
    [[nodiscard]] int tensorParallel() const noexcept { return m_tensorParallel; }
    /// @brief A tensor-parallel follower: in no data-parallel communicator, never among members().
    [[nodiscard]] bool follower() const noexcept { return m_rank % m_tensorParallel != 0; }
    /// @brief The data-parallel width the run started with: the world, or its groups (world / N).
    [[nodiscard]] int dataParallelWidth() const noexcept { return m_world / m_tensorParallel; }

    /// @brief This rank failed with @p exitCode: the others are told (and exit) instead of waiting.
    /// Tolerant runs: they go on without this rank, unless @p runWide (a failure every rank would
    /// hit: isRunWide()), which ends the run, every rank exiting with @p exitCode.
    void reportFailure(int exitCode, const std::string &message, bool runWide = false);
    /// @brief The run is over for this rank; peers may now exit without alarm.
    void finish();

private:
    // The constructor's steps, in order (distributed_setup.cpp), each given what it needs in a small
    // struct of its own (defined there, every field saying why).
    struct StoreStep;
    struct RendezvousStep;
    struct WatchdogStep;
    struct CommunicatorStep;
    /// 1. The rendezvous store: served by rank 0 (unless a launcher serves it), reached by every rank.
    void connectStore(const StoreStep &step);
    /// 2. Every rank announces itself and waits for the others; m_hosts from their announcements.
    void rendezvous(const RendezvousStep &step);
    /// The rendezvous timed out: says which ranks never arrived (rank 0 also wakes the others).
    [[noreturn]] void failRendezvous(const RendezvousStep &step, const std::vector<std::string> &keys);
    /// Rank 0 serving the store, before it leaves on a refusal every rank makes: until every rank has
    /// read the arrivals (or @p bound passes), so none sees a lost store instead of the refusal.
    void awaitArrivalsRead(std::chrono::milliseconds bound);
    /// 3. Liveness, before the communicators: a rank that dies while they connect is noticed too.
    /// @p starListener: rank 0's (listenForStar), taken over by the watchdog.
    void startWatchdog(const WatchdogStep &step, int &starListener);
    /// 4. The communicators (Gloo's formed in the background, or here: NCCL's, comm-check's).
    void makeCommunicators(const CommunicatorStep &step, ConnectLog &log);
    void formInBackground(const CommunicatorStep &step, ConnectLog &log);
    void formNow(const CommunicatorStep &step, ConnectLog &log);
    /// Step 4's data-parallel communicators over this rank's place in the run and its node group.
    [[nodiscard]] BackendOptions dataParallelOptions(const DistributedOptions &o, const std::string &host);
    /// Every communicator a rank takes part in, of @p backend over @p store: step 4 (on either path)
    /// and regroup(). Static: the background thread outlives this object when it is abandoned.
    [[nodiscard]] static Communicators formCommunicators(const C10d &c10d, const std::string &backend, RendezvousStore &store,
                                                         const BackendOptions &dataParallel);

    /// --tensor-parallel, tolerant (the watchdog's thread): @p raw as the data-parallel side sees it:
    /// the loss of the lost rank's group leader, the members the leaders whose groups are whole;
    /// nothing when that group was out already (its survivors leaving after it).
    [[nodiscard]] std::optional<Watchdog::Loss> dataParallelLoss(const Watchdog::Loss &raw);
    /// Why a survivor of a lost group leaves (its exit code: kExitCollective).
    [[nodiscard]] std::string tensorParallelGroupLost(const Watchdog::Loss &raw) const;

    /// CLUSTERPPL_TEST_HOLD_FINISH (tests): wait before the watchdog hears that this rank finished.
    void holdBeforeFinish() const;
    /// CLUSTERPPL_TEST_DIE (tests): this rank kills itself (SIGKILL) at @p point of the closing gather.
    void dieIfTold(std::string_view point) const;
    void reduceThroughTopology(std::span<std::int64_t> words);
    /// reduceThroughTopology; in a tolerant run a collective error becomes RankLostError when the
    /// watchdog reports a lost rank within the timeout (Gloo may notice the dead peer first).
    void collect(std::span<std::int64_t> words);
    /// The process groups formed in the background, once formed: adopted into m_comms (the first
    /// collective calls this; the seconds it waited are returned). Their error is thrown as the
    /// constructor threw it (the others told through the watchdog), or, tolerant, RankLostError
    /// when a lost rank is the cause or is reported meanwhile.
    double awaitCommunicators();
    /// regroup() and the destructor: forming groups are left to their thread, formed ones kept unused.
    void abandonConnecting() noexcept;
    struct Connecting
    {
        std::mutex mutex;
        std::condition_variable cv;
        bool awaited = false; ///< a collective waits for them (CLUSTERPPL_TEST_HOLD_CONNECT=R:collective)
        bool done = false;
        Communicators comms;
        std::exception_ptr error;
    };
    std::vector<std::int64_t> m_buffer; ///< words + one arrival time per rank
    int m_rank = 0;
    int m_world = 1;
    int m_tensorParallel = 1;
    Topology m_topology;
    C10d m_c10d;                          ///< LibTorch's store client and Gloo (the constructor's caller's)
    RankGroups m_groups;
    std::vector<std::string> m_hosts;
    std::vector<std::string> m_kinds; ///< by rank, from the rendezvous: "cuda" or "cpu"
    std::string m_storeAddress;
    std::unique_ptr<RendezvousStore> m_store;
    Communicators m_comms;
    std::mutex m_commsMutex; ///< m_comms is assigned on the main thread, aborted from the watchdog's
    std::shared_ptr<Connecting> m_connecting; ///< the process groups forming in the background, until the first collective
    std::thread m_connectThread;
    std::unique_ptr<Watchdog> m_watchdog; ///< reset (its thread joined) at the end of the destructor's body: after the communicators, before any member
    bool m_finished = false;              ///< finish() ran: the communicators close cleanly
    CommStats m_comm;
    BackendOptions m_backendOptions;      ///< as the communicators were made (regroup() changes rank, size, groups)
    std::string m_backendName;
    std::chrono::milliseconds m_timeout{300000};
    bool m_tolerant = false;
    bool m_servesStore = false;
    std::chrono::milliseconds m_testSlowCollective{0}; ///< CLUSTERPPL_TEST_SLOW_COLLECTIVE=MS: each round's collective takes MS longer
    std::string m_testDie;                ///< CLUSTERPPL_TEST_DIE=R:POINT: where this rank kills itself (empty: nowhere)
    bool m_inGather = false;              ///< gather() is collecting (the point "gather" is inside it)
    std::vector<int> m_members;
    int m_epochRank = 0;
    int m_epoch = 0;
    std::atomic<int> m_lossEpoch{0};      ///< the latest epoch the watchdog announced (its thread writes)
    std::atomic<bool> m_blockingRegroup{false}; ///< NCCL's rebuild is under way: a loss now is fatal (regroup())
    std::mutex m_lossMutex;
    std::vector<Watchdog::Loss> m_losses;
    std::vector<int> m_dataParallelMembers; ///< the watchdog's thread (dataParallelLoss): the leaders whose groups are whole
    /// beginLoad() .. the first awaitLoaded() that saw every rank loaded: when the phase began, and its bound (0: none pending).
    std::chrono::steady_clock::time_point m_loadStart;
    std::chrono::milliseconds m_loadBound{0};
};

[[nodiscard]] const char *topologyName(Topology t) noexcept;

} // namespace cppl::agent::dist
