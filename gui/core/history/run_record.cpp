// SPDX-License-Identifier: MIT
#include "history/run_record.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSysInfo>

#include <unistd.h>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

QString statusName(RunStatus status)
{
    switch (status) {
    case RunStatus::Running: return u"running"_s;
    case RunStatus::Finished: return u"finished"_s;
    case RunStatus::Failed: return u"failed"_s;
    case RunStatus::Stopped: return u"stopped"_s;
    case RunStatus::Interrupted: return u"interrupted"_s;
    }
    return u"?"_s;
}

std::optional<RunStatus> parseStatus(const QString &name)
{
    for (RunStatus s : {RunStatus::Running, RunStatus::Finished, RunStatus::Failed, RunStatus::Stopped, RunStatus::Interrupted})
        if (statusName(s) == name)
            return s;
    return std::nullopt;
}

namespace {

QString absoluteClean(const QString &path, const QString &base)
{
    if (path.isEmpty())
        return {};
    const QString abs = QDir::isAbsolutePath(path) ? path : QDir(base.isEmpty() ? QDir::currentPath() : base).filePath(path);
    return QDir::cleanPath(abs);
}

// Fields read from and written to JSON under one key each, so that a reader and its writer cannot drift apart.
template <typename S, typename T> struct Field
{
    const char16_t *key;
    T S::*member;
};

// The settings a result JSON holds at its top level under the names settingsJson writes (model and
// data differ: a result has their paths inside objects).
constexpr Field<SettingsKeyInputs, QString> kSettingsText[] = {{u"protocol", &SettingsKeyInputs::protocol}, {u"dtype", &SettingsKeyInputs::dtype}};
constexpr Field<SettingsKeyInputs, std::int64_t> kSettingsNumbers[] = {{u"context", &SettingsKeyInputs::context},
                                                                       {u"stride", &SettingsKeyInputs::stride},
                                                                       {u"batch", &SettingsKeyInputs::batch},
                                                                       {u"max_windows", &SettingsKeyInputs::maxWindows}};

// A rank's figures, as a result's ranks[] and an export's rank_summary rows hold them.
constexpr Field<RankSummary, int> kRankInts[] = {{u"rank", &RankSummary::rank}, {u"group", &RankSummary::group}};
constexpr Field<RankSummary, std::int64_t> kRankCounts[] = {
    {u"tokens", &RankSummary::tokens}, {u"windows", &RankSummary::windows}, {u"rounds", &RankSummary::rounds}};
constexpr Field<RankSummary, double> kRankSeconds[] = {{u"compute_seconds", &RankSummary::computeSeconds},
                                                       {u"wait_seconds", &RankSummary::waitSeconds},
                                                       {u"transfer_seconds", &RankSummary::transferSeconds},
                                                       {u"wall_seconds", &RankSummary::wallSeconds}};

QString keyOf(const char16_t *key) { return QString::fromUtf16(key); }

/// SettingsKeyInputs::quantize of a scheme at load; empty for none and for a checkpoint's own
/// (GPTQ/AWQ) quantization, which the model path already names.
QString quantizeKey(QString method, std::int64_t group, bool head)
{
    if (method == u"int4"_s)
        method = u"int4-sym"_s;
    if (method != u"int8"_s && method != u"int4-sym"_s && method != u"int4-asym"_s)
        return {};
    return u"%1/%2%3"_s.arg(method).arg(group).arg(head ? u"/head"_s : QString());
}

} // namespace

SettingsKeyInputs settingsInputsFromProfile(const ClusterProfile &profile, const QString &profileDir)
{
    const EvaluationSpec &e = profile.evaluation;
    // Relative paths mean the profile's directory only for the local launcher (launch_plan.cpp);
    // on SSH hosts they are relative to the remote working directory, kept as written.
    const bool local = profile.launcher == "local";
    auto path = [&](const std::string &p) { return local ? absoluteClean(QString::fromStdString(p), profileDir) : QString::fromStdString(p); };
    SettingsKeyInputs in;
    in.model = path(e.model);
    in.data = path(e.tokens.empty() ? e.text : e.tokens);
    in.protocol = QString::fromStdString(e.protocol);
    // "auto" is what the agents pick (bfloat16 on a GPU, float32 on the CPU), the dtype their
    // results name: known here when the device is; with device auto only the result says.
    in.dtype = QString::fromStdString(e.dtype);
    if (in.dtype == u"auto"_s && e.device == "cpu")
        in.dtype = u"float32"_s;
    else if (in.dtype == u"auto"_s && e.device.starts_with("cuda"))
        in.dtype = u"bfloat16"_s;
    in.context = e.context;
    in.stride = e.stride;
    in.batch = e.batch;
    in.maxWindows = e.maxWindows;
    in.quantize = quantizeKey(QString::fromStdString(e.quantize), e.quantGroup, e.quantizeHead);
    in.tensorParallel = std::max(1, e.tensorParallel);
    return in;
}

SettingsKeyInputs settingsInputsFromResult(const QJsonObject &r)
{
    SettingsKeyInputs in;
    in.model = absoluteClean(r.value(u"model"_s).toObject().value(u"path"_s).toString(), {});
    in.data = absoluteClean(r.value(u"data"_s).toObject().value(u"path"_s).toString(), {});
    for (const auto &f : kSettingsText)
        in.*f.member = r.value(keyOf(f.key)).toString();
    for (const auto &f : kSettingsNumbers)
        in.*f.member = r.value(keyOf(f.key)).toInteger();
    const QJsonObject q = r.value(u"quantization"_s).toObject();
    in.quantize = quantizeKey(q.value(u"method"_s).toString(), q.value(u"group"_s).toInteger(), q.value(u"head"_s).toBool());
    in.tensorParallel = std::max(1, r.value(u"tensor_parallel"_s).toObject().value(u"size"_s).toInt(1));
    return in;
}

QString settingsKey(const SettingsKeyInputs &in)
{
    // A stride of 0 means "the context" (profile.md): both spellings are one evaluation.
    const std::int64_t stride = in.stride <= 0 ? in.context : in.stride;
    const QString canon = u"model=%1\ndata=%2\nprotocol=%3\ncontext=%4\nstride=%5\nbatch=%6\nmax_windows=%7\ndtype=%8\n"_s.arg(in.model, in.data, in.protocol)
                              .arg(in.context)
                              .arg(stride)
                              .arg(in.batch)
                              .arg(in.maxWindows)
                              .arg(in.dtype)
                          + (in.quantize.isEmpty() ? QString() : u"quantize=%1\n"_s.arg(in.quantize))
                          + (in.tensorParallel <= 1 ? QString() : u"tensor_parallel=%1\n"_s.arg(in.tensorParallel));
    return QString::fromLatin1(QCryptographicHash::hash(canon.toUtf8(), QCryptographicHash::Sha256).toHex().left(32));
}

QJsonObject settingsJson(const SettingsKeyInputs &in)
{
    QJsonObject o{{u"model"_s, in.model}, {u"data"_s, in.data}};
    for (const auto &f : kSettingsText)
        o.insert(keyOf(f.key), in.*f.member);
    for (const auto &f : kSettingsNumbers)
        o.insert(keyOf(f.key), static_cast<qint64>(in.*f.member));
    if (in.batch == kAutoBatch) // the profile's "auto": the agents chose (the result says what)
        o.insert(u"batch"_s, u"auto"_s);
    if (!in.quantize.isEmpty())
        o.insert(u"quantize"_s, in.quantize);
    if (in.tensorParallel > 1)
        o.insert(u"tensor_parallel"_s, in.tensorParallel);
    return o;
}

SettingsKeyInputs settingsInputsFromJson(const QJsonObject &settings)
{
    SettingsKeyInputs in;
    in.model = settings.value(u"model"_s).toString();
    in.data = settings.value(u"data"_s).toString();
    for (const auto &f : kSettingsText)
        in.*f.member = settings.value(keyOf(f.key)).toString();
    for (const auto &f : kSettingsNumbers) // batch "auto" reads 0, kAutoBatch
        in.*f.member = settings.value(keyOf(f.key)).toInteger();
    in.quantize = settings.value(u"quantize"_s).toString();
    in.tensorParallel = std::max(1, settings.value(u"tensor_parallel"_s).toInt(1));
    return in;
}

QString oneRankSettingsKey(const RunRecord &run)
{
    if (run.settings.isEmpty() || tensorParallelOf(run) <= 1)
        return {};
    SettingsKeyInputs in = settingsInputsFromJson(run.settings);
    in.tensorParallel = 1;
    return settingsKey(in);
}

int tensorParallelOf(const RunRecord &run)
{
    if (run.resultJson.isEmpty())
        return 1;
    return std::max(1, QJsonDocument::fromJson(run.resultJson).object().value(u"tensor_parallel"_s).toObject().value(u"size"_s).toInt(1));
}

QString resultDtype(const RunRecord &run)
{
    return run.resultJson.isEmpty() ? QString() : QJsonDocument::fromJson(run.resultJson).object().value(u"dtype"_s).toString();
}

RankSummary rankSummaryFromJson(const QJsonObject &o)
{
    RankSummary s;
    s.host = o.value(u"host"_s).toString();
    for (const auto &f : kRankInts)
        s.*f.member = o.value(keyOf(f.key)).toInt();
    for (const auto &f : kRankCounts)
        s.*f.member = o.value(keyOf(f.key)).toInteger();
    for (const auto &f : kRankSeconds)
        s.*f.member = o.value(keyOf(f.key)).toDouble();
    return s;
}

QJsonArray lostRanksOf(const QByteArray &resultJson)
{
    if (resultJson.isEmpty())
        return {};
    return QJsonDocument::fromJson(resultJson).object().value(u"lost_ranks"_s).toArray();
}

QJsonObject rankSummaryJson(const RankSummary &s)
{
    QJsonObject o{{u"host"_s, s.host}};
    for (const auto &f : kRankInts)
        o.insert(keyOf(f.key), s.*f.member);
    for (const auto &f : kRankCounts)
        o.insert(keyOf(f.key), static_cast<qint64>(s.*f.member));
    for (const auto &f : kRankSeconds)
        o.insert(keyOf(f.key), s.*f.member);
    return o;
}

bool applyResult(RunRecord &rec)
{
    const QJsonDocument doc = QJsonDocument::fromJson(rec.resultJson);
    if (!doc.isObject())
        return false;
    const QJsonObject r = doc.object();
    rec.lostRanks = r.value(u"lost_ranks"_s).toArray();
    auto num = [&](const char16_t *k) -> std::optional<double> {
        const QJsonValue v = r.value(QString::fromUtf16(k));
        return v.isDouble() ? std::optional<double>(v.toDouble()) : std::nullopt;
    };
    rec.ppl = num(u"ppl");
    rec.pplStderr = num(u"ppl_stderr");
    rec.tokensPerSecond = num(u"tokens_per_second");
    rec.nllSumExact = r.value(u"nll_sum_exact"_s).toString();
    rec.tokensScored = r.value(u"tokens_scored"_s).toInteger();
    if (const int ws = r.value(u"world_size"_s).toInt(); ws > 0)
        rec.worldSize = ws;
    if (r.value(u"groups"_s).isArray()) {
        rec.groups = r.value(u"groups"_s).toArray();
        rec.groupsCount = static_cast<int>(rec.groups.size());
    } else if (rec.groupsCount == 0) {
        rec.groupsCount = 1;
    }
    const QJsonArray ranks = r.value(u"ranks"_s).toArray();
    if (!ranks.isEmpty()) {
        rec.ranks.clear();
        for (const QJsonValue &v : ranks) {
            RankSummary s = rankSummaryFromJson(v.toObject());
            s.tokensPerSecond = s.computeSeconds > 0 ? static_cast<double>(s.tokens) / s.computeSeconds : 0;
            rec.ranks.push_back(s);
        }
    } else if (rec.ranks.empty() && rec.worldSize <= 1) {
        // One rank has no ranks[]: its figures are the run's.
        RankSummary s;
        s.tokens = rec.tokensScored;
        s.windows = r.value(u"windows"_s).toInteger();
        s.computeSeconds = r.value(u"seconds"_s).toDouble();
        s.wallSeconds = s.computeSeconds;
        s.tokensPerSecond = rec.tokensPerSecond.value_or(0);
        s.host = r.value(u"host"_s).toString();
        rec.ranks.push_back(s);
    }
    return true;
}

QJsonObject versionsFrom(const QJsonArray &preflight, const QJsonObject &result)
{
    QJsonObject v;
    for (const QJsonValue &h : preflight) {
        const QJsonObject rep = h.toObject().value(u"report"_s).toObject();
        if (rep.isEmpty())
            continue;
        auto take = [&](const QString &key, const QJsonValue &value) {
            if (!v.contains(key) && !value.isUndefined() && !value.isNull())
                v.insert(key, value);
        };
        take(u"agent"_s, rep.value(u"agent_version"_s));
        take(u"libtorch"_s, rep.value(u"libtorch_version"_s));
        take(u"cuda"_s, rep.value(u"cuda"_s));
        take(u"nccl"_s, rep.value(u"nccl"_s));
        take(u"driver"_s, rep.value(u"driver_version"_s));
    }
    if (!v.contains(u"agent"_s) && result.contains(u"version"_s))
        v.insert(u"agent"_s, result.value(u"version"_s));
    if (result.contains(u"blas"_s))
        v.insert(u"blas"_s, result.value(u"blas"_s));
    if (result.contains(u"backend"_s))
        v.insert(u"backend"_s, result.value(u"backend"_s));
    return v;
}

QString currentOwner()
{
    return QSysInfo::machineHostName() + u':' + QString::number(::getpid());
}

} // namespace cppl::core::history
