// SPDX-License-Identifier: MIT
// DynamicSchedule after a lost rank (batch_schedule.h, docs/communication.md "Losing a rank"): the
// survivors agree on the last committed round through the store, regroup, keep the lost rank's
// committed part and queue the rest of its batches again.
#include "batch_schedule.h"

#include "distributed_run.h"
#include "rendezvous_store.h"
#include "schedule_words.h"

#include "cppl/errors.h"
#include "cppl/exact_sum.h"
#include "cppl/statistics.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

namespace cppl::agent::dist {

using schedule::minus;
using schedule::orZeros;
using schedule::plus;
using schedule::stateKey;
using schedule::Words;

/// The loss the survivors regroup for (the latest the watchdog reported).
struct DynamicSchedule::Regrouping
{
    std::vector<Watchdog::Loss> losses; ///< every loss so far, oldest first: their causes
    int epoch = 0;
    std::vector<int> members;           ///< the survivors, ascending
    std::vector<int> lost;              ///< the ranks the schedule last regrouped for that are gone
    std::string prefix;                 ///< this epoch's keys in the store
};

/// What a survivor holds (recoverOnce, step 1): its last committed round, the batches it
/// evaluated, and those it claimed and has not evaluated yet (in the order it would).
struct DynamicSchedule::HeldState
{
    int round = -1;
    std::vector<BatchRun> done, pending;
};

/// The lost ranks' part (recoverOnce, step 5).
struct DynamicSchedule::LostShare
{
    Words part;                        ///< their committed words (zeros when not matched)
    std::int64_t givenOut = 0;         ///< queue positions handed out so far
    std::vector<std::int64_t> theirs;  ///< their batches, in the order they evaluated them
    std::size_t committed = 0;         ///< of which the first this many are committed (matched)
    bool matched = false;
};

void DynamicSchedule::recover(std::span<std::int64_t> words)
{
    CPPL_ENFORCE(m_run.tolerant(), "recover() in a run that does not tolerate a lost rank");
    if (m_inflight.valid()) { // a claim sent ahead is this rank's: it must be in what this rank says it holds
        const Claimed c = m_inflight.get();
        accept(c.end, c.k);
    }
    if (m_base.empty()) {
        m_base.assign(words.size(), 0);
        m_carry.assign(words.size(), 0);
    }
    while (!recoverOnce(words)) {
    }
}

std::optional<std::string> DynamicSchedule::waitKey(const std::string &key, int epoch, const std::string &what)
{
    // Polls, so that a newer loss (another rank lost while regrouping) ends the wait: the
    // regrouping then starts over for the newer membership.
    const auto deadline = std::chrono::steady_clock::now() + m_run.timeout();
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
        if (m_run.store().check({key}))
            return m_run.store().get(key, m_run.timeout());
        if (!m_run.lossesSince(epoch).empty())
            return std::nullopt;
        // After the last round, the reporter may have written the result instead (its closing
        // gather completed where this rank's failed): this rank's part is in it, and nobody will
        // answer here.
        if (m_run.store().check({kReportedKey}))
            throw ResultWrittenError("rank " + std::to_string(m_run.rank()) + ": the reporting rank wrote the result while this rank regrouped ("
                                     + what + "): every rank's totals were in its closing gather; nothing is left to do");
        // While the watchdog elects a new hub (the hub was lost during this agreement) its verdict
        // may take up to --timeout more, and will end this wait; this deadline must not end it first.
        if (std::chrono::steady_clock::now() >= deadline && !m_run.hubElection())
            throw TimeoutError("rank " + std::to_string(m_run.rank()) + ": regrouping after a lost rank: " + what + " within "
                               + std::to_string(m_run.timeout().count() / 1000) + " s (key " + key + ")");
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
}

bool DynamicSchedule::regroups(int r)
{
    for (const auto &loss : m_run.lossesSince(m_run.epoch()))
        if (m_run.store().check({stateKey(loss.epoch, r)}))
            return true;
    return false;
}

bool DynamicSchedule::recoverOnce(std::span<std::int64_t> words)
{
    const Regrouping g = regroupingFor(m_run.lossesSince(0));
    // 1. What every survivor holds.
    std::optional<std::vector<HeldState>> states = exchangeStates(g);
    if (!states)
        return false;
    // 2. How far the counter got, read once every member has settled its claims.
    const std::optional<std::int64_t> counter = agreeOnCounter(g);
    if (!counter)
        return false;
    // 3. The last round every survivor completed (a rank is at most one round ahead of another).
    int committedRound = states->front().round;
    for (const HeldState &st : *states)
        committedRound = std::min(committedRound, st.round);
    const auto at = std::find_if(m_history.begin(), m_history.end(), [&](const Committed &c) { return c.round == committedRound; });
    if (at == m_history.end())
        throw ProtocolError("rank " + std::to_string(m_run.rank()) + ": the survivors last committed round " + std::to_string(committedRound)
                            + ", which this rank no longer holds (it is at round " + std::to_string(m_history.back().round) + ")");
    // 4. Communicators over the survivors, and one all-reduce of what they contributed at that
    //    round and of what they hold now.
    if (!regroupRun(g))
        return false;
    const std::size_t n = words.size();
    const Words thenLocal = orZeros(at->local, n), thenGlobal = orZeros(at->global, n);
    Words both(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        both[i] = thenLocal[i];
        both[n + i] = minus(words[i], m_base[i]);
    }
    try {
        m_run.allReduce(both);
    } catch (const RankLostError &) {
        return false;
    }
    // 5. The lost rank's committed part: the round's total minus the carry and the survivors'.
    const LostShare share = lostShare(g, *states, *counter, thenGlobal, both);
    // 6. The new state: everything committed so far is the carry; the rest is queued again first.
    for (std::size_t i = 0; i < n; ++i)
        m_carry[i] = plus(plus(m_carry[i], share.part[i]), both[n + i]);
    std::copy(words.begin(), words.end(), m_base.begin());
    requeue(g, share);
    recordLost(g, share, committedRound);
    for (std::size_t k = 0; k < g.members.size(); ++k) {
        m_pendingAtRegroup[static_cast<std::size_t>(g.members[k])] = (*states)[k].pending;
        m_doneAtRegroup[static_cast<std::size_t>(g.members[k])] = (*states)[k].done;
    }
    m_members = g.members;
    m_history.clear();
    m_history.push_back(Committed{committedRound + 1, Words(n, 0), m_carry});
    m_rounds = committedRound + 2;
    m_begun = m_rounds; // the next round's index, as without a loss
    std::copy(m_carry.begin(), m_carry.end(), words.begin());
    return true;
}

DynamicSchedule::Regrouping DynamicSchedule::regroupingFor(std::vector<Watchdog::Loss> losses) const
{
    CPPL_ENFORCE(!losses.empty(), "recover() without a lost rank");
    Regrouping g;
    g.epoch = losses.back().epoch;
    g.members = losses.back().members;
    const int me = m_run.rank();
    if (std::find(g.members.begin(), g.members.end(), me) == g.members.end())
        throw CollectiveError("rank " + std::to_string(me) + " was declared lost by the watchdog's hub (" + losses.back().cause
                              + "); it stops, the others go on without it");
    for (int r : m_members)
        if (std::find(g.members.begin(), g.members.end(), r) == g.members.end())
            g.lost.push_back(r);
    CPPL_ENFORCE(!g.lost.empty(), "a loss that removes nobody");
    g.prefix = "cppl/epoch" + std::to_string(g.epoch) + "/";
    g.losses = std::move(losses);
    return g;
}

std::optional<std::vector<DynamicSchedule::HeldState>> DynamicSchedule::exchangeStates(const Regrouping &g)
{
    const int me = m_run.rank();
    m_run.store().set(stateKey(g.epoch, me),
                      std::to_string(m_history.back().round) + "\t" + formatBatchRuns(m_done) + "\t" + formatBatchRuns(m_pending));
    std::vector<HeldState> states;
    for (int r : g.members) {
        const auto text = waitKey(stateKey(g.epoch, r), g.epoch, "rank " + std::to_string(r) + " did not say what it holds");
        if (!text)
            return std::nullopt;
        states.push_back(parseState(r, *text));
    }
    return states;
}

DynamicSchedule::HeldState DynamicSchedule::parseState(int r, const std::string &text) const
{
    const int me = m_run.rank();
    HeldState st;
    const auto t1 = text.find('\t'), t2 = t1 == std::string::npos ? t1 : text.find('\t', t1 + 1);
    auto done = t2 == std::string::npos ? std::nullopt : parseBatchRuns(text.substr(t1 + 1, t2 - t1 - 1));
    auto pending = t2 == std::string::npos ? std::nullopt : parseBatchRuns(text.substr(t2 + 1));
    const auto [end, ec] = std::from_chars(text.data(), text.data() + (t1 == std::string::npos ? text.size() : t1), st.round);
    if (!done || !pending || ec != std::errc() || st.round < -1)
        throw ProtocolError("rank " + std::to_string(me) + ": rank " + std::to_string(r) + "'s state after the loss is malformed (\""
                            + text.substr(0, 80) + "\"): do all ranks run the same agent version?");
    st.done = std::move(*done);
    st.pending = std::move(*pending);
    for (const auto &runs : {st.done, st.pending})
        for (const BatchRun &b : runs)
            if (b.end > m_allBatches)
                throw ProtocolError("rank " + std::to_string(me) + ": rank " + std::to_string(r) + " says it holds batch "
                                    + std::to_string(b.end - 1) + " of " + std::to_string(m_allBatches) + ": do all ranks run with the same plan?");
    return st;
}

std::optional<std::int64_t> DynamicSchedule::agreeOnCounter(const Regrouping &g)
{
    // The lowest member reads it; a rank stopped, not dead, may still move it, but only this value counts.
    RendezvousStore &store = m_run.store();
    if (m_run.rank() == g.members.front())
        store.set(g.prefix + "counter", std::to_string(store.add(m_key, 0)));
    const auto text = waitKey(g.prefix + "counter", g.epoch, "rank " + std::to_string(g.members.front()) + " did not publish the counter");
    if (!text)
        return std::nullopt;
    std::int64_t counter = -1;
    if (const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), counter); ec != std::errc() || counter < 0)
        throw ProtocolError("rank " + std::to_string(m_run.rank()) + ": the counter after the loss is malformed (\"" + text->substr(0, 40) + "\")");
    return counter;
}

bool DynamicSchedule::regroupRun(const Regrouping &g)
{
    if (m_run.epoch() >= g.epoch)
        return true;
    try {
        m_run.regroup(g.epoch, g.members);
    } catch (const CollectiveError &) {
        // A member lost while the new Gloo communicators connect (after it published its state:
        // the hub killed right after announcing a loss, say): Gloo's rendezvous fails after
        // --timeout. The watchdog's verdict on that member restarts the regrouping for the newer
        // membership instead of failing this live rank. (NCCL: a loss during its rebuild is fatal,
        // regroup() says so.)
        if (m_run.backend() == "gloo" && m_run.awaitLossAfter(g.epoch))
            return false;
        throw;
    }
    return true;
}

DynamicSchedule::LostShare DynamicSchedule::lostShare(const Regrouping &g, const std::vector<HeldState> &states, std::int64_t counter,
                                                      const Words &thenGlobal, const Words &both) const
{
    const std::size_t n = thenGlobal.size();
    LostShare share;
    share.part.resize(n);
    for (std::size_t i = 0; i < n; ++i)
        share.part[i] = minus(minus(thenGlobal[i], m_carry[i]), both[i]);
    // Which batches it is: the lost rank evaluated what it held at the last regrouping (at the
    // start: its first batch, queue position = its rank, which precedes every claim), then its
    // claims in counter order; every position given out (the first m_offset, then the counter's)
    // not held by a survivor is the lost rank's. Its committed batches are the first ones of that
    // sequence whose windows and tokens make up its part.
    share.givenOut = std::min(counter + m_offset, m_batches);
    std::vector<char> held(static_cast<std::size_t>(m_allBatches), 0);
    for (const HeldState &st : states)
        for (const auto &runs : {st.done, st.pending})
            for (const BatchRun &b : runs)
                for (std::int64_t x = b.first; x < b.end; ++x)
                    held[static_cast<std::size_t>(x)] = 1;
    auto take = [&](const std::vector<BatchRun> &runs) {
        for (const BatchRun &b : runs)
            for (std::int64_t x = b.first; x < b.end; ++x)
                if (!held[static_cast<std::size_t>(x)]) {
                    held[static_cast<std::size_t>(x)] = 1;
                    share.theirs.push_back(x);
                }
    };
    for (int r : g.lost)
        take(m_pendingAtRegroup[static_cast<std::size_t>(r)]);
    take(queueSlice(0, share.givenOut));
    if (g.lost.size() == 1 && n == static_cast<std::size_t>(NllStats::kReduceWords))
        matchCommitted(share);
    if (!share.matched) { // several ranks lost at once (or a mismatch): drop their part, redo all they claimed
        std::fill(share.part.begin(), share.part.end(), 0);
        share.committed = 0;
    }
    return share;
}

void DynamicSchedule::matchCommitted(LostShare &share) const
{
    // The first of its batches whose scored tokens (and windows, when known) are its part's.
    constexpr std::size_t kTokens = 2 * ExactSum::kReduceWords, kWindows = kTokens + 1;
    std::int64_t tokens = 0, windows = 0;
    for (;;) {
        if (tokens == share.part[kTokens] && (m_batchWindows.empty() || windows == share.part[kWindows])) {
            share.matched = true;
            return;
        }
        if (share.committed == share.theirs.size() || tokens > share.part[kTokens])
            return;
        const auto b = static_cast<std::size_t>(share.theirs[share.committed++]);
        tokens += m_batchTokens[b];
        windows += m_batchWindows.empty() ? 0 : m_batchWindows[b];
    }
}

void DynamicSchedule::requeue(const Regrouping &g, const LostShare &share)
{
    const std::vector<BatchRun> tail = queueSlice(share.givenOut, m_batches);
    std::vector<BatchRun> again;
    for (std::size_t i = share.committed; i < share.theirs.size(); ++i) {
        if (!again.empty() && again.back().end == share.theirs[i])
            again.back().end += 1;
        else
            again.push_back({share.theirs[i], share.theirs[i] + 1});
    }
    m_queue = again;
    m_queue.insert(m_queue.end(), tail.begin(), tail.end());
    m_batches = 0;
    for (const BatchRun &b : m_queue)
        m_batches += b.end - b.first;
    m_key = g.prefix + "sched/next";
    m_offset = 0; // the new counter hands out every position
    m_exhausted = m_batches == 0;
    m_redone.insert(m_redone.end(), again.begin(), again.end());
}

void DynamicSchedule::recordLost(const Regrouping &g, const LostShare &share, int committedRound)
{
    for (int r : g.lost) {
        LostRank l;
        l.rank = r;
        for (const auto &loss : g.losses)
            if (loss.rank == r)
                l.cause = loss.cause;
        l.round = committedRound + 1;
        l.committed = m_doneAtRegroup[static_cast<std::size_t>(r)];
        if (share.matched)
            for (std::size_t i = 0; i < share.committed; ++i) {
                if (!l.committed.empty() && l.committed.back().end == share.theirs[i])
                    l.committed.back().end += 1;
                else
                    l.committed.push_back({share.theirs[i], share.theirs[i] + 1});
            }
        for (const BatchRun &b : l.committed)
            for (std::int64_t x = b.first; x < b.end; ++x) {
                l.tokens += m_batchTokens[static_cast<std::size_t>(x)];
                l.windows += m_batchWindows.empty() ? 0 : m_batchWindows[static_cast<std::size_t>(x)];
            }
        m_lost.push_back(std::move(l));
        m_pendingAtRegroup[static_cast<std::size_t>(r)].clear();
    }
}

} // namespace cppl::agent::dist
