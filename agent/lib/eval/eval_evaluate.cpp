// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, step 6 (eval_session.h): the evaluation loop. Static schedule: the
// shards and rounds planned before the run; dynamic: batches claimed from the store as ranks go,
// surviving a lost rank where asked. Progress lines, telemetry, the ledger and checkpoint lines,
// and every rank's report gathered for the result.
#include "eval_session.h"

#include "evaluator.h"
#include "fault_hooks.h"
#include "language_model.h"
#include "distributed/batch_schedule.h"
#include "distributed/round_pipeline.h"
#include "distributed/store.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <utility>

namespace cppl::agent {

/// Step 6: evaluate, in rounds every rank enters alike (the same collectives on every rank,
/// however uneven the work); the totals of every rank, exactly. Static: the shards and rounds
/// planned before the run. Dynamic: batches claimed from the store as ranks go (batch_schedule.h).
EvalOutcome EvalSession::evaluate(LanguageModel &model, const EvalInput &input, const EvalPlan &planned)
{
    const WindowPlan &plan = planned.windows;
    const int shardRank = m_o.shardRank;
    const bool distributed = m_o.distributed;
    const bool dynamic = distributed && m_o.schedule == dist::Schedule::Dynamic;
    const bool quiet = m_o.quiet;
    const std::int64_t batch = m_o.batch;
    const auto nWindows = static_cast<std::int64_t>(plan.windows.size());
    dist::DistributedRun *run = m_run.get();
    telemetry::Publisher *tel = m_tel.get();
    // Who prints the run's round lines and losses: rank 0, or after it is lost the lowest survivor.
    const bool userQuiet = m_a.has("--quiet");
    auto silent = [&] { return distributed ? userQuiet || !run->reporter() : quiet; };

    std::ostream &err = m_err;
    NllStats stats;  // this rank's own tokens, cumulative
    NllStats global; // after each round: every rank's, exactly
    // A resumed run: the committed global totals are rank 0's constant contribution (they
    // already hold the document totals), and the ledger's batches are not evaluated again.
    const dist::ResumeState *resume = m_o.resume ? &*m_o.resume : nullptr;
    const NllStats base = resume ? NllStats::fromReducedWords(resume->words) : NllStats();
    global = base;
    if (resume && shardRank == 0) {
        stats = base;
    } else if (shardRank == 0) { // document totals (text input): counted once, by rank/shard 0
        stats.bytes = input.bytes;
        stats.words = input.words;
    }
    // Checkpoint rounds continue the interrupted run's numbering.
    const int firstRound = resume ? resume->round + 1 : 0;
    Evaluator evaluator(model, std::span<const std::uint32_t>(*planned.flat), plan, batch);
    // On a GPU, one batch before the clock (Evaluator::warmUp); CLUSTERPPL_NO_WARMUP=1 leaves it
    // out, to measure what it saves.
    double warmupSeconds = 0;
    const char *noWarmup = std::getenv("CLUSTERPPL_NO_WARMUP");
    if (model.info().device.is_cuda() && nWindows > 0 && !(noWarmup && std::string_view(noWarmup) == "1")) {
        warmupSeconds = evaluator.warmUp();
        char took[32];
        std::snprintf(took, sizeof took, "%.2f", warmupSeconds);
        if (!quiet)
            err << "warm-up: one batch on " << model.info().device.str() << " in " << took
                << " s (CUDA kernels and cuBLAS loaded; not counted in tokens per second)\n";
    }
    std::optional<RoundPlan> rounds;
    std::optional<dist::DynamicSchedule> schedule;
    if (dynamic) {
        std::vector<std::int64_t> windowsOf;
        for (std::int64_t b = 0; b < nWindows; b += batch)
            windowsOf.push_back(std::min(batch, nWindows - b));
        schedule.emplace(*run, batchTokens(plan, batch), m_o.syncEvery, "cppl/sched/next",
                         resume ? std::optional(dist::remainingBatches(m_batchCount, resume->ledger)) : std::nullopt, std::move(windowsOf));
        // The document totals (and a resume's committed words) are known to every rank: they
        // travel in the schedule's carry, so they survive the loss of rank 0 (whose own totals
        // still hold them, for its telemetry and report) or of several ranks at once.
        NllStats constant = base;
        if (!resume) {
            constant.bytes = input.bytes;
            constant.words = input.words;
        }
        const NllStats::Words constantWords = constant.toWords();
        schedule->setConstant(constantWords, shardRank == 0);
    } else {
        rounds.emplace(plan, planned.shards, distributed ? m_o.syncEvery : kSyncAtEnd, batch);
    }
    auto lastPrint = std::chrono::steady_clock::now() - std::chrono::seconds(10);
    const auto evalStart = std::chrono::steady_clock::now();
    double computeSeconds = 0;
    const Shard &myWork = planned.shards[static_cast<std::size_t>(shardRank)];
    // Dynamic: a rank has no share of its own (it claims batches as it goes): the telemetry's
    // windows_total is the run's, the same on every rank (the collector takes it so).
    const std::int64_t windowsExpected = dynamic ? nWindows : myWork.windows();
    const FaultHooks &hooks = faultHooks();
    const bool slow = hooks.slows(m_o.identity.rank);
    auto publishProgress = [&](bool final, double inRound) {
        if (!tel)
            return;
        cppl::telemetry::Progress p;
        p.tokensScoredTotal = stats.tokens;
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
        p.tokensPerSecond = wall > 0 ? static_cast<double>(stats.tokens) / wall : 0;
        p.windowsDone = stats.windows;
        p.windowsTotal = std::max(windowsExpected, stats.windows);
        p.computeSecondsTotal = computeSeconds + inRound;
        if (run) {
            p.commWaitSecondsTotal = run->comm().waitSeconds;
            p.commTransferSecondsTotal = run->comm().transferSeconds;
        }
        p.nll = stats.nll;
        p.nllSquared = stats.nllSquared;
        tel->progress(p, final);
    };
    // Windows [first, end) into this rank's totals; returns the seconds it took.
    auto evaluateRange = [&](std::int64_t first, std::int64_t end) {
        const auto c0 = std::chrono::steady_clock::now();
        evaluator.run(first, end, stats, [&](const EvalProgress &p, const NllStats &s) {
            if (slow)
                std::this_thread::sleep_for(hooks.slowMs);
            if (tel) // the publisher keeps at most 10 per second, the latest totals always
                publishProgress(false, std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count());
            if (distributed)
                return;
            const auto now = std::chrono::steady_clock::now();
            if (quiet || (now - lastPrint < std::chrono::milliseconds(500) && p.windowsDone < p.windowsTotal))
                return;
            lastPrint = now;
            const double rate = p.seconds > 0 ? static_cast<double>(p.tokensDone) / p.seconds : 0;
            const double eta = rate > 0 ? static_cast<double>(p.tokensTotal - p.tokensDone) / rate : NAN;
            char line[200];
            std::snprintf(line, sizeof line, "[%lld/%lld windows] ppl %.4f  %.0f tok/s  elapsed %s  ETA %s\n",
                          static_cast<long long>(p.windowsDone), static_cast<long long>(p.windowsTotal), computePerplexity(s).ppl, rate,
                          clock(p.seconds).c_str(), clock(eta).c_str());
            err << line << std::flush;
        });
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
        computeSeconds += took;
        return took;
    };
    // After round r's collective: telemetry, and rank 0's line with the global running figures.
    auto roundDone = [&](int r, int total, double wait0, double transfer0) {
        const bool last = r + 1 == total;
        if (tel) {
            tel->sync({r + 1, std::max(total, r + 1), run->comm().waitSeconds - wait0, run->comm().transferSeconds - transfer0});
            tel->phase(cppl::telemetry::Phase::Evaluating);
        }
        const auto now = std::chrono::steady_clock::now();
        if (silent() || (now - lastPrint < std::chrono::milliseconds(500) && !last && !hooks.everyRoundLine))
            return;
        lastPrint = now;
        const double elapsed = std::chrono::duration<double>(now - evalStart).count();
        const double rate = elapsed > 0 ? static_cast<double>(global.tokens) / elapsed : 0;
        const double eta = rate > 0 ? static_cast<double>(plan.scoredTokens - global.tokens) / rate : NAN;
        const double comm = run->comm().waitSeconds + run->comm().transferSeconds;
        char line[256];
        const std::string of = dynamic ? (last ? std::to_string(total) : std::string("~") + std::to_string(total)) : std::to_string(total);
        std::snprintf(line, sizeof line, "[round %d/%s] ppl %.4f  %lld/%lld tokens  %.0f tok/s (all ranks)  comm %.2f%%  elapsed %s  ETA %s\n", r + 1,
                      of.c_str(), computePerplexity(global).ppl, static_cast<long long>(global.tokens), static_cast<long long>(plan.scoredTokens), rate,
                      elapsed > 0 ? 100.0 * comm / elapsed : 0.0, clock(elapsed).c_str(), clock(eta).c_str());
        err << line << std::flush;
        if (tel)
            tel->log(cppl::telemetry::LogLevel::Info, std::string_view(line).substr(0, std::strlen(line) - 1));
    };
    if (tel)
        tel->phase(cppl::telemetry::Phase::Evaluating);
    // Before a round's collective every rank names its batches of the round; after it rank 0
    // gives the round's exact global words (checkpoint.h). One short stdout line each.
    const bool checkpoints = distributed && m_o.checkpointLines;
    // Batches computed while a round a loss ended was in flight (regroupBehind, below): they go
    // in the next ledger line, which is the only one of its (epoch, round) (the launcher's
    // CheckpointWriter takes a rank's round as complete at its first line of it).
    std::vector<dist::BatchRun> carriedLedger;
    auto ledger = [&](int r) {
        if (!checkpoints)
            return;
        std::vector<dist::BatchRun> mine;
        if (schedule) {
            mine = std::exchange(carriedLedger, {});
            mine.insert(mine.end(), schedule->roundDone().begin(), schedule->roundDone().end());
        } else {
            const Shard part = rounds->roundOf(shardRank, r);
            dist::addWindowsAsBatches(mine, part.firstWindow, part.endWindow, batch);
        }
        m_out << dist::ledgerLine(run->rank(), r, mine, run->epoch()) << '\n' << std::flush;
    };
    // After a regrouping, the first round whose checkpoint is complete (its regroup line says so).
    int checkpointsFrom = 0;
    auto checkpoint = [&](int r) {
        if (!checkpoints || !run->reporter() || r < checkpointsFrom)
            return;
        if (!m_fingerprint.valid())
            adoptFingerprint(*run); // a reporting rank after rank 0's loss
        if (!m_fingerprint.valid() || m_fingerprint.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
            return; // until the weights are hashed; the words are cumulative, a later round covers this one
        if (run->tolerant() && run->rank() == 0 && !m_fingerprintShared) {
            const dist::RunFingerprint &f = m_fingerprint.get(); // once, for a reporting rank after this one
            run->store().set(kFingerprintKey, f.model + '\n' + f.data + '\n' + f.plan);
            m_fingerprintShared = true;
        }
        m_out << dist::checkpointLine(r, global.toWords(), m_fingerprint.get(), dist::scheduleName(m_o.schedule), run->worldSize(),
                                      m_o.syncEvery, m_batchCount, m_o.batch, run->epoch())
              << '\n'
              << std::flush;
    };
    int roundsRun = 0;
    std::size_t lostSeen = 0;
    // A rank lost and the survivors regrouped (--on-rank-loss continue): the reporting rank says
    // so, and with checkpoints names the epoch, the first round whose checkpoint is complete again
    // and every lost rank's batches that count (the launcher's ledger replaces theirs by these).
    auto reportLosses = [&] {
        if (!schedule)
            return;
        const auto &lost = schedule->lostRanks();
        const bool fresh = lostSeen < lost.size();
        for (; lostSeen < lost.size(); ++lostSeen) {
            const auto &l = lost[lostSeen];
            std::int64_t redone = 0;
            for (const auto &b : schedule->redone())
                redone += b.end - b.first;
            const auto said = dist::rankLost(l.rank, run->hosts()[static_cast<std::size_t>(l.rank)], l.cause, l.round, l.windows, redone,
                                             run->epochSize());
            const std::string line = dist::recoveredText(said);
            if (run->reporter()) { // a note, not progress: --quiet keeps it (a run that exits 0 says whom it lost)
                err << line << '\n' << std::flush;
                if (checkpoints) // the launcher's word of it (docs/agent-lines.md)
                    m_out << dist::rankLostLine(said) << '\n' << std::flush;
            }
            if (tel)
                tel->log(cppl::telemetry::LogLevel::Warning, line);
        }
        if (fresh) {
            // The survivors' next round: the ledger lines of the rounds before it that a
            // survivor printed are in the carry, as are a rank ahead's of this round.
            checkpointsFrom = firstRound + schedule->rounds();
            if (checkpoints && run->reporter()) {
                std::vector<dist::RegroupLost> named;
                for (const auto &l : lost)
                    named.push_back({l.rank, firstRound + l.round - 1, l.committed});
                m_out << dist::regroupLine(run->epoch(), checkpointsFrom, named) << '\n' << std::flush;
            }
        }
    };
    // Round r's collective is done: the global totals, the checkpoint, telemetry and rank 0's
    // line. True when the run is complete (dynamic: every queue was empty).
    auto roundComplete = [&](int r, int committed, const NllStats::Words &words, bool allDone, double wait0, double transfer0) {
        global = NllStats::fromReducedWords(words);
        if (!dynamic) {
            checkpoint(committed);
            roundDone(r, rounds->rounds(), wait0, transfer0);
            return false;
        }
        const std::size_t lostBefore = lostSeen;
        reportLosses();
        if (lostSeen == lostBefore)
            checkpoint(committed); // not for a round whose collective the loss ended (the words are the carry)
        const int done = schedule->rounds();
        roundsRun = done;
        // Rounds left, estimated from the tokens left at the threshold per rank (telemetry needs a total).
        const std::int64_t perRound = std::max<std::int64_t>(1, m_o.syncEvery == kSyncAtEnd ? plan.scoredTokens : m_o.syncEvery)
                                      * run->epochSize();
        const auto left = static_cast<int>(std::min<std::int64_t>(1 << 30, (plan.scoredTokens - global.tokens + perRound - 1) / perRound));
        roundDone(done - 1, allDone ? done : done + std::max(1, left), wait0, transfer0);
        return allDone;
    };
    // The rounds' collectives go through a RoundPipeline (round_pipeline.h): with --overlap-sync
    // on, round r's aggregation runs on this rank's communication thread while round r+1 is
    // computed, and round r completes (global totals, checkpoint, rank 0's line) only then.
    // Tolerant runs too: a lost rank ends the round in flight, and this thread regroups once
    // the communication thread is idle (regroupBehind, below). A tolerant run without overlap
    // keeps its collectives in DynamicSchedule::sync, which regroups itself.
    std::optional<dist::RoundPipeline> pipe;
    if (distributed && (!run->tolerant() || m_o.overlapSync))
        pipe.emplace(*run, m_o.overlapSync);
    const bool tolerantPipe = pipe && run->tolerant();
    m_overlapRan = pipe && pipe->overlapping();
    int flightRound = 0, flightCommitted = 0;
    auto completeFlight = [&] {
        if (tel)
            tel->phase(cppl::telemetry::Phase::Syncing);
        const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
        const std::vector<std::int64_t> reduced = pipe->wait();
        NllStats::Words words{};
        bool allDone = false;
        if (schedule)
            allDone = schedule->complete(reduced, words);
        else
            std::copy_n(reduced.begin(), words.size(), words.begin());
        return roundComplete(flightRound, flightCommitted, words, allDone, wait0, transfer0);
    };
    // A tolerant run with overlap, after a loss: the round in flight failed (RankLostError out
    // of wait()) or the loss was seen before submitting. The communication thread is idle, so
    // this thread regroups as DynamicSchedule::sync does (the survivors agree on the committed
    // round, new communicators, the lost rank's uncommitted batches queued again). This rank's
    // totals hold the round it computed meanwhile: recover() puts all of them in the carry, so
    // they count once, and they go in the ledger line of the first round after the regrouping
    // (under the new epoch: its checkpoint is the first whose words hold them; under the old
    // epoch they could land in a checkpoint of the failed round's number), with that round's
    // own batches: one line per (epoch, round), as the launcher's CheckpointWriter expects.
    auto regroupBehind = [&](int r) {
        if (tel)
            tel->phase(cppl::telemetry::Phase::Syncing);
        const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
        NllStats::Words words = stats.toWords();
        schedule->recover(words);
        const int first = firstRound + schedule->rounds();
        roundComplete(r, first, words, false, wait0, transfer0); // the loss's lines; no checkpoint
        carriedLedger.insert(carriedLedger.end(), schedule->roundDone().begin(), schedule->roundDone().end());
    };
    auto runRounds = [&] {
        // Dynamic: a second call (a rank lost after the last round: the survivors regrouped) goes
        // on counting where the first stopped.
        for (int r = dynamic ? roundsRun : firstRound;; ++r) {
            if (dynamic) {
                schedule->beginRound();
                while (const auto b = schedule->next())
                    schedule->evaluated(*b, evaluateRange(*b * batch, std::min(nWindows, (*b + 1) * batch)));
            } else {
                if (r == rounds->rounds()) {
                    if (pipe && pipe->inFlight())
                        completeFlight(); // the last round's, with nothing left to hide it behind
                    break;
                }
                const Shard part = rounds->roundOf(shardRank, r);
                evaluateRange(part.firstWindow, part.endWindow);
            }
            roundsRun = (dynamic ? r : r - firstRound) + 1;
            if (!distributed) {
                global = stats;
                continue;
            }
            // Round r-1's result, now that round r is computed. Dynamic and complete: every
            // queue was empty when it was submitted, so round r evaluated nothing.
            if (pipe && pipe->inFlight()) {
                bool lost = false;
                try {
                    if (completeFlight())
                        break;
                } catch (const dist::RankLostError &) {
                    if (!tolerantPipe)
                        throw;
                    lost = true;
                }
                if (lost) {
                    regroupBehind(r);
                    continue;
                }
            }
            if (tolerantPipe && run->lossPending()) { // not worth a collective that would fail at once
                regroupBehind(r);
                continue;
            }
            // Dynamic: the schedule counts rounds (after a regrouping, the survivors' agreed count).
            const int committed = dynamic ? firstRound + schedule->rounds() : r;
            ledger(committed);
            NllStats::Words words = stats.toWords();
            if (pipe) {
                pipe->submit(schedule ? schedule->prepare(words) : std::vector<std::int64_t>(words.begin(), words.end()));
                flightRound = r;
                flightCommitted = committed;
                if (!pipe->overlapping() && completeFlight())
                    break;
                continue;
            }
            if (tel)
                tel->phase(cppl::telemetry::Phase::Syncing);
            const double wait0 = run->comm().waitSeconds, transfer0 = run->comm().transferSeconds;
            const bool allDone = schedule->sync(words); // tolerant: regroups around a lost rank
            if (roundComplete(r, committed, words, allDone, wait0, transfer0))
                break;
        }
    };
    runRounds();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
    std::vector<dist::RankReport> reports;
    std::vector<std::string> batchRuns; // dynamic: which batches each rank evaluated
    std::vector<dist::DynamicSchedule::LostRank> lostAfterTheEnd; // the reporter: ranks lost after its closing gather completed
    // A tolerant run: the others stay (their watchdogs watching) until the reporting rank has
    // written the result (kReportedKey); if it is lost first, they regroup and the next lowest
    // rank writes it. The reporter finishes after writing (run()).
    const bool tolerantReport = schedule && run->tolerant();
    auto awaitReport = [&] {
        if (run->reporter())
            return;
        const int reporter = run->members().front();
        for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
            if (run->store().check({kReportedKey})) {
                run->store().add(kReportedKey + "/acks", 1); // a reporter that serves the store waits for these
                return;
            }
            const auto losses = run->lossesSince(run->epoch());
            if (!losses.empty()) {
                const auto &left = losses.back().members;
                if (std::find(left.begin(), left.end(), reporter) == left.end())
                    throw dist::RankLostError("rank " + std::to_string(run->rank()) + ": rank " + std::to_string(reporter)
                                              + ", which reports for the run, was lost before it wrote the result");
                // A rank lost inside the closing gather can leave it completed here and failed at the
                // reporter (a collective is not atomic): the reporter then regroups, and waits for
                // this rank to say what it holds. Join it.
                if (schedule->regroups(reporter))
                    throw dist::RankLostError("rank " + std::to_string(run->rank()) + ": rank " + std::to_string(reporter)
                                              + ", which reports for the run, regroups after a rank lost in the closing gather");
            }
            std::this_thread::sleep_for(pause);
        }
    };
    bool reportedElsewhere = false; // the reporter wrote the result while this rank regrouped: nothing left to do
    if (distributed) {
        for (;;) {
            dist::RankReport mine;
            const bool carries = resume && shardRank == 0; // rank 0's totals include the resumed base
            mine.tokens = stats.tokens - (carries ? base.tokens : 0);
            mine.windows = stats.windows - (carries ? base.windows : 0);
            mine.rounds = roundsRun;
            mine.payloadBytes = run->comm().payloadBytes;
            mine.computeSeconds = computeSeconds;
            mine.waitSeconds = run->comm().waitSeconds;
            mine.transferSeconds = run->comm().transferSeconds;
            mine.collectiveSeconds = run->comm().collectiveSeconds;
            mine.wallSeconds = seconds;
            if (schedule) {
                // The ledger: each rank's batches through the store, read by rank 0 for the result.
                const std::string runs = dist::formatBatchRuns(schedule->done());
                run->store().set("cppl/sched/done/" + std::to_string(run->rank()), runs);
                if (tel)
                    tel->log(cppl::telemetry::LogLevel::Info, "batches evaluated by rank " + std::to_string(run->rank()) + ": "
                                                                  + (runs.empty() ? std::string("none") : runs) + " ("
                                                                  + std::to_string(schedule->claims()) + " claims)");
            }
            try {
                reports = run->gather(mine); // after every rank's ledger is in the store
                if (tolerantReport)
                    awaitReport();
                break;
            } catch (const dist::RankLostError &e) {
                // A rank was lost after the last round: regroup (its work is all committed: nothing
                // is queued again), one more round to agree that every queue is empty, gather again.
                if (!schedule)
                    throw;
                err << "clusterppl-agent: " << e.what() << "; regrouping after the last round\n" << std::flush;
                try {
                    NllStats::Words words = stats.toWords();
                    schedule->recover(words);
                    global = NllStats::fromReducedWords(words);
                    reportLosses();
                    runRounds();
                } catch (const dist::ResultWrittenError &written) {
                    // The gather completed at the reporter, failed here (the lost rank was inside
                    // it), and the reporter wrote the result: the run is over.
                    err << "clusterppl-agent: " << written.what() << '\n' << std::flush;
                    if (tel)
                        tel->log(cppl::telemetry::LogLevel::Info, written.what());
                    run->store().add(kReportedKey + "/acks", 1);
                    reportedElsewhere = true;
                    break;
                }
                seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - evalStart).count();
            }
        }
        if (run->reporter() && hooks.holdResult.forRank(run->rank()).count() > 0) { // before it looks for ranks lost meanwhile
            err << "clusterppl-agent: rank " << run->rank() << ": holding the result for " << hooks.holdResult.ms.count()
                << " ms (CLUSTERPPL_TEST_HOLD_RESULT)\n"
                << std::flush;
            std::this_thread::sleep_for(hooks.holdResult.ms);
        }
        if (schedule && run->reporter()) {
            batchRuns.assign(static_cast<std::size_t>(run->worldSize()), std::string());
            for (int k : run->members())
                batchRuns[static_cast<std::size_t>(k)] = run->store().get("cppl/sched/done/" + std::to_string(k), m_o.distOptions.timeout).value_or("");
            // Ranks lost after the gather completed here (after the last round): every batch of
            // theirs is in the totals, and their rows in the gather; the record says they were
            // lost. (A loss that comes after the result is written is the launcher's to say.)
            if (run->tolerant())
                for (const auto &loss : run->lossesSince(run->epoch())) {
                    const auto rep = std::find_if(reports.begin(), reports.end(), [&](const auto &x) { return x.rank == loss.rank; });
                    if (rep == reports.end() || rep->lost)
                        continue;
                    rep->lost = true;
                    dist::DynamicSchedule::LostRank l;
                    l.rank = loss.rank;
                    l.cause = loss.cause;
                    l.round = schedule->rounds();
                    l.committed = dist::parseBatchRuns(batchRuns[static_cast<std::size_t>(loss.rank)]).value_or(std::vector<dist::BatchRun>{});
                    l.tokens = rep->tokens;
                    l.windows = rep->windows;
                    lostAfterTheEnd.push_back(l);
                    const auto said = dist::rankLostAfterLastRound(l.rank, rep->host, l.cause, l.round, l.windows);
                    const std::string line = dist::recoveredText(said);
                    err << line << '\n' << std::flush;
                    if (m_o.checkpointLines) // the launcher's word of it (docs/agent-lines.md)
                        m_out << dist::rankLostLine(said) << '\n' << std::flush;
                    if (tel)
                        tel->log(cppl::telemetry::LogLevel::Warning, line);
                }
            for (const auto &l : schedule->lostRanks()) { // a lost rank's row: what of its work counts
                batchRuns[static_cast<std::size_t>(l.rank)] = dist::formatBatchRuns(l.committed);
                dist::RankReport rep;
                rep.rank = l.rank;
                rep.host = run->hosts()[static_cast<std::size_t>(l.rank)];
                rep.group = run->groups().groupOf[static_cast<std::size_t>(l.rank)];
                rep.tokens = l.tokens;
                rep.windows = l.windows;
                rep.rounds = l.round;
                rep.lost = true;
                reports.push_back(rep);
            }
            std::sort(reports.begin(), reports.end(), [](const auto &x, const auto &y) { return x.rank < y.rank; });
        }
        if (!tolerantReport || !run->reporter())
            run->finish();
        if (schedule && !reportedElsewhere && (global.tokens != plan.scoredTokens || global.windows != nWindows))
            // Never a silently wrong result: every batch must have been counted exactly once.
            throw ExitError(kExitCollective, "rank " + std::to_string(run->rank()) + ": the ranks' totals cover " + std::to_string(global.windows)
                                                 + " of " + std::to_string(nWindows) + " windows and " + std::to_string(global.tokens) + " of "
                                                 + std::to_string(plan.scoredTokens)
                                                 + " tokens: batches were lost or counted twice (a bug; please report it with the ranks' logs)");
    }
    publishProgress(true, 0); // this rank's complete totals, before its result
    if (global.nll.rejected() > 0)
        throw ExitError(kExitRuntime, std::to_string(global.nll.rejected())
                                          + " token log-probabilities were not finite (NaN/inf): the model overflowed in "
                                          + dtypeName(m_o.dtype) + "; try --dtype float32");
    EvalOutcome outcome{global, roundsRun, seconds, std::move(reports), std::move(batchRuns), base, {}, {}, warmupSeconds};
    if (schedule) {
        outcome.lostRanks = schedule->lostRanks();
        outcome.lostRanks.insert(outcome.lostRanks.end(), lostAfterTheEnd.begin(), lostAfterTheEnd.end());
        outcome.batchesRedone = dist::formatBatchRuns(schedule->redone());
    }
    return outcome;
}

} // namespace cppl::agent
