// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <string>
#include <vector>

struct pollfd;

namespace cppl::agent::dist {

class Store;

/// How many of the lowest ranks are the mesh's candidates (the ranks that watch everyone): see
/// LivenessMesh. CLUSTERPPL_TEST_MESH_CANDIDATES overrides it (tests only; meshCandidates()).
inline constexpr int kMeshCandidates = 4;

/// kMeshCandidates, or CLUSTERPPL_TEST_MESH_CANDIDATES (1-1000000) when set; throws ConfigError.
[[nodiscard]] int meshCandidates();

/// Whether ranks @p a and @p b hold a mesh link, with @p k candidates: one of them is a candidate
/// (rank < k), so each candidate links to every rank and every other rank to the k candidates.
[[nodiscard]] constexpr bool meshLinked(int a, int b, int k) noexcept
{
    return a != b && a >= 0 && b >= 0 && (a < k || b < k);
}

/// The ranks that @p rank links to in a world of @p world with @p k candidates, ascending:
/// every other rank for a candidate, the candidates for the others (min(k, world) - 1 or k links).
[[nodiscard]] std::vector<int> meshPeers(int rank, int world, int k);

/**
 * @brief The watchdog's mesh (tolerant runs whose store outlives the ranks, 3 ranks or more): TCP
 * links between ranks, for liveness only: a hello ("r<rank>"), a heartbeat ("h") every 250 ms
 * each way, and "d" when a rank finishes. Bounded: only the k lowest ranks (the candidates,
 * kMeshCandidates) watch everyone; every rank links to each candidate (meshLinked()), so a run
 * holds O(world * k) links, not O(world^2), and a rank that is not a candidate holds k. Each
 * candidate listens and publishes its address (`cppl/watchdog-mesh/<rank>`) before it joins the
 * star; a rank's watchdog thread connects to every lower candidate as they publish (beat()).
 * With k >= world - 1 it is the full mesh.
 *
 * The hub's star decides every loss while the hub lives; the mesh matters when the hub is lost.
 * The election makes the lowest live rank the new hub. When that is a candidate, it has watched
 * every other rank all along: a rank whose link closed without "d" is dead, one silent on its link
 * past --timeout is stopped, so the new hub announces the ranks lost together with the old one at
 * once instead of waiting --timeout for them to reconnect, and a rank does not wait for the vote
 * of a lower rank it knows lost. When every candidate is lost together, the new hub (not a
 * candidate) still knows the candidates' fate (it links to them) but not the other ranks': for
 * those lost() says nothing, never "dead", and each costs the new hub's --timeout, as without the
 * mesh. A link that was never made (a rank lost before it connected) tells nothing either.
 */
class LivenessMesh
{
public:
    /// @p candidates: meshCandidates() (a parameter for the tests of the link set).
    LivenessMesh(int rank, int world, std::chrono::milliseconds timeout, int candidates);
    ~LivenessMesh();
    LivenessMesh(const LivenessMesh &) = delete;
    LivenessMesh &operator=(const LivenessMesh &) = delete;

    /// A candidate listens and publishes its address; throws CollectiveError.
    void publish(Store &store, const std::string &advertise, const std::string &who);
    /// Connects to the lower candidates that published and are not linked yet; never waits on the store.
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
    /// empty when it is not known lost (linked and heard within --timeout, finished, or no link:
    /// a rank this one does not link to, meshLinked(), is never known lost here).
    [[nodiscard]] std::string lost(int r) const;
    /// Whether rank @p r said "d" on its link: it finished, so it is neither lost nor to be waited for.
    [[nodiscard]] bool finished(int r) const;

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
    int m_candidates;
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
