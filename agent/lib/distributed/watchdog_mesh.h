// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <string>
#include <vector>

struct pollfd;

namespace cppl::agent::dist {

class Store;

/**
 * @brief The watchdog's mesh (tolerant runs whose store outlives the ranks, 3 ranks or more): a
 * TCP link between every two ranks, for liveness only: a hello ("r<rank>"), a heartbeat ("h")
 * every 250 ms each way, and "d" when a rank finishes. Each rank listens and publishes its address
 * (`cppl/watchdog-mesh/<rank>`) before it joins the star; its watchdog thread connects to every
 * lower rank as they publish (beat()).
 *
 * The hub's star decides every loss while the hub lives; the mesh matters when the hub is lost.
 * Whichever rank the election makes the new hub, it has watched every other rank all along: a
 * rank whose link closed without "d" is dead, one silent on its link past --timeout is stopped,
 * so the new hub announces the ranks lost together with the old one at once instead of waiting
 * --timeout for them to reconnect, and a rank does not wait for the vote of a lower rank it knows
 * lost. A link that was never made (a rank lost before it connected) tells nothing: that rank
 * then costs the new hub's --timeout, as without the mesh.
 */
class LivenessMesh
{
public:
    LivenessMesh(int rank, int world, std::chrono::milliseconds timeout);
    ~LivenessMesh();
    LivenessMesh(const LivenessMesh &) = delete;
    LivenessMesh &operator=(const LivenessMesh &) = delete;

    /// Listens and publishes this rank's address; throws CollectiveError.
    void publish(Store &store, const std::string &advertise, const std::string &who);
    /// Connects to the lower ranks that published and are not linked yet; never waits on the store.
    void connectPending(Store &store);
    /// A heartbeat on every link (and connectPending while links are missing); at most every 250 ms.
    void beat(Store &store);
    /// This rank finished: "d" on every link, which may close from now on without alarm.
    void finish();
    /// Appends the fds to poll (listener, then links); handle() takes the same entries back.
    void pollFds(std::vector<pollfd> &fds) const;
    void handle(const pollfd *fds, std::size_t count);
    /// Reads what is there now without waiting (before judging silence after a pause in polling).
    void drain();
    /// Why rank @p r is lost as this rank sees it ("died: ..." or "stopped responding: ..."),
    /// empty when it is not known lost (linked and heard within --timeout, finished, or no link).
    [[nodiscard]] std::string lost(int r) const;

private:
    struct Link
    {
        int fd = -1;
        int rank = -1; ///< -1 until its hello (accepted links)
        std::string inbox;
    };
    void read(Link &l);
    void accept();

    int m_rank;
    std::chrono::milliseconds m_timeout;
    int m_listener = -1;
    std::vector<Link> m_links;
    std::vector<bool> m_connected;  ///< by rank: a link exists or existed
    std::vector<bool> m_done;       ///< by rank: sent "d"
    std::vector<bool> m_dead;       ///< by rank: its link closed without "d"
    std::vector<std::chrono::steady_clock::time_point> m_lastSeen; ///< by rank
    std::chrono::steady_clock::time_point m_nextBeat{};
    bool m_finished = false;
};

} // namespace cppl::agent::dist
