// SPDX-License-Identifier: MIT
// Loading a report's runs, the exact/display number forms, CSV and JSON, and writing files.
#include "report/report.h"

#include "history/run_export.h"
#include "history/run_history.h"

#include "cppl/errors.h"

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLocale>
#include <QSaveFile>

#include <cmath>
#include <stdexcept>

using namespace Qt::StringLiterals;

namespace cppl::core::report {

using history::RankSummary;
using history::RunRecord;

std::optional<ReportFormat> parseFormat(const QString &name)
{
    const QString n = name.toLower();
    if (n == u"pdf"_s)
        return ReportFormat::Pdf;
    if (n == u"html"_s || n == u"htm"_s) // a file name's suffix may say either
        return ReportFormat::Html;
    if (n == u"csv"_s)
        return ReportFormat::Csv;
    if (n == u"json"_s)
        return ReportFormat::Json;
    return std::nullopt;
}

QString formatName(ReportFormat format)
{
    switch (format) {
    case ReportFormat::Pdf: return u"pdf"_s;
    case ReportFormat::Html: return u"html"_s;
    case ReportFormat::Csv: return u"csv"_s;
    case ReportFormat::Json: return u"json"_s;
    }
    return {};
}

const history::ScalingPoint *ReportData::pointOf(const QString &runId) const
{
    for (const auto &p : comparison.points)
        if (p.runId == runId)
            return &p;
    return nullptr;
}

ReportData makeReport(std::vector<RunRecord> runs, const std::vector<RunRecord> &extraBaselines, double threshold)
{
    ReportData d;
    history::CompareOptions o;
    o.threshold = threshold;
    d.comparison = history::compareRuns(runs, extraBaselines, o);
    d.runs = std::move(runs);
    if (d.isComparison())
        if (auto rows = history::precisionRows(d.runs); history::comparesPrecisions(rows))
            d.precisions = std::move(rows);
    return d;
}

ReportData loadReport(const history::RunHistory &s, const QStringList &runIds, double threshold)
{
    std::vector<RunRecord> runs, baselines;
    for (const QString &id : runIds) {
        auto r = s.get(id);
        if (!r)
            throw std::out_of_range(QString(u"no run \""_s + id + u"\" in "_s + s.path() + u" (clusterppl-cli list shows the stored ones)"_s).toStdString());
        runs.push_back(std::move(*r));
    }
    for (const RunRecord &r : runs)
        for (RunRecord &b : history::storedBaselines(s, r, r.runId))
            baselines.push_back(std::move(b));
    return makeReport(std::move(runs), baselines, threshold);
}

QString exactNumber(double value)
{
    if (!std::isfinite(value))
        return std::isnan(value) ? u"nan"_s : (value > 0 ? u"inf"_s : u"-inf"_s);
    // Shortest round-trip digits; positional for ordinary magnitudes ("700000", not "7e+05").
    const double a = std::fabs(value);
    if (a == 0 || (a >= 1e-6 && a < 1e16))
        return QString::number(value, 'f', QLocale::FloatingPointShortest);
    return QString::number(value, 'g', QLocale::FloatingPointShortest);
}

QString exactNumber(const std::optional<double> &value)
{
    return value ? exactNumber(*value) : QString();
}

QString displayNumber(double value, int digits)
{
    if (!std::isfinite(value))
        return exactNumber(value);
    const double a = std::fabs(value);
    if (a != 0 && (a < 1e-3 || a >= 1e9))
        return QString::number(value, 'e', digits - 1);
    // Fixed notation with `digits` significant digits, but never fewer than the integer part.
    const int magnitude = a > 0 ? static_cast<int>(std::floor(std::log10(a))) : 0; // 0 for 1..9.99, -2 for 0.0123
    const int decimals = std::max(0, digits - 1 - magnitude);
    return QString::number(value, 'f', std::min(decimals, 12));
}

static double rankTotal(const RankSummary &r)
{
    return r.computeSeconds + r.waitSeconds + r.transferSeconds;
}

double waitShare(const RankSummary &r)
{
    const double t = rankTotal(r);
    return t > 0 ? r.waitSeconds / t : 0;
}

double transferShare(const RankSummary &r)
{
    const double t = rankTotal(r);
    return t > 0 ? r.transferSeconds / t : 0;
}

namespace {

// RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled; CRLF line ends.
QString csvField(const QString &v)
{
    if (!v.contains(u',') && !v.contains(u'"') && !v.contains(u'\n') && !v.contains(u'\r'))
        return v;
    QString q = v;
    q.replace(u"\""_s, u"\"\""_s);
    return u'"' + q + u'"';
}

QByteArray csvRows(const QStringList &header, const std::vector<QStringList> &rows)
{
    QString out;
    auto line = [&](const QStringList &fields) {
        QStringList f;
        for (const QString &v : fields)
            f << csvField(v);
        out += f.join(u',') + u"\r\n"_s;
    };
    line(header);
    for (const auto &r : rows)
        line(r);
    return out.toUtf8();
}

QString date(const QDateTime &d)
{
    return d.isValid() ? d.toUTC().toString(Qt::ISODateWithMs) : QString();
}

} // namespace

QByteArray reportCsvRuns(const ReportData &data)
{
    const QStringList header{u"run_id"_s, u"status"_s, u"started"_s, u"ended"_s, u"world_size"_s, u"groups"_s, u"nodes"_s, u"protocol"_s,
                             u"model"_s, u"data"_s, u"ppl"_s, u"ppl_stderr"_s, u"nll_sum_exact"_s, u"tokens_scored"_s,
                             u"tokens_per_second"_s, u"ideal_tokens_per_second"_s, u"efficiency"_s, u"wait_share"_s,
                             u"transfer_share"_s, u"comm_share"_s, u"baseline_run_id"_s, u"bit_identical"_s,
                             u"relative_deviation"_s, u"deviation"_s, u"exit_code"_s, u"first_cause"_s, u"precision"_s,
                             u"ppl_ratio"_s, u"ppl_ratio_stderr"_s, u"kld_mean"_s, u"kld_p99"_s, u"same_top"_s,
                             u"weight_bytes_per_rank"_s, u"rss_load_bytes"_s, u"tensor_parallel"_s, u"one_rank_run_id"_s,
                             u"one_rank_deviation"_s};
    std::vector<QStringList> rows;
    for (const RunRecord &r : data.runs) {
        const history::ScalingPoint *p = data.pointOf(r.runId);
        const history::ScalingPoint none;
        const history::ScalingPoint &s = p ? *p : none;
        const auto precision = history::precisionRow(r); // none without a result
        const auto *q = precision && precision->quality ? &*precision->quality : nullptr;
        const QStringList tail = !precision ? QStringList{QString(), QString(), QString(), QString(), QString(), QString(), QString(), QString()}
                                            : QStringList{precision->precision,
                                                          q ? exactNumber(q->pplRatio) : QString(),
                                                          q ? exactNumber(q->pplRatioStderr) : QString(),
                                                          q ? exactNumber(q->kldMean) : QString(),
                                                          q ? exactNumber(q->kldP99) : QString(),
                                                          q ? exactNumber(q->sameTop) : QString(),
                                                          QString::number(precision->weightBytes),
                                                          QString::number(precision->rssLoadBytes)};
        rows.push_back(QStringList{r.runId, history::statusName(r.status), date(r.started), date(r.ended), QString::number(r.worldSize),
                        QString::number(r.groupsCount), QString::number(r.nodeCount), r.protocol, r.model, r.data, exactNumber(r.ppl),
                        exactNumber(r.pplStderr), r.nllSumExact, QString::number(r.tokensScored), exactNumber(r.tokensPerSecond),
                        exactNumber(s.idealTokensPerSecond), exactNumber(s.efficiency), exactNumber(s.waitShare),
                        exactNumber(s.transferShare), exactNumber(s.commShare), s.baselineRunId,
                        s.bitIdentical ? (*s.bitIdentical ? u"true"_s : u"false"_s) : QString(), exactNumber(s.relativeDeviation),
                        s.deviationText(), r.exitCode ? QString::number(*r.exitCode) : QString(), r.firstCause}
                       + tail + QStringList{QString::number(s.tensorParallel), s.oneRankRunId, exactNumber(s.oneRankDeviation)});
    }
    return csvRows(header, rows);
}

QByteArray reportCsvRanks(const ReportData &data)
{
    const QStringList header{u"run_id"_s, u"rank"_s, u"host"_s, u"group"_s, u"tokens"_s, u"windows"_s, u"rounds"_s,
                             u"tokens_per_second"_s, u"compute_seconds"_s, u"wait_seconds"_s, u"transfer_seconds"_s,
                             u"wall_seconds"_s, u"wait_share"_s, u"transfer_share"_s, u"comm_share"_s, u"exit_code"_s};
    std::vector<QStringList> rows;
    for (const RunRecord &r : data.runs)
        for (const RankSummary &k : r.ranks)
            rows.push_back({r.runId, QString::number(k.rank), k.host, QString::number(k.group), QString::number(k.tokens),
                            QString::number(k.windows), QString::number(k.rounds), exactNumber(k.tokensPerSecond),
                            exactNumber(k.computeSeconds), exactNumber(k.waitSeconds), exactNumber(k.transferSeconds),
                            exactNumber(k.wallSeconds), exactNumber(waitShare(k)), exactNumber(transferShare(k)),
                            exactNumber(waitShare(k) + transferShare(k)), k.exitCode ? QString::number(*k.exitCode) : QString()});
    return csvRows(header, rows);
}

QJsonObject reportJson(const ReportData &data)
{
    QJsonArray runs;
    for (const RunRecord &r : data.runs)
        runs.append(history::runToJson(r));
    QJsonObject o{{u"format"_s, u"clusterppl-report"_s},
                  {u"version"_s, 1},
                  {u"kind"_s, data.isComparison() ? u"comparison"_s : u"run"_s},
                  {u"generated"_s, QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs)},
                  {u"runs"_s, runs},
                  {u"comparison"_s, history::comparisonToJson(data.comparison)}};
    if (!data.precisions.empty())
        o.insert(u"precisions"_s, history::precisionsToJson(data.precisions));
    return o;
}

namespace {

void writeFile(const QString &path, const QByteArray &bytes)
{
    QSaveFile f(path); // atomic: a failed write never leaves half a report behind
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit())
        throw IoError(QString(path + u": cannot write the report: "_s + f.errorString()).toStdString());
}

} // namespace

QStringList writeReport(const ReportData &data, ReportFormat format, const QString &path)
{
    switch (format) {
    case ReportFormat::Pdf:
        writeFile(path, reportPdf(data));
        return {path};
    case ReportFormat::Html:
        writeFile(path, reportHtml(data));
        return {path};
    case ReportFormat::Json:
        writeFile(path, QJsonDocument(reportJson(data)).toJson(QJsonDocument::Indented));
        return {path};
    case ReportFormat::Csv: {
        QString runsPath, ranksPath;
        if (QFileInfo(path).isDir()) {
            runsPath = QDir(path).filePath(u"runs.csv"_s);
            ranksPath = QDir(path).filePath(u"ranks.csv"_s);
        } else {
            const QFileInfo fi(path);
            const QString suffix = fi.suffix();
            const QString base = suffix.isEmpty() ? path : path.left(path.size() - suffix.size() - 1);
            runsPath = path;
            ranksPath = base + u"-ranks"_s + (suffix.isEmpty() ? QString() : u'.' + suffix);
        }
        writeFile(runsPath, reportCsvRuns(data));
        writeFile(ranksPath, reportCsvRanks(data));
        return {runsPath, ranksPath};
    }
    }
    return {};
}

} // namespace cppl::core::report
