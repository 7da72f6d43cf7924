// SPDX-License-Identifier: MIT
#pragma once

// The dashboard's sweep: the same evaluation at several rank counts, and optionally at several
// precisions at each (history/sweep.h derives each profile), one RunEngine after another, each recorded into the history with the stored one-rank
// baseline, then the run ids for Compare. The CLI twin is `clusterppl-cli sweep`.

#include "history/sweep.h"
#include "run/run_engine.h"

#include <QObject>
#include <QStringList>

#include <memory>
#include <vector>

namespace cppl::core::history {
class RunRecorder;
class RunHistory;
} // namespace cppl::core::history

namespace cppl::app {

class SweepRunner : public QObject
{
    Q_OBJECT

public:
    explicit SweepRunner(cppl::core::history::RunHistory &history, QObject *parent = nullptr);
    ~SweepRunner() override;

    /// Checks every count against the profile first (ConfigError message in @p error), then
    /// starts the first run. @p base: profilePath, agent, logDir and launcher settings to use.
    /// @p precisions (none, int8, int4, int4-asym): a precision sweep, each at each count, against
    /// @p reference (empty: the profile's reference model, else the model itself).
    bool start(const cppl::core::run::RunRequest &base, const std::vector<int> &counts, QString *error,
               const QStringList &precisions = {}, const QString &reference = {});
    /// The runs of the sweep started last (profiles, rank counts, precisions).
    [[nodiscard]] const std::vector<cppl::core::history::SweepRun> &plan() const noexcept { return m_plan; }
    /// Stops the current run; no further run starts.
    void stop();
    [[nodiscard]] bool running() const noexcept { return m_index >= 0; }
    [[nodiscard]] cppl::core::run::RunEngine *engine() const noexcept { return m_engine.get(); }
    [[nodiscard]] const QStringList &runIds() const noexcept { return m_ids; }

Q_SIGNALS:
    /// Run @p index (0-based) of @p total started, with @p ranks ranks.
    void progress(int index, int total, int ranks, const QString &runId);
    void runEnded(const QString &runId, const cppl::core::run::RunOutcome &outcome);
    /// Every run ended (or Stop); @p failures: runs that did not finish.
    void finished(const QStringList &runIds, int failures, bool stopped);

private:
    void startNext();

    cppl::core::history::RunHistory &m_history;
    cppl::core::run::RunRequest m_base;
    std::vector<cppl::core::history::SweepRun> m_plan;
    QStringList m_ids;
    QString m_prefix;
    int m_index = -1;
    int m_failures = 0;
    bool m_stopped = false;
    std::unique_ptr<cppl::core::history::RunRecorder> m_recorder;
    std::unique_ptr<cppl::core::run::RunEngine> m_engine;
};

} // namespace cppl::app
