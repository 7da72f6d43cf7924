// SPDX-License-Identifier: MIT
#include "store/run_record.h"

#include <QCryptographicHash>
#include <QDir>
#include <QFileInfo>
#include <QJsonDocument>
#include <QSysInfo>

#include <unistd.h>

using namespace Qt::StringLiterals;

namespace cppl::core::store {

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
    in.dtype = QString::fromStdString(e.dtype);
    in.context = e.context;
    in.stride = e.stride;
    in.batch = e.batch;
    in.maxWindows = e.maxWindows;
    return in;
}

SettingsKeyInputs settingsInputsFromResult(const QJsonObject &r)
{
    SettingsKeyInputs in;
    in.model = absoluteClean(r.value(u"model"_s).toObject().value(u"path"_s).toString(), {});
    in.data = absoluteClean(r.value(u"data"_s).toObject().value(u"path"_s).toString(), {});
    in.protocol = r.value(u"protocol"_s).toString();
    in.dtype = r.value(u"dtype"_s).toString();
    in.context = r.value(u"context"_s).toInteger();
    in.stride = r.value(u"stride"_s).toInteger();
    in.batch = r.value(u"batch"_s).toInteger();
    in.maxWindows = r.value(u"max_windows"_s).toInteger();
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
                              .arg(in.dtype);
    return QString::fromLatin1(QCryptographicHash::hash(canon.toUtf8(), QCryptographicHash::Sha256).toHex().left(32));
}

QJsonObject settingsJson(const SettingsKeyInputs &in)
{
    return QJsonObject{{u"model"_s, in.model},
                       {u"data"_s, in.data},
                       {u"protocol"_s, in.protocol},
                       {u"dtype"_s, in.dtype},
                       {u"context"_s, static_cast<qint64>(in.context)},
                       {u"stride"_s, static_cast<qint64>(in.stride)},
                       {u"batch"_s, static_cast<qint64>(in.batch)},
                       {u"max_windows"_s, static_cast<qint64>(in.maxWindows)}};
}

RankSummary rankSummaryFromJson(const QJsonObject &o)
{
    RankSummary s;
    s.rank = o.value(u"rank"_s).toInt();
    s.host = o.value(u"host"_s).toString();
    s.group = o.value(u"group"_s).toInt();
    s.tokens = o.value(u"tokens"_s).toInteger();
    s.windows = o.value(u"windows"_s).toInteger();
    s.rounds = o.value(u"rounds"_s).toInteger();
    s.computeSeconds = o.value(u"compute_seconds"_s).toDouble();
    s.waitSeconds = o.value(u"wait_seconds"_s).toDouble();
    s.transferSeconds = o.value(u"transfer_seconds"_s).toDouble();
    s.wallSeconds = o.value(u"wall_seconds"_s).toDouble();
    return s;
}

QJsonArray lostRanksOf(const QByteArray &resultJson)
{
    if (resultJson.isEmpty())
        return {};
    return QJsonDocument::fromJson(resultJson).object().value(u"lost_ranks"_s).toArray();
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

} // namespace cppl::core::store
