// SPDX-License-Identifier: MIT
#include "history/comparison.h"

#include "history/run_history.h"

#include "history/host_resources.h"
#include "history/precision.h"

#include "cppl/counted.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <set>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

QString relativeDeviationText(double relative)
{
    return QString::asprintf("%+.3g", relative);
}

QString ScalingPoint::deviationText() const
{
    if (!bitIdentical.has_value())
        return u"no baseline"_s;
    if (*bitIdentical)
        return u"bit-identical"_s;
    return relativeDeviation ? relativeDeviationText(*relativeDeviation) : u"differs"_s;
}

QString ScalingPoint::oneRankDeviationText() const
{
    if (!oneRankDeviation)
        return {};
    const QString bound = !oneRankBound ? u"measured, no bound for this dtype"_s
                          : std::fabs(*oneRankDeviation) <= *oneRankBound
                              ? u"float32: within the expected %1"_s.arg(*oneRankBound, 0, 'g', 3)
                              : u"float32: beyond the expected %1"_s.arg(*oneRankBound, 0, 'g', 3);
    return u"deviation from N = 1: %1 (%2)"_s.arg(relativeDeviationText(*oneRankDeviation), bound);
}

ScalingPoint scalingPoint(const RunRecord &run)
{
    ScalingPoint p;
    p.runId = run.runId;
    p.worldSize = run.worldSize;
    p.groups = run.groupsCount;
    p.nodes = run.nodeCount;
    p.tokens = run.tokensScored;
    p.tokensPerSecond = run.tokensPerSecond.value_or(0);
    p.ppl = run.ppl;
    p.pplStderr = run.pplStderr;
    const QJsonObject r = QJsonDocument::fromJson(run.resultJson).object();
    p.topology = r.value(u"topology"_s).toString(run.worldSize <= 1 ? u"none"_s : run.settings.value(u"topology"_s).toString());
    p.rounds = r.value(u"rounds"_s).toInteger();
    double compute = 0, wait = 0, transfer = 0, speed = 0, comm = 0;
    int speedRanks = 0;
    for (const RankSummary &s : run.ranks) {
        compute += s.computeSeconds;
        wait += s.waitSeconds;
        transfer += s.transferSeconds;
        if (s.computeSeconds > 0) {
            speed += static_cast<double>(s.tokens) / s.computeSeconds;
            ++speedRanks;
        }
        if (s.rounds > 0)
            comm += (s.waitSeconds + s.transferSeconds) / static_cast<double>(s.rounds);
    }
    const double total = compute + wait + transfer;
    if (total > 0) {
        p.waitShare = wait / total;
        p.transferShare = transfer / total;
        p.commShare = p.waitShare + p.transferShare;
    }
    p.computeSpeedPerRank = speedRanks > 0 ? speed / speedRanks : 0;
    p.commSecondsPerRound = !run.ranks.empty() && run.worldSize > 1 ? comm / static_cast<double>(run.ranks.size()) : 0;
    QStringList shared;
    for (const SharedHost &h : sharedHosts(run))
        shared << h.text();
    p.sharedHosts = shared.join(u"; "_s);
    return p;
}

LinearFit fitLine(const std::vector<double> &x, const std::vector<double> &y)
{
    LinearFit f;
    const std::size_t n = std::min(x.size(), y.size());
    f.points = static_cast<int>(n);
    if (n == 0)
        return f;
    double mx = 0, my = 0;
    for (std::size_t i = 0; i < n; ++i) {
        mx += x[i];
        my += y[i];
    }
    mx /= static_cast<double>(n);
    my /= static_cast<double>(n);
    double sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < n; ++i) {
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    // One distinct x: a constant (no slope can be told from one place).
    f.b = sxx > 0 ? sxy / sxx : 0;
    f.a = my - f.b * mx;
    double ss = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const double e = y[i] - (f.a + f.b * x[i]);
        ss += e * e;
    }
    f.rmsError = std::sqrt(ss / static_cast<double>(n));
    return f;
}

namespace {

struct Model
{
    LinearFit speed, flat, hier;
    bool hierarchical = true;
    std::int64_t tokens = 0;
    std::int64_t sync = -1;
    double roundsRefTimesRanks = 0; // for sync 0 (every batch): rounds x ranks of the largest run

    [[nodiscard]] double speedAt(double r) const { return std::exp(speed.a + speed.b * std::log(r)); }
    [[nodiscard]] double commAt(double r) const
    {
        const double c = hierarchical ? hier.a + hier.b * std::log2(r) : flat.a + flat.b * r;
        return r <= 1 ? 0.0 : std::max(0.0, c);
    }
    [[nodiscard]] double roundsAt(double r) const
    {
        if (r <= 1)
            return 0;
        if (sync < 0)
            return 1;
        if (sync == 0)
            return std::max(1.0, std::ceil(roundsRefTimesRanks / r));
        return std::max(1.0, std::ceil(static_cast<double>(tokens) / (r * static_cast<double>(sync))));
    }
    /// compute seconds per rank, comm seconds per rank
    [[nodiscard]] std::pair<double, double> times(double r) const
    {
        return {static_cast<double>(tokens) / (r * speedAt(r)), roundsAt(r) * commAt(r)};
    }
    [[nodiscard]] double throughput(double r) const
    {
        const auto [tc, tm] = times(r);
        return static_cast<double>(tokens) / (tc + tm);
    }
    [[nodiscard]] double commShare(double r) const
    {
        const auto [tc, tm] = times(r);
        return tm / (tc + tm);
    }
};

std::optional<Model> fitModel(const std::vector<ScalingPoint> &pts, std::int64_t tokens, std::int64_t sync, bool hierarchical, QString *why)
{
    std::vector<double> lx, ly, rx, lr, cy;
    std::set<int> sizes;
    Model m;
    m.tokens = tokens;
    m.sync = sync;
    m.hierarchical = hierarchical;
    int largest = 0;
    for (const ScalingPoint &p : pts) {
        if (p.worldSize <= 0 || p.computeSpeedPerRank <= 0)
            continue;
        sizes.insert(p.worldSize);
        lx.push_back(std::log(static_cast<double>(p.worldSize)));
        ly.push_back(std::log(p.computeSpeedPerRank));
        rx.push_back(p.worldSize);
        lr.push_back(std::log2(static_cast<double>(p.worldSize)));
        cy.push_back(p.worldSize <= 1 ? 0.0 : p.commSecondsPerRound);
        if (p.worldSize >= largest && p.rounds > 0) {
            largest = p.worldSize;
            m.roundsRefTimesRanks = static_cast<double>(p.rounds) * p.worldSize;
        }
    }
    if (sizes.size() < 2) {
        *why = u"needs runs at two or more world sizes with per-rank compute times"_s;
        return std::nullopt;
    }
    m.speed = fitLine(lx, ly);
    m.flat = fitLine(rx, cy);
    m.hier = fitLine(lr, cy);
    return m;
}

void describe(Model &m)
{
    m.speed.model = u"power"_s;
    m.speed.formula = QString::asprintf("s(R) = %.6g * R^%.4f tokens/s per rank", std::exp(m.speed.a), m.speed.b);
    m.flat.model = u"flat"_s;
    m.flat.formula = QString::asprintf("c(R) = %.6g + %.6g * R seconds per round", m.flat.a, m.flat.b);
    m.hier.model = u"hierarchical"_s;
    m.hier.formula = QString::asprintf("c(R) = %.6g + %.6g * log2(R) seconds per round", m.hier.a, m.hier.b);
}

} // namespace

namespace {

int smallestWorldSize(const std::vector<ScalingPoint> &points)
{
    int rmin = 0;
    for (const ScalingPoint &p : points)
        if (p.worldSize > 0 && (rmin == 0 || p.worldSize < rmin))
            rmin = p.worldSize;
    return rmin;
}

/// Refits without the largest world size of @p points, predicts it, and compares with what was measured.
HeldOutCheck heldOutCheck(const std::vector<ScalingPoint> &points, std::int64_t tokens, std::int64_t sync, bool hier)
{
    HeldOutCheck h;
    int rmax = 0;
    for (const ScalingPoint &p : points)
        rmax = std::max(rmax, p.worldSize);
    std::vector<ScalingPoint> rest;
    const ScalingPoint *measured = nullptr;
    for (const ScalingPoint &p : points) {
        if (p.worldSize < rmax)
            rest.push_back(p);
        else if (!measured)
            measured = &p;
    }
    h.ranks = rmax;
    QString why;
    std::optional<Model> held = fitModel(rest, tokens, sync, hier, &why);
    if (!held || !measured) {
        h.why = u"the check "_s + why + u" besides the largest"_s;
        return h;
    }
    const int restMin = smallestWorldSize(rest);
    const double heldRef = held->throughput(restMin);
    h.available = true;
    h.predictedTokensPerSecond = held->throughput(rmax);
    h.predictedEfficiency = heldRef > 0 ? h.predictedTokensPerSecond / (heldRef * rmax / restMin) : 0;
    h.predictedCommShare = held->commShare(rmax);
    h.measuredTokensPerSecond = measured->tokensPerSecond;
    h.measuredEfficiency = measured->efficiency;
    h.measuredCommShare = measured->commShare;
    return h;
}

} // namespace

Projection project(const std::vector<ScalingPoint> &points, std::int64_t tokens, std::int64_t syncEveryTokens, const QString &topology,
                   const std::vector<int> &projectTo)
{
    Projection pr;
    pr.topology = topology == u"flat"_s ? u"flat"_s : u"hierarchical"_s;
    pr.tokens = tokens;
    pr.syncEveryTokens = syncEveryTokens;
    const bool hier = pr.topology == u"hierarchical"_s;
    pr.formula = u"T(R) = N / (N / (R * s(R)) + rounds(R) * c(R)); s(R) = s1 * R^-alpha (least squares on log s vs log R); "
                 "c(R) = a + b * %1 (least squares, c(1) = 0); rounds(R) = %2; efficiency(R) = T(R) / (T(Rmin) * R / Rmin); "
                 "comm share(R) = rounds(R) * c(R) / (N / (R * s(R)) + rounds(R) * c(R))"_s
                     .arg(hier ? u"log2(R)"_s : u"R"_s,
                          syncEveryTokens < 0    ? u"1 (sync at the end)"_s
                          : syncEveryTokens == 0 ? u"every batch: measured rounds x ranks / R"_s
                                                 : u"ceil(N / (R * %1))"_s.arg(syncEveryTokens));
    // Ranks that shared a host's cores or GPUs measured that host, not the network: left out.
    std::vector<ScalingPoint> fitted;
    for (const ScalingPoint &p : points) {
        if (p.sharedHosts.isEmpty())
            fitted.push_back(p);
        else
            pr.excluded << p.runId;
    }
    if (tokens <= 0) {
        pr.why = u"no run with a result (tokens scored) to project"_s;
        return pr;
    }
    std::optional<Model> m = fitModel(fitted, tokens, syncEveryTokens, hier, &pr.why);
    if (!m) {
        if (!pr.excluded.isEmpty())
            pr.why += u" (left out: %1, whose ranks shared a host's cores or GPUs)"_s.arg(pr.excluded.join(u", "_s));
        return pr;
    }
    describe(*m);
    pr.available = true;
    pr.computeSpeed = m->speed;
    pr.collectiveFlat = m->flat;
    pr.collectiveHierarchical = m->hier;
    const int rmin = smallestWorldSize(fitted);
    const double ref = m->throughput(rmin);
    for (int r : projectTo) {
        ProjectionPoint pp;
        pp.ranks = r;
        pp.tokensPerSecond = m->throughput(r);
        pp.efficiency = ref > 0 ? pp.tokensPerSecond / (ref * r / rmin) : 0;
        pp.commShare = m->commShare(r);
        pr.points.push_back(pp);
    }
    pr.heldOut = heldOutCheck(fitted, tokens, syncEveryTokens, hier);
    return pr;
}

namespace {

using Row = std::pair<const RunRecord *, ScalingPoint>;

/// Each run's figures, by world size then start time; a run that did not finish, or whose ranks
/// shared a host's cores or GPUs, is said so in @p warnings.
std::vector<Row> scalingRows(const std::vector<RunRecord> &runs, QStringList &warnings)
{
    std::vector<Row> rows;
    for (const RunRecord &r : runs) {
        if (r.status != RunStatus::Finished)
            warnings << u"run %1 is %2: its figures are partial"_s.arg(r.runId, statusName(r.status));
        rows.emplace_back(&r, scalingPoint(r));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) {
        return a.second.worldSize != b.second.worldSize ? a.second.worldSize < b.second.worldSize : a.first->started < b.first->started;
    });
    for (const auto &[rec, p] : rows)
        if (!p.sharedHosts.isEmpty())
            warnings << u"run %1: %2, so its throughput measures that contention, not scaling across machines; "
                        "it is left out of the projection's fit"_s.arg(rec->runId, p.sharedHosts);
    std::set<QString> keys;
    for (const auto &[rec, p] : rows)
        keys.insert(rec->settingsKey);
    if (keys.size() > 1)
        warnings << u"the runs evaluated %1 different settings (model, data, protocol, context, stride, batch, windows, dtype): "
                    "throughput is still compared, deviations only against a baseline of the same settings"_s
                        .arg(keys.size());
    return rows;
}

/// Baselines: finished one-rank (one tensor-parallel group) runs with an exact sum, the selection's own first; by settings key
/// and the dtype the result ran in (a profile's dtype auto: bfloat16 on GPUs, float32 on CPUs, one key).
struct Baselines
{
    std::map<std::pair<QString, QString>, const RunRecord *> byKeyAndDtype;
    std::map<QString, QString> anyDtype; // settings key -> a baseline's dtype, for the warning

    void offer(const RunRecord &r)
    {
        if (r.worldSize == baselineWorldSize(r) && r.status == RunStatus::Finished && !r.nllSumExact.isEmpty() && !r.settingsKey.isEmpty()) {
            const QString dtype = resultDtype(r);
            byKeyAndDtype.try_emplace(std::pair{r.settingsKey, dtype}, &r);
            anyDtype.try_emplace(r.settingsKey, dtype);
        }
    }
};

/// @p p against the one-rank baseline of its settings and dtype, if there is one.
void compareWithBaseline(const RunRecord &rec, ScalingPoint &p, const Baselines &b, QStringList &warnings)
{
    if (rec.nllSumExact.isEmpty())
        return;
    const QString dtype = resultDtype(rec);
    if (const auto it = b.byKeyAndDtype.find(std::pair{rec.settingsKey, dtype}); it != b.byKeyAndDtype.end()) {
        const RunRecord &base = *it->second;
        p.baselineRunId = base.runId;
        p.bitIdentical = rec.nllSumExact == base.nllSumExact && rec.tokensScored == base.tokensScored;
        if (rec.ppl && base.ppl && *base.ppl > 0)
            p.relativeDeviation = *rec.ppl / *base.ppl - 1;
    } else if (const auto o = b.anyDtype.find(rec.settingsKey); o != b.anyDtype.end()) {
        warnings << u"run %1 ran in %2, the one-rank baseline of its settings in %3: not compared (the profiles' dtype "
                    "auto; run one rank in %2 for a baseline)"_s
                        .arg(rec.runId, dtype, o->second);
    }
}

/// A tensor-parallel run against the one-rank run (N = 1) of its settings, if there is one: a
/// deviation, shown as one (the same-N baseline above says whether it is bit-identical).
void compareWithOneRank(const RunRecord &rec, ScalingPoint &p, const Baselines &b)
{
    p.tensorParallel = tensorParallelOf(rec);
    const QString key = oneRankSettingsKey(rec);
    if (key.isEmpty() || !rec.ppl)
        return;
    const QString dtype = resultDtype(rec);
    const auto it = b.byKeyAndDtype.find(std::pair{key, dtype});
    if (it == b.byKeyAndDtype.end() || !it->second->ppl || !(*it->second->ppl > 0))
        return;
    p.oneRankRunId = it->second->runId;
    p.oneRankDeviation = *rec.ppl / *it->second->ppl - 1;
    if (dtype == u"float32"_s)
        p.oneRankBound = kTensorParallelFloat32Bound;
}

/// The ideal line of each precision runs through its smallest run that has a throughput: scaling
/// efficiency compares one model at one precision across rank counts. Across precisions (a
/// quantization sweep) it would call int8's speed-up "140% efficiency"; the warning says so. Returns
/// the precisions the runs cover, in the order of their first run.
QStringList setEfficiency(std::vector<Row> &rows, QStringList &warnings)
{
    QStringList precisions;
    std::map<QString, std::pair<double, int>> reference; // precision -> (tokens/s, world size) of its smallest run
    for (const auto &[rec, p] : rows) {
        const QString precision = precisionOf(*rec);
        if (!precision.isEmpty() && !precisions.contains(precision)) // a run without a result has none
            precisions << precision;
        if (p.worldSize > 0 && p.tokensPerSecond > 0)
            reference.try_emplace(precision, p.tokensPerSecond, p.worldSize);
    }
    for (auto &[rec, p] : rows)
        if (const auto it = reference.find(precisionOf(*rec)); it != reference.end() && p.worldSize > 0) {
            p.idealTokensPerSecond = it->second.first * p.worldSize / it->second.second;
            p.efficiency = p.tokensPerSecond / p.idealTokensPerSecond;
        }
    if (precisions.size() > 1)
        warnings << u"the runs cover %1 precisions (%2): scaling efficiency is each precision's own, against its smallest run; "
                    "their speeds are compared in the precision table"_s.arg(precisions.size())
                        .arg(precisions.join(u", "_s));
    return precisions;
}

void recommend(Comparison &c, double threshold)
{
    for (const ScalingPoint &p : c.points)
        if (p.idealTokensPerSecond > 0 && p.efficiency >= threshold)
            c.recommendedWorldSize = std::max(c.recommendedWorldSize.value_or(0), p.worldSize);
    if (c.points.empty())
        c.recommendation = u"no runs to compare"_s;
    else if (c.recommendedWorldSize)
        c.recommendation = u"%1: the largest world size measured whose scaling efficiency stays at or above %2%"_s
                               .arg(QString::fromStdString(cppl::counted(*c.recommendedWorldSize, "rank", "ranks")))
                               .arg(100 * threshold, 0, 'g', 3);
    else
        c.recommendation = u"no run reaches %1% scaling efficiency"_s.arg(100 * threshold, 0, 'g', 3);
}

/// The projection models the largest run's evaluation (its tokens, sync threshold, topology).
Projection projectLargest(const std::vector<Row> &rows, const std::vector<ScalingPoint> &points, const std::vector<int> &projectTo)
{
    std::int64_t tokens = 0, sync = -1;
    QString topology = u"hierarchical"_s;
    for (const auto &[rec, p] : rows) {
        const QJsonObject r = QJsonDocument::fromJson(rec->resultJson).object();
        if (p.tokens <= 0)
            continue;
        tokens = p.tokens;
        const QJsonValue s = r.value(u"sync_every_tokens"_s);
        if (s.isDouble())
            sync = s.toInteger();
        else if (rec->settings.value(u"sync_every_tokens"_s).isDouble())
            sync = rec->settings.value(u"sync_every_tokens"_s).toInteger();
        if (p.worldSize > 1 && !p.topology.isEmpty() && p.topology != u"none"_s)
            topology = p.topology;
    }
    return project(points, tokens, sync, topology, projectTo);
}

} // namespace

Comparison compareRuns(const std::vector<RunRecord> &runs, const std::vector<RunRecord> &extraBaselines, const CompareOptions &options)
{
    Comparison c;
    c.threshold = options.threshold;
    std::vector<Row> rows = scalingRows(runs, c.warnings);
    Baselines baselines;
    for (const auto &[rec, p] : rows)
        baselines.offer(*rec);
    for (const RunRecord &r : extraBaselines)
        baselines.offer(r);
    const QStringList precisions = setEfficiency(rows, c.warnings);
    for (auto &[rec, p] : rows) {
        compareWithBaseline(*rec, p, baselines, c.warnings);
        compareWithOneRank(*rec, p, baselines);
        c.points.push_back(p);
    }
    recommend(c, options.threshold);
    if (precisions.size() > 1) {
        c.projection.why = u"the runs cover %1 precisions; select one precision's runs to project its scaling"_s.arg(precisions.size());
    } else {
        c.projection = projectLargest(rows, c.points, options.projectTo);
    }
    return c;
}

namespace {

QJsonValue optJson(const std::optional<double> &v)
{
    return v ? QJsonValue(*v) : QJsonValue(QJsonValue::Null);
}

QJsonObject fitJson(const LinearFit &f)
{
    return {{u"model"_s, f.model}, {u"formula"_s, f.formula}, {u"a"_s, f.a}, {u"b"_s, f.b}, {u"rms_error"_s, f.rmsError}, {u"points"_s, f.points}};
}

} // namespace

std::vector<RunRecord> storedBaselines(const RunHistory &store, const RunRecord &run, const QString &excludeRunId)
{
    std::vector<RunRecord> out;
    const QString dtype = resultDtype(run);
    if (auto b = store.baselineFor(run.settingsKey, excludeRunId, dtype))
        out.push_back(std::move(*b));
    if (auto b = store.baselineFor(oneRankSettingsKey(run), excludeRunId, dtype)) // empty key: none
        out.push_back(std::move(*b));
    return out;
}

QJsonObject comparisonToJson(const Comparison &c)
{
    QJsonArray pts;
    for (const ScalingPoint &p : c.points)
        pts.append(QJsonObject{{u"run_id"_s, p.runId},
                               {u"world_size"_s, p.worldSize},
                               {u"groups"_s, p.groups},
                               {u"nodes"_s, p.nodes},
                               {u"topology"_s, p.topology},
                               {u"tokens_scored"_s, static_cast<qint64>(p.tokens)},
                               {u"rounds"_s, static_cast<qint64>(p.rounds)},
                               {u"tokens_per_second"_s, p.tokensPerSecond},
                               {u"ideal_tokens_per_second"_s, p.idealTokensPerSecond},
                               {u"efficiency"_s, p.efficiency},
                               {u"wait_share"_s, p.waitShare},
                               {u"transfer_share"_s, p.transferShare},
                               {u"comm_share"_s, p.commShare},
                               {u"compute_tokens_per_second_per_rank"_s, p.computeSpeedPerRank},
                               {u"comm_seconds_per_round"_s, p.commSecondsPerRound},
                               {u"ppl"_s, optJson(p.ppl)},
                               {u"ppl_stderr"_s, optJson(p.pplStderr)},
                               {u"baseline_run_id"_s, p.baselineRunId},
                               {u"bit_identical"_s, p.bitIdentical ? QJsonValue(*p.bitIdentical) : QJsonValue(QJsonValue::Null)},
                               {u"relative_deviation"_s, optJson(p.relativeDeviation)},
                               {u"deviation"_s, p.deviationText()},
                               {u"tensor_parallel"_s, p.tensorParallel},
                               {u"one_rank_run_id"_s, p.oneRankRunId.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(p.oneRankRunId)},
                               {u"one_rank_deviation"_s, optJson(p.oneRankDeviation)},
                               {u"one_rank_deviation_bound"_s, optJson(p.oneRankBound)},
                               {u"shared_hosts"_s, p.sharedHosts.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(p.sharedHosts)}});
    const Projection &pr = c.projection;
    QJsonArray proj;
    for (const ProjectionPoint &p : pr.points)
        proj.append(QJsonObject{{u"ranks"_s, p.ranks}, {u"tokens_per_second"_s, p.tokensPerSecond}, {u"efficiency"_s, p.efficiency},
                                {u"comm_share"_s, p.commShare}});
    const HeldOutCheck &h = pr.heldOut;
    QJsonObject held{{u"available"_s, h.available}, {u"ranks"_s, h.ranks}};
    if (h.available) {
        held.insert(u"predicted_efficiency"_s, h.predictedEfficiency);
        held.insert(u"measured_efficiency"_s, h.measuredEfficiency);
        held.insert(u"efficiency_error_points"_s, h.efficiencyErrorPoints());
        held.insert(u"predicted_comm_share"_s, h.predictedCommShare);
        held.insert(u"measured_comm_share"_s, h.measuredCommShare);
        held.insert(u"comm_share_error_points"_s, h.commShareErrorPoints());
        held.insert(u"predicted_tokens_per_second"_s, h.predictedTokensPerSecond);
        held.insert(u"measured_tokens_per_second"_s, h.measuredTokensPerSecond);
        held.insert(u"throughput_relative_error"_s, h.throughputRelativeError());
    } else {
        held.insert(u"why"_s, h.why);
    }
    QJsonObject projection{{u"available"_s, pr.available}, {u"topology"_s, pr.topology},  {u"tokens"_s, static_cast<qint64>(pr.tokens)},
                           {u"sync_every_tokens"_s, static_cast<qint64>(pr.syncEveryTokens)}, {u"formula"_s, pr.formula},
                           {u"points"_s, proj},        {u"held_out"_s, held},
                           {u"excluded_runs"_s, QJsonArray::fromStringList(pr.excluded)}};
    if (pr.available) {
        projection.insert(u"compute_speed"_s, fitJson(pr.computeSpeed));
        projection.insert(u"collective_flat"_s, fitJson(pr.collectiveFlat));
        projection.insert(u"collective_hierarchical"_s, fitJson(pr.collectiveHierarchical));
    } else {
        projection.insert(u"why"_s, pr.why);
    }
    QJsonArray warnings;
    for (const QString &w : c.warnings)
        warnings.append(w);
    return {{u"points"_s, pts},
            {u"threshold"_s, c.threshold},
            {u"recommended_world_size"_s, c.recommendedWorldSize ? QJsonValue(*c.recommendedWorldSize) : QJsonValue(QJsonValue::Null)},
            {u"recommendation"_s, c.recommendation},
            {u"projection"_s, projection},
            {u"warnings"_s, warnings}};
}

QString formatComparison(const Comparison &c)
{
    QString s;
    s += u"ranks groups  tokens/s     ideal   effic.   wait%  transfer%   ppl +/- stderr            vs 1 rank        run\n"_s;
    for (const ScalingPoint &p : c.points)
        s += QString::asprintf("%5d %6d %9.1f %9.1f %7.1f%% %7.2f %10.2f   %-24s %-16s %s%s\n", p.worldSize, p.groups, p.tokensPerSecond,
                               p.idealTokensPerSecond, 100 * p.efficiency, 100 * p.waitShare, 100 * p.transferShare,
                               p.ppl ? qPrintable(QString::asprintf("%.6f +/- %.5f", *p.ppl, p.pplStderr.value_or(0))) : "-",
                               qPrintable(p.deviationText()), qPrintable(p.runId), p.sharedHosts.isEmpty() ? "" : "  (shared host: see the warning below)");
    for (const ScalingPoint &p : c.points) // against N = 1: a deviation by construction (the matmuls sum in another order)
        if (p.oneRankDeviation)
            s += u"run %1 (tensor parallel %2): %3 vs run %4; a deviation, not a failure\n"_s.arg(p.runId)
                     .arg(p.tensorParallel)
                     .arg(p.oneRankDeviationText(), p.oneRankRunId);
    s += u"recommendation (threshold %1%): %2\n"_s.arg(100 * c.threshold, 0, 'g', 3).arg(c.recommendation);
    const Projection &pr = c.projection;
    if (!pr.available) {
        s += u"projection: not available: "_s + pr.why + u'\n';
    } else {
        s += u"projection (%1 collective, N = %2 tokens): %3\n"_s.arg(pr.topology).arg(pr.tokens).arg(pr.formula);
        if (!pr.excluded.isEmpty())
            s += u"  left out of the fit: %1 (their ranks shared a host's cores or GPUs)\n"_s.arg(pr.excluded.join(u", "_s));
        const LinearFit &col = pr.topology == u"flat"_s ? pr.collectiveFlat : pr.collectiveHierarchical;
        s += u"  fitted: %1 (rms error %2 in log s); %3 (rms error %4 s)\n"_s.arg(pr.computeSpeed.formula)
                 .arg(pr.computeSpeed.rmsError, 0, 'g', 3)
                 .arg(col.formula)
                 .arg(col.rmsError, 0, 'g', 3);
        for (const ProjectionPoint &p : pr.points)
            s += QString::asprintf("  %5d ranks: %12.1f tokens/s, efficiency %6.1f%%, comm share %6.2f%% (projected)\n", p.ranks, p.tokensPerSecond,
                                   100 * p.efficiency, 100 * p.commShare);
        const HeldOutCheck &h = pr.heldOut;
        if (h.available)
            s += QString::asprintf("  held-out check (fit without %d ranks, predict it): efficiency %.1f%% predicted vs %.1f%% measured (%+.1f points), "
                                   "comm share %.2f%% vs %.2f%% (%+.2f points), throughput %+.1f%%\n",
                                   h.ranks, 100 * h.predictedEfficiency, 100 * h.measuredEfficiency, h.efficiencyErrorPoints(),
                                   100 * h.predictedCommShare, 100 * h.measuredCommShare, h.commShareErrorPoints(),
                                   100 * h.throughputRelativeError());
        else
            s += u"  held-out check: not available: "_s + h.why + u'\n';
    }
    for (const QString &w : c.warnings)
        s += u"warning: "_s + w + u'\n';
    return s;
}

} // namespace cppl::core::history
