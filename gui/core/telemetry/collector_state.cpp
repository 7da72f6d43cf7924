// SPDX-License-Identifier: MIT
#include "telemetry/collector_state.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cppl::core::telemetry {

using cppl::telemetry::Kind;
using cppl::telemetry::Message;
using cppl::telemetry::Phase;

namespace {
constexpr std::array<std::string_view, kRankStateCount> kStateNames{"connecting", "loading", "evaluating", "syncing",
                                                                    "done",       "failed",  "stalled"};
constexpr int kSeqWindow = 64; // late messages up to 64 behind still fill their gap

bool terminal(RankState s) noexcept
{
    return s == RankState::Done || s == RankState::Failed;
}

RankState fromPhase(Phase p) noexcept
{
    switch (p) {
    case Phase::Connecting:
        return RankState::Connecting;
    case Phase::Loading:
        return RankState::Loading;
    case Phase::Syncing:
        return RankState::Syncing;
    case Phase::Evaluating:
    case Phase::Finishing:
        break;
    }
    return RankState::Evaluating;
}

double share(double part, double whole) noexcept
{
    return whole > 0 ? std::clamp(part / whole, 0.0, 1.0) : 0.0;
}
} // namespace

std::string_view rankStateName(RankState s) noexcept
{
    return kStateNames[static_cast<std::size_t>(s)];
}

double ReferenceLive::kldMean() const noexcept
{
    return tokens > 0 ? kld.toDouble() / static_cast<double>(tokens) : std::numeric_limits<double>::quiet_NaN();
}

double ReferenceLive::sameTopShare() const noexcept
{
    return tokens > 0 ? static_cast<double>(sameTop) / static_cast<double>(tokens) : std::numeric_limits<double>::quiet_NaN();
}

ReferenceLive::Words ReferenceLive::toWords() const noexcept
{
    Words w{};
    const auto limbs = kld.limbs();
    std::copy(limbs.begin(), limbs.end(), w.begin());
    w[limbs.size()] = tokens;
    w[limbs.size() + 1] = sameTop;
    return w;
}

ReferenceLive ReferenceLive::fromReducedWords(const Words &sum) noexcept
{
    cppl::ExactSum::Limbs limbs{};
    std::copy_n(sum.begin(), limbs.size(), limbs.begin());
    ReferenceLive r;
    r.kld = cppl::ExactSum::fromReducedLimbs(limbs);
    r.tokens = sum[limbs.size()];
    r.sameTop = sum[limbs.size() + 1];
    return r;
}

CollectorState::CollectorState(Options options) : m_options(std::move(options)) {}

CollectorState::Entry &CollectorState::entry(std::int64_t rank)
{
    const auto r = static_cast<std::size_t>(rank);
    if (r >= m_ranks.size())
        m_ranks.resize(r + 1);
    if (!m_ranks[r]) {
        m_ranks[r] = std::make_unique<Entry>();
        m_ranks[r]->view.rank = rank;
    }
    return *m_ranks[r];
}

bool CollectorState::ingest(std::string_view bytes, double now)
{
    const auto r = cppl::telemetry::decode(bytes, m_scratch);
    m_decode.count(r.error);
    return r.ok() && apply(m_scratch, now);
}

bool CollectorState::apply(const Message &m, double now)
{
    const auto &h = m.header;
    if (m_options.run.empty())
        m_options.run = h.run;
    if (m_options.worldSize == 0)
        m_options.worldSize = h.worldSize;
    if (h.run != m_options.run || h.worldSize != m_options.worldSize) {
        ++m_foreign;
        return false;
    }
    Entry &e = entry(h.rank);
    RankView &v = e.view;

    if (!noteSeq(e, h.seq))
        return false;
    ++v.received;
    e.lastSeen = now;
    e.dirty = true;
    if (e.stalled)
        e.stalled = false;
    v.host = h.host;
    v.group = h.group;
    v.localRank = h.localRank;
    v.senderDropped = std::max(v.senderDropped, h.droppedTotal);

    switch (h.kind) {
    case Kind::Hello:
    case Kind::Heartbeat: setState(e, fromPhase(m.phase), h.seq); break;
    case Kind::Progress: applyProgress(e, m); break;
    case Kind::Sync: applySync(e, m); break;
    case Kind::Log:
        v.lastLog = m.text;
        m_logs.push_back("[rank " + std::to_string(h.rank) + "] " + m.text);
        while (m_logs.size() > m_options.logHistory)
            m_logs.pop_front();
        break;
    case Kind::Result:
        setState(e, RankState::Done, h.seq);
        if (!m.resultJson.empty()) {
            m_resultJson = m.resultJson;
            m_resultStats = cppl::telemetry::resultStats(m_resultJson);
        }
        break;
    case Kind::Error:
        v.error = m.text;
        v.exitCode = m.exitCode;
        e.base = RankState::Failed; // whatever came before
        e.stateSeq = h.seq;
        break;
    case Kind::Bye: applyBye(e, m); break;
    }
    return true;
}

void CollectorState::setState(Entry &e, RankState s, std::int64_t seq)
{
    // An ended rank stays ended, and an older message never overrides a newer one's state.
    if (terminal(e.base) || seq < e.stateSeq)
        return;
    e.base = s;
    e.stateSeq = seq;
}

void CollectorState::applyProgress(Entry &e, const Message &m)
{
    setState(e, RankState::Evaluating, m.header.seq);
    if (m.header.seq <= e.progressSeq)
        return; // older totals than what we have
    e.progressSeq = m.header.seq;
    const auto &p = m.progress;
    // A tensor-parallel follower scores its leader's windows: the group's totals are the leader's,
    // counted once; a follower's own (an agent that sent them) count nowhere.
    const bool follower = p.tpRank.value_or(0) > 0;
    const auto stats = follower ? cppl::NllStats() : p.stats();
    const auto words = stats.toWords();
    for (std::size_t i = 0; i < words.size(); ++i)
        m_globalWords[i] += words[i] - (e.hasWords ? e.words[i] : 0);
    e.words = words;
    e.hasWords = true;
    RankView &v = e.view;
    v.hasProgress = true;
    v.stats = stats;
    v.tokensPerSecond = follower ? 0.0 : p.tokensPerSecond;
    v.windowsDone = follower ? 0 : p.windowsDone;
    v.windowsTotal = follower ? 0 : p.windowsTotal;
    v.tpSize = p.tpSize.value_or(1);
    v.tpRank = p.tpRank.value_or(0);
    v.tpCollectiveSeconds = p.tpCollectiveSecondsTotal.value_or(0.0);
    v.computeSeconds = p.computeSecondsTotal;
    v.waitSeconds = p.commWaitSecondsTotal;
    v.transferSeconds = p.commTransferSecondsTotal;
    v.rssBytes = p.rssBytes;
    v.deviceMemoryBytes = p.deviceMemoryBytes;
    v.deviceMemoryTotalBytes = p.deviceMemoryTotalBytes;
    v.gpuUtilizationPercent = p.gpuUtilizationPercent;
    applyReference(e, follower ? std::nullopt : p.reference);
}

/// The rank's running comparison into the exact merge, as its NLL sums (a rank that stops sending
/// one keeps its last: the sums are cumulative).
void CollectorState::applyReference(Entry &e, const std::optional<cppl::telemetry::Progress::Reference> &r)
{
    if (!r)
        return;
    ReferenceLive live;
    live.tokens = r->tokens;
    live.kld = r->kld;
    live.sameTop = r->sameTop;
    const auto words = live.toWords();
    for (std::size_t i = 0; i < words.size(); ++i)
        m_refGlobalWords[i] += words[i] - (e.hasRefWords ? e.refWords[i] : 0);
    e.refWords = words;
    e.hasRefWords = true;
    m_hasReference = true;
    e.view.reference = live;
}

void CollectorState::applySync(Entry &e, const Message &m)
{
    setState(e, RankState::Evaluating, m.header.seq);
    auto &acc = m_rounds[m.sync.round];
    acc.roundsTotal = m.sync.roundsTotal;
    ++acc.reported;
    if (m.sync.waitSeconds < acc.minWait || (m.sync.waitSeconds == acc.minWait && m.header.rank < acc.minRank)) {
        acc.minWait = m.sync.waitSeconds;
        acc.minRank = m.header.rank;
    }
    acc.maxWait = std::max(acc.maxWait, m.sync.waitSeconds);
    acc.maxTransfer = std::max(acc.maxTransfer, m.sync.transferSeconds);
    while (m_rounds.size() > m_options.roundHistory)
        m_rounds.erase(m_rounds.begin());
}

void CollectorState::applyBye(Entry &e, const Message &m)
{
    if (m.exitCode)
        e.view.exitCode = m.exitCode;
    if (m.exitCode && *m.exitCode != 0) {
        e.base = RankState::Failed;
        e.stateSeq = m.header.seq;
    } else {
        setState(e, RankState::Done, m.header.seq);
    }
}

bool CollectorState::noteSeq(Entry &e, std::int64_t seq)
{
    RankView &v = e.view;
    // Sequence bookkeeping: gaps count as lost until a late message fills them.
    if (!v.heard) {
        v.heard = true;
        e.firstSeq = seq; // joined mid-stream (e.g. after a collector restart): no gap before it
        e.window = 1;
        v.lastSeq = seq;
    } else if (seq > v.lastSeq) {
        const std::int64_t d = seq - v.lastSeq;
        v.lost += d - 1;
        e.window = d >= kSeqWindow ? 1 : (e.window << d) | 1;
        v.lastSeq = seq;
    } else {
        const std::int64_t d = v.lastSeq - seq;
        if (d < kSeqWindow && (e.window >> d) & 1) {
            ++v.duplicates;
            return false;
        }
        if (d < kSeqWindow)
            e.window |= std::uint64_t{1} << d;
        ++v.reordered;
        if (seq > e.firstSeq && d < kSeqWindow && v.lost > 0)
            --v.lost;
    }
    return true;
}

bool CollectorState::skipSuperseded(const PeekedHeader &h, double now)
{
    if (h.run != m_options.run || h.worldSize != m_options.worldSize || h.rank < 0 || h.rank >= h.worldSize)
        return false;
    const auto r = static_cast<std::size_t>(h.rank);
    if (r >= m_ranks.size() || !m_ranks[r] || !m_ranks[r]->view.heard)
        return false; // a rank's first message is always decoded (host, group)
    Entry &e = *m_ranks[r];
    ++e.view.coalesced; // received, not decoded (a duplicate too)
    if (!noteSeq(e, h.seq))
        return true;
    ++e.view.received;
    e.lastSeen = now;
    e.stalled = false;
    return true;
}

bool CollectorState::checkStalls(double now)
{
    bool changed = false;
    for (auto &p : m_ranks) {
        if (!p || !p->view.heard || terminal(p->base))
            continue;
        const bool stalled = now - p->lastSeen > m_options.stallAfterSeconds;
        if (stalled && !p->stalled)
            changed = true;
        p->stalled = stalled;
    }
    return changed;
}

Snapshot CollectorState::snapshot(double now)
{
    checkStalls(now);
    Snapshot s;
    s.sequence = ++m_sequence;
    s.run = m_options.run;
    s.worldSize = m_options.worldSize;
    s.global = cppl::NllStats::fromReducedWords(m_globalWords);
    s.globalPpl = cppl::computePerplexity(s.global);
    if (m_hasReference)
        s.reference = ReferenceLive::fromReducedWords(m_refGlobalWords);
    s.decode = m_decode;
    s.foreign = m_foreign;

    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(m_options.worldSize, 0));
    if (m_ranks.size() < n)
        m_ranks.resize(n);
    s.ranks.reserve(n);
    for (std::size_t r = 0; r < n; ++r)
        addRank(s, r, now);

    s.windowsGlobal = m_options.windowsGlobal;
    // A rank lost in a run that goes on keeps the windows it counted, and the others redo the
    // uncommitted ones: never more done than the run has.
    if (m_options.windowsGlobal)
        s.windowsDone = std::min(s.windowsDone, s.windowsTotal);

    s.rounds.reserve(m_rounds.size());
    for (const auto &[round, acc] : m_rounds) {
        RoundView rv;
        rv.round = round;
        rv.roundsTotal = acc.roundsTotal;
        rv.reported = acc.reported;
        rv.straggler = acc.minRank;
        rv.stragglerLagSeconds = acc.maxWait - (std::isfinite(acc.minWait) ? acc.minWait : 0);
        rv.maxTransferSeconds = acc.maxTransfer;
        s.rounds.push_back(rv);
    }
    s.resultJson = m_resultJson;
    // Judged once every rank has said its last word (Result, Bye or Error): until then a rank's
    // final sums may still be on the way (each rank's stream is ordered, the ranks' are not with
    // each other), and a merge without them would differ from rank 0's result for a moment.
    const std::int64_t ended = s.stateCounts[static_cast<std::size_t>(RankState::Done)]
                               + s.stateCounts[static_cast<std::size_t>(RankState::Failed)];
    if (m_resultStats && n > 0 && ended == static_cast<std::int64_t>(n))
        s.resultMatches = m_resultStats->nll == s.global.nll && m_resultStats->nllSquared == s.global.nllSquared
                          && m_resultStats->tokens == s.global.tokens;
    s.recentLogs.assign(m_logs.begin(), m_logs.end());
    return s;
}

void CollectorState::addRank(Snapshot &s, std::size_t r, double now)
{
    if (!m_ranks[r]) {
        RankView v;
        v.rank = static_cast<std::int64_t>(r);
        s.ranks.push_back(std::move(v));
        ++s.stateCounts[static_cast<std::size_t>(RankState::Connecting)];
        return;
    }
    Entry &e = *m_ranks[r];
    RankView &v = e.view;
    if (e.dirty) {
        v.local = cppl::computePerplexity(v.stats);
        const double wall = v.computeSeconds + v.waitSeconds + v.transferSeconds;
        v.waitShare = share(v.waitSeconds, wall);
        v.transferShare = share(v.transferSeconds, wall);
        v.commShare = std::min(1.0, v.waitShare + v.transferShare);
        e.dirty = false;
    }
    if (v.hasProgress && v.stats.tokens > 0 && s.global.tokens > 0) {
        v.deviation = v.local.ppl - s.globalPpl.ppl;
        v.deviationRelative = v.local.ppl / s.globalPpl.ppl - 1;
        const double seMean = v.local.ppl > 0 ? v.local.pplStderr / v.local.ppl : 0;
        v.deviationSigma = seMean > 0 && std::isfinite(seMean) ? (v.local.meanNll - s.globalPpl.meanNll) / seMean : 0;
    }
    v.silentSeconds = v.heard ? now - e.lastSeen : 0;
    v.state = e.stalled && !terminal(e.base) ? RankState::Stalled : e.base;
    ++s.stateCounts[static_cast<std::size_t>(v.state)];
    s.tokensPerSecond += v.state == RankState::Evaluating || v.state == RankState::Syncing ? v.tokensPerSecond : 0;
    s.windowsDone += v.windowsDone;
    s.windowsTotal = m_options.windowsGlobal ? std::max(s.windowsTotal, v.windowsTotal) : s.windowsTotal + v.windowsTotal;
    s.lostTotal += v.lost;
    s.senderDroppedTotal += v.senderDropped;
    s.coalescedTotal += v.coalesced;
    s.ranks.push_back(v);
}

} // namespace cppl::core::telemetry
