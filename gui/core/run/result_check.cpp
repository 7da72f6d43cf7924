// SPDX-License-Identifier: MIT
#include "run/result_check.h"

#include <QCoreApplication>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <cmath>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("RunEngine", text);
}

/// Fields of a result JSON the engine compares: the exact sum and the counts it divides by.
struct ResultKey
{
    QString nllExact;
    qint64 tokens = -1;
    double ppl = 0;
    bool valid = false;
    // How it ran, which a profile may leave to the agents ("auto"): a baseline of the same
    // settings key can have run otherwise.
    QString dtype, deviceKind, gemm;
    qint64 batch = 0;
};

ResultKey resultKey(const QByteArray &json)
{
    const QJsonObject o = QJsonDocument::fromJson(json).object();
    ResultKey k;
    k.nllExact = o.value(u"nll_sum_exact"_s).toString();
    k.tokens = o.value(u"tokens_scored"_s).toInteger(-1);
    k.ppl = o.value(u"ppl"_s).toDouble();
    k.valid = !k.nllExact.isEmpty() && k.tokens > 0;
    k.dtype = o.value(u"dtype"_s).toString();
    k.deviceKind = o.value(u"device"_s).toString().section(u':', 0, 0); // cuda:3 and cuda:0 are one kind
    k.gemm = o.value(u"gemm"_s).toString();
    k.batch = o.value(u"batch"_s).toInteger();
    return k;
}

/// How @p mine ran differently from @p base, in words ("device cuda, the baseline's cpu; batch 64,
/// the baseline's 8"), among the things that change a result's last bits (docs/models.md,
/// "Determinism"): device kind, batch and kernels. Fields a result lacks are not compared.
QString howItRanDiffers(const ResultKey &mine, const ResultKey &base)
{
    QStringList out;
    auto differ = [&](const QString &what, const QString &a, const QString &b) {
        if (!a.isEmpty() && !b.isEmpty() && a != b)
            out << tr("%1 %2, the baseline's %3").arg(what, a, b);
    };
    differ(QStringLiteral("device"), mine.deviceKind, base.deviceKind);
    differ(QStringLiteral("batch"), mine.batch > 0 ? QString::number(mine.batch) : QString(), base.batch > 0 ? QString::number(base.batch) : QString());
    differ(QStringLiteral("kernels"), mine.gemm, base.gemm);
    return out.join(u"; "_s);
}

} // namespace

BaselineVerdict compareWithBaseline(const QByteArray &mineJson, const QByteArray &baseJson, double tolerance)
{
    BaselineVerdict v;
    const ResultKey mine = resultKey(mineJson);
    const ResultKey base = resultKey(baseJson);
    if (!mine.valid || !base.valid)
        return v;
    if (!mine.dtype.isEmpty() && !base.dtype.isEmpty() && mine.dtype != base.dtype) {
        // dtype "auto" in both profiles, one run on GPUs (bfloat16) and the other on CPUs
        // (float32): one key, two precisions. Their gap says nothing about this run's sums.
        v.notCompared = tr("it ran in %1, this run in %2").arg(base.dtype, mine.dtype);
        return v;
    }
    v.identical = mine.nllExact == base.nllExact && mine.tokens == base.tokens;
    v.relativeDeviation = base.ppl > 0 ? mine.ppl / base.ppl - 1 : 0;
    if (!*v.identical && std::abs(v.relativeDeviation) > tolerance) {
        const QString how = howItRanDiffers(mine, base);
        v.deviation = tr("PPL %1 deviates %2% from the one-rank baseline %3 (tolerance %4%)")
                          .arg(mine.ppl, 0, 'f', 6)
                          .arg(100 * v.relativeDeviation, 0, 'g', 3)
                          .arg(base.ppl, 0, 'f', 6)
                          .arg(100 * tolerance, 0, 'g', 3)
                      + (how.isEmpty() ? QString() : tr("; it ran otherwise: %1").arg(how));
    }
    return v;
}

QStringList recoveredRanks(const QByteArray &resultJson)
{
    QStringList out;
    const QJsonArray lost = QJsonDocument::fromJson(resultJson).object().value(u"lost_ranks"_s).toArray();
    for (const QJsonValue &v : lost) {
        const QJsonObject l = v.toObject();
        out << tr("rank %1 (%2): %3; lost after round %4")
                   .arg(l.value(u"rank"_s).toInt())
                   .arg(l.value(u"host"_s).toString(), l.value(u"cause"_s).toString())
                   .arg(l.value(u"round"_s).toInt());
    }
    return out;
}

} // namespace cppl::core::run
