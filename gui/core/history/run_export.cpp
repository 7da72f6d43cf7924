// SPDX-License-Identifier: MIT
#include "history/run_export.h"

#include "cli/exit_codes.h"
#include "history/host_resources.h"
#include "run/run_engine.h"

#include "cppl/errors.h"

#include <QCryptographicHash>
#include <QJsonArray>
#include <QJsonDocument>

#include <set>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

namespace {

QJsonValue opt(const std::optional<double> &v)
{
    return v ? QJsonValue(*v) : QJsonValue(QJsonValue::Null);
}
QString date(const QDateTime &d)
{
    return d.isValid() ? d.toUTC().toString(Qt::ISODateWithMs) : QString();
}
QDateTime dateOf(const QJsonValue &v)
{
    QDateTime d = QDateTime::fromString(v.toString(), Qt::ISODateWithMs);
    if (d.isValid())
        d = d.toUTC();
    return d;
}
[[noreturn]] void bad(const QString &what)
{
    throw ConfigError(what.toStdString());
}

} // namespace

QJsonObject runToJson(const RunRecord &r)
{
    QJsonObject run{{u"run_id"_s, r.runId},
                    {u"status"_s, statusName(r.status)},
                    {u"started"_s, date(r.started)},
                    {u"ended"_s, date(r.ended)},
                    {u"source"_s, r.source},
                    {u"profile_name"_s, r.profileName},
                    {u"profile"_s, r.profile},
                    {u"settings"_s, r.settings},
                    {u"launcher"_s, r.launcher},
                    {u"world_size"_s, r.worldSize},
                    {u"groups_count"_s, r.groupsCount},
                    {u"node_count"_s, r.nodeCount},
                    {u"hosts"_s, r.hosts},
                    {u"groups"_s, r.groups},
                    {u"versions"_s, r.versions},
                    {u"preflight"_s, r.preflight},
                    {u"result"_s, r.resultJson.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(QJsonDocument::fromJson(r.resultJson).object())},
                    {u"ppl"_s, opt(r.ppl)},
                    {u"ppl_stderr"_s, opt(r.pplStderr)},
                    {u"nll_sum_exact"_s, r.nllSumExact},
                    {u"tokens_scored"_s, static_cast<qint64>(r.tokensScored)},
                    {u"tokens_per_second"_s, opt(r.tokensPerSecond)},
                    {u"exit_code"_s, r.exitCode ? QJsonValue(*r.exitCode) : QJsonValue(QJsonValue::Null)},
                    {u"first_cause"_s, r.firstCause},
                    {u"lost_ranks"_s, r.lostRanks},
                    {u"model"_s, r.model},
                    {u"data"_s, r.data},
                    {u"protocol"_s, r.protocol},
                    {u"settings_key"_s, r.settingsKey}};
    QJsonArray ranks, samples, logs, alerts;
    for (const RankSummary &s : r.ranks) {
        QJsonObject o = rankSummaryJson(s);
        o.insert(u"tokens_per_second"_s, s.tokensPerSecond);
        o.insert(u"exit_code"_s, s.exitCode ? QJsonValue(*s.exitCode) : QJsonValue(QJsonValue::Null));
        ranks.append(o);
    }
    // Samples as rows of numbers: a long run has tens of thousands.
    for (const RankSample &s : r.samples)
        samples.append(QJsonArray{s.t, s.rank, s.tokensPerSecond, s.waitShare, s.transferShare, s.deviation, static_cast<qint64>(s.tokens)});
    for (const LogLine &l : r.logs)
        logs.append(QJsonArray{l.rank, static_cast<qint64>(l.seq), l.t, l.isStderr ? u"err"_s : u"out"_s, l.line});
    for (const StoredAlert &a : r.alerts)
        alerts.append(QJsonObject{{u"t"_s, a.t}, {u"at"_s, date(a.when)}, {u"rank"_s, a.rank}, {u"kind"_s, a.kind}, {u"message"_s, a.message}});
    return {{u"format"_s, u"clusterppl-run"_s},
            {u"version"_s, kExportVersion},
            {u"run"_s, run},
            {u"rank_summary"_s, ranks},
            {u"samples_columns"_s, QJsonArray{u"t"_s, u"rank"_s, u"tokens_per_second"_s, u"wait_share"_s, u"transfer_share"_s, u"deviation"_s, u"tokens"_s}},
            {u"samples"_s, samples},
            {u"logs_columns"_s, QJsonArray{u"rank"_s, u"seq"_s, u"t"_s, u"stream"_s, u"line"_s}},
            {u"logs"_s, logs},
            {u"alerts"_s, alerts}};
}

namespace {

/// The "run" object of an exported run: its row of the runs table.
RunRecord exportedRunRow(const QJsonObject &run)
{
    RunRecord r;
    r.runId = run.value(u"run_id"_s).toString();
    if (const QString why = run::validateRunId(r.runId); !why.isEmpty())
        bad(u"run.run_id: "_s + why);
    const auto status = parseStatus(run.value(u"status"_s).toString());
    if (!status)
        bad(u"run.status: \"%1\" is not one of running, finished, failed, stopped, interrupted"_s.arg(run.value(u"status"_s).toString()));
    // A run exported while it was being recorded is over as far as this history is concerned.
    r.status = *status == RunStatus::Running ? RunStatus::Interrupted : *status;
    r.started = dateOf(run.value(u"started"_s));
    if (!r.started.isValid())
        bad(u"run.started: not an ISO 8601 date"_s);
    r.ended = dateOf(run.value(u"ended"_s));
    r.source = run.value(u"source"_s).toString();
    r.profileName = run.value(u"profile_name"_s).toString();
    r.profile = run.value(u"profile"_s).toObject();
    r.settings = run.value(u"settings"_s).toObject();
    r.launcher = run.value(u"launcher"_s).toString();
    r.worldSize = run.value(u"world_size"_s).toInt();
    r.groupsCount = run.value(u"groups_count"_s).toInt();
    r.nodeCount = run.value(u"node_count"_s).toInt();
    r.hosts = run.value(u"hosts"_s).toArray();
    r.groups = run.value(u"groups"_s).toArray();
    r.versions = run.value(u"versions"_s).toObject();
    r.preflight = run.value(u"preflight"_s).toArray();
    if (run.value(u"result"_s).isObject())
        r.resultJson = QJsonDocument(run.value(u"result"_s).toObject()).toJson(QJsonDocument::Compact);
    r.lostRanks = lostRanksOf(r.resultJson);
    auto num = [&](const QString &k) { return run.value(k).isDouble() ? std::optional<double>(run.value(k).toDouble()) : std::nullopt; };
    r.ppl = num(u"ppl"_s);
    r.pplStderr = num(u"ppl_stderr"_s);
    r.tokensPerSecond = num(u"tokens_per_second"_s);
    r.nllSumExact = run.value(u"nll_sum_exact"_s).toString();
    r.tokensScored = run.value(u"tokens_scored"_s).toInteger();
    if (run.value(u"exit_code"_s).isDouble())
        r.exitCode = run.value(u"exit_code"_s).toInt();
    r.firstCause = run.value(u"first_cause"_s).toString();
    r.model = run.value(u"model"_s).toString();
    r.data = run.value(u"data"_s).toString();
    r.protocol = run.value(u"protocol"_s).toString();
    r.settingsKey = run.value(u"settings_key"_s).toString();
    return r;
}

/// The rank summaries, samples, logs and alerts of an exported run, into @p r.
void readExportedDetails(const QJsonObject &json, RunRecord &r)
{
    for (const QJsonValue &v : json.value(u"rank_summary"_s).toArray()) {
        const QJsonObject o = v.toObject();
        RankSummary s = rankSummaryFromJson(o);
        s.tokensPerSecond = o.value(u"tokens_per_second"_s).toDouble();
        if (o.value(u"exit_code"_s).isDouble())
            s.exitCode = o.value(u"exit_code"_s).toInt();
        r.ranks.push_back(s);
    }
    int i = 0;
    for (const QJsonValue &v : json.value(u"samples"_s).toArray()) {
        const QJsonArray a = v.toArray();
        if (a.size() != 7)
            bad(u"samples[%1]: expected 7 numbers (see samples_columns), got %2"_s.arg(i).arg(a.size()));
        r.samples.push_back({a[0].toDouble(), a[1].toInt(), a[2].toDouble(), a[3].toDouble(), a[4].toDouble(), a[5].toDouble(), a[6].toInteger()});
        ++i;
    }
    i = 0;
    for (const QJsonValue &v : json.value(u"logs"_s).toArray()) {
        const QJsonArray a = v.toArray();
        if (a.size() != 5)
            bad(u"logs[%1]: expected [rank, seq, t, stream, line], got %2 values"_s.arg(i).arg(a.size()));
        r.logs.push_back({a[0].toInt(), a[1].toInteger(), a[2].toDouble(), a[3].toString() == u"err"_s, a[4].toString()});
        ++i;
    }
    for (const QJsonValue &v : json.value(u"alerts"_s).toArray()) {
        const QJsonObject o = v.toObject();
        r.alerts.push_back({o.value(u"t"_s).toDouble(), dateOf(o.value(u"at"_s)), o.value(u"rank"_s).toInt(-1), o.value(u"kind"_s).toString(),
                            o.value(u"message"_s).toString()});
    }
}

/// A bare agent result: a finished run whose figures are the result's.
RunRecord runFromResult(const QJsonObject &json, const QString &runIdForResult)
{
    if (!json.value(u"ppl"_s).isDouble())
        bad(u"neither an exported run (\"format\": \"clusterppl-run\") nor an agent result JSON (no numeric \"ppl\")"_s);
    if (json.value(u"nll_sum_exact"_s).toString().isEmpty())
        bad(u"the result has no \"nll_sum_exact\" (docs/result-json.md); it cannot be compared exactly"_s);
    RunRecord r;
    const QByteArray bytes = QJsonDocument(json).toJson(QJsonDocument::Compact);
    r.runId = !runIdForResult.isEmpty() ? runIdForResult
                                        : u"import-"_s + QString::fromLatin1(QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().left(12));
    if (const QString why = run::validateRunId(r.runId); !why.isEmpty())
        bad(u"--run-id: "_s + why);
    r.status = RunStatus::Finished;
    r.source = u"import"_s;
    r.started = QDateTime::currentDateTimeUtc();
    r.ended = r.started;
    r.resultJson = bytes;
    r.launcher = json.value(u"rendezvous"_s).toObject().value(u"source"_s).toString();
    applyResult(r);
    const SettingsKeyInputs in = settingsInputsFromResult(json);
    r.settings = settingsJson(in);
    if (json.contains(u"sync_every_tokens"_s))
        r.settings.insert(u"sync_every_tokens"_s, json.value(u"sync_every_tokens"_s).isDouble() ? json.value(u"sync_every_tokens"_s) : QJsonValue(-1));
    if (json.contains(u"topology"_s))
        r.settings.insert(u"topology"_s, json.value(u"topology"_s));
    r.model = in.model;
    r.data = in.data;
    r.protocol = in.protocol;
    r.settingsKey = settingsKey(in);
    r.versions = versionsFrom({}, json);
    r.exitCode = kCliOk; // a bare result JSON: rank 0 wrote it, so the run finished
    std::set<QString> hosts;
    for (const RankSummary &s : r.ranks)
        if (!s.host.isEmpty())
            hosts.insert(s.host);
    r.nodeCount = std::max<int>(1, static_cast<int>(hosts.size()));
    for (const QString &h : hosts)
        r.hosts.append(QJsonObject{{u"name"_s, h}});
    return r;
}

} // namespace

RunRecord runFromJson(const QJsonObject &json, const QString &runIdForResult)
{
    if (json.value(u"format"_s).toString() != u"clusterppl-run"_s)
        return runFromResult(json, runIdForResult);
    if (json.value(u"version"_s).toInt() != kExportVersion)
        bad(u"\"version\" is %1; this ClusterPPL reads exported runs of version %2"_s.arg(json.value(u"version"_s).toInt()).arg(kExportVersion));
    RunRecord r = exportedRunRow(json.value(u"run"_s).toObject());
    readExportedDetails(json, r);
    recordHostResources(r); // exported before the history kept the hosts' cores and GPUs
    return r;
}

} // namespace cppl::core::history
