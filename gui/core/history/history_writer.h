// SPDX-License-Identifier: MIT
#pragma once

// The run history's write path: a thread with its own SQLite connection. Callers only enqueue
// (a mutex held for a vector push, never for disk work); the thread commits what has queued up
// in one transaction at most every Options::batchMilliseconds, so a crash loses at most that much
// (docs/run-history.md, "Write path").

#include "history/run_record.h"

#include <QString>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

class QSqlDatabase;

namespace cppl::core::history {

class HistoryWriter
{
public:
    struct Options
    {
        // Upper bound on what a crash loses, and on how long one transaction's data waits; short
        // enough for the "~1 s", long enough that 25 Hz telemetry is one commit, not 25.
        int batchMilliseconds = 500;
    };

    /// Opens its own connection to @p path on the writer thread; the schema must exist (RunHistory
    /// creates and migrates it first).
    HistoryWriter(const QString &path, Options options);
    /// Writes everything enqueued, then stops the thread.
    ~HistoryWriter();
    HistoryWriter(const HistoryWriter &) = delete;
    HistoryWriter &operator=(const HistoryWriter &) = delete;

    /// A new runs row (status as given, usually running). Later calls name the run by runId; calls
    /// for a run whose row could not be written (an id already stored) are dropped and counted.
    void beginRun(RunRecord header);
    /// The pre-flight reports, their versions, and the hosts with what they found (recordHostResources).
    void setPreflight(const QString &runId, QJsonArray preflight, QJsonObject versions, QJsonArray hosts);
    void addSamples(const QString &runId, std::vector<RankSample> samples);
    void addLogs(const QString &runId, std::vector<LogLine> lines);
    /// Deletes log lines [fromSeq, toSeq) of one rank (the recorder keeps a head and a tail).
    void trimLogs(const QString &runId, int rank, std::int64_t fromSeq, std::int64_t toSeq);
    void addAlert(const QString &runId, StoredAlert alert);
    /// Status, end time, result and the fields parsed from it, versions, hosts, rank summaries.
    void finishRun(RunRecord final);

    /// Blocks until everything enqueued before the call is committed (tests, end of a CLI run).
    void flush();

    /// The last write error (disk full, a locked file past the busy timeout); empty when none.
    [[nodiscard]] QString lastError() const;
    [[nodiscard]] std::int64_t transactions() const noexcept { return m_transactions.load(); }
    [[nodiscard]] std::int64_t operationsDropped() const noexcept { return m_dropped.load(); }

private:
    struct Context;
    using Op = std::function<void(Context &)>;
    void enqueue(Op op);
    void loop(QString path);

    Options m_options;
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    std::condition_variable m_done;
    std::vector<Op> m_queue;
    std::uint64_t m_enqueued = 0;  // operations ever enqueued
    std::uint64_t m_committed = 0; // of those, written (or failed) and committed
    bool m_stop = false;
    int m_flushWaiters = 0;
    QString m_error;
    std::atomic<std::int64_t> m_transactions{0};
    std::atomic<std::int64_t> m_dropped{0};
    std::thread m_thread;
};

} // namespace cppl::core::history
