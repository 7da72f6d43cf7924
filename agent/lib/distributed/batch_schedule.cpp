// SPDX-License-Identifier: MIT
#include "batch_schedule.h"

#include "distributed_run.h"
#include "rendezvous_store.h"
#include "schedule_words.h"

#include "cppl/errors.h"
#include "cppl/sharding.h"
#include "cppl/statistics.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <limits>
#include <thread>
#include <tuple>

namespace cppl::agent::dist {

using schedule::minus;
using schedule::plus;
using schedule::Words;

namespace {

/// Timer and scheduler noise in a measured compute time (seconds): what a speed measured over
/// little compute cannot resolve (beginRound).
constexpr double kSpeedNoiseSeconds = 0.03;

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

/// One thread for the schedule's life that sends its claims ahead, one at a time. (A thread per
/// claim, std::async, cost the main thread 1-15 ms at its first one on a loaded host, when every
/// rank's process groups form: bench_comm, 8 ranks on 2 cores.)
class DynamicSchedule::ClaimThread
{
public:
    ClaimThread()
        : m_thread([this] { loop(); })
    {
    }
    ~ClaimThread()
    {
        {
            const std::lock_guard lock(m_mutex);
            m_stop = true;
        }
        m_cv.notify_one();
        m_thread.join(); // after the claim it runs, if any (the store's timeout bounds it)
    }
    ClaimThread(const ClaimThread &) = delete;
    ClaimThread &operator=(const ClaimThread &) = delete;

    [[nodiscard]] std::future<Claimed> post(std::function<Claimed()> f)
    {
        std::packaged_task<Claimed()> task(std::move(f));
        std::future<Claimed> result = task.get_future();
        {
            const std::lock_guard lock(m_mutex);
            CPPL_ENFORCE(!m_queued, "a claim sent ahead while another is queued");
            m_task = std::move(task);
            m_queued = true;
        }
        m_cv.notify_one();
        return result;
    }

private:
    void loop()
    {
        for (;;) {
            std::packaged_task<Claimed()> task;
            {
                std::unique_lock lock(m_mutex);
                m_cv.wait(lock, [this] { return m_queued || m_stop; });
                if (!m_queued)
                    return;
                task = std::move(m_task);
                m_queued = false;
            }
            task(); // an exception (the store's) goes to the future
        }
    }

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::packaged_task<Claimed()> m_task;
    bool m_queued = false;
    bool m_stop = false;
    std::thread m_thread; ///< last: starts once the members above exist
};

const char *scheduleName(Schedule s) noexcept
{
    return s == Schedule::Static ? "static" : "dynamic";
}

DynamicSchedule::DynamicSchedule(DistributedRun &run, std::vector<std::int64_t> batchTokens, std::int64_t syncEveryTokens, std::string key,
                                 std::optional<std::vector<std::int64_t>> order, std::vector<std::int64_t> batchWindows)
    : m_run(run), m_batchTokens(std::move(batchTokens)), m_batchWindows(std::move(batchWindows)), m_sync(syncEveryTokens), m_key(std::move(key))
{
    if (syncEveryTokens < 0)
        throw ConfigError("sync threshold must be >= 0 tokens (0 = after every batch), got " + std::to_string(syncEveryTokens));
    CPPL_ENFORCE(m_batchWindows.empty() || m_batchWindows.size() == m_batchTokens.size(), "one window count per batch");
    m_allBatches = static_cast<std::int64_t>(m_batchTokens.size());
    // The queue the counter hands out: every batch, or (a resumed run) those its ledger lacks.
    if (order) {
        for (std::int64_t b : *order) {
            CPPL_ENFORCE(b >= 0 && b < m_allBatches, "a batch to evaluate outside the plan");
            if (!m_queue.empty() && m_queue.back().end == b)
                m_queue.back().end = b + 1;
            else
                m_queue.push_back({b, b + 1});
        }
    } else if (m_allBatches > 0) {
        m_queue.push_back({0, m_allBatches});
    }
    m_batches = 0;
    for (const BatchRun &r : m_queue)
        m_batches += r.end - r.first;
    // Rank r's first batch is queue position r: no claim on the store before it, at the moment
    // every rank's process groups form on the same store (distributed_run.cpp), where a round trip
    // took 5-30 ms on a loaded host instead of well under one. The counter hands out the rest.
    // (--tensor-parallel: the data-parallel ranks, each group's leader.)
    m_offset = run.dataParallelWidth();
    if (const int dpRank = run.rank() / run.tensorParallel(); dpRank < m_batches)
        m_pending = queueSlice(dpRank, dpRank + 1);
    m_exhausted = m_batches <= m_offset;
    if (!m_exhausted)
        m_claimThread = std::make_unique<ClaimThread>();
    m_members = run.members();
    m_pendingAtRegroup.resize(static_cast<std::size_t>(run.worldSize()));
    m_doneAtRegroup.resize(static_cast<std::size_t>(run.worldSize()));
    m_history.push_back(Committed{});
    std::int64_t total = 0;
    for (const BatchRun &r : m_queue)
        for (std::int64_t b = r.first; b < r.end; ++b)
            total += m_batchTokens[static_cast<std::size_t>(b)];
    m_meanBatchTokens = m_batches > 0 ? std::max(1.0, static_cast<double>(total) / static_cast<double>(m_batches)) : 1.0;
}

DynamicSchedule::~DynamicSchedule() = default;

DynamicSchedule::Sizing DynamicSchedule::sizing() const
{
    // Guided self-scheduling: half of this rank's fair share of what is left, in proportion to its
    // measured speed among all ranks', so that runs are long while much is left (few store round
    // trips) and single batches at the end (the last claims finish together). Never more than one
    // round of this rank's work: a claimed run is this rank's until it is evaluated, and a long one
    // would hold batches a faster rank could take. Round 0 (speeds unknown) claims one batch.
    Sizing z;
    const double myRate = m_myTokens > 0 && m_myCompute > 0 ? static_cast<double>(m_myTokens) / m_myCompute : 0;
    z.share = m_rateSum > 0 && myRate > 0 ? std::min(1.0, myRate / m_rateSum) : 1.0 / m_run.epochSize();
    if (m_sync == 0 || m_round == 0)
        z.cap = 1;
    else if (m_sync != kSyncAtEnd)
        z.cap = std::max<std::int64_t>(1, static_cast<std::int64_t>(m_roundBudget / m_meanBatchTokens));
    return z;
}

std::int64_t DynamicSchedule::Sizing::of(std::int64_t left) const
{
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(left) * share / 2), 1, cap);
}

std::pair<std::int64_t, std::int64_t> DynamicSchedule::Sizing::claim(RendezvousStore &store, const std::string &key, std::int64_t batches) const
{
    // Read the counter first (add 0): other ranks have moved it since this rank last looked, and
    // sizing from a stale value would take too much near the end, where it matters most.
    const std::int64_t seen = cap > 1 ? store.add(key, 0) : 0;
    const std::int64_t k = of(std::max<std::int64_t>(0, batches - seen));
    return {store.add(key, k), k};
}

std::vector<BatchRun> DynamicSchedule::queueSlice(std::int64_t from, std::int64_t to) const
{
    std::vector<BatchRun> out;
    std::int64_t at = 0; // queue position of the current run's first batch
    for (const BatchRun &r : m_queue) {
        const std::int64_t n = r.end - r.first;
        const std::int64_t a = std::max(from, at), b = std::min(to, at + n);
        if (a < b)
            out.push_back({r.first + (a - at), r.first + (b - at)});
        at += n;
        if (at >= to)
            break;
    }
    return out;
}

void DynamicSchedule::accept(std::int64_t end, std::int64_t k)
{
    ++m_claims;
    end += m_offset; // counter values to queue positions
    const std::int64_t first = end - k;
    if (first >= m_batches) {
        m_exhausted = true;
        return;
    }
    for (const BatchRun &r : queueSlice(first, std::min(end, m_batches))) {
        if (!m_pending.empty() && m_pending.back().end == r.first)
            m_pending.back().end = r.end;
        else
            m_pending.push_back(r);
    }
    if (end >= m_batches)
        m_exhausted = true; // the last run: no need to ask again
}

bool DynamicSchedule::claim()
{
    const double t0 = now();
    if (m_inflight.valid()) {
        const Claimed c = m_inflight.get(); // rethrows the store's error
        if (c.started >= 0)
            m_started = c.started;
        accept(c.end, c.k);
    } else if (!m_exhausted) {
        const auto [end, k] = sizing().claim(m_run.store(), m_key, counterBatches());
        accept(end, k);
    }
    m_claimSeconds += now() - t0;
    return !m_pending.empty();
}

void DynamicSchedule::prefetch()
{
    // Ask for the next run while this rank still computes the last batch of its current one, so
    // the store's round trips (a millisecond or more on a loaded host) are not on the critical path.
    // Round 0 too (single batches there): the claim also carries the late-starter check (this
    // rank's announcement with its first one), so round 0 has no round trip on this thread either.
    if (m_exhausted || m_inflight.valid())
        return;
    std::int64_t pending = 0;
    for (const BatchRun &r : m_pending)
        pending += r.end - r.first;
    if (pending > 1)
        return;
    std::string startedKey;
    std::int64_t announce = 0;
    if (startersMatter()) {
        startedKey = m_key + "/started";
        announce = m_announced ? 0 : 1;
        m_announced = true;
    }
    if (!m_claimThread) // nothing to claim at the start, something after a regrouping
        m_claimThread = std::make_unique<ClaimThread>();
    m_inflight = m_claimThread->post([z = sizing(), &store = m_run.store(), key = m_key, n = counterBatches(), startedKey, announce] {
        Claimed c;
        if (!startedKey.empty())
            c.started = store.add(startedKey, announce);
        std::tie(c.end, c.k) = z.claim(store, key, n);
        return c;
    });
}

void DynamicSchedule::beginRound()
{
    m_round = m_begun++;
    m_inRound = 0;
    m_roundTokens = 0;
    m_roundDone.clear();
    if (m_sync == kSyncAtEnd) {
        m_roundBudget = std::numeric_limits<double>::infinity();
    } else if (m_sync == 0 || m_round == 0) {
        m_roundBudget = 0; // one batch: every batch (threshold 0), or round 0, which measures the speed
    } else if (!(m_rateSum > 0) || m_known == 0) {
        // No collective has completed yet (round 1 with the aggregation overlapped: round 0's
        // collective runs behind it): the others' speeds are not known, so this rank takes its own
        // for theirs and runs the ramp's 8 batches of its own time. A round of a single batch here
        // would be shorter than round 0's collective and wait for it.
        const bool measured = m_myTokens > 0 && m_myCompute > 0;
        m_roundBudget = measured ? std::min(static_cast<double>(m_sync), std::pow(8.0, m_round) * m_meanBatchTokens) : 0;
    } else {
        // The round lasts as long as `sync` tokens take at the ranks' mean speed; this rank's share
        // of that time is its own speed times it. A measured speed is noisy: the scheduler's and the
        // timer's milliseconds (tens of them on a busy host, and a GPU's first batch warms up) over
        // the compute measured so far, 25% after round 0's single batch, 3% after a second or two.
        // So this rank takes the mean speed of the ranks within that noise of its own (itself
        // included): equal ranks then get equal budgets and arrive together, as with static shards,
        // instead of apart whenever noise sizes them differently, while a rank that is really
        // slower (or a group of them) stays apart and the fast ones are not pulled towards it.
        const double mean = m_rateSum / static_cast<double>(m_known);
        const double mine = m_myTokens > 0 && m_myCompute > 0 ? static_cast<double>(m_myTokens) / m_myCompute : mean;
        const double noise = std::clamp(kSpeedNoiseSeconds / std::max(m_myCompute, 1e-9), 0.03, 0.25);
        double alike = 0;
        int n = 0;
        for (const double r : m_rates)
            if (r > 0 && std::abs(r / mine - 1) < noise) {
                alike += r;
                ++n;
            }
        const double rate = n > 0 ? alike / n : mine;
        // Rounds ramp up: at most 8x the mean batch per round so far (1 batch in round 0, 8 in
        // round 1, 64 in round 2, ...), so that no long round runs on a speed measured over one
        // batch; with the default threshold that is one more round than without.
        const double ramp = std::pow(8.0, m_round) * m_meanBatchTokens;
        m_roundBudget = std::min(static_cast<double>(m_sync), ramp) * rate / mean;
    }
}

bool DynamicSchedule::startersMatter() const
{
    return m_round == 0 && m_sync != 0 && m_sync != kSyncAtEnd && m_run.dataParallelWidth() >= 2;
}

bool DynamicSchedule::othersStillStarting()
{
    // Ranks start at different times (loading the model, connecting). Rather than wait at round
    // 0's collective for the last one, a rank that has its first batch done goes on with single
    // batches until every rank has started (or it has the threshold's tokens in the round); the
    // wait for a late starter is then at most one batch. (Threshold 0 keeps one batch a round.)
    // A rank says it started with the claim it sends ahead during its first batch, and each claim
    // sent ahead in round 0 brings back how many ranks had said so: the answer is one batch old,
    // and the announcement one batch early, so a rank ends round 0 about when it did with a round
    // trip of its own per batch, which took 1-3 ms on a loaded host, while the groups formed.
    if (!startersMatter())
        return false;
    if (m_started < 0 && m_inflight.valid())
        claim(); // its answer carries the count as it was when it was sent
    std::int64_t started = m_started;
    m_started = -1;
    if (started < 0) { // nothing sent ahead since the last check (the queue's end): ask now
        const double t0 = now();
        started = m_run.store().add(m_key + "/started", m_announced ? 0 : 1);
        m_announced = true;
        m_claimSeconds += now() - t0;
    }
    return started < m_run.dataParallelWidth();
}

std::optional<std::int64_t> DynamicSchedule::next()
{
    if (m_run.lossPending()) // end the round now: the survivors regroup in its collective
        return std::nullopt;
    // A one-batch round (round 0) goes on while other ranks have not started yet, up to the
    // threshold's tokens (which bound how stale the live totals get).
    const bool waitingForStarters = m_inRound > 0 && !(m_roundBudget > 0);
    if (waitingForStarters && m_pending.empty() && m_exhausted && !m_inflight.valid())
        return std::nullopt; // nothing left to take: no need to ask who started
    if (waitingForStarters && !othersStillStarting())
        return std::nullopt;
    if (m_pending.empty() && !claim())
        return std::nullopt;
    BatchRun &front = m_pending.front();
    const std::int64_t b = front.first;
    // Stop at the batch boundary nearest to this round's budget: go on only if the next batch
    // overshoots it by less than stopping now falls short.
    const double budget = waitingForStarters ? static_cast<double>(m_sync) : m_roundBudget;
    if (m_inRound > 0 && std::isfinite(budget)
        && static_cast<double>(m_roundTokens) + 0.5 * static_cast<double>(m_batchTokens[static_cast<std::size_t>(b)]) > budget)
        return std::nullopt;
    if (++front.first == front.end)
        m_pending.erase(m_pending.begin());
    prefetch();
    return b;
}

void DynamicSchedule::evaluated(std::int64_t b, double seconds)
{
    ++m_inRound;
    m_roundTokens += m_batchTokens[static_cast<std::size_t>(b)];
    m_myTokens += m_batchTokens[static_cast<std::size_t>(b)];
    m_myCompute += seconds;
    for (std::vector<BatchRun> *runs : {&m_done, &m_roundDone}) {
        if (!runs->empty() && runs->back().end == b)
            runs->back().end = b + 1;
        else
            runs->push_back({b, b + 1});
    }
}

void DynamicSchedule::setConstant(std::span<const std::int64_t> words, bool counted)
{
    CPPL_ENFORCE(m_rounds == 0 && m_lost.empty(), "setConstant() after the first round");
    m_carry.assign(words.begin(), words.end());
    m_base = counted ? m_carry : Words(words.size(), 0);
    // Before the first round completes the committed global totals are the constant alone.
    m_history.assign(1, Committed{-1, Words(words.size(), 0), m_carry});
}

bool DynamicSchedule::sync(std::span<std::int64_t> words)
{
    if (m_run.lossPending()) {
        if (m_pending.empty() && m_inflight.valid())
            claim();
        recover(words);
        return false;
    }
    std::vector<std::int64_t> buffer = prepare(words);
    try {
        m_run.awaitLoaded(); // the first round: every rank's model loaded (--load-timeout)
        m_run.allReduce(buffer);
    } catch (const RankLostError &) {
        recover(words);
        return false;
    }
    return complete(buffer, words);
}

std::vector<std::int64_t> DynamicSchedule::prepare(std::span<const std::int64_t> words)
{
    // Empty now means empty for good: the counter only grows, and nothing is pending.
    if (m_pending.empty() && m_inflight.valid())
        claim();
    const std::size_t n = words.size();
    if (m_base.empty()) {
        m_base.assign(n, 0);
        m_carry.assign(n, 0);
    }
    const bool empty = m_pending.empty() && m_exhausted;
    // This rank's totals since the last regrouping, plus (lowest member) what was committed before.
    m_local.assign(n, 0);
    std::vector<std::int64_t> buffer(n, 0);
    const bool carrier = m_run.epochRank() == 0;
    for (std::size_t i = 0; i < n; ++i) {
        m_local[i] = minus(words[i], m_base[i]);
        buffer[i] = carrier ? plus(m_local[i], m_carry[i]) : m_local[i];
    }
    const bool knowsSpeed = m_myTokens > 0 && m_myCompute > 0;
    const double rate = knowsSpeed ? static_cast<double>(m_myTokens) / m_myCompute : 0;
    const int world = m_run.epochSize(); // after a regrouping, the survivors
    buffer.push_back(empty ? 1 : 0);
    const std::size_t speeds = buffer.size();
    buffer.resize(speeds + static_cast<std::size_t>(world), 0); // one slot per rank: only this rank's is non-zero here
    buffer[speeds + static_cast<std::size_t>(m_run.epochRank())] = static_cast<std::int64_t>(std::llround(std::min(rate, 1e15) * 1000.0));
    return buffer;
}

bool DynamicSchedule::complete(std::span<const std::int64_t> reduced, std::span<std::int64_t> words)
{
    const std::size_t n = words.size();
    const int world = m_run.epochSize();
    CPPL_ENFORCE(reduced.size() == n + controlWords(world), "a round's result of another size than its words");
    std::copy(reduced.begin(), reduced.begin() + static_cast<std::ptrdiff_t>(n), words.begin());
    if (m_run.tolerant()) {
        m_history.push_back(Committed{m_rounds, std::move(m_local), Words(words.begin(), words.end())});
        if (m_history.size() > 2)
            m_history.erase(m_history.begin());
    }
    const std::int64_t emptyRanks = reduced[n];
    const std::size_t speeds = n + 1;
    // Every rank sizes the next round from the same speeds.
    m_rates.assign(static_cast<std::size_t>(world), 0);
    m_rateSum = 0;
    m_known = 0;
    for (int k = 0; k < world; ++k) {
        const std::int64_t milli = reduced[speeds + static_cast<std::size_t>(k)];
        if (milli <= 0)
            continue;
        m_rates[static_cast<std::size_t>(k)] = static_cast<double>(milli) / 1000.0;
        m_rateSum += m_rates[static_cast<std::size_t>(k)];
        ++m_known;
    }
    ++m_rounds;
    if (emptyRanks > m_run.epochSize() || emptyRanks < 0)
        throw ProtocolError("rank " + std::to_string(m_run.rank()) + ": the round's collective says " + std::to_string(emptyRanks) + " of "
                            + std::to_string(m_run.epochSize()) + " ranks are done: do all ranks run the same agent version and --schedule?");
    return emptyRanks == m_run.epochSize();
}

} // namespace cppl::agent::dist
