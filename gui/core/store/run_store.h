// SPDX-License-Identifier: MIT
#pragma once

// The run history: one SQLite file (QtSql) in the user's data directory. docs/run-store.md has
// the schema, its migrations, the write path and what a crash loses.
//
// Threads: a RunStore's reads use a connection of the thread that constructed it; call them there
// (or construct another RunStore on a worker). Writes go through writer(), which only enqueues.

#include "store/run_record.h"
#include "store/store_writer.h"

#include <QString>

#include <memory>
#include <optional>
#include <vector>

namespace cppl::core::store {

class RunStore
{
public:
    struct Options
    {
        StoreWriter::Options writer;
    };

    /// $CLUSTERPPL_STORE when set, else QStandardPaths::AppDataLocation + "/runs.sqlite".
    [[nodiscard]] static QString defaultPath();

    /// Opens (creating the file and its directory, migrating an older schema) and marks runs left
    /// "running" by a process that no longer exists as "interrupted". Throws cppl::IoError with
    /// the path and the cause.
    explicit RunStore(const QString &path, Options options);
    explicit RunStore(const QString &path = defaultPath()) : RunStore(path, Options{}) {}
    /// Writes everything the writer holds, then closes.
    ~RunStore();
    RunStore(const RunStore &) = delete;
    RunStore &operator=(const RunStore &) = delete;

    [[nodiscard]] QString path() const { return m_path; }
    /// The schema version the file had before this open (0: new file).
    [[nodiscard]] int versionFound() const noexcept { return m_versionFound; }
    [[nodiscard]] static int schemaVersion() noexcept;
    /// Run ids marked "interrupted" by this open.
    [[nodiscard]] const QStringList &interruptedOnOpen() const noexcept { return m_interrupted; }

    /// Runs matching @p filter, newest first, without samples/logs/alerts (ranks are included).
    [[nodiscard]] std::vector<RunRecord> list(const RunFilter &filter = {}) const;
    /// Everything about one run; nullopt when the id is not stored.
    [[nodiscard]] std::optional<RunRecord> get(const QString &runId) const;
    [[nodiscard]] bool contains(const QString &runId) const;
    /// Deletes a run and everything about it; false when the id is not stored.
    bool remove(const QString &runId);
    /// The newest finished one-rank run with this settings key (other than @p excludeRunId).
    [[nodiscard]] std::optional<RunRecord> baselineFor(const QString &settingsKey, const QString &excludeRunId = {}) const;
    /// Stores a whole run (export/import) in one transaction. Throws IoError when its id exists.
    void insert(const RunRecord &record);

    /// The asynchronous write path (started on first use).
    StoreWriter &writer();
    /// Waits until the writer has committed everything enqueued so far.
    void flush();

private:
    void markInterrupted();
    [[nodiscard]] std::vector<RunRecord> select(const QString &where, const QVariantList &binds, int limit) const;

    QString m_path;
    Options m_options;
    QString m_connection;
    int m_versionFound = 0;
    QStringList m_interrupted;
    std::unique_ptr<StoreWriter> m_writer;
};

} // namespace cppl::core::store
