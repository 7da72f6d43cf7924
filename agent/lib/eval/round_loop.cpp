// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 6 (round_loop.h): the rounds, static or dynamic, with overlap and
// lost ranks; the ledger, checkpoint and regroup lines; the closing gather.
#include "round_loop.h"

#include "evaluator.h"
#include "fault_hooks.h"
#include "run_fingerprint.h"
#include "tensor_parallel_driver.h"
#include "distributed/rendezvous_store.h"
#include "telemetry/publisher.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>
#include <utility>

namespace cppl::agent {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

std::string clock(double seconds)
{
    if (!std::isfinite(seconds) || seconds < 0)
        return "--:--";
    const auto s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    return buf;
}

RoundLoop::RoundLoop(const EvalOptions &options, const RoundLoopIo &io, WindowScorer &scorer, const EvalInput &input, const EvalPlan &plan)
    : m_o(options),
      m_out(io.out),
      m_err(io.err),
      m_run(io.run),
      m_tel(io.telemetry),
      m_fingerprint(io.fingerprint),
      m_tpLeader(io.tpLeader),
      m_scorer(scorer),
      m_input(input),
      m_plan(plan.windows),
      m_shards(plan.shards),
      m_hooks(faultHooks()),
      m_distributed(options.distributed),
      m_dynamic(options.distributed && options.schedule == dist::Schedule::Dynamic),
      m_batch(options.batch),
      m_nWindows(static_cast<std::int64_t>(plan.windows.windows.size())),
      m_batchCount((m_nWindows + options.batch - 1) / options.batch),
      m_resume(options.resume ? &*options.resume : nullptr),
      // A resumed run: the committed global totals are rank 0's constant contribution (they
      // already hold the document totals), and the ledger's batches are not evaluated again.
      m_base(m_resume ? NllStats::fromReducedWords(m_resume->words) : NllStats()),
      m_firstRound(m_resume ? m_resume->round + 1 : 0),
      // Dynamic: a rank has no share of its own (it claims batches as it goes): the telemetry's
      // windows_total is the run's, the same on every rank (the collector takes it so).
      m_windowsExpected(m_dynamic ? m_nWindows : plan.shards[static_cast<std::size_t>(options.shardRank)].windows()),
      m_slow(m_hooks.slows(options.identity.rank)),
      // Before a round's collective every rank names its batches of the round; after it rank 0
      // gives the round's exact global words (checkpoint.h). One short stdout line each.
      m_checkpoints(options.distributed && options.checkpointLines),
      // A tolerant run: the others stay (their watchdogs watching) until the reporting rank has
      // written the result (dist::kReportedKey); if it is lost first, they regroup and the next lowest
      // rank writes it. The reporter finishes after writing (EvalSession::run()).
      m_tolerantReport(m_dynamic && m_run->tolerant()),
      m_global(m_base)
{
    if (scorer.comparesReference()) {
        m_ref.emplace();
        m_refGlobal.emplace();
    }
    if (m_resume && options.shardRank == 0) {
        m_stats = m_base;
    } else if (options.shardRank == 0) { // document totals (text input): counted once, by rank/shard 0
        m_stats.bytes = input.bytes;
        m_stats.words = input.words;
    }
}

EvalOutcome RoundLoop::run()
{
    planRounds();
    startClock();
    openPipeline();
    runRounds();
    m_seconds = secondsSince(m_evalStart);
    if (m_distributed) {
        gatherReports();
        holdResultForTests(); // before the reporter looks for ranks lost meanwhile
        if (m_schedule && m_run->reporter())
            collectRankRows();
        if (m_ref && m_run->reporter())
            collectReferenceRows();
        if (!m_tolerantReport || !m_run->reporter())
            m_run->finish();
        checkEveryBatchCounted();
    }
    publishProgress(true, 0); // this rank's complete totals, before its result
    checkFinite();
    return outcome();
}

/// Static: every rank's rounds, planned before the run. Dynamic: the schedule that hands out
/// global batches (a resumed run: those not in its ledger).
void RoundLoop::planRounds()
{
    if (!m_dynamic) {
        m_rounds.emplace(m_plan, m_shards, m_distributed ? m_o.syncEvery : kSyncAtEnd, m_batch);
        return;
    }
    std::vector<std::int64_t> windowsOf;
    for (std::int64_t b = 0; b < m_nWindows; b += m_batch)
        windowsOf.push_back(std::min(m_batch, m_nWindows - b));
    m_schedule.emplace(*m_run, batchTokens(m_plan, m_batch), m_o.syncEvery, "cppl/sched/next",
                       m_resume ? std::optional(dist::remainingBatches(m_batchCount, m_resume->ledger)) : std::nullopt, std::move(windowsOf));
    // The document totals (and a resume's committed words) are known to every rank: they travel
    // in the schedule's carry, so they survive the loss of rank 0 (whose own totals still hold
    // them, for its telemetry and report) or of several ranks at once.
    NllStats constant = m_base;
    if (!m_resume) {
        constant.bytes = m_input.bytes;
        constant.words = m_input.words;
    }
    const NllStats::Words constantWords = constant.toWords();
    std::vector<std::int64_t> all(constantWords.begin(), constantWords.end());
    all.resize(roundWords().size(), 0); // the reference's sums start from nothing on every rank
    m_schedule->setConstant(all, m_o.shardRank == 0);
}

void RoundLoop::startClock()
{
    m_lastPrint = Clock::now() - std::chrono::seconds(10);
    m_evalStart = Clock::now();
    if (m_tel)
        m_tel->phase(cppl::telemetry::Phase::Evaluating);
}

/// The rounds' collectives go through a RoundPipeline (round_pipeline.h): with --overlap-sync on,
/// round r's aggregation runs on this rank's communication thread while round r+1 is computed,
/// and round r completes (global totals, checkpoint, rank 0's line) only then. Tolerant runs too:
/// a lost rank ends the round in flight, and this thread regroups once the communication thread
/// is idle (regroupBehind()). A tolerant run without overlap keeps its collectives in
/// DynamicSchedule::sync, which regroups itself.
void RoundLoop::openPipeline()
{
    if (m_distributed && (!m_run->tolerant() || m_o.overlapSync))
        m_pipe.emplace(*m_run, m_o.overlapSync);
    m_tolerantPipe = m_pipe && m_run->tolerant();
    m_overlapRan = m_pipe && m_pipe->overlapping();
}

void RoundLoop::runRounds()
{
    // Dynamic: a second call (a rank lost after the last round: the survivors regrouped) goes on
    // counting where the first stopped.
    for (int r = m_dynamic ? m_roundsRun : m_firstRound;; ++r) {
        if (!m_dynamic && r == m_rounds->rounds()) {
            if (m_pipe && m_pipe->inFlight())
                completeFlight(); // the last round's, with nothing left to hide it behind
            return;
        }
        computeRound(r);
        m_roundsRun = (m_dynamic ? r : r - m_firstRound) + 1;
        if (!m_distributed) {
            m_global = m_stats;
            m_refGlobal = m_ref;
            continue;
        }
        const Flight previous = settleFlight(r);
        if (previous == Flight::RunComplete)
            return;
        if (previous == Flight::Regrouped)
            continue;
        if (syncRound(r))
            return;
    }
}

/// This rank's windows of round r: its static share, or the batches it claims until the round's
/// time is up (dynamic).
void RoundLoop::computeRound(int r)
{
    if (m_dynamic) {
        m_schedule->beginRound();
        while (const auto b = m_schedule->next())
            m_schedule->evaluated(*b, evaluateRange(*b * m_batch, std::min(m_nWindows, (*b + 1) * m_batch)));
        return;
    }
    const Shard part = m_rounds->roundOf(m_o.shardRank, r);
    evaluateRange(part.firstWindow, part.endWindow);
}

/// Windows [first, end) into this rank's totals; returns the seconds it took.
double RoundLoop::evaluateRange(std::int64_t first, std::int64_t end)
{
    const auto c0 = Clock::now();
    m_scorer.run(first, end, m_stats, m_ref ? &*m_ref : nullptr, [&](const EvalProgress &p, const NllStats &s) { afterBatch(p, s, c0); });
    const double took = secondsSince(c0);
    m_computeSeconds += took;
    return took;
}

void RoundLoop::afterBatch(const EvalProgress &p, const NllStats &s, Clock::time_point rangeStart)
{
    if (m_slow)
        std::this_thread::sleep_for(m_hooks.slowMs);
    if (m_tel) // the publisher keeps at most 10 per second, the latest totals always
        publishProgress(false, secondsSince(rangeStart));
    if (!m_distributed) // a distributed run prints round lines instead
        printProgress(p, s);
}

void RoundLoop::printProgress(const EvalProgress &p, const NllStats &s)
{
    const auto now = Clock::now();
    if (m_o.quiet || (now - m_lastPrint < std::chrono::milliseconds(500) && p.windowsDone < p.windowsTotal))
        return;
    m_lastPrint = now;
    const double rate = p.seconds > 0 ? static_cast<double>(p.tokensDone) / p.seconds : 0;
    const double eta = rate > 0 ? static_cast<double>(p.tokensTotal - p.tokensDone) / rate : NAN;
    char line[200];
    std::snprintf(line, sizeof line, "[%lld/%lld windows] ppl %.4f  %.0f tok/s  elapsed %s  ETA %s", static_cast<long long>(p.windowsDone),
                  static_cast<long long>(p.windowsTotal), computePerplexity(s).ppl, rate, clock(p.seconds).c_str(), clock(eta).c_str());
    m_err << line << referenceTail() << '\n' << std::flush;
}

void RoundLoop::publishProgress(bool final, double inRound)
{
    if (!m_tel)
        return;
    cppl::telemetry::Progress p;
    p.tokensScoredTotal = m_stats.tokens;
    const double wall = secondsSince(m_evalStart);
    p.tokensPerSecond = wall > 0 ? static_cast<double>(m_stats.tokens) / wall : 0;
    p.windowsDone = m_stats.windows;
    p.windowsTotal = std::max(m_windowsExpected, m_stats.windows);
    p.computeSecondsTotal = m_computeSeconds + inRound;
    if (m_run) {
        p.commWaitSecondsTotal = m_run->comm().waitSeconds;
        p.commTransferSecondsTotal = m_run->comm().transferSeconds;
    }
    p.nll = m_stats.nll;
    p.nllSquared = m_stats.nllSquared;
    if (m_o.tensorParallel > 1) { // the group's leader (its followers publish their own: EvalSession::follow)
        p.tpSize = m_o.tensorParallel;
        p.tpRank = 0;
        p.tpCollectiveSecondsTotal = m_tpLeader ? m_tpLeader->collectiveSeconds() : 0.0;
    }
    if (m_ref) // this rank's own running comparison: the collector merges the ranks' sums exactly
        p.reference = cppl::telemetry::Progress::Reference{m_ref->tokens, m_ref->kld, m_ref->sameTop};
    m_tel->progress(p, final);
}

/// What this rank contributes to a round's sum: its cumulative exact totals (with a reference,
/// the comparison's after them).
std::vector<std::int64_t> RoundLoop::roundWords() const
{
    const NllStats::Words own = m_stats.toWords();
    std::vector<std::int64_t> words(own.begin(), own.end());
    if (m_ref)
        m_ref->appendWords(words, m_run->rank(), m_run->worldSize());
    return words;
}

void RoundLoop::takeGlobal(std::span<const std::int64_t> words)
{
    NllStats::Words own{};
    std::copy_n(words.begin(), own.size(), own.begin());
    m_global = NllStats::fromReducedWords(own);
    if (m_ref)
        m_refGlobal = ReferenceStats::fromReducedWords(words.subspan(own.size()), m_run->worldSize());
}

/// The running comparison for the progress and round lines ("" without a reference).
std::string RoundLoop::referenceTail() const
{
    const ReferenceStats *s = m_distributed ? (m_refGlobal ? &*m_refGlobal : nullptr) : (m_ref ? &*m_ref : nullptr);
    return s && s->tokens > 0 ? "  " + figuresLine(referenceFigures(*s)) : std::string();
}

/// Round r-1's result, now that round r is computed (its collective ran behind round r). A
/// tolerant run that lost a rank meanwhile regroups instead. Dynamic and complete: every queue
/// was empty when round r-1 was submitted, so round r evaluated nothing.
RoundLoop::Flight RoundLoop::settleFlight(int r)
{
    if (m_pipe && m_pipe->inFlight()) {
        bool lost = false;
        try {
            if (completeFlight())
                return Flight::RunComplete;
        } catch (const dist::RankLostError &) {
            if (!m_tolerantPipe)
                throw;
            lost = true;
        }
        if (lost) {
            regroupBehind(r);
            return Flight::Regrouped;
        }
    }
    if (m_tolerantPipe && m_run->lossPending()) { // not worth a collective that would fail at once
        regroupBehind(r);
        return Flight::Regrouped;
    }
    return Flight::None;
}

/// Round r's collective: the ledger line, then this rank's words summed over the ranks (behind
/// the next round's compute with overlap). True when the run is complete.
bool RoundLoop::syncRound(int r)
{
    // Dynamic: the schedule counts rounds (after a regrouping, the survivors' agreed count).
    const int committed = m_dynamic ? m_firstRound + m_schedule->rounds() : r;
    ledger(committed);
    std::vector<std::int64_t> words = roundWords();
    if (m_pipe) {
        m_pipe->submit(m_schedule ? m_schedule->prepare(words) : std::vector<std::int64_t>(words.begin(), words.end()));
        m_flightRound = r;
        m_flightCommitted = committed;
        return !m_pipe->overlapping() && completeFlight();
    }
    if (m_tel)
        m_tel->phase(cppl::telemetry::Phase::Syncing);
    const CommMark mark = commMark();
    const bool allDone = m_schedule->sync(words); // tolerant: regroups around a lost rank
    return roundComplete(r, committed, words, allDone, mark);
}

/// The round in flight: waits for its collective, then completes it.
bool RoundLoop::completeFlight()
{
    if (m_tel)
        m_tel->phase(cppl::telemetry::Phase::Syncing);
    const CommMark mark = commMark();
    const std::vector<std::int64_t> reduced = m_pipe->wait();
    std::vector<std::int64_t> words(roundWords().size());
    bool allDone = false;
    if (m_schedule)
        allDone = m_schedule->complete(reduced, words);
    else
        std::copy_n(reduced.begin(), words.size(), words.begin());
    return roundComplete(m_flightRound, m_flightCommitted, words, allDone, mark);
}

/// A tolerant run with overlap, after a loss: the round in flight failed (RankLostError out of
/// wait()) or the loss was seen before submitting. The communication thread is idle, so this
/// thread regroups as DynamicSchedule::sync does (the survivors agree on the committed round, new
/// communicators, the lost rank's uncommitted batches queued again). This rank's totals hold the
/// round it computed meanwhile: recover() puts all of them in the carry, so they count once, and
/// they go in the ledger line of the first round after the regrouping (under the new epoch: its
/// checkpoint is the first whose words hold them; under the old epoch they could land in a
/// checkpoint of the failed round's number), with that round's own batches: one line per (epoch,
/// round), as the launcher's CheckpointWriter expects.
void RoundLoop::regroupBehind(int r)
{
    if (m_tel)
        m_tel->phase(cppl::telemetry::Phase::Syncing);
    const CommMark mark = commMark();
    std::vector<std::int64_t> words = roundWords();
    m_schedule->recover(words);
    const int first = m_firstRound + m_schedule->rounds();
    roundComplete(r, first, words, false, mark); // the loss's lines; no checkpoint
    m_carriedLedger.insert(m_carriedLedger.end(), m_schedule->roundDone().begin(), m_schedule->roundDone().end());
}

/// Round r's collective is done: the global totals, the checkpoint, telemetry and the reporting
/// rank's line. True when the run is complete (dynamic: every queue was empty).
bool RoundLoop::roundComplete(int r, int committed, std::span<const std::int64_t> words, bool allDone, CommMark mark)
{
    takeGlobal(words);
    if (!m_dynamic) {
        checkpoint(committed);
        reportRound(r, m_rounds->rounds(), mark);
        return false;
    }
    const std::size_t lostBefore = m_lostSeen;
    reportLosses();
    if (m_lostSeen == lostBefore)
        checkpoint(committed); // not for a round whose collective the loss ended (the words are the carry)
    const int done = m_schedule->rounds();
    m_roundsRun = done;
    reportRound(done - 1, allDone ? done : done + std::max(1, roundsLeftEstimate()), mark);
    return allDone;
}

/// Rounds left, estimated from the tokens left at the threshold per rank (telemetry needs a total).
int RoundLoop::roundsLeftEstimate() const
{
    const std::int64_t perRound = std::max<std::int64_t>(1, m_o.syncEvery == kSyncAtEnd ? m_plan.scoredTokens : m_o.syncEvery) * m_run->epochSize();
    return static_cast<int>(std::min<std::int64_t>(1 << 30, (m_plan.scoredTokens - m_global.tokens + perRound - 1) / perRound));
}

/// After round r's collective: telemetry, and the reporting rank's line with the global running figures.
void RoundLoop::reportRound(int r, int total, CommMark mark)
{
    const bool last = r + 1 == total;
    if (m_tel) {
        m_tel->sync({r + 1, std::max(total, r + 1), m_run->comm().waitSeconds - mark.wait, m_run->comm().transferSeconds - mark.transfer});
        m_tel->phase(cppl::telemetry::Phase::Evaluating);
    }
    const auto now = Clock::now();
    if (silent() || (now - m_lastPrint < std::chrono::milliseconds(500) && !last && !m_hooks.everyRoundLine))
        return;
    m_lastPrint = now;
    const std::string line = roundLine(r, total, last, now);
    m_err << line << '\n' << std::flush;
    if (m_tel)
        m_tel->log(cppl::telemetry::LogLevel::Info, line);
}

std::string RoundLoop::roundLine(int r, int total, bool last, Clock::time_point now) const
{
    const double elapsed = std::chrono::duration<double>(now - m_evalStart).count();
    const double rate = elapsed > 0 ? static_cast<double>(m_global.tokens) / elapsed : 0;
    const double eta = rate > 0 ? static_cast<double>(m_plan.scoredTokens - m_global.tokens) / rate : NAN;
    const double comm = m_run->comm().waitSeconds + m_run->comm().transferSeconds;
    // Dynamic: the total is an estimate until the last round.
    const std::string of = m_dynamic && !last ? "~" + std::to_string(total) : std::to_string(total);
    char line[256];
    std::snprintf(line, sizeof line, "[round %d/%s] ppl %.4f  %lld/%lld tokens  %.0f tok/s (all ranks)  comm %.2f%%  elapsed %s  ETA %s", r + 1,
                  of.c_str(), computePerplexity(m_global).ppl, static_cast<long long>(m_global.tokens), static_cast<long long>(m_plan.scoredTokens),
                  rate, elapsed > 0 ? 100.0 * comm / elapsed : 0.0, clock(elapsed).c_str(), clock(eta).c_str());
    return line + referenceTail();
}

/// Before round r's collective: this rank's batches of the round (checkpoint.h).
void RoundLoop::ledger(int r)
{
    if (!m_checkpoints)
        return;
    std::vector<dist::BatchRun> mine;
    if (m_schedule) {
        mine = std::exchange(m_carriedLedger, {});
        mine.insert(mine.end(), m_schedule->roundDone().begin(), m_schedule->roundDone().end());
    } else {
        const Shard part = m_rounds->roundOf(m_o.shardRank, r);
        dist::addWindowsAsBatches(mine, part.firstWindow, part.endWindow, m_batch);
    }
    m_out << dist::ledgerLine(m_run->rank(), r, mine, m_run->epoch()) << '\n' << std::flush;
}

/// After round r's collective, the reporting rank: the round's exact global words, once the run's
/// fingerprint is hashed (a later round covers this one: the words are cumulative).
void RoundLoop::checkpoint(int r)
{
    if (!m_checkpoints || !m_run->reporter() || r < m_checkpointsFrom)
        return;
    const dist::RunFingerprint *fingerprint = m_fingerprint.ready(*m_run, m_o.distOptions.timeout);
    if (!fingerprint)
        return;
    cppl::lines::Checkpoint c = dist::checkpointOf(r, m_global.toWords(), *fingerprint, dist::scheduleName(m_o.schedule), m_run->worldSize(),
                                                   m_o.syncEvery, m_batchCount, m_o.batch, m_run->epoch());
    if (const std::size_t pad = m_hooks.longLines; pad > 0) // a line srun -l cuts (docs/testing.md)
        c.more.emplace_back("test_padding", '"' + std::string(pad, 'x') + '"');
    m_out << cppl::lines::encode(c) << '\n' << std::flush;
}

/// A rank lost and the survivors regrouped (--on-rank-loss continue): the reporting rank says so,
/// and with checkpoints names the epoch, the first round whose checkpoint is complete again and
/// every lost rank's batches that count (the launcher's ledger replaces theirs by these).
void RoundLoop::reportLosses()
{
    if (!m_schedule)
        return;
    const auto &lost = m_schedule->lostRanks();
    if (m_lostSeen == lost.size())
        return;
    std::int64_t redone = 0;
    for (const auto &b : m_schedule->redone())
        redone += b.end - b.first;
    for (; m_lostSeen < lost.size(); ++m_lostSeen) {
        const auto &l = lost[m_lostSeen];
        const auto said = dist::rankLost(l.rank, m_run->hosts()[static_cast<std::size_t>(l.rank)], l.cause, l.round, l.windows, redone,
                                         m_run->epochSize());
        const std::string line = dist::recoveredText(said); // for humans; nothing parses it
        if (m_run->reporter()) { // a note, not progress: --quiet keeps it (a run that exits 0 says whom it lost)
            m_err << line << '\n' << std::flush;
            if (m_checkpoints) // the launcher's word of it (docs/agent-lines.md)
                m_out << dist::rankLostLine(said) << '\n' << std::flush;
        }
        if (m_tel)
            m_tel->log(cppl::telemetry::LogLevel::Warning, line);
    }
    announceRegroup();
}

/// The survivors' next round: the ledger lines of the rounds before it that a survivor printed
/// are in the carry, as are a rank ahead's of this round.
void RoundLoop::announceRegroup()
{
    m_checkpointsFrom = m_firstRound + m_schedule->rounds();
    if (!m_checkpoints || !m_run->reporter())
        return;
    std::vector<dist::RegroupLost> named;
    for (const auto &l : m_schedule->lostRanks())
        named.push_back({l.rank, m_firstRound + l.round - 1, l.committed});
    m_out << dist::regroupLine(m_run->epoch(), m_checkpointsFrom, named) << '\n' << std::flush;
}

RoundLoop::CommMark RoundLoop::commMark() const
{
    return {m_run->comm().waitSeconds, m_run->comm().transferSeconds};
}

/// Who prints the run's round lines and losses: rank 0, or after it is lost the lowest survivor.
bool RoundLoop::silent() const
{
    return m_distributed ? m_o.quietAsked || !m_run->reporter() : m_o.quiet;
}

/// Every rank's report, gathered after every rank's ledger is in the store. A rank lost after the
/// last round: regroup and gather again.
void RoundLoop::gatherReports()
{
    for (;;) {
        const dist::RankReport mine = myReport();
        publishBatches();
        publishReference();
        try {
            m_reports = m_run->gather(mine, followerRows());
            if (m_tolerantReport)
                awaitReport();
            return;
        } catch (const dist::RankLostError &e) {
            if (!m_schedule)
                throw;
            m_err << "clusterppl-agent: " << e.what() << "; regrouping after the last round\n" << std::flush;
        }
        if (!regroupAfterTheLastRound())
            return;
        m_seconds = secondsSince(m_evalStart);
    }
}

dist::RankReport RoundLoop::myReport() const
{
    dist::RankReport mine;
    const bool carries = m_resume && m_o.shardRank == 0; // rank 0's totals include the resumed base
    mine.tokens = m_stats.tokens - (carries ? m_base.tokens : 0);
    mine.windows = m_stats.windows - (carries ? m_base.windows : 0);
    mine.rounds = m_roundsRun;
    mine.tensorParallelSeconds = m_tpLeader ? m_tpLeader->collectiveSeconds() : 0;
    mine.payloadBytes = m_run->comm().payloadBytes;
    mine.computeSeconds = m_computeSeconds;
    mine.waitSeconds = m_run->comm().waitSeconds;
    mine.transferSeconds = m_run->comm().transferSeconds;
    mine.collectiveSeconds = m_run->comm().collectiveSeconds;
    mine.wallSeconds = m_seconds;
    return mine;
}

/// --tensor-parallel, the leader: its followers' rows for the closing gather (no tokens: the
/// group's are in the leader's row), from their own figures.
std::vector<dist::RankReport> RoundLoop::followerRows() const
{
    std::vector<dist::RankReport> rows;
    if (!m_tpLeader)
        return rows;
    int tpRank = 0;
    for (const MemberFigures &f : m_tpLeader->followerFigures()) {
        dist::RankReport r;
        r.tpRank = ++tpRank;
        r.rounds = m_roundsRun;
        r.computeSeconds = f.computeSeconds;
        r.tensorParallelSeconds = f.tensorParallelSeconds;
        r.wallSeconds = f.wallSeconds;
        rows.push_back(r);
    }
    return rows;
}

/// Dynamic: this rank's batches through the store, read by the reporting rank for the result.
void RoundLoop::publishBatches()
{
    if (!m_schedule)
        return;
    const std::string runs = dist::formatBatchRuns(m_schedule->done());
    m_run->store().set("cppl/sched/done/" + std::to_string(m_run->rank()), runs);
    if (m_tel)
        m_tel->log(cppl::telemetry::LogLevel::Info, "batches evaluated by rank " + std::to_string(m_run->rank()) + ": "
                                                        + (runs.empty() ? std::string("none") : runs) + " ("
                                                        + std::to_string(m_schedule->claims()) + " claims)");
}

/// With a reference: this rank's own figures through the store, for the result's per-rank rows.
void RoundLoop::publishReference()
{
    if (m_ref)
        m_run->store().set("cppl/ref/rank/" + std::to_string(m_run->rank()), figuresJson(referenceFigures(*m_ref), m_run->rank()));
}

/// The reporting rank: every member's figures (a lost rank's stay unknown: its sums count in the
/// totals as far as they were committed, its own figures were never published).
void RoundLoop::collectReferenceRows()
{
    m_refRanks.assign(static_cast<std::size_t>(m_run->worldSize()), std::string());
    for (int k : m_run->members())
        m_refRanks[static_cast<std::size_t>(k)] = m_run->store().get("cppl/ref/rank/" + std::to_string(k), m_o.distOptions.timeout).value_or("");
}

/// A tolerant run, a rank that does not report: stays until the reporting rank has written the
/// result; throws RankLostError when the reporter is lost first (or regroups after a rank lost in
/// the closing gather), so that this rank regroups and gathers again.
void RoundLoop::awaitReport()
{
    if (m_run->reporter())
        return;
    const int reporter = m_run->members().front();
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
        if (m_run->store().check({dist::kReportedKey})) {
            m_run->store().add(dist::kReportedKey + "/acks", 1); // a reporter that serves the store waits for these
            return;
        }
        const auto losses = m_run->lossesSince(m_run->epoch());
        if (!losses.empty()) {
            const auto &left = losses.back().members;
            if (std::find(left.begin(), left.end(), reporter) == left.end())
                throw dist::RankLostError("rank " + std::to_string(m_run->rank()) + ": rank " + std::to_string(reporter)
                                          + ", which reports for the run, was lost before it wrote the result");
            // A rank lost inside the closing gather can leave it completed here and failed at the
            // reporter (a collective is not atomic): the reporter then regroups, and waits for
            // this rank to say what it holds. Join it.
            if (m_schedule->regroups(reporter))
                throw dist::RankLostError("rank " + std::to_string(m_run->rank()) + ": rank " + std::to_string(reporter)
                                          + ", which reports for the run, regroups after a rank lost in the closing gather");
        }
        std::this_thread::sleep_for(pause);
    }
}

/// A rank was lost after the last round: regroup (its work is all committed: nothing is queued
/// again) and one more round to agree that every queue is empty. False when the reporting rank
/// wrote the result meanwhile: nothing is left to do.
bool RoundLoop::regroupAfterTheLastRound()
{
    try {
        std::vector<std::int64_t> words = roundWords();
        m_schedule->recover(words);
        takeGlobal(words);
        reportLosses();
        runRounds();
        return true;
    } catch (const dist::ResultWrittenError &written) {
        // The gather completed at the reporter, failed here (the lost rank was inside it), and
        // the reporter wrote the result: the run is over.
        m_err << "clusterppl-agent: " << written.what() << '\n' << std::flush;
        if (m_tel)
            m_tel->log(cppl::telemetry::LogLevel::Info, written.what());
        m_run->store().add(dist::kReportedKey + "/acks", 1);
        m_reportedElsewhere = true;
        return false;
    }
}

/// CLUSTERPPL_TEST_HOLD_RESULT: the reporting rank waits after its closing gather.
void RoundLoop::holdResultForTests()
{
    if (!m_run->reporter() || m_hooks.holdResult.forRank(m_run->rank()).count() <= 0)
        return;
    m_err << "clusterppl-agent: rank " << m_run->rank() << ": holding the result for " << m_hooks.holdResult.ms.count()
          << " ms (CLUSTERPPL_TEST_HOLD_RESULT)\n"
          << std::flush;
    std::this_thread::sleep_for(m_hooks.holdResult.ms);
}

/// The reporting rank, dynamic: each rank's batches for the result's rows, and a row for every
/// lost rank (what of its work counts), in rank order.
void RoundLoop::collectRankRows()
{
    m_batchRuns.assign(static_cast<std::size_t>(m_run->worldSize()), std::string());
    for (int k : m_run->members())
        m_batchRuns[static_cast<std::size_t>(k)] = m_run->store().get("cppl/sched/done/" + std::to_string(k), m_o.distOptions.timeout).value_or("");
    if (m_run->tolerant())
        markLostAfterTheEnd();
    addLostRankRows();
    std::sort(m_reports.begin(), m_reports.end(), [](const auto &x, const auto &y) { return x.rank < y.rank; });
}

/// Ranks lost after the gather completed here (after the last round): every batch of theirs is in
/// the totals, and their rows in the gather; the record says they were lost. (A loss that comes
/// after the result is written is the launcher's to say.)
void RoundLoop::markLostAfterTheEnd()
{
    for (const auto &loss : m_run->lossesSince(m_run->epoch())) {
        const auto rep = std::find_if(m_reports.begin(), m_reports.end(), [&](const auto &x) { return x.rank == loss.rank; });
        if (rep == m_reports.end() || rep->lost)
            continue;
        rep->lost = true;
        dist::DynamicSchedule::LostRank l;
        l.rank = loss.rank;
        l.cause = loss.cause;
        l.round = m_schedule->rounds();
        l.committed = dist::parseBatchRuns(m_batchRuns[static_cast<std::size_t>(loss.rank)]).value_or(std::vector<dist::BatchRun>{});
        l.tokens = rep->tokens;
        l.windows = rep->windows;
        m_lostAfterTheEnd.push_back(l);
        const auto said = dist::rankLostAfterLastRound(l.rank, rep->host, l.cause, l.round, l.windows);
        const std::string line = dist::recoveredText(said); // for humans; nothing parses it
        m_err << line << '\n' << std::flush;
        if (m_o.checkpointLines) // the launcher's word of it (docs/agent-lines.md)
            m_out << dist::rankLostLine(said) << '\n' << std::flush;
        if (m_tel)
            m_tel->log(cppl::telemetry::LogLevel::Warning, line);
    }
}

void RoundLoop::addLostRankRows()
{
    for (const auto &l : m_schedule->lostRanks()) {
        m_batchRuns[static_cast<std::size_t>(l.rank)] = dist::formatBatchRuns(l.committed);
        dist::RankReport rep;
        rep.rank = l.rank;
        rep.host = m_run->hosts()[static_cast<std::size_t>(l.rank)];
        rep.group = m_run->groups().groupOf[static_cast<std::size_t>(l.rank)];
        rep.tokens = l.tokens;
        rep.windows = l.windows;
        rep.rounds = l.round;
        rep.lost = true;
        m_reports.push_back(rep);
    }
}

/// Never a silently wrong result: every batch must have been counted exactly once.
void RoundLoop::checkEveryBatchCounted() const
{
    if (!m_schedule || m_reportedElsewhere || (m_global.tokens == m_plan.scoredTokens && m_global.windows == m_nWindows))
        return;
    throw ExitError(kExitCollective, "rank " + std::to_string(m_run->rank()) + ": the ranks' totals cover " + std::to_string(m_global.windows) + " of "
                                         + std::to_string(m_nWindows) + " windows and " + std::to_string(m_global.tokens) + " of "
                                         + std::to_string(m_plan.scoredTokens)
                                         + " tokens: batches were lost or counted twice (a bug; please report it with the ranks' logs)");
}

void RoundLoop::checkFinite() const
{
    if (m_global.nll.rejected() > 0)
        throw ExitError(kExitRuntime, std::to_string(m_global.nll.rejected())
                                          + " token log-probabilities were not finite (NaN/inf): the model overflowed in " + dtypeName(m_o.dtype)
                                          + "; try --dtype float32");
    if (m_refGlobal && m_refGlobal->rejected() > 0)
        throw ExitError(kExitRuntime, std::to_string(m_refGlobal->rejected())
                                          + " values of the comparison with the reference model were not finite (NaN/inf): the reference overflowed in "
                                          + dtypeName(m_o.reference.dtype) + "; try --reference-dtype float32");
}

EvalOutcome RoundLoop::outcome()
{
    EvalOutcome o;
    o.stats = m_global;
    o.rounds = m_roundsRun;
    o.seconds = m_seconds;
    o.reports = std::move(m_reports);
    o.batchRuns = std::move(m_batchRuns);
    o.resumedBase = m_base;
    o.overlapRan = m_overlapRan;
    o.reference = m_refGlobal;
    if (m_distributed)
        o.referenceRanks = std::move(m_refRanks);
    else if (m_ref)
        o.referenceRanks = {figuresJson(referenceFigures(*m_ref), m_o.shardRank)};
    if (m_schedule) {
        o.lostRanks = m_schedule->lostRanks();
        o.lostRanks.insert(o.lostRanks.end(), m_lostAfterTheEnd.begin(), m_lostAfterTheEnd.end());
        o.batchesRedone = dist::formatBatchRuns(m_schedule->redone());
    }
    return o;
}

} // namespace cppl::agent
