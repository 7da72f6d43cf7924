// SPDX-License-Identifier: MIT
#pragma once

// Qt-free on purpose: the collector's logic could move to shared/ or a headless daemon unchanged.

#include "cppl/statistics.h"
#include "cppl/telemetry.h"
#include "telemetry/message_peek.h"

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::core::telemetry {

enum class RankState : std::uint8_t { Connecting, Loading, Evaluating, Syncing, Done, Failed, Stalled };
inline constexpr int kRankStateCount = 7;
[[nodiscard]] std::string_view rankStateName(RankState s) noexcept;

/// A reference model's running comparison (--reference-model): a rank's latest cumulative sums,
/// or every rank's merged exactly.
struct ReferenceLive
{
    std::int64_t tokens = 0;         // tokens compared
    cppl::ExactSum kld;              // Σ KL(P_ref || P_model) over them
    std::int64_t sameTop = 0;        // those whose top tokens agree
    /// Σ KLD / tokens and sameTop / tokens (NaN before any token).
    [[nodiscard]] double kldMean() const noexcept;
    [[nodiscard]] double sameTopShare() const noexcept;
    static constexpr std::size_t kWords = cppl::ExactSum::kReduceWords + 2;
    using Words = std::array<std::int64_t, kWords>;
    [[nodiscard]] Words toWords() const noexcept;
    [[nodiscard]] static ReferenceLive fromReducedWords(const Words &sum) noexcept;
};

/// One rank as a view sees it.
struct RankView
{
    std::int64_t rank = 0;
    std::string host;
    std::int64_t group = 0;
    std::int64_t localRank = 0;
    RankState state = RankState::Connecting;
    bool heard = false;              // any message from this rank yet
    double silentSeconds = 0;        // since its last message (collector clock)

    std::int64_t lastSeq = -1;
    std::int64_t received = 0;
    std::int64_t lost = 0;           // seq gaps not filled later (includes the sender's own drops)
    std::int64_t reordered = 0;      // arrived after a later seq (filled a gap)
    std::int64_t duplicates = 0;     // dropped
    std::int64_t senderDropped = 0;  // the sender's dropped_total
    std::int64_t coalesced = 0;      // received but not decoded: a newer one of its kind came with it (duplicates included)

    bool hasProgress = false;
    cppl::NllStats stats;            // its latest cumulative accumulators
    double tokensPerSecond = 0;
    std::int64_t windowsDone = 0;
    std::int64_t windowsTotal = 0;
    double computeSeconds = 0;
    double waitSeconds = 0;
    double transferSeconds = 0;
    double waitShare = 0;            // wait / (compute + wait + transfer), 0..1
    double transferShare = 0;
    double commShare = 0;            // waitShare + transferShare
    std::int64_t rssBytes = 0;
    std::optional<std::int64_t> deviceMemoryBytes;      // in use on its GPU (NVML), when it has one
    std::optional<std::int64_t> deviceMemoryTotalBytes; // that GPU's memory
    std::optional<std::int64_t> gpuUtilizationPercent;  // 0..100, that GPU's recent busy share
    std::int64_t tpSize = 1;          // --tensor-parallel: its group's size (group rank / tpSize), 1 without
    std::int64_t tpRank = 0;          // its member of the group; > 0: a follower, whose totals are its leader's (counted once)
    double tpCollectiveSeconds = 0;   // in the group's reductions (part of computeSeconds), apart from wait and transfer
    std::optional<ReferenceLive> reference; // its running comparison, when it evaluates with a reference model

    cppl::Perplexity local;          // this rank's own running PPL
    double deviation = 0;            // local.ppl - global ppl
    double deviationRelative = 0;    // local.ppl / global ppl - 1
    double deviationSigma = 0;       // (local mean NLL - global mean NLL) / its standard error

    std::string lastLog;
    std::string error;
    std::optional<std::int64_t> exitCode;
};

/// One sync round across the ranks that reported it.
struct RoundView
{
    std::int64_t round = 0;
    std::int64_t roundsTotal = 0;
    std::int64_t reported = 0;
    std::int64_t straggler = -1;     // the last to arrive: the rank that waited least
    double stragglerLagSeconds = 0;  // how long the most patient rank waited for it
    double maxTransferSeconds = 0;
};

struct Snapshot
{
    std::int64_t sequence = 0;       // +1 per snapshot
    std::string run;
    std::int64_t worldSize = 0;

    cppl::NllStats global;           // exact merge of every rank's latest accumulators
    cppl::Perplexity globalPpl;
    // Exact merge of the ranks' running comparisons; set once any rank sent one.
    std::optional<ReferenceLive> reference;
    double tokensPerSecond = 0;      // sum of the ranks' recent rates
    std::int64_t windowsDone = 0;    // every rank's windows (at most windowsTotal)
    std::int64_t windowsTotal = 0;   // the run's windows
    // The dynamic schedule: each rank's windowsTotal is the run's (it claims batches as it goes and
    // has no share of its own), so a rank's progress is its count, or its part of the run's.
    bool windowsGlobal = false;

    std::vector<RankView> ranks;     // by rank; ranks never heard from are Connecting
    std::array<std::int64_t, kRankStateCount> stateCounts{};
    std::vector<RoundView> rounds;   // oldest first, the last Options::roundHistory rounds

    cppl::telemetry::DecodeCounters decode;
    std::int64_t foreign = 0;        // valid messages of another run or world size
    std::int64_t lostTotal = 0;
    std::int64_t senderDroppedTotal = 0;
    std::int64_t coalescedTotal = 0; // received, superseded by a newer message in the same batch, not decoded
    std::int64_t authRejected = 0;   // filled by Collector (ZAP denials, failed handshakes)

    std::string resultJson;          // rank 0's aggregated result, once it arrived
    std::optional<bool> resultMatches; // the live merge equals that result bit for bit; unset until every rank ended
    std::vector<std::string> recentLogs; // "[rank R] line", newest last
};

/**
 * Per-rank state and the exact global merge. Not thread-safe (Collector serialises access).
 * Times are seconds on a monotonic clock chosen by the caller.
 */
class CollectorState
{
public:
    struct Options
    {
        // Only this run's messages count; empty: the first valid message's run is adopted.
        std::string run;
        // 0: adopt the first valid message's world_size. Other world sizes are foreign.
        std::int64_t worldSize = 0;
        // Silence after which a rank that is not done or failed shows as stalled.
        double stallAfterSeconds = 3.0;
        std::size_t roundHistory = 64;
        // The dynamic schedule: every rank's windows_total is the run's windows (the agents send
        // it so), not its share: the run's total is that number, not their sum.
        bool windowsGlobal = false;
        std::size_t logHistory = 200;
    };

    explicit CollectorState(Options options);

    /// Decodes and applies one message; false when it was dropped (counted).
    bool ingest(std::string_view bytes, double now);
    /// Applies a decoded message; false when it was dropped (foreign or duplicate).
    bool apply(const cppl::telemetry::Message &m, double now);
    /// A progress or heartbeat of a rank already heard from, superseded by a newer one of the same
    /// rank and kind that will be applied next (markSuperseded()): counted (seq, received,
    /// coalesced) but not decoded. false when it is not this run's (the caller ingest()s it).
    bool skipSuperseded(const PeekedHeader &header, double now);
    /// True when some rank became stalled since the last call (views should refresh).
    bool checkStalls(double now);

    [[nodiscard]] Snapshot snapshot(double now);
    [[nodiscard]] std::int64_t foreign() const noexcept { return m_foreign; }
    /// The message ingest() last decoded (valid after it returned true).
    [[nodiscard]] const cppl::telemetry::Message &lastMessage() const noexcept { return m_scratch; }

private:
    struct Entry
    {
        RankView view;
        RankState base = RankState::Connecting;
        std::int64_t firstSeq = 0;
        std::uint64_t window = 0;        // bit d: seq (lastSeq - d) arrived
        std::int64_t progressSeq = -1;   // newest progress applied (older ones never replace it)
        std::int64_t stateSeq = -1;      // newest message that set the base state
        double lastSeen = 0;
        bool stalled = false;
        bool dirty = true;               // local figures need recomputing
        bool hasWords = false;
        cppl::NllStats::Words words{};
        bool hasRefWords = false;
        ReferenceLive::Words refWords{};
    };

    struct RoundAcc
    {
        std::int64_t roundsTotal = 0;
        std::int64_t reported = 0;
        std::int64_t minRank = -1;
        double minWait = std::numeric_limits<double>::infinity();
        double maxWait = 0;
        double maxTransfer = 0;
    };

    Entry &entry(std::int64_t rank);
    // apply()'s kinds that change more than a field or two.
    void setState(Entry &e, RankState s, std::int64_t seq);
    void applyProgress(Entry &e, const cppl::telemetry::Message &m);
    void applyReference(Entry &e, const std::optional<cppl::telemetry::Progress::Reference> &r);
    void applySync(Entry &e, const cppl::telemetry::Message &m);
    void applyBye(Entry &e, const cppl::telemetry::Message &m);
    /// Rank @p r's view in @p s, and its part of the run's totals.
    void addRank(Snapshot &s, std::size_t r, double now);
    /// Sequence bookkeeping for one message of @p e's rank; false for a duplicate (counted).
    bool noteSeq(Entry &e, std::int64_t seq);

    Options m_options;
    cppl::telemetry::Message m_scratch;
    cppl::telemetry::DecodeCounters m_decode;
    std::int64_t m_foreign = 0;
    std::int64_t m_sequence = 0;
    std::vector<std::unique_ptr<Entry>> m_ranks;
    // Elementwise int64 sum of every rank's latest NllStats::toWords(): integer addition and
    // subtraction are exact, so replacing a rank's totals costs 18 words, not a full re-merge.
    cppl::NllStats::Words m_globalWords{};
    ReferenceLive::Words m_refGlobalWords{}; // the same for the ranks' running comparisons
    bool m_hasReference = false;
    std::map<std::int64_t, RoundAcc> m_rounds;
    std::deque<std::string> m_logs;
    std::string m_resultJson;
    std::optional<cppl::NllStats> m_resultStats;
};

} // namespace cppl::core::telemetry
