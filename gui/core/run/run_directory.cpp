// SPDX-License-Identifier: MIT
#include "run/run_directory.h"

#include "cppl/errors.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSaveFile>
#include <QStringList>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

namespace {

QString saveAtomically(const QString &path, const QByteArray &bytes)
{
    QSaveFile f(path); // a temporary file beside it, flushed to disk, then renamed over it
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit())
        return u"%1: cannot write: %2"_s.arg(path, f.errorString());
    return {};
}

QString syncText(std::int64_t t)
{
    return t < 0 ? u"end"_s : QString::number(t);
}

} // namespace

std::optional<BatchRanges> parseBatchRanges(const QString &text)
{
    return cppl::lines::parseBatchRanges(text.toStdString());
}

QString formatBatchRanges(const BatchRanges &ranges)
{
    return QString::fromStdString(cppl::lines::formatBatchRanges(ranges));
}

void mergeBatchRanges(BatchRanges &into, const BatchRanges &more)
{
    into.insert(into.end(), more.begin(), more.end());
    std::sort(into.begin(), into.end());
    BatchRanges merged;
    for (const auto &r : into) {
        if (r.end <= r.first)
            continue;
        if (!merged.empty() && r.first <= merged.back().end)
            merged.back().end = std::max(merged.back().end, r.end);
        else
            merged.push_back(r);
    }
    into = std::move(merged);
}

CheckpointWriter::CheckpointWriter(QString directory, QString runId, int worldSize, BatchRanges committed, QJsonObject resumedFrom)
    : m_dir(std::move(directory)), m_runId(std::move(runId)), m_worldSize(worldSize), m_committed(std::move(committed)),
      m_resumedFrom(std::move(resumedFrom))
{
}

void CheckpointWriter::fail(const QString &why)
{
    if (m_error.isEmpty())
        m_error = why;
}

bool CheckpointWriter::take(int rank, const cppl::lines::Decoded &line)
{
    using cppl::lines::Kind;
    if (!line.kind || (*line.kind != Kind::Ledger && *line.kind != Kind::Checkpoint && *line.kind != Kind::Regroup))
        return false;
    const QString what = *line.kind == Kind::Ledger ? u"ledger"_s : *line.kind == Kind::Regroup ? u"regroup"_s : u"checkpoint"_s;
    switch (line.status) {
    case cppl::lines::Status::Accepted: break;
    case cppl::lines::Status::NewerVersion: // its rounds cannot be counted: no checkpoint would be complete
        fail(u"rank %1 sent a %2 line of version %3, newer than this ClusterPPL reads; checkpoints stop here"_s.arg(rank).arg(what).arg(line.version));
        return false;
    default:
        fail(u"rank %1 sent a malformed %2 line (%3); checkpoints stop here"_s.arg(rank).arg(what, QString::fromStdString(line.reason())));
        return true;
    }
    if (const auto *l = std::get_if<cppl::lines::Ledger>(&line.event))
        takeLedger(rank, *l);
    else if (const auto *g = std::get_if<cppl::lines::Regroup>(&line.event))
        takeRegroup(rank, *g);
    else
        takeCheckpoint(rank, std::get<cppl::lines::Checkpoint>(line.event));
    return true;
}

void CheckpointWriter::takeLedger(int rank, const cppl::lines::Ledger &l)
{
    if (l.rank != rank)
        return fail(u"rank %1 sent a malformed ledger line (it names rank %2); checkpoints stop here"_s.arg(rank).arg(l.rank));
    if (isLost(rank))
        return; // its batches that count came with the regroup line
    if (const auto it = m_latest.find(rank); it == m_latest.end() || it->second < std::make_pair(l.epoch, l.round))
        m_latest[rank] = {l.epoch, l.round};
    m_pendingLedger.push_back({rank, l.round, l.batches});
    tryCommit();
}

void CheckpointWriter::takeRegroup(int rank, const cppl::lines::Regroup &g)
{
    std::map<int, BatchRanges> lost;
    for (const cppl::lines::LostBatches &l : g.lost) {
        if (l.rank >= m_worldSize || l.rank == rank)
            return fail(u"rank %1 sent a malformed regroup line (it names rank %2 lost); checkpoints stop here"_s.arg(rank).arg(l.rank));
        lost[l.rank] = l.batches;
    }
    if (g.epoch <= m_regroupEpoch)
        return; // an older regrouping's (the newest names every rank lost so far)
    m_regroupEpoch = g.epoch;
    m_regroupFirst = g.firstRound;
    m_lost = std::move(lost);
    for (const auto &[r, batches] : m_lost) { // their own lines no longer count
        m_rankCommitted.erase(r);
        m_latest.erase(r);
    }
    std::erase_if(m_pendingLedger, [&](const Line &l) { return isLost(l.rank); });
    if (m_pending && m_pending->epoch < g.epoch)
        m_pending.reset(); // a round before the loss that will never be complete
    tryCommit();
}

void CheckpointWriter::takeCheckpoint(int rank, const cppl::lines::Checkpoint &c)
{
    if (c.epoch < m_regroupEpoch)
        return; // sent before the newest regrouping: a round before it is complete again
    // The reporting rank: rank 0, or after a regrouping the lowest rank not lost (its regroup
    // line comes first, on the same stream).
    int reporter = 0;
    while (c.epoch == m_regroupEpoch && isLost(reporter))
        ++reporter;
    if (rank != reporter && c.epoch == m_regroupEpoch)
        return fail(u"rank %1 sent a checkpoint line, but rank %2 reports for the run; checkpoints stop here"_s.arg(rank).arg(reporter));
    if (c.round <= m_written)
        return; // not newer than what is written
    m_pending = Pending{c.epoch, c.round, QJsonDocument::fromJson(QByteArray::fromStdString(cppl::lines::checkpointDocument(c))).object()};
    tryCommit();
}

void CheckpointWriter::tryCommit()
{
    if (!m_pending || !m_error.isEmpty() || m_dir.isEmpty())
        return;
    const int round = m_pending->round, epoch = m_pending->epoch;
    if (epoch != m_regroupEpoch)
        return; // its regroup line is not here yet
    if (epoch > 0 && round < m_regroupFirst) {
        m_pending.reset(); // not complete after the regrouping (an agent would not send it)
        return;
    }
    // Committed through round r: every rank (after a regrouping, every survivor) has named its
    // batches of every round up to r, in r's epoch or later; ranks lost count with the batches the
    // regroup line gave them.
    for (int r = 0; r < m_worldSize; ++r) {
        if (isLost(r) || printsNoLedger(r))
            continue;
        const auto it = m_latest.find(r);
        if (it == m_latest.end() || it->second < std::make_pair(epoch, round))
            return;
    }
    BatchRanges now = m_committed;
    for (const auto &[r, batches] : m_lost)
        mergeBatchRanges(now, batches);
    auto keep = m_pendingLedger.begin();
    for (auto it = m_pendingLedger.begin(); it != m_pendingLedger.end(); ++it) {
        if (it->round <= round)
            mergeBatchRanges(m_rankCommitted[it->rank], it->batches);
        else
            *keep++ = std::move(*it);
    }
    m_pendingLedger.erase(keep, m_pendingLedger.end());
    for (const auto &[r, batches] : m_rankCommitted)
        mergeBatchRanges(now, batches);
    QJsonObject doc = m_pending->doc;
    doc[u"ledger"_s] = formatBatchRanges(now);
    doc[u"run_id"_s] = m_runId;
    doc[u"written"_s] = QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs);
    if (!m_resumedFrom.isEmpty())
        doc[u"resumed_from"_s] = m_resumedFrom;
    m_pending.reset();
    if (const QString why = saveAtomically(m_dir + u'/' + QLatin1StringView(kCheckpointFile), QJsonDocument(doc).toJson(QJsonDocument::Indented));
        !why.isEmpty()) {
        m_error = why;
        return;
    }
    m_written = round;
}

QString writeRunInfo(const QString &directory, const QString &runId, const ClusterProfile &profile, const QString &profilePath,
                     const QJsonObject &resumedFrom)
{
    QJsonObject o{{u"format"_s, u"clusterppl-run-directory"_s},
                  {u"version"_s, 1},
                  {u"run_id"_s, runId},
                  {u"profile_path"_s, profilePath.isEmpty() ? QString() : QFileInfo(profilePath).absoluteFilePath()},
                  {u"profile"_s, QJsonDocument::fromJson(QByteArray::fromStdString(profileToJson(profile))).object()},
                  {u"started"_s, QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs)}};
    if (!resumedFrom.isEmpty())
        o[u"resumed_from"_s] = resumedFrom;
    return saveAtomically(directory + u'/' + QLatin1StringView(kRunInfoFile), QJsonDocument(o).toJson(QJsonDocument::Indented));
}

QString writeResultFile(const QString &directory, const QByteArray &resultJson)
{
    return saveAtomically(directory + u'/' + QLatin1StringView(kResultFile), resultJson);
}

QString defaultRunDirectory(const QString &runId)
{
    const QString state = qEnvironmentVariable("XDG_STATE_HOME", QDir::homePath() + u"/.local/state"_s);
    return state + u"/clusterppl/runs/"_s + runId;
}

std::optional<ResumeSource> loadResumeSource(const QString &run, QString *error)
{
    const auto fail = [&](const QString &why) {
        *error = why;
        return std::nullopt;
    };
    ResumeSource s;
    s.directory = QFileInfo(run).isDir() ? run : defaultRunDirectory(run);
    if (!QFileInfo(s.directory).isDir())
        return fail(u"--resume %1: no such run directory (%2 does not exist; pass the run's directory, e.g. its --log-dir)"_s.arg(run, s.directory));
    const QString info = s.directory + u'/' + QLatin1StringView(kRunInfoFile);
    QFile f(info);
    if (!f.open(QIODevice::ReadOnly))
        return fail(u"--resume %1: %2 is missing or unreadable: the run was not started by a clusterppl-cli that records runs for resuming"_s.arg(
            run, info));
    const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
    if (o.value(u"format"_s).toString() != u"clusterppl-run-directory"_s || o.value(u"version"_s).toInt() != 1)
        return fail(u"--resume %1: %2 is not a clusterppl run directory file of version 1"_s.arg(run, info));
    s.runId = o.value(u"run_id"_s).toString();
    s.profilePath = o.value(u"profile_path"_s).toString();
    const ProfileParseResult parsed = parseProfile(QJsonDocument(o.value(u"profile"_s).toObject()).toJson().toStdString(), info.toStdString());
    if (!parsed.ok())
        return fail(u"--resume %1: the profile saved in %2 is not valid: %3"_s.arg(run, info, QString::fromStdString(parsed.errors.front())));
    s.profile = parsed.profile;
    const QString resultPath = s.directory + u'/' + QLatin1StringView(kResultFile);
    if (QFile result(resultPath); result.open(QIODevice::ReadOnly)) {
        const QJsonObject r = QJsonDocument::fromJson(result.readAll()).object();
        return fail(u"--resume %1: run %2 finished (ppl %3 over %4 tokens; %5): there is nothing to resume"_s.arg(run, s.runId)
                        .arg(r.value(u"ppl"_s).toDouble(), 0, 'f', 6)
                        .arg(static_cast<qint64>(r.value(u"tokens_scored"_s).toDouble()))
                        .arg(resultPath));
    }
    const QString cpPath = s.directory + u'/' + QLatin1StringView(kCheckpointFile);
    QFile cp(cpPath);
    if (!cp.open(QIODevice::ReadOnly))
        return fail(u"--resume %1: run %2 has no committed round (%3 is missing: it was interrupted before its first sync round, or "
                    "ran on one rank, which syncs only at the end); start it again with run --profile"_s.arg(run, s.runId, cpPath));
    const QJsonObject c = QJsonDocument::fromJson(cp.readAll()).object();
    s.round = c.value(u"round"_s).toInt(-1);
    s.ledger = c.value(u"ledger"_s).toString();
    s.batchCount = static_cast<std::int64_t>(c.value(u"batch_count"_s).toDouble(-1));
    s.worldSize = c.value(u"world_size"_s).toInt();
    s.schedule = c.value(u"schedule"_s).toString();
    s.batch = std::max<std::int64_t>(0, c.value(u"batch"_s).toInteger(0));
    const auto ledger = parseBatchRanges(s.ledger);
    if (c.value(u"format"_s).toString() != u"clusterppl-checkpoint"_s || s.round < 0 || !ledger || s.batchCount < 0)
        return fail(u"--resume %1: %2 is not a valid checkpoint"_s.arg(run, cpPath));
    for (const auto &[a, b] : *ledger)
        s.batchesDone += b - a;
    s.checkpoint = QJsonDocument(c).toJson(QJsonDocument::Compact);
    return s;
}

QStringList resumeMismatches(const ClusterProfile &saved, const ClusterProfile &profile, const QString &schedule, std::int64_t recordedBatch)
{
    QStringList out;
    const EvaluationSpec &a = saved.evaluation, &b = profile.evaluation;
    auto differ = [&](const char *field, const QString &was, const QString &now) {
        if (was != now)
            out << u"evaluation.%1 is %2, the run evaluated %3"_s.arg(QLatin1StringView(field), now.isEmpty() ? u"(none)"_s : now,
                                                                        was.isEmpty() ? u"(none)"_s : was);
    };
    auto str = [](const std::string &s) { return QString::fromStdString(s); };
    differ("model", str(a.model), str(b.model));
    differ("tokens", str(a.tokens), str(b.tokens));
    differ("text", str(a.text), str(b.text));
    differ("tokenizer", str(a.tokenizer), str(b.tokenizer));
    differ("protocol", str(a.protocol), str(b.protocol));
    differ("context", QString::number(a.context), QString::number(b.context));
    differ("stride", QString::number(a.stride), QString::number(b.stride));
    // "auto" resumes with the batch the run used (the checkpoint's, passed as --batch): a fixed
    // batch equal to it is the same computation. Without a recorded batch auto stays its own value.
    const auto batchUsed = [&](std::int64_t batch) { return batch == kAutoBatch && recordedBatch > 0 ? recordedBatch : batch; };
    if (batchUsed(a.batch) != batchUsed(b.batch)) {
        const auto batchText = [&](std::int64_t batch) {
            if (batch != kAutoBatch)
                return QString::number(batch);
            return recordedBatch > 0 ? u"auto (batch %1 in this run)"_s.arg(recordedBatch) : u"auto"_s;
        };
        differ("batch", batchText(a.batch), batchText(b.batch));
    }
    differ("max_windows", QString::number(a.maxWindows), QString::number(b.maxWindows));
    differ("dtype", str(a.dtype), str(b.dtype));
    differ("device", str(a.device), str(b.device));
    differ("schedule", schedule, str(b.schedule));
    if (schedule == u"static"_s) {
        // A static schedule's rounds are planned for one world size and threshold.
        const int was = rankLayout(saved).worldSize(), now = rankLayout(profile).worldSize();
        if (was != now)
            out << u"the profile has %1 ranks, the run had %2 (a static schedule resumes only on as many ranks)"_s.arg(now).arg(was);
        if (saved.thresholds.syncEveryTokens != profile.thresholds.syncEveryTokens)
            out << u"thresholds.sync_every_tokens is %1, the run synchronised every %2 (a static schedule's rounds depend on it)"_s.arg(
                syncText(profile.thresholds.syncEveryTokens), syncText(saved.thresholds.syncEveryTokens));
    }
    return out;
}

} // namespace cppl::core::run
