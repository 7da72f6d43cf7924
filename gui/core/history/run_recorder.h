// SPDX-License-Identifier: MIT
#pragma once

// Records everything a RunEngine emits into a RunHistory, as it arrives: the run's row when it is
// planned, pre-flight reports, per-rank samples (at most one per second, thinning out on long
// runs), log lines (a head and a tail per rank), alerts, and the end. Only enqueues: the engine's
// thread never waits on the disk.

#include "history/run_record.h"
#include "telemetry/snapshot_ptr.h"

#include <QObject>
#include <QPointer>

#include <map>
#include <optional>

namespace cppl::core::run {
class RunEngine;
struct HostPreflight;
struct RunAlert;
struct RunOutcome;
} // namespace cppl::core::run

namespace cppl::core::history {

class RunHistory;
class HistoryWriter;

class RunRecorder : public QObject
{
    Q_OBJECT

public:
    struct Options
    {
        QString source = QStringLiteral("cli"); ///< "cli", "dashboard", "sweep"
        // Samples: one per interval; the interval doubles after every samplesPerStage samples, so
        // a 10-hour run keeps ~7 stages' worth (docs/run-history.md, "Samples").
        double sampleIntervalSeconds = 1.0;
        int samplesPerStage = 600;
        // Logs: the first logHead lines of each rank and its last logTail lines are kept.
        int logHead = 1000;
        int logTail = 1000;
        // The id the history records the run under; empty: the engine's run id. (A run id already
        // in the history is recorded under a free variant instead of overwriting the old run.)
        QString recordAs;
    };

    explicit RunRecorder(RunHistory &store, QObject *parent = nullptr) : RunRecorder(store, Options{}, parent) {}
    RunRecorder(RunHistory &store, Options options, QObject *parent = nullptr);

    /// Connect before engine->start(): planned() is emitted inside start().
    void attach(run::RunEngine *engine);
    [[nodiscard]] QString runId() const { return m_runId; }

Q_SIGNALS:
    /// The end of the run was enqueued (flush the history to read it back).
    void recorded(const QString &runId);

private:
    void onPlanned();
    void onPreflight(const run::HostPreflight &report);
    void onOutput(int rank, bool isStderr, const QString &line);
    void onSnapshot(const telemetry::SnapshotPtr &snapshot);
    void onAlert(const run::RunAlert &alert);
    void onFinished(const run::RunOutcome &outcome);
    void beginIfNeeded();
    [[nodiscard]] double interval() const;

    struct RankLog
    {
        std::int64_t next = 0;     // seq of the next line
        std::int64_t trimmed = 0;  // lines [logHead, trimmed) already deleted
    };

    HistoryWriter &m_writer;
    Options m_options;
    QPointer<run::RunEngine> m_engine;
    QString m_runId;
    bool m_begun = false;
    RunRecord m_header;
    QJsonArray m_preflight;
    std::map<int, RankLog> m_logs;
    double m_lastSample = -1e9;
    int m_stage = 0;
    int m_inStage = 0;
};

} // namespace cppl::core::history
