// SPDX-License-Identifier: MIT
#include "round_pipeline.h"

#include "cppl/errors.h"

#include <chrono>
#include <utility>

namespace cppl::agent::dist {

RoundPipeline::RoundPipeline(DistributedRun &run, bool overlap) : m_run(run), m_overlap(overlap)
{
    if (m_overlap)
        m_thread = std::thread([this] { loop(); });
}

RoundPipeline::~RoundPipeline()
{
    if (!m_thread.joinable())
        return;
    {
        const std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_cv.notify_all();
    m_thread.join(); // after the round in flight, if any (its result is dropped: the run failed)
}

void RoundPipeline::loop()
{
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_cv.wait(lock, [this] { return m_stop || m_job; });
        if (!m_job)
            return;
        lock.unlock();
        std::exception_ptr error;
        try {
            m_run.allReduce(m_words, &m_timing);
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        m_error = error;
        m_job = false;
        m_cv.notify_all();
    }
}

void RoundPipeline::submit(std::vector<std::int64_t> words)
{
    CPPL_ENFORCE(!m_inFlight, "a round submitted while another is in flight");
    m_words = std::move(words);
    m_inFlight = true;
    m_error = nullptr;
    try { // the first round waits for every rank's model load, on this (the main) thread: the store is its
        m_run.awaitLoaded();
    } catch (...) { // rethrown by wait(), as the collective's own error
        m_error = std::current_exception();
        return;
    }
    if (!m_overlap) { // blocked for the whole call, from this rank's arrival
        try {
            m_run.allReduce(m_words, &m_timing);
        } catch (...) {
            m_error = std::current_exception();
            return;
        }
        m_run.account(m_timing, m_timing.arrivalNs, m_timing.seconds);
        return;
    }
    {
        const std::lock_guard lock(m_mutex);
        m_job = true;
    }
    m_cv.notify_all();
}

std::vector<std::int64_t> RoundPipeline::wait()
{
    CPPL_ENFORCE(m_inFlight, "wait() without a round in flight");
    m_inFlight = false;
    if (m_overlap) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::int64_t from = m_run.nowOnRank0Ns();
        {
            std::unique_lock lock(m_mutex);
            m_cv.wait(lock, [this] { return !m_job; });
        }
        if (!m_error) // only the time this thread was blocked counts: the rest was hidden behind compute
            m_run.account(m_timing, from, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (m_error)
        std::rethrow_exception(std::exchange(m_error, nullptr));
    return std::move(m_words);
}

} // namespace cppl::agent::dist
