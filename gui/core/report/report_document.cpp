// SPDX-License-Identifier: MIT
// What a report says, in order, as blocks: setup, result, per-rank table, charts, alerts; for a
// comparison first the scaling table, recommendation and projection, then each run.
#include "report/report_document.h"


#include "report/report_charts.h"

#include "cppl/cluster_profile.h"
#include "cppl/config.h"
#include "cppl/counted.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>
#include <numeric>

using namespace Qt::StringLiterals;

namespace cppl::core::report {

using history::RankSummary;
using history::RunRecord;

namespace {

Cell text(const QString &t)
{
    return {t, {}, false};
}

Cell figure(double v, int digits = 4)
{
    return {displayNumber(v, digits), exactNumber(v), true};
}


Cell exactFigure(double v)
{
    return {exactNumber(v), exactNumber(v), true};
}

Cell integer(std::int64_t v)
{
    return {QString::number(v), QString::number(v), true};
}

/// A share (0..1) shown as a percentage; the exact cell keeps the stored fraction.
Cell percent(double share)
{
    return {displayNumber(share * 100, 3) + u" %"_s, exactNumber(share), true};
}

Block heading(Block::Kind kind, const QString &t)
{
    Block b;
    b.kind = kind;
    b.text = t;
    return b;
}

Block paragraph(const QString &t, const QString &css = {})
{
    Block b = heading(Block::Kind::Paragraph, t);
    b.cssClass = css;
    return b;
}

Block keyValues(const std::vector<std::pair<QString, Cell>> &rows)
{
    Block b;
    b.kind = Block::Kind::KeyValues;
    b.table.header = {u"field"_s, u"value"_s};
    b.table.widths = {1, 4};
    for (const auto &[k, v] : rows) {
        Cell c = v;
        c.numeric = false; // a key/value list reads left to right
        b.table.rows.push_back({text(k), c});
    }
    return b;
}

Block chart(int runIndex, const QString &id)
{
    Block b;
    b.kind = Block::Kind::Chart;
    b.runIndex = runIndex;
    b.chartId = id;
    return b;
}

QString jsonCompact(const QJsonValue &v)
{
    if (v.isObject())
        return QString::fromUtf8(QJsonDocument(v.toObject()).toJson(QJsonDocument::Compact));
    if (v.isArray())
        return QString::fromUtf8(QJsonDocument(v.toArray()).toJson(QJsonDocument::Compact));
    return v.toVariant().toString();
}

QString dateText(const QDateTime &d)
{
    return d.isValid() ? d.toUTC().toString(u"yyyy-MM-dd HH:mm:ss 'UTC'"_s) : u"-"_s;
}

std::vector<Cell> rankRow(const RankSummary &k)
{
    return {integer(k.rank),
            text(k.host),
            integer(k.group),
            integer(k.tokens),
            figure(k.tokensPerSecond),
            figure(k.computeSeconds),
            figure(k.waitSeconds),
            figure(k.transferSeconds),
            percent(waitShare(k) + transferShare(k)),
            k.exitCode ? integer(*k.exitCode) : text(u"-"_s)};
}

Block rankTable(const RunRecord &r, const std::vector<const RankSummary *> &ranks)
{
    Block b;
    b.kind = Block::Kind::Table;
    b.table.header = {u"rank"_s, u"host"_s, u"group"_s, u"tokens"_s, u"tokens/s"_s, u"compute s"_s, u"wait s"_s, u"transfer s"_s,
                      u"comm"_s, u"exit"_s};
    b.table.widths = {0.6, 2.2, 0.6, 1.1, 1.1, 1.1, 1, 1.1, 0.9, 0.5};
    for (const RankSummary *k : ranks)
        b.table.rows.push_back(rankRow(*k));
    Q_UNUSED(r);
    return b;
}

/// A list of at most 12 items, then how many there are in all: a 512-host list would be pages.
constexpr int kListed = 12;

QString hostsText(const RunRecord &r)
{
    QStringList hosts;
    for (const QJsonValue &h : r.hosts) {
        if (hosts.size() == kListed) {
            hosts << u"... %1 hosts in all (every one is in the JSON report)"_s.arg(r.hosts.size());
            break;
        }
        const QJsonObject o = h.toObject();
        hosts << u"%1 (%2%3)"_s.arg(o.value(u"name"_s).toString())
                     .arg(QString::fromStdString(cppl::counted(o.value(u"slots"_s).toInt(), "slot", "slots")))
                     .arg(o.value(u"address"_s).toString().isEmpty() ? QString() : u", "_s + o.value(u"address"_s).toString());
    }
    return hosts.isEmpty() ? u"-"_s : hosts.join(u"; "_s);
}

QString groupsText(const RunRecord &r)
{
    QStringList groups;
    for (const QJsonValue &g : r.groups) {
        if (groups.size() == kListed) {
            groups << u"... %1 groups in all"_s.arg(r.groups.size());
            break;
        }
        std::vector<int> ranks;
        for (const QJsonValue &k : g.toArray())
            ranks.push_back(k.toInt());
        groups << u"["_s + QString::fromStdString(rankListText(std::move(ranks))) + u"]"_s;
    }
    return groups.isEmpty() ? u"-"_s : groups.join(u" "_s) + u" (the first rank of each leads it)"_s;
}

Block setupBlock(const RunRecord &r)
{
    QStringList versions;
    for (auto it = r.versions.begin(); it != r.versions.end(); ++it)
        versions << it.key() + u" "_s + jsonCompact(it.value());
    return keyValues({
        {u"run"_s, text(r.runId)},
        {u"status"_s, text(history::statusName(r.status) + (r.exitCode ? u", exit code %1"_s.arg(*r.exitCode) : QString()))},
        {u"started"_s, text(dateText(r.started))},
        {u"ended"_s, text(dateText(r.ended))},
        {u"source"_s, text(r.source + (r.profileName.isEmpty() ? QString() : u", profile \""_s + r.profileName + u'"'))},
        {u"cluster"_s, text(u"%1 on %2, %3, launcher %4"_s.arg(QString::fromStdString(cppl::counted(r.worldSize, "rank", "ranks")),
                                                               QString::fromStdString(cppl::counted(r.nodeCount, "node", "nodes")),
                                                               QString::fromStdString(cppl::counted(r.groupsCount, "group", "groups")),
                                                               r.launcher.isEmpty() ? u"-"_s : r.launcher))},
        {u"hosts"_s, text(hostsText(r))},
        {u"groups"_s, text(groupsText(r))},
        {u"model"_s, text(r.model)},
        {u"data"_s, text(r.data)},
        {u"protocol"_s, text(r.protocol)},
        {u"settings"_s, text(jsonCompact(r.settings))},
        {u"versions"_s, text(versions.isEmpty() ? u"not recorded"_s : versions.join(u", "_s))},
    });
}

void resultBlocks(const RunRecord &r, const history::ScalingPoint *p, std::vector<Block> &out)
{
    if (r.ppl) {
        QString deviation = p ? p->deviationText() : u"no baseline"_s;
        if (p && p->baselineRunId == r.runId)
            deviation = u"this run is the one-rank baseline of its settings"_s;
        else if (p && !p->baselineRunId.isEmpty())
            deviation += u" vs the one-rank baseline "_s + p->baselineRunId;
        else
            deviation += u" (no finished one-rank run of the same settings is stored)"_s;
        out.push_back(keyValues({
            {u"PPL"_s, Cell{exactNumber(*r.ppl) + u" ± "_s + exactNumber(r.pplStderr), exactNumber(*r.ppl), true}},
            {u"tokens scored"_s, integer(r.tokensScored)},
            {u"tokens/s"_s, r.tokensPerSecond ? exactFigure(*r.tokensPerSecond) : text(u"-"_s)},
            {u"exact NLL sum"_s, text(r.nllSumExact)},
            {u"deviation"_s, text(deviation)},
        }));
        if (p && p->oneRankDeviation)
            out.push_back(keyValues({{u"deviation from N = 1"_s,
                                      Cell{p->oneRankDeviationText() + u" vs run "_s + p->oneRankRunId
                                               + u": tensor parallelism sums the matmuls in another order; a deviation, not a failure"_s,
                                           exactNumber(*p->oneRankDeviation), false}}}));
        if (p && p->bitIdentical && *p->bitIdentical && p->baselineRunId != r.runId)
            out.push_back(paragraph(u"bit-identical: the exact NLL sum and the token count equal the one-rank baseline's."_s, u"ok"_s));
    } else {
        out.push_back(paragraph(u"No result: the run ended %1%2."_s.arg(history::statusName(r.status),
                                                                          r.firstCause.isEmpty() ? QString() : u" (" + r.firstCause + u")"),
                                u"warn"_s));
    }
    if (!r.firstCause.isEmpty() && r.ppl)
        out.push_back(paragraph(u"First cause: "_s + r.firstCause, u"warn"_s));
}

/// Every rank, or for many ranks the spread of their rates and the slowest and fastest few.
void rankBlocks(const RunRecord &r, std::vector<Block> &out)
{
    if (r.ranks.empty()) {
        out.push_back(paragraph(u"No per-rank figures are stored for this run."_s));
        return;
    }
    std::vector<const RankSummary *> sorted;
    for (const auto &k : r.ranks)
        sorted.push_back(&k);
    if (static_cast<int>(r.ranks.size()) <= kFullRankTable) {
        out.push_back(rankTable(r, sorted));
        return;
    }
    std::stable_sort(sorted.begin(), sorted.end(), [](auto *a, auto *b) { return a->tokensPerSecond < b->tokensPerSecond; });
    double sum = 0;
    for (auto *k : sorted)
        sum += k->tokensPerSecond;
    const double median = sorted[sorted.size() / 2]->tokensPerSecond;
    out.push_back(paragraph(u"%1 ranks: tokens/s per rank from %2 (rank %3) to %4 (rank %5), mean %6, median %7. Listed: the %8 slowest "
                            "and the %8 fastest ranks; every rank is in the CSV and JSON reports."_s
                                .arg(sorted.size())
                                .arg(displayNumber(sorted.front()->tokensPerSecond))
                                .arg(sorted.front()->rank)
                                .arg(displayNumber(sorted.back()->tokensPerSecond))
                                .arg(sorted.back()->rank)
                                .arg(displayNumber(sum / static_cast<double>(sorted.size())))
                                .arg(displayNumber(median))
                                .arg(kRankExtremes)));
    out.push_back(heading(Block::Kind::Note, u"Slowest %1 ranks"_s.arg(kRankExtremes)));
    out.push_back(rankTable(r, {sorted.begin(), sorted.begin() + kRankExtremes}));
    out.push_back(heading(Block::Kind::Note, u"Fastest %1 ranks"_s.arg(kRankExtremes)));
    out.push_back(rankTable(r, {sorted.end() - kRankExtremes, sorted.end()}));
}

void alertBlocks(const RunRecord &r, std::vector<Block> &out)
{
    if (r.alerts.empty())
        out.push_back(paragraph(u"No alerts were raised."_s));
    for (const history::StoredAlert &a : r.alerts) {
        Block b;
        b.kind = Block::Kind::Alert;
        b.text = u"%1 s  %2  %3: %4"_s.arg(displayNumber(a.t, 4), a.rank >= 0 ? u"rank %1"_s.arg(a.rank) : u"run"_s, a.kind, a.message);
        out.push_back(b);
    }
}

/// One run's part: setup, result, ranks, charts, alerts (in a comparison, each under the run's heading).
void runBlocks(const ReportData &data, int index, std::vector<Block> &out, const std::vector<ReportChart> &charts)
{
    const RunRecord &r = data.runs[static_cast<size_t>(index)];
    const Block::Kind section = data.isComparison() ? Block::Kind::Subheading : Block::Kind::Heading;
    out.push_back(heading(Block::Kind::Heading, data.isComparison() ? u"Run "_s + r.runId : u"Setup"_s));
    if (data.isComparison())
        out.push_back(heading(Block::Kind::Subheading, u"Setup"_s));
    out.push_back(setupBlock(r));
    out.push_back(heading(section, u"Result"_s));
    resultBlocks(r, data.pointOf(r.runId), out);
    out.push_back(heading(section, u"Ranks"_s));
    rankBlocks(r, out);
    if (!charts.empty()) {
        out.push_back(heading(section, u"Charts"_s));
        for (const ReportChart &c : charts) {
            out.push_back(chart(index, c.id));
            out.push_back(heading(Block::Kind::Note, c.caption));
        }
    }
    out.push_back(heading(section, u"Alerts"_s));
    alertBlocks(r, out);
}

bool isPrecisionChart(const ReportChart &c)
{
    return c.id.startsWith(u"precision-"_s);
}

void comparisonBlocks(const ReportData &data, std::vector<Block> &out, const std::vector<ReportChart> &charts)
{
    const history::Comparison &c = data.comparison;
    out.push_back(heading(Block::Kind::Heading, u"Scaling"_s));
    Block t;
    t.kind = Block::Kind::Table;
    t.table.header = {u"run"_s,        u"ranks"_s,      u"nodes"_s,      u"tokens/s"_s, u"ideal tokens/s"_s, u"efficiency"_s,
                      u"wait"_s,       u"transfer"_s,   u"PPL"_s,        u"deviation"_s};
    t.table.widths = {1.7, 0.55, 0.55, 0.9, 0.9, 0.85, 0.8, 0.85, 1.6, 1.2};
    for (const auto &p : c.points)
        t.table.rows.push_back({text(p.runId), integer(p.worldSize), integer(p.nodes), figure(p.tokensPerSecond),
                                figure(p.idealTokensPerSecond), percent(p.efficiency), percent(p.waitShare), percent(p.transferShare),
                                p.ppl ? Cell{exactNumber(*p.ppl), exactNumber(*p.ppl), true} : text(u"-"_s),
                                text((p.baselineRunId == p.runId ? u"baseline"_s : p.deviationText())
                                     + (p.oneRankDeviation ? QString(u"; "_s + p.oneRankDeviationText()) : QString()))});
    out.push_back(t);
    out.push_back(paragraph(u"Recommendation: "_s + c.recommendation, c.recommendedWorldSize ? u"ok"_s : u"warn"_s));
    for (const QString &w : c.warnings)
        out.push_back(paragraph(u"Note: "_s + w, u"warn"_s));
    for (const ReportChart &rc : charts) {
        if (rc.id == u"projection"_s || isPrecisionChart(rc))
            continue;
        out.push_back(chart(-1, rc.id));
        out.push_back(heading(Block::Kind::Note, rc.caption));
    }

    out.push_back(heading(Block::Kind::Heading, u"Projection"_s));
    const history::Projection &pr = c.projection;
    if (!pr.available) {
        out.push_back(paragraph(u"No projection: "_s + pr.why, u"warn"_s));
        return;
    }
    out.push_back(paragraph(u"Model ("_s + pr.topology + u" collective): "_s + pr.formula));
    std::vector<std::pair<QString, Cell>> fits;
    if (!pr.excluded.isEmpty()) // their ranks shared a host's cores or GPUs (the notes above)
        fits.push_back({u"left out of the fit"_s, text(pr.excluded.join(u", "_s) + u": their ranks shared a host's cores or GPUs"_s)});
    for (const history::LinearFit *f : {&pr.computeSpeed, &pr.collectiveFlat, &pr.collectiveHierarchical})
        if (f->points > 0)
            fits.push_back({f->model + u" fit"_s, text(u"%1 (rms error %2, %3 points)"_s.arg(f->formula, displayNumber(f->rmsError)).arg(f->points))});
    if (pr.heldOut.available)
        fits.push_back({u"held-out check"_s,
                        text(u"fitted without %1 ranks: efficiency predicted %2 % vs measured %3 % (%4 points), comm share %5 % vs %6 %, "
                             "throughput error %7 %"_s.arg(pr.heldOut.ranks)
                                 .arg(displayNumber(pr.heldOut.predictedEfficiency * 100, 3), displayNumber(pr.heldOut.measuredEfficiency * 100, 3),
                                      displayNumber(pr.heldOut.efficiencyErrorPoints(), 2),
                                      displayNumber(pr.heldOut.predictedCommShare * 100, 3),
                                      displayNumber(pr.heldOut.measuredCommShare * 100, 3),
                                      displayNumber(pr.heldOut.throughputRelativeError() * 100, 2)))});
    else
        fits.push_back({u"held-out check"_s, text(u"not available: "_s + pr.heldOut.why)});
    out.push_back(keyValues(fits));
    Block pt;
    pt.kind = Block::Kind::Table;
    pt.table.header = {u"ranks (projected)"_s, u"tokens/s"_s, u"efficiency"_s, u"comm share"_s};
    pt.table.widths = {1, 1, 1, 1};
    for (const auto &p : pr.points)
        pt.table.rows.push_back({integer(p.ranks), figure(p.tokensPerSecond), percent(p.efficiency), percent(p.commShare)});
    out.push_back(pt);
    for (const ReportChart &rc : charts)
        if (rc.id == u"projection"_s) {
            out.push_back(chart(-1, rc.id));
            out.push_back(heading(Block::Kind::Note, rc.caption));
        }
}

/// The precisions of one checkpoint side by side (a precision sweep, or any selection of several):
/// quality against the reference model, speed and memory per rank, then their charts.
void precisionBlocks(const ReportData &data, std::vector<Block> &out, const std::vector<ReportChart> &charts)
{
    out.push_back(heading(Block::Kind::Heading, u"Precisions"_s));
    Block t;
    t.kind = Block::Kind::Table;
    t.table.header = {u"run"_s,      u"precision"_s, u"ranks"_s,    u"PPL"_s,       u"PPL ratio"_s, u"KLD mean"_s,
                      u"KLD p99"_s,  u"same top"_s,  u"tokens/s"_s, u"x first"_s,   u"weights/rank"_s, u"load RSS"_s};
    t.table.widths = {1.6, 0.8, 0.5, 0.9, 1.2, 0.9, 0.8, 0.8, 0.8, 0.6, 0.9, 0.8};
    const auto bytes = [](qint64 b) { return b > 0 ? Cell{displayNumber(double(b) / (1 << 20), 4) + u" MiB"_s, QString::number(b), true} : text(u"-"_s); };
    for (const auto &r : data.precisions) {
        const auto &q = r.quality;
        t.table.rows.push_back({text(r.runId), text(r.precision), integer(r.worldSize), figure(r.ppl),
                                q ? Cell{displayNumber(q->pplRatio, 5) + u" ± "_s + displayNumber(q->pplRatioStderr, 2), exactNumber(q->pplRatio), true}
                                  : text(u"(no reference)"_s),
                                q ? figure(q->kldMean) : text(u"-"_s), q ? figure(q->kldP99) : text(u"-"_s),
                                q ? percent(q->sameTop) : text(u"-"_s), figure(r.tokensPerSecond), figure(r.speedup, 3), bytes(r.weightBytes),
                                bytes(r.rssLoadBytes)});
    }
    out.push_back(t);
    out.push_back(heading(Block::Kind::Note, u"PPL ratio, KLD and same top: the run against its reference model token by token "
                                             "(the result's \"reference\"); x first: tokens/s over the first row's."_s));
    for (const ReportChart &rc : charts) {
        if (!isPrecisionChart(rc))
            continue;
        out.push_back(chart(-1, rc.id));
        out.push_back(heading(Block::Kind::Note, rc.caption));
    }
}

} // namespace

QString reportTitle(const ReportData &data)
{
    if (!data.isComparison())
        return data.runs.empty() ? u"ClusterPPL report"_s : u"ClusterPPL run report: "_s + data.runs.front().runId;
    return u"ClusterPPL comparison report: %1 runs"_s.arg(data.runs.size());
}

std::vector<Block> buildDocument(const ReportData &data)
{
    std::vector<Block> out;
    out.push_back(heading(Block::Kind::Title, reportTitle(data)));
    out.push_back(heading(Block::Kind::Note, u"Generated %1 by clusterppl %2 from the run store. Displayed figures are the stored ones "
                                             "rounded to 4 significant digits unless shown in full; the CSV and JSON reports carry them "
                                             "exactly."_s.arg(dateText(QDateTime::currentDateTimeUtc()), QStringLiteral(CLUSTERPPL_VERSION_STRING))));
    const charts::Theme theme = charts::Theme::light(); // ids and captions only: the writers render per theme
    if (data.isComparison()) {
        const std::vector<ReportChart> charts = comparisonCharts(data, theme);
        comparisonBlocks(data, out, charts);
        if (!data.precisions.empty())
            precisionBlocks(data, out, charts);
    }
    for (size_t i = 0; i < data.runs.size(); ++i)
        runBlocks(data, static_cast<int>(i), out, runCharts(data.runs[i], theme));
    return out;
}

} // namespace cppl::core::report
