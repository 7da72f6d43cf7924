// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

struct pollfd;

namespace cppl::agent::dist {

class LivenessMesh;
class RendezvousStore;

/**
 * @brief Liveness for a run, independent of the collectives, so no failure can leave a rank
 * waiting: every rank keeps one TCP connection to rank 0's watchdog (a star), and both ends send a
 * heartbeat every 250 ms.
 *
 * - A connection that closes without "done" means that process died (SIGKILL, crash, OOM): the
 *   kernel closes its sockets at once, so this is noticed within a poll interval.
 * - No heartbeat for longer than the timeout means the process is stopped or hung (SIGSTOP, a host
 *   gone silent).
 * - A rank that fails (bad data, a collective error) reports it before exiting.
 * Rank 0 relays any of these to every rank, and each rank then calls onFatal (which exits). The
 * connection's address is published in the store under "cppl/watchdog".
 *
 * Tolerant runs (an onLoss handler, `--on-rank-loss continue`): the hub (rank 0 at first) alone
 * decides that another rank is lost (dead, stopped past the timeout, or failed), drops it from the
 * membership, counts a new epoch, tells every remaining rank ("l" frame: epoch, rank, members,
 * cause) and calls onLoss on every rank, itself included; nobody exits. When the hub itself is lost
 * and the store is served outside the ranks (an own store connection given), the survivors elect a
 * new hub through the store (`cppl/hub<k>/`: the lowest live rank), reconnect to it (measuring
 * their clock offsets to it again), and the new hub announces the old one's loss as a verdict with
 * a new epoch. Without an own store connection the hub's loss stays fatal (it serves the store).
 * With one (and 3 ranks or more) the ranks also hold the links of the mesh (watchdog_mesh.h: each
 * of the kMeshCandidates lowest ranks to every rank, the others on a ring), so a new hub that is
 * one of them knows at once which others died, stopped or finished with the old one; one that is
 * not learns the rest from the survivors' hellos (what their links know). A rank that finished is
 * also on record in the store (finish()), and is neither waited for nor declared lost.
 * Ranks lost before they join the star are lost like any other (tolerant runs, rank 0 excepted:
 * its loss there ends the run, at once; listenForStar()).
 */
class Watchdog
{
public:
    struct Fatal
    {
        int exitCode;
        std::string message;
    };
    using FatalHandler = std::function<void(const Fatal &)>;
    /// A rank lost in a tolerant run, as rank 0 decided it: the run's membership from now on.
    struct Loss
    {
        int epoch = 0;            ///< 1 for the first loss, then 2, ...
        int rank = -1;            ///< the lost rank (original numbering)
        std::string cause;        ///< e.g. "died: its connection closed ...", without "rank R (host)"
        std::vector<int> members; ///< the ranks left, ascending (original numbering)
    };
    using LossHandler = std::function<void(const Loss &)>;

    /**
     * @param hosts hostname of every rank, for messages. @param advertise the address other ranks
     * reach this rank at (when it is or becomes the hub). @param ownStore tolerant runs whose store
     * outlives every rank: the watchdog thread's own connection to it (hub election, fencing);
     * null: losing the hub is fatal. @param hubListener rank 0: listenForStar()'s, or -1 (it
     * listens here). Throws CollectiveError/TimeoutError when the star cannot be formed in time.
     */
    Watchdog(RendezvousStore &store, int rank, std::vector<std::string> hosts, const std::string &advertise, std::chrono::milliseconds timeout,
             FatalHandler onFatal, LossHandler onLoss = {}, std::unique_ptr<RendezvousStore> ownStore = {}, int hubListener = -1);

    /**
     * @brief Rank 0, before it arrives at the rendezvous: listens for the star and publishes the
     * address, so that no rank can finish the rendezvous before rank 0's watchdog listens; a rank 0
     * lost after the rendezvous is then seen at once (connection refused or closed), not after
     * --timeout. Returns the listener, to pass to the constructor (which closes it). Throws
     * CollectiveError.
     */
    static int listenForStar(RendezvousStore &store, const std::string &advertise);
    ~Watchdog();
    Watchdog(const Watchdog &) = delete;
    Watchdog &operator=(const Watchdog &) = delete;

    /// @brief This rank failed: tell everyone (rank 0 relays), then return so the caller can exit.
    /// Tolerant runs: @p runWide (every rank would hit it: bad arguments, a resume refused) ends
    /// the run, every rank exiting with @p exitCode (1..6); otherwise the others go on without it.
    void reportFailure(int exitCode, const std::string &message, bool runWide = false);
    /**
     * @brief This rank finished normally: its connection may close from now on without alarm.
     * Tolerant runs whose store outlives the ranks also put it on record there
     * (`cppl/finished/<rank>`, then `cppl/finished`), so that a hub elected after it neither waits
     * for it to reconnect nor declares it lost (a rank that has no mesh link to it included).
     */
    void finish();

    /**
     * @brief This rank's clock offset to the hub's, in ns (the hub's CLOCK_REALTIME minus ours),
     * estimated when connecting from the fastest of several round trips (Cristian's method); 0 on
     * the hub. Measured again when a new hub is elected. Arrival times of all ranks become
     * comparable with it (docs/communication.md).
     */
    [[nodiscard]] std::int64_t clockOffsetNs() const noexcept { return m_clockOffsetNs.load(); }
    /// @brief Half the fastest round trip to the hub when the offset was measured: its uncertainty.
    [[nodiscard]] std::int64_t clockUncertaintyNs() const noexcept { return m_clockUncertaintyNs.load(); }
    /// @brief The rank at the star's centre now (0 until rank 0 is lost).
    [[nodiscard]] int hub() const noexcept { return m_hubRank.load(); }
    /**
     * @brief The hub's loss is being settled (tolerant runs whose store outlives the ranks): this
     * rank votes, elects, reconnects, or waits for the new hub's first verdict (which a new hub
     * sends only once every survivor reconnected, or after --timeout for those that did not). A
     * verdict follows (onLoss runs before this turns false) or this process exits; every step has
     * its own bound. A caller waiting for a verdict with a deadline of its own (a collective's
     * error, the regrouping's agreement) waits while this holds instead of failing first.
     */
    [[nodiscard]] bool electing() const noexcept { return m_electing.load(); }

private:
    struct Peer
    {
        int fd = -1;
        int rank = -1;
        std::chrono::steady_clock::time_point lastSeen;
        std::string inbox;
        bool done = false;
    };
    /// Not the hub, after an election: what this rank's mesh learnt since its hello (a rank killed
    /// together with the old hub whose link closed a few ms after the hub's), as "k" lines to the
    /// new hub, which may still wait for that rank.
    void reportMeshNews();
    /// The hub, tolerant: @p p is gone; drop it, tell the others, call onLoss.
    void lose(Peer &p, const std::string &cause);
    /// The hub, tolerant: @p rank is out of the run (fenced in the store); announce it.
    void announceLoss(int rank, const std::string &cause);
    // The star (watchdog_star.cpp).
    struct StarForming;
    /// Rank 0: takes every rank's connection on @p listener (and closes it), each rank's hello and
    /// clock pings at once; tolerant runs announce the ranks lost before they joined.
    void formStar(RendezvousStore &store, int listener, std::chrono::steady_clock::time_point deadline);
    [[noreturn]] void starTimedOut(StarForming &star);
    void acceptJoining(StarForming &star);
    /// What the @p i th connection under way sent: its hello, clock pings, "e" (joined); or it closed.
    void readJoining(StarForming &star, std::size_t i);
    /// The other ranks: connect to rank 0's watchdog, whose address rank 0 publishes in the store.
    void joinStar(RendezvousStore &store, std::chrono::steady_clock::time_point deadline);
    /// Connects to the hub @p hub at HOST:PORT @p where and measures the clock offset to it; false when it closed.
    bool connectToHub(int hub, const std::string &where, std::chrono::steady_clock::time_point deadline);
    // The hub lost (watchdog_election.cpp).
    class Takeover;
    /// Not the hub, tolerant: the hub is gone (@p cause); elect a new one and connect to it.
    void hubLost(const std::string &cause, int code);
    /// Having voted: waits a moment (up to 1 s) for a lower live candidate's vote; whether one voted.
    bool lowerRankVoted(const std::vector<int> &candidates, const std::string &prefix);
    /// This rank won the election: listen, take the survivors' connections, announce the old hub's loss.
    void becomeHub(int old, const std::string &cause, const std::vector<int> &candidates, const std::string &prefix);
    void closePeer(Peer &p);
    /// Whether the run is over: a rank finished (finish() wrote kFinishedKey; tolerant runs whose store outlives the ranks).
    bool runOver();
    /// Whether rank @p r finished (its "d" on the mesh, or, when @p over, its key in the store): not lost, not awaited.
    bool finishedRank(int r, bool over);
    /// The hub was replaced (it was stopped past the timeout) or this rank was declared lost: exit.
    bool fenced();
    void handleLoss(const std::string &frame);
    [[nodiscard]] bool isHub() const noexcept { return m_hubRank.load() == m_rank; }
    /// The watchdog's thread: heartbeats, what the peers and the mesh say, silences past the timeout.
    void loop();
    /// Reads the peers poll() found ready (@p fds after the wake pipe's, @p polled of them); true
    /// when this rank elected a new hub meanwhile, which replaced m_peers.
    bool readPeers(const std::vector<pollfd> &fds, std::size_t polled);
    /// @p p's connection closed: lost (tolerant hub), a new hub elected (returns true), or fatal.
    bool peerClosed(Peer &p);
    /// Peers silent for longer than the timeout: stopped or hung.
    void checkHeartbeats();
    void sendAll(const std::string &frame);
    void handleFrame(Peer &p, const std::string &frame);
    void fire(int code, const std::string &message, int origin, bool runWide = false);
    std::string who(int rank) const;

    int m_rank;
    std::atomic<std::int64_t> m_clockOffsetNs{0};
    std::atomic<std::int64_t> m_clockUncertaintyNs{0};
    std::atomic<int> m_hubRank{0};
    int m_hubIndex = 0;                ///< elections so far: the store keys of the next are cppl/hub<m_hubIndex + 1>/
    std::string m_advertise;
    std::unique_ptr<RendezvousStore> m_store;    ///< the watchdog thread's own store connection (tolerant, store outside the ranks)
    std::vector<std::string> m_hosts;
    std::chrono::milliseconds m_timeout;
    FatalHandler m_onFatal;
    LossHandler m_onLoss;
    std::vector<int> m_members; ///< tolerant: the ranks not lost (the hub's, and every rank's from its verdicts)
    int m_epoch = 0;
    std::vector<Peer> m_peers; ///< the hub: one per other rank; others: the hub only
    /// Not the hub, after an election: the ranks this rank's mesh told the current hub about (in
    /// its hello, or later with reportMeshNews()), by rank.
    std::vector<char> m_reported;
    std::mutex m_sendMutex;
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_finished{false};
    std::atomic<bool> m_fired{false};
    std::atomic<bool> m_electing{false}; ///< electing(): set when the hub is found lost, cleared after the new hub's first verdict
    std::unique_ptr<LivenessMesh> m_mesh; ///< tolerant runs whose store outlives the ranks, 3 ranks or more (watchdog_mesh.h)
    int m_wakeRead = -1, m_wakeWrite = -1;
    std::thread m_thread;
};

} // namespace cppl::agent::dist
