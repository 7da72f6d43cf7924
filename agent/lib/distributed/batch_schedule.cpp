// SPDX-License-Identifier: MIT
#include "batch_schedule.h"

#include "distributed_run.h"
#include "store.h"

#include "cppl/errors.h"
#include "cppl/sharding.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>

namespace cppl::agent::dist {

namespace {

/// Timer and scheduler noise in a measured compute time (seconds): what a speed measured over
/// little compute cannot resolve (beginRound).
constexpr double kSpeedNoiseSeconds = 0.03;

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

} // namespace

const char *scheduleName(Schedule s) noexcept
{
    return s == Schedule::Static ? "static" : "dynamic";
}

std::string formatBatchRuns(std::span<const BatchRun> runs)
{
    std::string s;
    for (const BatchRun &r : runs) {
        if (r.end <= r.first)
            continue;
        if (!s.empty())
            s += ',';
        s += std::to_string(r.first);
        if (r.end - r.first > 1)
            s += '-' + std::to_string(r.end - 1);
    }
    return s;
}

std::optional<std::vector<BatchRun>> parseBatchRuns(const std::string &text)
{
    std::vector<BatchRun> out;
    std::size_t pos = 0;
    auto number = [&](std::int64_t &v) {
        const char *b = text.data() + pos;
        const auto [p, ec] = std::from_chars(b, text.data() + text.size(), v);
        if (ec != std::errc() || p == b || v < 0)
            return false;
        pos = static_cast<std::size_t>(p - text.data());
        return true;
    };
    while (pos < text.size()) {
        std::int64_t a = 0, b = 0;
        if (!number(a))
            return std::nullopt;
        b = a;
        if (pos < text.size() && text[pos] == '-') {
            ++pos;
            if (!number(b) || b < a)
                return std::nullopt;
        }
        out.push_back({a, b + 1});
        if (pos < text.size() && text[pos++] != ',')
            return std::nullopt;
    }
    return out;
}

DynamicSchedule::DynamicSchedule(DistributedRun &run, std::vector<std::int64_t> batchTokens, std::int64_t syncEveryTokens, std::string key,
                                 std::optional<std::vector<std::int64_t>> order)
    : m_run(run), m_batchTokens(std::move(batchTokens)), m_sync(syncEveryTokens), m_key(std::move(key)), m_order(std::move(order))
{
    if (syncEveryTokens < 0)
        throw ConfigError("sync threshold must be >= 0 tokens (0 = after every batch), got " + std::to_string(syncEveryTokens));
    m_batches = static_cast<std::int64_t>(m_order ? m_order->size() : m_batchTokens.size());
    std::int64_t total = 0;
    for (std::int64_t i = 0; i < m_batches; ++i)
        total += m_batchTokens[static_cast<std::size_t>(m_order ? (*m_order)[static_cast<std::size_t>(i)] : i)];
    m_meanBatchTokens = m_batches > 0 ? std::max(1.0, static_cast<double>(total) / static_cast<double>(m_batches)) : 1.0;
}

DynamicSchedule::Sizing DynamicSchedule::sizing() const
{
    // Guided self-scheduling: half of this rank's fair share of what is left, in proportion to its
    // measured speed among all ranks', so that runs are long while much is left (few store round
    // trips) and single batches at the end (the last claims finish together). Never more than one
    // round of this rank's work: a claimed run is this rank's until it is evaluated, and a long one
    // would hold batches a faster rank could take. Round 0 (speeds unknown) claims one batch.
    Sizing z;
    const double myRate = m_myTokens > 0 && m_myCompute > 0 ? static_cast<double>(m_myTokens) / m_myCompute : 0;
    z.share = m_rateSum > 0 && myRate > 0 ? std::min(1.0, myRate / m_rateSum) : 1.0 / m_run.worldSize();
    if (m_sync == 0 || m_rounds == 0)
        z.cap = 1;
    else if (m_sync != kSyncAtEnd)
        z.cap = std::max<std::int64_t>(1, static_cast<std::int64_t>(m_roundBudget / m_meanBatchTokens));
    return z;
}

std::int64_t DynamicSchedule::Sizing::of(std::int64_t left) const
{
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(static_cast<double>(left) * share / 2), 1, cap);
}

std::pair<std::int64_t, std::int64_t> DynamicSchedule::Sizing::claim(Store &store, const std::string &key, std::int64_t batches) const
{
    // Read the counter first (add 0): other ranks have moved it since this rank last looked, and
    // sizing from a stale value would take too much near the end, where it matters most.
    const std::int64_t seen = cap > 1 ? store.add(key, 0) : 0;
    const std::int64_t k = of(std::max<std::int64_t>(0, batches - seen));
    return {store.add(key, k), k};
}

void DynamicSchedule::accept(std::int64_t end, std::int64_t k)
{
    ++m_claims;
    const std::int64_t first = end - k;
    if (first >= m_batches) {
        m_exhausted = true;
        return;
    }
    m_pending.push_back({first, std::min(end, m_batches)});
    if (end >= m_batches)
        m_exhausted = true; // the last run: no need to ask again
}

bool DynamicSchedule::claim()
{
    const double t0 = now();
    if (m_inflight.valid()) {
        const auto [end, k] = m_inflight.get(); // rethrows the store's error
        accept(end, k);
    } else if (!m_exhausted) {
        const auto [end, k] = sizing().claim(m_run.store(), m_key, m_batches);
        accept(end, k);
    }
    m_claimSeconds += now() - t0;
    return !m_pending.empty();
}

void DynamicSchedule::prefetch()
{
    // Ask for the next run while this rank still computes the last batch of its current one, so
    // the store's round trips (a millisecond or more on a loaded host) are not on the critical path.
    if (m_exhausted || m_inflight.valid() || m_rounds == 0)
        return;
    std::int64_t pending = 0;
    for (const BatchRun &r : m_pending)
        pending += r.end - r.first;
    if (pending > 1)
        return;
    m_inflight = std::async(std::launch::async, [z = sizing(), &store = m_run.store(), key = m_key, n = m_batches] { return z.claim(store, key, n); });
}

void DynamicSchedule::beginRound()
{
    m_inRound = 0;
    m_roundTokens = 0;
    m_roundDone.clear();
    if (m_sync == kSyncAtEnd) {
        m_roundBudget = std::numeric_limits<double>::infinity();
    } else if (m_sync == 0 || m_rounds == 0 || !(m_rateSum > 0) || m_known == 0) {
        m_roundBudget = 0; // one batch: every batch (threshold 0), or round 0, which measures the speed
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
        const double ramp = std::pow(8.0, m_rounds) * m_meanBatchTokens;
        m_roundBudget = std::min(static_cast<double>(m_sync), ramp) * rate / mean;
    }
}

bool DynamicSchedule::othersStillStarting()
{
    // Ranks start at different times (loading the model, connecting). Rather than wait at round
    // 0's collective for the last one, a rank that has its first batch done goes on with single
    // batches until every rank has done its first; the wait for a late starter is then at most one
    // batch. One store round trip per batch, in round 0 only. (Threshold 0 keeps one batch a round.)
    if (m_rounds != 0 || m_sync == 0 || m_run.worldSize() < 2)
        return false;
    const double t0 = now();
    const std::string key = m_key + "/started";
    const std::int64_t started = m_run.store().add(key, m_announced ? 0 : 1);
    m_announced = true;
    m_claimSeconds += now() - t0;
    return started < m_run.worldSize();
}

std::optional<std::int64_t> DynamicSchedule::next()
{
    if (m_inRound > 0 && !(m_roundBudget > 0) && !othersStillStarting())
        return std::nullopt;
    if (m_pending.empty() && !claim())
        return std::nullopt;
    BatchRun &front = m_pending.front();
    const std::int64_t b = m_order ? (*m_order)[static_cast<std::size_t>(front.first)] : front.first;
    // Stop at the batch boundary nearest to this round's budget: go on only if the next batch
    // overshoots it by less than stopping now falls short.
    if (m_inRound > 0 && std::isfinite(m_roundBudget)
        && static_cast<double>(m_roundTokens) + 0.5 * static_cast<double>(m_batchTokens[static_cast<std::size_t>(b)]) > m_roundBudget)
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

bool DynamicSchedule::sync(std::span<std::int64_t> words)
{
    // Empty now means empty for good: the counter only grows, and nothing is pending.
    if (m_pending.empty() && m_inflight.valid())
        claim();
    const bool empty = m_pending.empty() && m_exhausted;
    m_buffer.assign(words.begin(), words.end());
    const bool knowsSpeed = m_myTokens > 0 && m_myCompute > 0;
    const double rate = knowsSpeed ? static_cast<double>(m_myTokens) / m_myCompute : 0;
    const int world = m_run.worldSize();
    m_buffer.push_back(empty ? 1 : 0);
    const std::size_t speeds = m_buffer.size();
    m_buffer.resize(speeds + static_cast<std::size_t>(world), 0); // one slot per rank: only this rank's is non-zero here
    m_buffer[speeds + static_cast<std::size_t>(m_run.rank())] = static_cast<std::int64_t>(std::llround(std::min(rate, 1e15) * 1000.0));
    m_run.allReduce(m_buffer);
    std::copy(m_buffer.begin(), m_buffer.begin() + static_cast<std::ptrdiff_t>(words.size()), words.begin());
    const std::int64_t emptyRanks = m_buffer[words.size()];
    // Every rank sizes the next round from the same speeds.
    m_rates.assign(static_cast<std::size_t>(world), 0);
    m_rateSum = 0;
    m_known = 0;
    for (int k = 0; k < world; ++k) {
        const std::int64_t milli = m_buffer[speeds + static_cast<std::size_t>(k)];
        if (milli <= 0)
            continue;
        m_rates[static_cast<std::size_t>(k)] = static_cast<double>(milli) / 1000.0;
        m_rateSum += m_rates[static_cast<std::size_t>(k)];
        ++m_known;
    }
    ++m_rounds;
    if (emptyRanks > m_run.worldSize() || emptyRanks < 0)
        throw ProtocolError("rank " + std::to_string(m_run.rank()) + ": the round's collective says " + std::to_string(emptyRanks) + " of "
                            + std::to_string(m_run.worldSize()) + " ranks are done: do all ranks run the same agent version and --schedule?");
    return emptyRanks == m_run.worldSize();
}

} // namespace cppl::agent::dist
