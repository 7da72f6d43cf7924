// SPDX-License-Identifier: MIT
#include "history/precision.h"

#include "cppl/errors.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTextStream>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

namespace {

std::optional<PrecisionRow::Quality> qualityOf(const QJsonObject &ref)
{
    if (ref.isEmpty())
        return std::nullopt;
    PrecisionRow::Quality q;
    auto num = [&](const char16_t *key) { return ref.value(QString::fromUtf16(key)).toDouble(); };
    q.pplRatio = num(u"ppl_ratio");
    q.pplRatioStderr = num(u"ppl_ratio_stderr");
    q.kldMean = num(u"kld_mean");
    q.kldStderr = num(u"kld_stderr");
    q.kldP99 = num(u"kld_p99");
    q.sameTop = num(u"same_top");
    q.sameTopStderr = num(u"same_top_stderr");
    return q;
}

QString megabytes(qint64 bytes) { return bytes > 0 ? QString::number(double(bytes) / (1 << 20), 'f', 1) : u"-"_s; }

QString precisionIn(const QJsonObject &result)
{
    const QString method = result.value(u"quantization"_s).toObject().value(u"method"_s).toString();
    return method.isEmpty() || method == u"none"_s ? result.value(u"dtype"_s).toString() : method;
}

} // namespace

QString precisionOf(const RunRecord &run)
{
    return precisionIn(QJsonDocument::fromJson(run.resultJson).object());
}

std::optional<PrecisionRow> precisionRow(const RunRecord &r)
{
    const QJsonObject o = QJsonDocument::fromJson(r.resultJson).object();
    if (o.isEmpty())
        return std::nullopt;
    PrecisionRow row;
    row.runId = r.runId;
    row.precision = precisionIn(o);
    row.worldSize = r.worldSize;
    row.ppl = o.value(u"ppl"_s).toDouble();
    row.pplStderr = o.value(u"ppl_stderr"_s).toDouble();
    row.quality = qualityOf(o.value(u"reference"_s).toObject());
    row.tokensPerSecond = r.tokensPerSecond.value_or(o.value(u"tokens_per_second"_s).toDouble());
    const QJsonObject model = o.value(u"model"_s).toObject();
    const qint64 perRank = o.value(u"tensor_parallel"_s).toObject().value(u"weights_bytes_per_rank"_s).toInteger();
    row.weightBytes = perRank > 0 ? perRank : model.value(u"weight_bytes"_s).toInteger();
    row.rssLoadBytes = model.value(u"rss_load_bytes"_s).toInteger();
    return row;
}

std::vector<PrecisionRow> precisionRows(const std::vector<RunRecord> &runs)
{
    std::vector<PrecisionRow> rows;
    for (const RunRecord &r : runs)
        if (auto row = precisionRow(r))
            rows.push_back(std::move(*row));
    for (PrecisionRow &row : rows)
        row.speedup = rows.front().tokensPerSecond > 0 ? row.tokensPerSecond / rows.front().tokensPerSecond : 0;
    return rows;
}

bool comparesPrecisions(const std::vector<PrecisionRow> &rows)
{
    return std::any_of(rows.begin(), rows.end(), [&](const PrecisionRow &r) { return r.precision != rows.front().precision; });
}

QString formatPrecisions(const std::vector<PrecisionRow> &rows)
{
    QString text;
    QTextStream out(&text);
    out << "precision   ranks  PPL                    PPL ratio            KLD mean            KLD p99   same top          tokens/s  x first  weights MB/rank  load RSS MB\n";
    for (const PrecisionRow &r : rows) {
        out << r.precision.leftJustified(11) << ' ' << QString::number(r.worldSize).rightJustified(5) << "  "
            << u"%1 ± %2"_s.arg(r.ppl, 0, 'f', 4).arg(r.pplStderr, 0, 'f', 4).leftJustified(22) << ' ';
        if (r.quality)
            out << u"%1 ± %2"_s.arg(r.quality->pplRatio, 0, 'f', 5).arg(r.quality->pplRatioStderr, 0, 'f', 5).leftJustified(20) << ' '
                << u"%1 ± %2"_s.arg(r.quality->kldMean, 0, 'f', 6).arg(r.quality->kldStderr, 0, 'f', 6).leftJustified(19) << ' '
                << QString::number(r.quality->kldP99, 'f', 5).leftJustified(9) << ' '
                << u"%1% ± %2"_s.arg(100 * r.quality->sameTop, 0, 'f', 2).arg(100 * r.quality->sameTopStderr, 0, 'f', 2).leftJustified(16) << ' ';
        else
            out << u"(no reference)"_s.leftJustified(20) << ' ' << u"-"_s.leftJustified(19) << ' ' << u"-"_s.leftJustified(9) << ' '
                << u"-"_s.leftJustified(16) << ' ';
        out << QString::number(r.tokensPerSecond, 'f', 1).rightJustified(9) << "  " << QString::number(r.speedup, 'f', 2).rightJustified(6) << "x  "
            << megabytes(r.weightBytes).rightJustified(15) << "  " << megabytes(r.rssLoadBytes).rightJustified(11) << '\n';
    }
    return text;
}

QJsonArray precisionsToJson(const std::vector<PrecisionRow> &rows)
{
    QJsonArray a;
    for (const PrecisionRow &r : rows) {
        QJsonObject o{{u"run_id"_s, r.runId},        {u"precision"_s, r.precision},          {u"world_size"_s, r.worldSize},
                      {u"ppl"_s, r.ppl},             {u"ppl_stderr"_s, r.pplStderr},         {u"tokens_per_second"_s, r.tokensPerSecond},
                      {u"speedup"_s, r.speedup},     {u"weight_bytes"_s, r.weightBytes},     {u"rss_load_bytes"_s, r.rssLoadBytes}};
        if (r.quality)
            o.insert(u"reference"_s, QJsonObject{{u"ppl_ratio"_s, r.quality->pplRatio},
                                                 {u"ppl_ratio_stderr"_s, r.quality->pplRatioStderr},
                                                 {u"kld_mean"_s, r.quality->kldMean},
                                                 {u"kld_stderr"_s, r.quality->kldStderr},
                                                 {u"kld_p99"_s, r.quality->kldP99},
                                                 {u"same_top"_s, r.quality->sameTop},
                                                 {u"same_top_stderr"_s, r.quality->sameTopStderr}});
        a.append(o);
    }
    return a;
}

QStringList parsePrecisionList(const QString &list)
{
    static const QStringList kKnown{u"none"_s, u"int8"_s, u"int4"_s, u"int4-sym"_s, u"int4-asym"_s};
    QStringList out;
    for (const QString &item : list.split(u',')) {
        const QString q = item.trimmed();
        if (!kKnown.contains(q))
            throw ConfigError("--quantize: \"" + q.toStdString() + "\" is not one of none, int8, int4, int4-sym, int4-asym");
        if (out.contains(q))
            throw ConfigError("--quantize: \"" + q.toStdString() + "\" is listed twice");
        out << q;
    }
    return out;
}

} // namespace cppl::core::history
