// SPDX-License-Identifier: MIT
#include "report/report_charts.h"

#include "report/precision_charts.h"

#include "charts/band_chart.h"
#include "charts/stacked_bar_chart.h"
#include "charts/time_series_chart.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace Qt::StringLiterals;

namespace cppl::core::report {

using charts::AxisSpec;
using charts::SeriesData;
using charts::ValueFormat;

namespace {

std::map<int, SeriesData> throughputByRank(const history::RunRecord &run)
{
    std::map<int, SeriesData> byRank;
    for (const history::RankSample &s : run.samples) {
        SeriesData &d = byRank[s.rank];
        if (d.name.isEmpty())
            d.name = u"rank %1"_s.arg(s.rank);
        if (!d.x.empty() && s.t <= d.x.back())
            continue; // the chart needs x ascending; the store orders by t already
        d.x.push_back(s.t);
        d.y.push_back(s.tokensPerSecond);
    }
    return byRank;
}

double meanOf(const std::vector<double> &v)
{
    double sum = 0;
    for (double x : v)
        sum += x;
    return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

/// One bar of a comm-share chart: a rank or a run, its waiting and transfer shares.
struct ShareBar
{
    QString label;
    double wait = 0;
    double transfer = 0;
};

/// Waiting and transfer shares stacked per category (ranks of a run, or runs of a comparison).
std::unique_ptr<charts::StackedBarChart> shareBars(const charts::Theme &theme, const QString &title, const QString &categoryTitle,
                                                   const QString &shareTitle, const std::vector<ShareBar> &bars)
{
    auto c = std::make_unique<charts::StackedBarChart>();
    c->setTheme(theme);
    c->setTitle(title);
    c->setSegmentNames({u"waiting"_s, u"transfer"_s});
    std::vector<double> values;
    QStringList labels;
    for (const ShareBar &b : bars) {
        values.push_back(b.wait);
        values.push_back(b.transfer);
        labels << b.label;
    }
    c->setValues(std::move(values));
    c->setCategoryLabels(labels);
    c->setXAxis({categoryTitle, ValueFormat::Plain, {}, {}, false});
    c->setYAxis({shareTitle, ValueFormat::Percent, {}, {}, true});
    return c;
}

/// A comparison's line chart: series over log2 of the runs' rank counts.
std::unique_ptr<charts::TimeSeriesChart> lineChart(const charts::Theme &theme, const QString &title, const AxisSpec &x,
                                                   const AxisSpec &y, std::vector<SeriesData> series)
{
    auto c = std::make_unique<charts::TimeSeriesChart>();
    c->setTheme(theme);
    c->setTitle(title);
    c->setXAxis(x);
    c->setYAxis(y);
    c->setSeries(std::move(series));
    return c;
}

} // namespace

QFont reportFont(double pointSize, bool bold, bool italic)
{
    QFont f(u"DejaVu Sans"_s);
    f.setStyleHint(QFont::SansSerif);
    f.setStyleStrategy(QFont::PreferNoShaping); // no ligatures: PDF text stays searchable
    f.setPointSizeF(pointSize);
    f.setBold(bold);
    f.setItalic(italic);
    return f;
}

charts::Theme reportTheme(bool dark)
{
    charts::Theme t = dark ? charts::Theme::dark() : charts::Theme::light();
    t.font = reportFont(8);
    t.lineWidth = 1.25;
    return t;
}

std::vector<ReportChart> runCharts(const history::RunRecord &run, const charts::Theme &theme)
{
    std::vector<ReportChart> out;
    const AxisSpec tokY{u"tokens/s"_s, ValueFormat::Si, {}, {}, true};
    std::map<int, SeriesData> byRank = throughputByRank(run);
    if (!byRank.empty() && static_cast<int>(byRank.size()) <= kMaxLineRanks) {
        auto c = std::make_unique<charts::TimeSeriesChart>();
        c->setTheme(theme);
        c->setTitle(u"Tokens/s per rank over time"_s);
        c->setYAxis(tokY);
        c->setStyledSeriesLimit(kMaxLineRanks);
        std::vector<SeriesData> series;
        for (auto &[rank, d] : byRank)
            series.push_back(std::move(d));
        c->setSeries(std::move(series));
        out.push_back({u"rank-throughput"_s,
                       u"Each rank's scoring rate from the stored telemetry samples (%1 ranks, one line each)."_s.arg(byRank.size()),
                       std::move(c)});
    } else if (!byRank.empty()) {
        std::vector<SeriesData> all;
        for (auto &[rank, d] : byRank)
            all.push_back(std::move(d));
        // The slowest ranks by mean sampled rate are the ones a reader looks for.
        std::vector<size_t> order(all.size());
        for (size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return meanOf(all[a].y) < meanOf(all[b].y); });
        std::vector<SeriesData> slowest;
        for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i)
            slowest.push_back(all[order[i]]);
        QStringList names;
        for (const auto &s : slowest)
            names << s.name;
        auto c = std::make_unique<charts::BandChart>();
        c->setTheme(theme);
        c->setTitle(u"Tokens/s per rank over time (p5..p95 band, median, slowest ranks)"_s);
        c->setYAxis(tokY);
        c->setSeries(std::move(all));
        c->setHighlights(std::move(slowest));
        out.push_back({u"rank-throughput"_s,
                       u"%1 ranks: the band spans the 5th to 95th percentile of the ranks' rates, the line is the median; "
                       "named: the slowest by mean rate (%2)."_s.arg(byRank.size())
                           .arg(names.join(u", "_s)),
                       std::move(c)});
    }

    if (!run.ranks.empty()) {
        std::vector<ShareBar> bars;
        for (const history::RankSummary &k : run.ranks)
            bars.push_back({QString::number(k.rank), waitShare(k), transferShare(k)});
        out.push_back({u"comm-share"_s,
                       u"Share of each rank's time (compute + waiting + transfer) spent waiting for other ranks and transferring "
                       "partial sums, from the result's per-rank figures."_s,
                       shareBars(theme, u"Communication share per rank"_s, u"rank"_s, u"share of the rank's time"_s, bars)});
    }
    return out;
}

namespace {

/// Measured and projected efficiency and comm share on the log ranks axis: 1..4 measured and
/// 16..1024 projected side by side, readable.
ReportChart projectionChart(const history::Comparison &cmp, const charts::Theme &theme, const AxisSpec &ranksX)
{
    const history::Projection &pr = cmp.projection;
    SeriesData effM{u"efficiency, measured"_s, {}, {}}, effP{u"efficiency, projected"_s, {}, {}};
    SeriesData comM{u"comm share, measured"_s, {}, {}}, comP{u"comm share, projected"_s, {}, {}};
    for (const auto &p : cmp.points) {
        if (p.worldSize <= 0 || (!effM.x.empty() && std::log2(p.worldSize) <= effM.x.back()))
            continue;
        effM.x.push_back(std::log2(p.worldSize));
        effM.y.push_back(p.efficiency);
        comM.x.push_back(std::log2(p.worldSize));
        comM.y.push_back(p.commShare);
    }
    if (!effM.x.empty()) { // the dashed line starts at the last measured point
        effP.x.push_back(effM.x.back());
        effP.y.push_back(effM.y.back());
        comP.x.push_back(comM.x.back());
        comP.y.push_back(comM.y.back());
    }
    for (const auto &p : pr.points) {
        if (p.ranks <= 0 || (!effP.x.empty() && std::log2(p.ranks) <= effP.x.back()))
            continue;
        effP.x.push_back(std::log2(p.ranks));
        effP.y.push_back(p.efficiency);
        comP.x.push_back(std::log2(p.ranks));
        comP.y.push_back(p.commShare);
    }
    // Series order sets the dash: 0 solid, 1 dashed, 2 dotted, 3 dash-dot (chart_theme.cpp).
    return {u"projection"_s, u"Measured (solid/dotted) and projected (dashed/dash-dot) efficiency and comm share. Model: "_s + pr.formula,
            lineChart(theme, u"Projection to %1 ranks (dashed)"_s.arg(pr.points.back().ranks), ranksX,
                      {u"share"_s, ValueFormat::Percent, 0.0, {}, true}, {std::move(effM), std::move(effP), std::move(comM), std::move(comP)})};
}

} // namespace

std::vector<ReportChart> comparisonCharts(const ReportData &data, const charts::Theme &theme)
{
    std::vector<ReportChart> out;
    if (!data.isComparison())
        return out;
    const history::Comparison &cmp = data.comparison;
    // Ranks double from run to run (1, 2, 4 ... 1024) and the rates with them: log axes labelled
    // with the counts and rates themselves, as the dashboard's Compare page draws them (on a
    // linear axis every run below a tenth of the largest sat in its first pixels).
    const AxisSpec ranksX{u"ranks (log)"_s, ValueFormat::Log2Count, {}, {}, false};
    const auto log2Ranks = [](int ranks) { return std::log2(double(std::max(1, ranks))); };

    {
        SeriesData measured{u"measured"_s, {}, {}}, ideal{u"ideal linear"_s, {}, {}};
        for (const auto &p : cmp.points) {
            if (!(p.tokensPerSecond > 0) || !(p.idealTokensPerSecond > 0))
                continue; // no rate to put on a log scale (a run without a result)
            measured.x.push_back(log2Ranks(p.worldSize));
            measured.y.push_back(std::log10(p.tokensPerSecond));
            ideal.x.push_back(log2Ranks(p.worldSize));
            ideal.y.push_back(std::log10(p.idealTokensPerSecond));
        }
        out.push_back({u"throughput"_s,
                       u"Scored tokens per second of each run against its rank count, both on log scales; dashed: the "
                       "smallest run's rate scaled linearly."_s,
                       lineChart(theme, u"Throughput vs ranks"_s, ranksX, {u"tokens/s (log)"_s, ValueFormat::Log10Si, {}, {}, false},
                                 {std::move(measured), std::move(ideal)})});
    }
    {
        SeriesData eff{u"scaling efficiency"_s, {}, {}};
        for (const auto &p : cmp.points) {
            eff.x.push_back(log2Ranks(p.worldSize));
            eff.y.push_back(p.efficiency);
        }
        auto c = lineChart(theme, u"Scaling efficiency"_s, ranksX, {u"efficiency"_s, ValueFormat::Percent, 0.0, {}, true},
                           {std::move(eff)});
        c->setReferenceLines({{cmp.threshold, u"threshold"_s, {}, Qt::DashLine}});
        out.push_back({u"efficiency"_s, u"Measured throughput / ideal linear throughput, with the recommendation's threshold."_s,
                       std::move(c)});
    }
    {
        std::vector<ShareBar> bars;
        for (const auto &p : cmp.points)
            bars.push_back({QString::number(p.worldSize), p.waitShare, p.transferShare});
        out.push_back({u"comm-share-runs"_s, u"Waiting and transfer time over all ranks' compute + waiting + transfer time, per run."_s,
                       shareBars(theme, u"Communication share per run"_s, u"ranks"_s, u"share of the ranks' time"_s, bars)});
    }
    if (cmp.projection.available && !cmp.projection.points.empty() && !cmp.points.empty())
        out.push_back(projectionChart(cmp, theme, ranksX));
    for (ReportChart &c : precisionCharts(data.precisions, theme)) // empty unless the runs compare precisions
        out.push_back(std::move(c));
    return out;
}

} // namespace cppl::core::report
