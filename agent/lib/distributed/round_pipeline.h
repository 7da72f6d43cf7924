// SPDX-License-Identifier: MIT
#pragma once

#include "distributed_run.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cppl::agent::dist {

/**
 * @brief Hides each sync round's aggregation behind the next round's compute
 * (docs/communication.md, "Overlapping the aggregation").
 *
 * The main thread computes round r, then submit()s its words: with overlap a communication thread
 * of this rank runs the round's whole aggregation (DistributedRun::allReduce: flat all-reduce, or
 * reduce, leaders' all-reduce, broadcast) while the main thread computes round r+1; the main
 * thread wait()s for round r's result only once round r+1 is computed (and at the end). At most
 * one round is in flight, so every rank enters the same collectives in the same order, one at a
 * time, as before. Without overlap submit() runs the collective at once on the calling thread.
 *
 * Measurement: what a rank loses is the time its main thread is blocked in wait() (without
 * overlap: the whole collective). That time is accounted into DistributedRun::comm(), split at the
 * last rank's arrival (from the collective's arrival-time slots): wait before it, transfer after;
 * comm().collectiveSeconds keeps the collectives' full duration, hidden or not.
 *
 * Threads: the communicators are used by one thread at a time (the communication thread while a
 * round is in flight, otherwise the main thread: the closing gather comes after the last wait()).
 * NCCL's communicators take their own lock per call and the watchdog's abort only sets a flag the
 * polling thread acts on (nccl_backend.cpp), whichever thread that is.
 *
 * Tolerant runs (`--on-rank-loss continue`): a round whose collective a lost rank ended makes
 * wait() throw RankLostError once the communication thread is idle again (it is idle whenever no
 * round is in flight); the caller then regroups on its own thread (DynamicSchedule::recover),
 * which replaces the communicators while no other thread uses them, and goes on submitting.
 */
class RoundPipeline
{
public:
    RoundPipeline(DistributedRun &run, bool overlap);
    /// @brief Waits for a round still in flight (its collective completes or fails: the peers' comm
    /// threads take part in it whatever their main threads do; a dead peer ends it through the
    /// watchdog), then ends the communication thread.
    ~RoundPipeline();
    RoundPipeline(const RoundPipeline &) = delete;
    RoundPipeline &operator=(const RoundPipeline &) = delete;

    [[nodiscard]] bool overlapping() const noexcept { return m_overlap; }
    [[nodiscard]] bool inFlight() const noexcept { return m_inFlight; }
    /// @brief Starts the exact SUM of @p words over all ranks (none may be in flight). With overlap
    /// it returns at once; without, the collective is done (and accounted) when it returns.
    void submit(std::vector<std::int64_t> words);
    /// @brief The summed words of the round in flight, once its collective completed; the time
    /// this thread was blocked goes into comm(). Rethrows the collective's error (RankLostError
    /// when a lost rank ended it); the communication thread is idle when it returns or throws.
    [[nodiscard]] std::vector<std::int64_t> wait();

private:
    void loop();

    DistributedRun &m_run;
    const bool m_overlap;
    bool m_inFlight = false; ///< main thread only
    std::vector<std::int64_t> m_words;
    CollectiveTiming m_timing;
    std::exception_ptr m_error;
    // Shared with the communication thread, under m_mutex.
    std::mutex m_mutex;
    std::condition_variable m_cv;
    bool m_job = false;  ///< a round is handed over and not yet done
    bool m_stop = false;
    std::thread m_thread;
};

} // namespace cppl::agent::dist
