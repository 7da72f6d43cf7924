// SPDX-License-Identifier: MIT
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

struct pollfd;

namespace cppl::agent::dist {

class RendezvousStore;

/// How many of the lowest ranks are the mesh's candidates (the ranks that watch everyone): see
/// LivenessMesh. CLUSTERPPL_TEST_MESH_CANDIDATES overrides it (tests only; meshCandidates()).
inline constexpr int kMeshCandidates = 4;

/// kMeshCandidates, or CLUSTERPPL_TEST_MESH_CANDIDATES (1-1000000) when set; throws ConfigError.
[[nodiscard]] int meshCandidates();

/// Whether ranks @p a and @p b of a world of @p world hold a mesh link, with @p k candidates: one
/// of them is a candidate (rank < k), so each candidate links to every rank and every other rank
/// to the k candidates; or both are other ranks next to each other on their ring (k, k+1, ...,
/// world-1, back to k), so each of those also links to its one or two ring neighbours.
[[nodiscard]] constexpr bool meshLinked(int a, int b, int k, int world) noexcept
{
    if (a == b || a < 0 || b < 0 || a >= world || b >= world)
        return false;
    if (a < k || b < k)
        return true;
    const int lo = a < b ? a : b, hi = a < b ? b : a;
    return hi == lo + 1 || (lo == k && hi == world - 1);
}

/// The ranks that @p rank links to in a world of @p world with @p k candidates, ascending: every
/// other rank for a candidate; for the others the candidates and their ring neighbours (k + 2
/// links; k + 1 with two other ranks, k with one).
[[nodiscard]] std::vector<int> meshPeers(int rank, int world, int k);

/**
 * @brief The watchdog's mesh (tolerant runs whose store outlives the ranks, 3 ranks or more): TCP
 * links between ranks, for liveness only: a hello ("r<rank>"), a heartbeat ("h") every 250 ms
 * each way, and "d" when a rank finishes. Bounded: only the k lowest ranks (the candidates,
 * kMeshCandidates) watch everyone; every rank links to each candidate, and each other rank also
 * to its one or two neighbours on the ring of the other ranks (meshLinked()), so a run holds
 * O(world * k) links, not O(world^2), and a rank that is not a candidate holds at most k + 2.
 * Every rank with a higher peer listens and publishes its address (`cppl/watchdog-mesh/<rank>`)
 * before it joins the star; a rank's watchdog thread connects to its lower peers as they publish
 * (beat()). With k >= world - 1 it is the full mesh.
 *
 * The hub's star decides every loss while the hub lives; the mesh matters when the hub is lost.
 * The election makes the lowest live rank the new hub. When that is a candidate, it has watched
 * every other rank all along: a rank whose link closed without "d" is dead, one silent on its link
 * past --timeout is stopped, so the new hub announces the ranks lost together with the old one at
 * once instead of waiting --timeout for them to reconnect, and a rank does not wait for the vote
 * of a lower rank it knows lost. When every candidate is lost together, the new hub (not a
 * candidate) knows the candidates' fate and its ring neighbours'; every survivor tells it what its
 * own links know (known(), sent with its hello), so it waits only for a rank that nobody linked to
 * it knows anything of (both its ring neighbours lost too). lost() never says "dead" of a rank
 * without a link; a link that was never made (a rank lost before it connected) tells nothing.
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
    void publish(RendezvousStore &store, const std::string &advertise, const std::string &who);
    /// Connects to the lower candidates that published and are not linked yet; never waits on the store.
    void connectPending(RendezvousStore &store);
    /// A heartbeat on every link (and connectPending while links are missing); at most every 250 ms.
    void beat(RendezvousStore &store);
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
    /// What this rank's links know, for a new hub: each linked rank known lost (its cause, as
    /// lost()) or finished (an empty cause), ascending.
    [[nodiscard]] std::vector<std::pair<int, std::string>> known() const;

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
    std::vector<int> m_lower; ///< the lower ranks it links to (it connects to them; the higher ones connect to it)
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
