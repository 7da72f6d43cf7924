// SPDX-License-Identifier: MIT
#include "rank_series_chart.h"

#include <algorithm>
#include <cmath>
#include <span>

using cppl::charts::Hit;
using cppl::charts::SeriesData;
using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;

namespace cppl::app {

namespace {

constexpr int kQuantileBudget = 48; // samples recomputed per update after a compaction

/// NaN before @p from.
std::vector<double> from(std::vector<double> v, std::span<const double> times, double start)
{
    for (size_t i = 0; i < v.size() && i < times.size() && times[i] < start; ++i)
        v[i] = std::numeric_limits<double>::quiet_NaN();
    return v;
}

} // namespace

std::vector<double> rankSeries(const RunTimeline &tl, RankMetric metric, int rank, double start)
{
    const std::span<const float> samples = tl.rank(metric, rank);
    return from({samples.begin(), samples.end()}, tl.times(), std::max(start, tl.firstProgressSeconds(rank)));
}

RankSeriesChart::RankSeriesChart(RankMetric metric, std::vector<double> quantiles, QObject *parent)
    : TimeSeriesChart(parent)
    , m_metric(metric)
    , m_band(std::make_unique<RankQuantiles>(metric, std::move(quantiles)))
{
}

void RankSeriesChart::clear()
{
    m_seriesRank.clear();
    m_band->clear();
    m_selected = -1;
    clearSeries();
}

void RankSeriesChart::rebuild(const RunTimeline &tl, const QStringList &names, const std::vector<std::pair<int, QString>> &named,
                              double start)
{
    const auto times = tl.times();
    const std::vector<double> x(times.begin(), times.end());
    const int ranks = tl.worldSize();
    m_band->update(tl, kQuantileBudget);
    std::vector<SeriesData> series;
    m_seriesRank.clear();
    if (ranks <= kLinesUpTo) {
        for (int r = 0; r < ranks; ++r) {
            series.push_back({names.value(r, tr("rank %1").arg(r)), x, rankSeries(tl, m_metric, r, start)});
            m_seriesRank.push_back(r);
        }
    } else {
        series.push_back({tr("p95 of ranks"), x, from(m_band->values(2), times, start)});
        series.push_back({tr("median"), x, from(m_band->values(1), times, start)});
        series.push_back({tr("p5 of ranks"), x, from(m_band->values(0), times, start)});
        m_seriesRank.insert(m_seriesRank.end(), 3, -1);
        for (const auto &[rank, name] : named) {
            series.push_back({name, x, rankSeries(tl, m_metric, rank, start)});
            m_seriesRank.push_back(rank);
        }
    }
    setSeries(std::move(series));
    setSelectedRank(m_selected);
}

int RankSeriesChart::rankOf(const Hit &hit) const
{
    if (hit.kind != Hit::Kind::Series || hit.series < 0 || size_t(hit.series) >= m_seriesRank.size())
        return -1;
    return m_seriesRank[size_t(hit.series)];
}

void RankSeriesChart::setSelectedRank(int rank)
{
    m_selected = rank;
    const auto it = std::find(m_seriesRank.begin(), m_seriesRank.end(), rank);
    setHighlightedSeries(rank >= 0 && it != m_seriesRank.end() ? int(it - m_seriesRank.begin()) : -1);
}

} // namespace cppl::app
