// SPDX-License-Identifier: MIT
#pragma once

// A synthetic run of N ranks built from Snapshot objects directly (no agents, no sockets), for
// screenshots and for checking how the Run page reads at 1024 ranks: realistic per-rank rates, a
// few slow ranks, a stall, comm shares (waiting vs transfer), text bias per rank, and the engine's own
// RunTimeline and AlertMonitor on top, so the page sees what a real run would give it.

#include "run/alerts.h"
#include "run/run_engine.h"
#include "run/run_timeline.h"
#include "telemetry/collector_state.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace cppl::app {

class RunPage;

class SyntheticRun
{
public:
    explicit SyntheticRun(int ranks, unsigned seed = 12345);

    /// Advances the simulated run to @p seconds (sampling the timeline on the way).
    void advanceTo(double seconds);
    /// SyntheticRun(ranks) advanced to @p seconds, the same state (the steps are deterministic),
    /// built from the latest state of the same size at or before @p seconds that was asked for
    /// before in this process: screenshots and tests ask for a few moments of 1024 ranks many
    /// times, and 744 steps of 1024 ranks cost ~1 s (tens under a sanitizer). Copies, so the
    /// caller may finish() or advance it further.
    [[nodiscard]] static SyntheticRun advanced(int ranks, double seconds);
    /// Every rank done: the state after the run ended. The stalled rank caught up, unless
    /// @p stalledRankLost (the run went on without it, --on-rank-loss continue): then it stays
    /// silent at 0 tok/s, as a lost rank does.
    void finish(bool stalledRankLost = false);
    /// Had the others regrouped without the stalled rank (--on-rank-loss continue): the engine's
    /// "rank lost" warning (finish(true) raises it into alerts()).
    [[nodiscard]] cppl::core::run::RunAlert stalledRankLostAlert() const;

    [[nodiscard]] const cppl::core::telemetry::Snapshot &snapshot() const { return *m_snapshot; }
    [[nodiscard]] const cppl::core::run::RunTimeline &timeline() const { return m_timeline; }
    [[nodiscard]] const std::vector<cppl::core::run::RunAlert> &alerts() const { return m_alerts.alerts(); }
    [[nodiscard]] const Thresholds &thresholds() const { return m_thresholds; }
    [[nodiscard]] std::vector<QString> groupNames() const;
    [[nodiscard]] cppl::core::run::RunOutcome outcome() const;
    /// The same run had it tolerated the stalled rank (--on-rank-loss continue): finished,
    /// "recovered", the stalled rank in the result's lost_ranks (screenshots of the badge).
    [[nodiscard]] cppl::core::run::RunOutcome recoveredOutcome() const;
    [[nodiscard]] double seconds() const noexcept { return m_now; }
    [[nodiscard]] int stalledRank() const noexcept { return m_stalled; }
    [[nodiscard]] const std::vector<int> &slowRanks() const noexcept { return m_slow; }
    /// When @p rank sends its first progress message (0.5–4 s in: loading the model); before it
    /// the rank is heard (heartbeats) without progress, as a real rank is.
    [[nodiscard]] double startOf(int rank) const { return m_ranks.at(size_t(rank)).startAt; }
    /// The ranks' first sync round: no rank knows its communication time before it.
    static constexpr double kFirstSyncSeconds = 8;
    /// A congested switch drops telemetry: from this moment a few ranks (every 97th, from rank 5)
    /// have lost 3 messages each. None are lost before (nothing has been sent to lose).
    static constexpr double kTelemetryLossSeconds = 250;

    /// What the engine says as the run launches: "run synthetic-4-ranks: 4 ranks on 1 host
    /// (local), groups [0–1] [2–3], master …" (runStartNotice).
    [[nodiscard]] QString startNotice() const;

    /// Feeds everything to a Run page as the engine would.
    void showOn(RunPage &page) const;
    /// After showOn() mid-run: the others regrouped without the stalled rank (--on-rank-loss
    /// continue), told to @p page as the engine tells it: rankLost, the notice, the "rank lost" alert.
    void showStalledRankLostOn(RunPage &page) const;
    /// After showOn() of finish(true): the outcome and the engine's last notice, "recovered (…)".
    void showRecoveredOn(RunPage &page) const;

private:
    struct Rank
    {
        double rate = 0;        // tok/s when healthy
        double mu = 0;          // mean NLL of the text it evaluates (its deviation from the global PPL)
        double transfer = 0;    // transfer share
        bool slow = false;
        bool stalls = false;
        cppl::NllStats stats;
        double lastHeard = 0;
        double startAt = 0;     // its first progress message (loading the model before)
        std::string host;       // hostOf(rank): formatted once, not in every snapshot
    };
    void step(double dt);
    void snapshotNow(bool finished);

    int m_n;
    double m_now = 0;
    double m_stallAt = 0;
    int m_stalled = -1;
    std::vector<int> m_slow;
    std::mt19937 m_rng;
    std::vector<Rank> m_ranks;
    Thresholds m_thresholds;
    cppl::core::run::RunTimeline m_timeline;
    cppl::core::run::AlertMonitor m_alerts;
    std::shared_ptr<cppl::core::telemetry::Snapshot> m_snapshot;
    std::vector<std::pair<int, QString>> m_logs;
    std::int64_t m_sequence = 0;
    bool m_finished = false;
    bool m_stalledLost = false; ///< finish(true): the stalled rank was lost, the run went on
};

} // namespace cppl::app
