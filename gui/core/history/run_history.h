// SPDX-License-Identifier: MIT
#pragma once

// The run history: one SQLite file (QtSql) in the user's data directory. docs/run-history.md has
// the schema, its migrations, the write path and what a crash loses.
//
// Threads: a RunHistory's reads use a connection of the thread that constructed it; call them there
// (or construct another RunHistory on a worker). Writes go through writer(), which only enqueues.

#include "history/run_record.h"
#include "history/history_writer.h"

#include <QString>

#include <memory>
#include <optional>
#include <vector>

namespace cppl::core::history {

class RunHistory
{
public:
    struct Options
    {
        HistoryWriter::Options writer;
    };

    /// $CLUSTERPPL_STORE when set, else ~/.local/share/clusterppl/runs.sqlite ($XDG_DATA_HOME
    /// respected): one history for the dashboard and the CLI.
    [[nodiscard]] static QString defaultPath();
    /// Where the dashboard (~/.local/share/ClusterPPL/clusterppl/runs.sqlite) and the CLI
    /// (~/.local/share/clusterppl-cli/runs.sqlite) each kept a history of their own in earlier builds.
    [[nodiscard]] static QStringList earlierDefaultPaths();
    /// Once, when the shared default store does not exist yet and $CLUSTERPPL_STORE is not set:
    /// creates it with every run of the earlier stores that exist (read from copies, so those
    /// files stay as they were; a run id in both is kept twice, the second as ID.2). The history
    /// appears whole or not at all (built beside it, then linked into place; a process that
    /// adopts at the same moment leaves it to the first). Returns a line per earlier store found
    /// ("N runs from PATH", or why it could not be read and what to do), empty when there was
    /// nothing to do. Throws cppl::IoError when the history cannot be created.
    static QStringList adoptEarlierStores();

    /// Opens (creating the file and its directory, migrating an older schema) and marks runs left
    /// "running" by a process that no longer exists as "interrupted". Throws cppl::IoError with
    /// the path and the cause.
    explicit RunHistory(const QString &path, Options options);
    explicit RunHistory(const QString &path = defaultPath()) : RunHistory(path, Options{}) {}
    /// Writes everything the writer holds, then closes.
    ~RunHistory();
    RunHistory(const RunHistory &) = delete;
    RunHistory &operator=(const RunHistory &) = delete;

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
    /// @p runId when it is not stored, else the first of ID.2, ID.3, ... that is not.
    [[nodiscard]] QString freeRunId(const QString &runId) const;
    /// Deletes a run and everything about it; false when the id is not stored.
    bool remove(const QString &runId);
    /// The newest finished one-rank run with this settings key (other than @p excludeRunId) and,
    /// when @p dtype is given, whose result ran in it: two runs of a profile with dtype auto share
    /// a key whether they ran on GPUs (bfloat16) or CPUs (float32), not a precision (resultDtype).
    [[nodiscard]] std::optional<RunRecord> baselineFor(const QString &settingsKey, const QString &excludeRunId = {},
                                                       const QString &dtype = {}) const;
    /// Stores a whole run (export/import) in one transaction. Throws IoError when its id exists.
    void insert(const RunRecord &record);

    /// The asynchronous write path (started on first use).
    HistoryWriter &writer();
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
    std::unique_ptr<HistoryWriter> m_writer;
};

} // namespace cppl::core::history
