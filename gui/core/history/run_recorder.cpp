// SPDX-License-Identifier: MIT
#include "history/run_recorder.h"

#include "history/host_resources.h"
#include "run/run_directory.h"
#include "run/run_engine.h"
#include "history/run_history.h"

#include <QFileInfo>
#include <QJsonDocument>

#include <cmath>
#include <set>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

RunRecorder::RunRecorder(RunHistory &store, Options options, QObject *parent)
    : QObject(parent), m_writer(store.writer()), m_options(std::move(options))
{
}

void RunRecorder::attach(run::RunEngine *engine)
{
    m_engine = engine;
    using run::RunEngine;
    connect(engine, &RunEngine::planned, this, &RunRecorder::onPlanned);
    connect(engine, &RunEngine::preflightHost, this, &RunRecorder::onPreflight);
    connect(engine, &RunEngine::rankOutput, this, &RunRecorder::onOutput);
    connect(engine, &RunEngine::snapshotReady, this, &RunRecorder::onSnapshot);
    connect(engine, &RunEngine::alertRaised, this, &RunRecorder::onAlert);
    connect(engine, &RunEngine::finished, this, &RunRecorder::onFinished);
}

void RunRecorder::onPlanned()
{
    const run::RunEngine *e = m_engine;
    const run::RunRequest &req = e->request();
    const ClusterProfile &p = req.profile;
    RunRecord &h = m_header;
    h.runId = m_options.recordAs.isEmpty() ? e->runId() : m_options.recordAs;
    h.status = RunStatus::Running;
    h.started = QDateTime::currentDateTimeUtc();
    h.source = m_options.source;
    h.profileName = QString::fromStdString(p.name);
    h.profile = QJsonDocument::fromJson(QByteArray::fromStdString(profileToJson(p))).object();
    const SettingsKeyInputs in = settingsInputsFromProfile(p, req.profilePath.isEmpty() ? QString() : QFileInfo(req.profilePath).absolutePath());
    h.settings = settingsJson(in);
    h.settings.insert(u"tokenizer"_s, QString::fromStdString(p.evaluation.tokenizer));
    h.settings.insert(u"sync_every_tokens"_s, static_cast<qint64>(p.thresholds.syncEveryTokens));
    h.settings.insert(u"backend"_s, QString::fromStdString(p.evaluation.backend));
    h.settings.insert(u"topology"_s, QString::fromStdString(p.evaluation.topology));
    h.settings.insert(u"device"_s, QString::fromStdString(p.evaluation.device));
    // Where the engine keeps logs, checkpoint.json and run.json: what the History page's Resume
    // reads (a --log-dir, or the default place of the engine's run id, which a recordAs id is not).
    h.settings.insert(u"run_directory"_s, req.logDir.isEmpty() ? run::defaultRunDirectory(e->runId()) : QFileInfo(req.logDir).absoluteFilePath());
    if (!req.resumeState.isEmpty())
        h.settings.insert(u"resumed_from_round"_s, QJsonDocument::fromJson(req.resumeState).object().value(u"round"_s).toInt());
    h.model = in.model;
    h.data = in.data;
    h.protocol = in.protocol;
    h.settingsKey = settingsKey(in);
    h.launcher = QString::fromStdString(e->plan().launcher);
    h.worldSize = static_cast<int>(e->plan().ranks.size());
    std::set<int> hosts;
    for (const auto &r : e->plan().ranks)
        hosts.insert(r.hostIndex);
    h.nodeCount = static_cast<int>(hosts.size());
    for (const auto &host : p.hosts)
        h.hosts.append(QJsonObject{{u"name"_s, QString::fromStdString(host.name)},
                                   {u"address"_s, QString::fromStdString(host.address.empty() ? host.name : host.address)},
                                   {u"slots"_s, host.slots}});
    // The agents' --groups list: "0,1;2,3".
    for (const QString &g : QString::fromStdString(e->plan().groups).split(u';', Qt::SkipEmptyParts)) {
        QJsonArray ranks;
        for (const QString &r : g.split(u','))
            ranks.append(r.toInt());
        h.groups.append(ranks);
    }
    h.groupsCount = static_cast<int>(h.groups.size());
    h.owner = currentOwner();
    m_runId = h.runId;
    m_writer.beginRun(h);
    m_begun = true;
}

void RunRecorder::beginIfNeeded()
{
    if (m_begun || !m_engine)
        return;
    // Refused before planning (a bad run id, an invalid profile): still a run the user asked for.
    m_runId = m_options.recordAs.isEmpty() ? m_engine->runId() : m_options.recordAs;
    if (m_runId.isEmpty() || !run::validateRunId(m_runId).isEmpty())
        return;
    m_header.runId = m_runId;
    m_header.started = QDateTime::currentDateTimeUtc();
    m_header.source = m_options.source;
    m_header.profileName = QString::fromStdString(m_engine->request().profile.name);
    m_header.owner = currentOwner();
    m_writer.beginRun(m_header);
    m_begun = true;
}

void RunRecorder::onPreflight(const run::HostPreflight &report)
{
    QJsonArray problems;
    for (const QString &p : report.problems)
        problems.append(p);
    m_preflight.append(QJsonObject{{u"host"_s, report.host}, {u"ran"_s, report.ran}, {u"problems"_s, problems}, {u"report"_s, report.report}});
    m_header.preflight = m_preflight;
    m_header.versions = versionsFrom(m_preflight, {});
    recordHostResources(m_header);
    if (m_begun)
        m_writer.setPreflight(m_runId, m_preflight, m_header.versions, m_header.hosts);
}

void RunRecorder::onOutput(int rank, bool isStderr, const QString &line)
{
    if (!m_begun)
        return;
    RankLog &log = m_logs[rank];
    const std::int64_t seq = log.next++;
    m_writer.addLogs(m_runId, {LogLine{rank, seq, m_engine ? m_engine->elapsedSeconds() : 0.0, isStderr, line}});
    // Past head + tail, lines leave the middle in chunks: the history keeps how a rank started and
    // how it ended, and the gap in line numbers says how many were dropped.
    const std::int64_t keepFrom = log.next - m_options.logTail;
    if (keepFrom - std::max<std::int64_t>(log.trimmed, m_options.logHead) >= 256) {
        const std::int64_t from = std::max<std::int64_t>(log.trimmed, m_options.logHead);
        m_writer.trimLogs(m_runId, rank, from, keepFrom);
        log.trimmed = keepFrom;
    }
}

double RunRecorder::interval() const
{
    return m_options.sampleIntervalSeconds * std::ldexp(1.0, m_stage);
}

void RunRecorder::onSnapshot(const telemetry::SnapshotPtr &snapshot)
{
    if (!m_begun || !snapshot || !m_engine)
        return;
    const double t = m_engine->elapsedSeconds();
    const bool terminal = run::isTerminal(m_engine->phase());
    if (t - m_lastSample < interval() && !terminal)
        return;
    std::vector<RankSample> out;
    out.reserve(snapshot->ranks.size());
    for (const auto &r : snapshot->ranks) {
        if (!r.heard)
            continue;
        out.push_back({t, static_cast<int>(r.rank), r.tokensPerSecond, r.waitShare, r.transferShare, r.deviationRelative, r.stats.tokens});
    }
    if (out.empty())
        return;
    m_lastSample = t;
    if (++m_inStage >= m_options.samplesPerStage) {
        m_inStage = 0;
        ++m_stage;
    }
    m_writer.addSamples(m_runId, std::move(out));
}

void RunRecorder::onAlert(const run::RunAlert &alert)
{
    if (!m_begun)
        return;
    m_writer.addAlert(m_runId, {alert.seconds, alert.when, alert.rank, run::alertKindName(alert.kind), alert.message});
}

void RunRecorder::onFinished(const run::RunOutcome &o)
{
    beginIfNeeded();
    if (!m_begun)
        return;
    // The final figures of the last snapshot are a sample too, however short the run was.
    if (m_engine)
        if (const auto snap = m_engine->latestSnapshot()) {
            m_lastSample = -1e9;
            onSnapshot(snap);
        }
    RunRecord f = m_header;
    switch (o.phase) {
    case run::RunPhase::Finished: f.status = RunStatus::Finished; break;
    case run::RunPhase::Stopped: f.status = RunStatus::Stopped; break;
    default: f.status = RunStatus::Failed; break;
    }
    f.ended = o.ended.isValid() ? o.ended : QDateTime::currentDateTimeUtc();
    f.exitCode = o.exitCode;
    f.firstCause = o.firstCause;
    if (!o.slurmJobId.isEmpty()) { // known only once submitted (docs/launching.md, "Slurm launcher")
        f.settings.insert(u"slurm_job_id"_s, o.slurmJobId);
        f.settings.insert(u"slurm_partition"_s, o.slurmPartition.isEmpty() ? u"(default)"_s : o.slurmPartition);
        f.settings.insert(u"slurm_nodes"_s, o.slurmNodes);
    }
    f.resultJson = o.resultJson;
    const bool hasResult = !f.resultJson.isEmpty() && applyResult(f);
    if (!hasResult && m_engine)
        if (const auto snap = m_engine->latestSnapshot())
            for (const auto &r : snap->ranks) {
                RankSummary s;
                s.rank = static_cast<int>(r.rank);
                s.host = QString::fromStdString(r.host);
                s.group = static_cast<int>(r.group);
                s.tokens = r.stats.tokens;
                s.windows = r.windowsDone;
                s.computeSeconds = r.computeSeconds;
                s.waitSeconds = r.waitSeconds;
                s.transferSeconds = r.transferSeconds;
                s.wallSeconds = r.computeSeconds + r.waitSeconds + r.transferSeconds;
                s.tokensPerSecond = r.tokensPerSecond;
                f.ranks.push_back(s);
            }
    for (RankSummary &s : f.ranks)
        if (const auto it = o.ends.find(s.rank); it != o.ends.end())
            s.exitCode = it->second.exitCode;
    f.versions = versionsFrom(m_preflight, QJsonDocument::fromJson(f.resultJson).object());
    recordHostResources(f); // rank 0's CPUs, when pre-flight did not run
    m_writer.finishRun(std::move(f));
    Q_EMIT recorded(m_runId);
}

} // namespace cppl::core::history
