// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cppl::agent::dist {

class Store;

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
 * Tolerant runs (an onLoss handler, `--on-rank-loss continue`): rank 0 alone decides that a rank
 * other than itself is lost (dead, stopped past the timeout, or failed), drops it from the
 * membership, counts a new epoch, tells every remaining rank ("l" frame: epoch, rank, members,
 * cause) and calls onLoss on every rank, itself included; nobody exits. Rank 0 itself lost, or
 * failing, stays fatal (it holds this star).
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
     * reach rank 0 at. Throws CollectiveError/TimeoutError when the star cannot be formed in time.
     */
    Watchdog(Store &store, int rank, std::vector<std::string> hosts, const std::string &advertise, std::chrono::milliseconds timeout,
             FatalHandler onFatal, LossHandler onLoss = {});
    ~Watchdog();
    Watchdog(const Watchdog &) = delete;
    Watchdog &operator=(const Watchdog &) = delete;

    /// @brief This rank failed: tell everyone (rank 0 relays), then return so the caller can exit.
    void reportFailure(int exitCode, const std::string &message);
    /// @brief This rank finished normally: its connection may close from now on without alarm.
    void finish();

    /**
     * @brief This rank's clock offset to rank 0's, in ns (rank 0's CLOCK_REALTIME minus ours),
     * estimated when connecting from the fastest of several round trips (Cristian's method); 0 on
     * rank 0. Arrival times of all ranks become comparable with it (docs/communication.md).
     */
    [[nodiscard]] std::int64_t clockOffsetNs() const noexcept { return m_clockOffsetNs; }
    /// @brief Half the fastest round trip to rank 0 when the offset was measured: its uncertainty.
    [[nodiscard]] std::int64_t clockUncertaintyNs() const noexcept { return m_clockUncertaintyNs; }

    /// @brief Exit codes used for what the watchdog sees (docs/exit-codes.md).
    static constexpr int kPeerDied = 5;
    static constexpr int kPeerTimeout = 6;

private:
    struct Peer
    {
        int fd = -1;
        int rank = -1;
        std::chrono::steady_clock::time_point lastSeen;
        std::string inbox;
        bool done = false;
    };
    /// Rank 0, tolerant: @p p is gone; drop it, tell the others, call onLoss.
    void lose(Peer &p, const std::string &cause);
    void handleLoss(const std::string &frame);
    void loop();
    void sendAll(const std::string &frame);
    bool sendTo(Peer &p, const std::string &frame);
    void handleFrame(Peer &p, const std::string &frame);
    void fire(int code, const std::string &message, int origin);
    std::string who(int rank) const;

    int m_rank;
    std::int64_t m_clockOffsetNs = 0;
    std::int64_t m_clockUncertaintyNs = 0;
    std::vector<std::string> m_hosts;
    std::chrono::milliseconds m_timeout;
    FatalHandler m_onFatal;
    LossHandler m_onLoss;
    std::vector<int> m_members; ///< rank 0, tolerant: the ranks not lost
    int m_epoch = 0;
    std::vector<Peer> m_peers; ///< rank 0: one per other rank; others: rank 0 only
    std::mutex m_sendMutex;
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_finished{false};
    std::atomic<bool> m_fired{false};
    int m_wakeRead = -1, m_wakeWrite = -1;
    std::thread m_thread;
};

} // namespace cppl::agent::dist
