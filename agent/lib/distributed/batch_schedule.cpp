// SPDX-License-Identifier: MIT
#include "batch_schedule.h"

#include "distributed_run.h"
#include "rendezvous_store.h"

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

namespace {

/// Timer and scheduler noise in a measured compute time (seconds): what a speed measured over
/// little compute cannot resolve (beginRound).
constexpr double kSpeedNoiseSeconds = 0.03;

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Where rank @p r says what it holds when the survivors regroup for epoch @p epoch (recoverOnce, step 1).
std::string stateKey(int epoch, int r)
{
    return "cppl/epoch" + std::to_string(epoch) + "/state/" + std::to_string(r);
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
    m_offset = run.worldSize();
    if (run.rank() < m_batches)
        m_pending = queueSlice(run.rank(), run.rank() + 1);
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
    return m_round == 0 && m_sync != 0 && m_sync != kSyncAtEnd && m_run.worldSize() >= 2;
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
    return started < m_run.worldSize();
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

namespace {

using Words = std::vector<std::int64_t>;

// Integer words add and subtract with wrap-around: the exact accumulator's limbs are summed by
// int64 addition across ranks, so differences of sums are exact whatever the order.
std::int64_t plus(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}

std::int64_t minus(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

Words orZeros(const Words &w, std::size_t n)
{
    return w.empty() ? Words(n, 0) : w;
}

} // namespace

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
    const std::size_t n = words.size();
    const auto losses = m_run.lossesSince(0);
    CPPL_ENFORCE(!losses.empty(), "recover() without a lost rank");
    const int epoch = losses.back().epoch;
    const std::vector<int> &members = losses.back().members;
    const int me = m_run.rank();
    if (std::find(members.begin(), members.end(), me) == members.end())
        throw CollectiveError("rank " + std::to_string(me) + " was declared lost by the watchdog's hub (" + losses.back().cause
                              + "); it stops, the others go on without it");
    std::vector<int> lost;
    for (int r : m_members)
        if (std::find(members.begin(), members.end(), r) == members.end())
            lost.push_back(r);
    CPPL_ENFORCE(!lost.empty(), "a loss that removes nobody");
    RendezvousStore &store = m_run.store();
    const std::string prefix = "cppl/epoch" + std::to_string(epoch) + "/";

    // 1. What this rank holds: its last committed round, the batches it evaluated, those it claimed
    //    and has not evaluated yet (in the order it would evaluate them).
    store.set(stateKey(epoch, me),
              std::to_string(m_history.back().round) + "\t" + formatBatchRuns(m_done) + "\t" + formatBatchRuns(m_pending));
    struct State
    {
        int round = -1;
        std::vector<BatchRun> done, pending;
    };
    std::vector<State> states;
    for (int r : members) {
        const auto text = waitKey(stateKey(epoch, r), epoch, "rank " + std::to_string(r) + " did not say what it holds");
        if (!text)
            return false;
        State st;
        const auto t1 = text->find('\t'), t2 = t1 == std::string::npos ? t1 : text->find('\t', t1 + 1);
        auto done = t2 == std::string::npos ? std::nullopt : parseBatchRuns(text->substr(t1 + 1, t2 - t1 - 1));
        auto pending = t2 == std::string::npos ? std::nullopt : parseBatchRuns(text->substr(t2 + 1));
        const auto [end, ec] = std::from_chars(text->data(), text->data() + (t1 == std::string::npos ? text->size() : t1), st.round);
        if (!done || !pending || ec != std::errc() || st.round < -1)
            throw ProtocolError("rank " + std::to_string(me) + ": rank " + std::to_string(r) + "'s state after the loss is malformed (\""
                                + text->substr(0, 80) + "\"): do all ranks run the same agent version?");
        st.done = std::move(*done);
        st.pending = std::move(*pending);
        for (const auto &runs : {st.done, st.pending})
            for (const BatchRun &b : runs)
                if (b.end > m_allBatches)
                    throw ProtocolError("rank " + std::to_string(me) + ": rank " + std::to_string(r) + " says it holds batch "
                                        + std::to_string(b.end - 1) + " of " + std::to_string(m_allBatches) + ": do all ranks run with the same plan?");
        states.push_back(std::move(st));
    }
    // 2. How far the counter got, read once every member has settled its claims (the lowest
    //    member reads it; a rank stopped, not dead, may still move it, but only this value counts).
    if (me == members.front())
        store.set(prefix + "counter", std::to_string(store.add(m_key, 0)));
    const auto counterText = waitKey(prefix + "counter", epoch, "rank " + std::to_string(members.front()) + " did not publish the counter");
    if (!counterText)
        return false;
    std::int64_t counter = -1;
    if (const auto [end, ec] = std::from_chars(counterText->data(), counterText->data() + counterText->size(), counter); ec != std::errc() || counter < 0)
        throw ProtocolError("rank " + std::to_string(me) + ": the counter after the loss is malformed (\"" + counterText->substr(0, 40) + "\")");
    // 3. The last round every survivor completed (a rank is at most one round ahead of another).
    int committedRound = states.front().round;
    for (const State &st : states)
        committedRound = std::min(committedRound, st.round);
    const auto at = std::find_if(m_history.begin(), m_history.end(), [&](const Committed &c) { return c.round == committedRound; });
    if (at == m_history.end())
        throw ProtocolError("rank " + std::to_string(me) + ": the survivors last committed round " + std::to_string(committedRound)
                            + ", which this rank no longer holds (it is at round " + std::to_string(m_history.back().round) + ")");
    // 4. Communicators over the survivors, and one all-reduce of what they contributed at that
    //    round and of what they hold now.
    if (m_run.epoch() < epoch) {
        try {
            m_run.regroup(epoch, members);
        } catch (const CollectiveError &) {
            // A member lost while the new Gloo communicators connect (after it published its state:
            // the hub killed right after announcing a loss, say): Gloo's rendezvous fails after
            // --timeout. The watchdog's verdict on that member restarts the regrouping for the newer
            // membership instead of failing this live rank. (NCCL: a loss during its rebuild is fatal,
            // regroup() says so.)
            if (m_run.backend() == "gloo" && m_run.awaitLossAfter(epoch))
                return false;
            throw;
        }
    }
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
    Words lostPart(n);
    for (std::size_t i = 0; i < n; ++i)
        lostPart[i] = minus(minus(thenGlobal[i], m_carry[i]), both[i]);
    // Which batches it is: the lost rank evaluated what it held at the last regrouping (at the
    // start: its first batch, queue position = its rank, which precedes every claim), then its
    // claims in counter order; every position given out (the first m_offset, then the counter's)
    // not held by a survivor is the lost rank's. Its committed batches are the first ones of that
    // sequence whose windows and tokens make up its part.
    const std::int64_t givenOut = std::min(counter + m_offset, m_batches);
    std::vector<char> held(static_cast<std::size_t>(m_allBatches), 0);
    for (const State &st : states)
        for (const auto &runs : {st.done, st.pending})
            for (const BatchRun &b : runs)
                for (std::int64_t x = b.first; x < b.end; ++x)
                    held[static_cast<std::size_t>(x)] = 1;
    std::vector<std::int64_t> theirs;
    auto take = [&](const std::vector<BatchRun> &runs) {
        for (const BatchRun &b : runs)
            for (std::int64_t x = b.first; x < b.end; ++x)
                if (!held[static_cast<std::size_t>(x)]) {
                    held[static_cast<std::size_t>(x)] = 1;
                    theirs.push_back(x);
                }
    };
    for (int r : lost)
        take(m_pendingAtRegroup[static_cast<std::size_t>(r)]);
    take(queueSlice(0, givenOut));
    constexpr std::size_t kTokens = 2 * ExactSum::kReduceWords, kWindows = kTokens + 1;
    std::size_t prefixLength = 0;
    bool matched = false;
    if (lost.size() == 1 && n == static_cast<std::size_t>(NllStats::kReduceWords)) {
        std::int64_t tokens = 0, windows = 0;
        for (;;) {
            if (tokens == lostPart[kTokens] && (m_batchWindows.empty() || windows == lostPart[kWindows])) {
                matched = true;
                break;
            }
            if (prefixLength == theirs.size() || tokens > lostPart[kTokens])
                break;
            const auto b = static_cast<std::size_t>(theirs[prefixLength++]);
            tokens += m_batchTokens[b];
            windows += m_batchWindows.empty() ? 0 : m_batchWindows[b];
        }
    }
    if (!matched) { // several ranks lost at once (or a mismatch): drop their part, redo all they claimed
        std::fill(lostPart.begin(), lostPart.end(), 0);
        prefixLength = 0;
    }
    // 6. The new state: everything committed so far is the carry; the rest is queued again first.
    for (std::size_t i = 0; i < n; ++i)
        m_carry[i] = plus(plus(m_carry[i], lostPart[i]), both[n + i]);
    std::copy(words.begin(), words.end(), m_base.begin());
    const std::vector<BatchRun> tail = queueSlice(givenOut, m_batches);
    std::vector<BatchRun> requeue;
    for (std::size_t i = prefixLength; i < theirs.size(); ++i) {
        if (!requeue.empty() && requeue.back().end == theirs[i])
            requeue.back().end += 1;
        else
            requeue.push_back({theirs[i], theirs[i] + 1});
    }
    m_queue = requeue;
    m_queue.insert(m_queue.end(), tail.begin(), tail.end());
    m_batches = 0;
    for (const BatchRun &b : m_queue)
        m_batches += b.end - b.first;
    m_key = prefix + "sched/next";
    m_offset = 0; // the new counter hands out every position
    m_exhausted = m_batches == 0;
    m_redone.insert(m_redone.end(), requeue.begin(), requeue.end());
    for (int r : lost) {
        LostRank l;
        l.rank = r;
        for (const auto &loss : losses)
            if (loss.rank == r)
                l.cause = loss.cause;
        l.round = committedRound + 1;
        l.committed = m_doneAtRegroup[static_cast<std::size_t>(r)];
        if (matched)
            for (std::size_t i = 0; i < prefixLength; ++i) {
                if (!l.committed.empty() && l.committed.back().end == theirs[i])
                    l.committed.back().end += 1;
                else
                    l.committed.push_back({theirs[i], theirs[i] + 1});
            }
        for (const BatchRun &b : l.committed)
            for (std::int64_t x = b.first; x < b.end; ++x) {
                l.tokens += m_batchTokens[static_cast<std::size_t>(x)];
                l.windows += m_batchWindows.empty() ? 0 : m_batchWindows[static_cast<std::size_t>(x)];
            }
        m_lost.push_back(std::move(l));
        m_pendingAtRegroup[static_cast<std::size_t>(r)].clear();
    }
    for (std::size_t k = 0; k < members.size(); ++k) {
        m_pendingAtRegroup[static_cast<std::size_t>(members[k])] = states[k].pending;
        m_doneAtRegroup[static_cast<std::size_t>(members[k])] = states[k].done;
    }
    m_members = members;
    m_history.clear();
    m_history.push_back(Committed{committedRound + 1, Words(n, 0), m_carry});
    m_rounds = committedRound + 2;
    m_begun = m_rounds; // the next round's index, as without a loss
    std::copy(m_carry.begin(), m_carry.end(), words.begin());
    return true;
}

} // namespace cppl::agent::dist
