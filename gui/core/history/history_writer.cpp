// SPDX-License-Identifier: MIT
#include "history/history_writer.h"

#include "history/history_sql.h"

#include "cppl/errors.h"

#include <QSqlDatabase>
#include <QSqlError>

#include <atomic>
#include <chrono>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

struct HistoryWriter::Context
{
    QSqlDatabase &db;
    std::map<QString, std::int64_t> ids; // run id -> row id, for runs this writer began or found
    std::atomic<std::int64_t> &dropped;

    std::optional<std::int64_t> id(const QString &runId)
    {
        if (const auto it = ids.find(runId); it != ids.end())
            return it->second;
        // A run begun by another writer (an import, a reopened store) is found once by its id.
        if (const auto found = sql::idOf(db, runId)) {
            ids.emplace(runId, *found);
            return found;
        }
        ++dropped;
        return std::nullopt;
    }
};

HistoryWriter::HistoryWriter(const QString &path, Options options) : m_options(options)
{
    m_thread = std::thread([this, path] { loop(path); });
}

HistoryWriter::~HistoryWriter()
{
    {
        const std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_all();
    m_thread.join();
}

void HistoryWriter::enqueue(Op op)
{
    {
        const std::lock_guard lock(m_mutex);
        m_queue.push_back(std::move(op));
        ++m_enqueued;
    }
    m_wake.notify_one();
}

void HistoryWriter::beginRun(RunRecord header)
{
    enqueue([h = std::move(header)](Context &c) {
        if (sql::idOf(c.db, h.runId)) {
            ++c.dropped; // never write into a stored run of the same id
            throw IoError(QString(u"run id "_s + h.runId + u" is already in the store; this run is not recorded"_s).toStdString());
        }
        c.ids[h.runId] = sql::insertRun(c.db, h, false);
    });
}

void HistoryWriter::setPreflight(const QString &runId, QJsonArray preflight, QJsonObject versions, QJsonArray hosts)
{
    enqueue([runId, p = std::move(preflight), v = std::move(versions), h = std::move(hosts)](Context &c) {
        if (const auto id = c.id(runId))
            sql::updatePreflight(c.db, *id, p, v, h);
    });
}

void HistoryWriter::addSamples(const QString &runId, std::vector<RankSample> samples)
{
    enqueue([runId, s = std::move(samples)](Context &c) {
        if (const auto id = c.id(runId))
            sql::insertSamples(c.db, *id, s);
    });
}

void HistoryWriter::addLogs(const QString &runId, std::vector<LogLine> lines)
{
    enqueue([runId, l = std::move(lines)](Context &c) {
        if (const auto id = c.id(runId))
            sql::insertLogs(c.db, *id, l);
    });
}

void HistoryWriter::trimLogs(const QString &runId, int rank, std::int64_t fromSeq, std::int64_t toSeq)
{
    enqueue([=](Context &c) {
        if (const auto id = c.id(runId))
            sql::trimLogs(c.db, *id, rank, fromSeq, toSeq);
    });
}

void HistoryWriter::addAlert(const QString &runId, StoredAlert alert)
{
    enqueue([runId, a = std::move(alert)](Context &c) {
        if (const auto id = c.id(runId))
            sql::insertAlert(c.db, *id, a);
    });
}

void HistoryWriter::finishRun(RunRecord final)
{
    enqueue([f = std::move(final)](Context &c) {
        if (const auto id = c.id(f.runId))
            sql::updateEnd(c.db, *id, f);
    });
}

void HistoryWriter::flush()
{
    std::unique_lock lock(m_mutex);
    const std::uint64_t target = m_enqueued;
    if (m_committed >= target)
        return;
    ++m_flushWaiters;
    m_wake.notify_all();
    m_done.wait(lock, [&] { return m_committed >= target; });
    --m_flushWaiters;
}

QString HistoryWriter::lastError() const
{
    const std::lock_guard lock(m_mutex);
    return m_error;
}

void HistoryWriter::loop(QString path)
{
    static std::atomic<int> serial{0};
    const QString name = u"clusterppl-store-writer-%1"_s.arg(serial++);
    std::optional<QSqlDatabase> db;
    QString openError;
    try {
        db = sql::openConnection(path, name);
    } catch (const cppl::Error &e) {
        openError = QString::fromUtf8(e.what());
    }
    std::map<QString, std::int64_t> ids;
    for (;;) {
        std::vector<Op> batch;
        std::uint64_t upTo = 0;
        {
            std::unique_lock lock(m_mutex);
            m_wake.wait(lock, [&] { return m_stop || !m_queue.empty(); });
            // Gather for one batch interval unless stopping or someone waits in flush().
            m_wake.wait_for(lock, std::chrono::milliseconds(m_options.batchMilliseconds), [&] { return m_stop || m_flushWaiters > 0; });
            batch.swap(m_queue);
            upTo = m_enqueued;
            if (batch.empty() && m_stop)
                break;
        }
        if (!db) {
            const std::lock_guard lock(m_mutex);
            m_error = openError;
            m_dropped += static_cast<std::int64_t>(batch.size());
            m_committed = upTo;
            m_done.notify_all();
            continue;
        }
        Context ctx{*db, {}, m_dropped};
        ctx.ids.swap(ids);
        QString error;
        if (!db->transaction()) {
            error = db->lastError().text();
        } else {
            for (Op &op : batch) {
                try {
                    op(ctx);
                } catch (const cppl::Error &e) {
                    error = QString::fromUtf8(e.what()); // one bad operation never loses the batch
                }
            }
            if (!db->commit()) {
                error = db->lastError().text();
                db->rollback();
            }
        }
        ids.swap(ctx.ids);
        m_transactions += 1;
        {
            const std::lock_guard lock(m_mutex);
            if (!error.isEmpty())
                m_error = error;
            m_committed = upTo;
        }
        m_done.notify_all();
    }
    db.reset();
    sql::closeConnection(name);
    const std::lock_guard lock(m_mutex);
    m_committed = m_enqueued;
    m_done.notify_all();
}

} // namespace cppl::core::history
