// SPDX-License-Identifier: MIT
#include "sweep_runner.h"

#include "history/run_recorder.h"
#include "history/run_history.h"
#include "history/sweep.h"

#include "cppl/errors.h"

#include <QFileInfo>
#include <QTimer>

using namespace Qt::StringLiterals;
using cppl::core::run::RunEngine;
using cppl::core::run::RunOutcome;

namespace cppl::app {

SweepRunner::SweepRunner(cppl::core::history::RunHistory &history, QObject *parent)
    : QObject(parent)
    , m_history(history)
{
}

// The recorder before the engine: a recorder never outlives the history, an engine stops its ranks.
SweepRunner::~SweepRunner()
{
    m_engine.reset();
    m_recorder.reset();
}

bool SweepRunner::start(const cppl::core::run::RunRequest &base, const std::vector<int> &counts, QString *error, const QStringList &precisions,
                        const QString &reference)
{
    if (running()) {
        *error = tr("A sweep is already running; stop it first");
        return false;
    }
    if (counts.empty()) {
        *error = tr("The sweep has no rank counts; give a list such as 1,2,4,8");
        return false;
    }
    std::vector<cppl::core::history::SweepRun> plan;
    try {
        plan = cppl::core::history::planSweep(base.profile, counts, precisions, reference); // every count checked first
    } catch (const cppl::Error &e) {
        *error = QString::fromUtf8(e.what());
        return false;
    }
    m_base = base;
    m_plan = std::move(plan);
    m_ids.clear();
    m_failures = 0;
    m_stopped = false;
    m_prefix = u"sweep-"_s + cppl::core::run::generateRunId();
    m_index = -1;
    startNext();
    return true;
}

void SweepRunner::stop()
{
    m_stopped = true;
    if (m_engine && !cppl::core::run::isTerminal(m_engine->phase()))
        m_engine->stop();
}

void SweepRunner::startNext()
{
    ++m_index;
    // The previous engine is done (this runs queued after its finished()): drop it.
    m_engine.reset();
    m_recorder.reset();
    if (m_stopped || m_index >= int(m_plan.size())) {
        const QStringList ids = m_ids;
        const int failures = m_failures;
        const bool stopped = m_stopped;
        m_index = -1;
        m_history.flush();
        Q_EMIT finished(ids, failures, stopped);
        return;
    }
    cppl::core::run::RunRequest req = m_base;
    const cppl::core::history::SweepRun &planned = m_plan[std::size_t(m_index)];
    req.profile = planned.profile;
    req.runId = m_prefix + u'-' + planned.idSuffix;
    req.baselineResultJson.clear();
    // The previous run's end is on disk, so a one-rank run earlier in this sweep is the baseline.
    m_history.flush();
    const QString dir = req.profilePath.isEmpty() ? QString() : QFileInfo(req.profilePath).absolutePath();
    if (const auto b = m_history.baselineFor(cppl::core::history::settingsKey(cppl::core::history::settingsInputsFromProfile(req.profile, dir))))
        req.baselineResultJson = b->resultJson;
    m_engine = std::make_unique<RunEngine>();
    cppl::core::history::RunRecorder::Options ro;
    ro.source = u"sweep"_s;
    m_recorder = std::make_unique<cppl::core::history::RunRecorder>(m_history, ro);
    m_recorder->attach(m_engine.get());
    const QString id = req.runId;
    m_ids << id;
    connect(m_engine.get(), &RunEngine::finished, this, [this, id](const RunOutcome &o) {
        if (o.phase != cppl::core::run::RunPhase::Finished)
            ++m_failures;
        Q_EMIT runEnded(id, o);
        // Not inside the engine's own signal: startNext() destroys it.
        QTimer::singleShot(0, this, &SweepRunner::startNext);
    });
    Q_EMIT progress(m_index, int(m_plan.size()), planned.ranks, id);
    m_engine->start(std::move(req));
}

} // namespace cppl::app
