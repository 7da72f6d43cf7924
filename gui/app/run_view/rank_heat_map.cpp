// SPDX-License-Identifier: MIT
#include "rank_heat_map.h"

#include "clock_text.h"

#include "cppl/cluster_profile.h"

#include <QLocale>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace Qt::StringLiterals;
using cppl::charts::Hit;
using cppl::core::run::RankMetric;
using cppl::core::run::RunTimeline;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::Snapshot;

namespace cppl::app {

namespace {

/// Rounded up to a quarter of its decade (9.82k -> 10k, 2.64k -> 2.75k): the image is recoloured
/// only when the scale crosses such a step, not at every change of the maximum.
double scaleStep(double v)
{
    if (!(v > 0) || !std::isfinite(v))
        return 1;
    const double step = std::pow(10.0, std::floor(std::log10(v))) / 4;
    return std::ceil(v / step - 1e-9) * step;
}

QChar markSymbol(char mark)
{
    return mark == 'F' ? QChar(0x2717) : mark == 'L' ? QChar(0x2298) : mark == 'S' ? QChar(0x2016) : QChar(); // ✗ ⊘ ‖
}

} // namespace

RankHeatMap::RankHeatMap(QObject *parent)
    : HeatMap(parent)
{
    setTitle(tr("Tokens/s over time"));
    setXAxis({tr("time"), cppl::charts::ValueFormat::Seconds, {}, {}, false});
    setRowAxisTitle(tr("rank"));
    setBinnedRowAxisTitle(tr("rank (each row: the slowest of %1)"));
    setAggregation(cppl::charts::Aggregation::Min);
    setPartialBinsAsNoData(true);
    // Also once finished: the first seconds before each rank's first progress stay hatched.
    setNoDataLabel(tr("no data (before the rank's first progress message)"));
    setEmptyText(tr("no data yet"));
}

QString RankHeatMap::description()
{
    return tr("Tokens/s of every rank over time: brighter is faster; hatched grey: no data yet (the rank has not sent "
              "its first progress message). ✗ failed, ‖ stalled, ⊘ lost (the run recovered without it). Click a row to "
              "select its rank.");
}

void RankHeatMap::clear()
{
    m_times.clear();
    m_marks.clear();
    m_stateMarks.clear();
    m_lost.clear();
    m_ranks = m_columns = 0;
    m_compactions = ~std::uint64_t{0};
    m_scale = 0;
    HeatMap::setData(0, 0, {});
    setRowMarks({});
    setHighlightedRow(-1);
    setTitle(tr("Tokens/s over time"));
}

void RankHeatMap::setData(const RunTimeline &tl, const Snapshot &snapshot, double colourMax)
{
    const int ranks = tl.worldSize();
    const int n = int(tl.size());
    const auto times = tl.times();
    // The columns before `from` are what the map holds already: same run (times), no compaction since.
    int from = 0;
    if (ranks == m_ranks && tl.compactions() == m_compactions && n >= m_columns && m_columns > 0
        && std::equal(m_times.begin(), m_times.end() - 1, times.begin()))
        from = m_columns - 1; // the newest sample may have been updated in place
    resizeData(ranks, n);
    writeColumns(tl, from);
    m_ranks = ranks;
    m_columns = n;
    m_compactions = tl.compactions();
    m_times.assign(times.begin(), times.end());
    setColumnPositions(m_times); // columns as wide as their samples' spacing: a linear time axis
    // The scale follows the data up at once, down only when it fell by a quarter (no flicker).
    const double wanted = scaleStep(colourMax);
    if (wanted > m_scale || wanted < 0.75 * m_scale) {
        m_scale = wanted;
        setValueAxis({tr("tok/s"), cppl::charts::ValueFormat::Si, 0.0, m_scale, false});
    }
    setTitle(ranks <= 1 ? tr("Tokens/s over time") : tr("Tokens/s of %1 ranks over time").arg(ranks));
    m_marks.clear();
    setMarks(snapshot);
    notifyChanged();
}

void RankHeatMap::writeColumns(const RunTimeline &tl, int from)
{
    // Before its first progress message a rank's rate is 0 in the timeline: no data, not a rate.
    // A rank's time only ever goes from +inf to the sample that first held its progress, the
    // newest one then, so the columns written before stay right.
    const auto times = tl.times();
    const int n = int(tl.size());
    for (int r = 0; r < tl.worldSize(); ++r) {
        const auto s = tl.rank(RankMetric::TokensPerSecond, r);
        const double first = tl.firstProgressSeconds(r);
        for (int c = from; c < n; ++c)
            setValue(r, c, times[size_t(c)] < first ? std::numeric_limits<float>::quiet_NaN() : s[size_t(c)]);
    }
}

void RankHeatMap::setMarks(const Snapshot &snapshot)
{
    std::vector<char> marks(size_t(m_ranks), 0);
    for (const auto &r : snapshot.ranks)
        if (r.rank >= 0 && r.rank < m_ranks)
            marks[size_t(r.rank)] = r.state == RankState::Failed ? 'F' : r.state == RankState::Stalled ? 'S' : 0;
    m_stateMarks = marks;
    for (const int r : m_lost)
        if (r >= 0 && r < m_ranks)
            marks[size_t(r)] = 'L';
    if (marks == m_marks)
        return;
    m_marks = std::move(marks);
    showMarks();
}

void RankHeatMap::setLostRanks(const std::vector<int> &ranks)
{
    for (const int r : m_lost) // marked lost while the run went on, and the run then failed: its own state again
        if (r >= 0 && size_t(r) < m_marks.size() && std::find(ranks.begin(), ranks.end(), r) == ranks.end())
            m_marks[size_t(r)] = size_t(r) < m_stateMarks.size() ? m_stateMarks[size_t(r)] : 0;
    m_lost = ranks;
    for (const int r : m_lost)
        if (r >= 0 && size_t(r) < m_marks.size())
            m_marks[size_t(r)] = 'L';
    showMarks();
}

void RankHeatMap::showMarks()
{
    std::vector<QChar> symbols(m_marks.size());
    std::transform(m_marks.begin(), m_marks.end(), symbols.begin(), markSymbol);
    setRowMarks(std::move(symbols));
}

Hit RankHeatMap::hitTest(const QPointF &point) const
{
    Hit hit = HeatMap::hitTest(point);
    if (hit.isValid())
        hit.text = cellText(hit);
    return hit;
}

int RankHeatMap::rankOf(const Hit &hit) const
{
    return hit.kind == Hit::Kind::Cell ? hit.row : -1;
}

QString RankHeatMap::cellText(const Hit &hit) const
{
    // The row as painted (its bin of ranks) at the sample nearest the pointer's time.
    const int r0 = hit.rowFirst, r1 = hit.rowEnd, c = hit.column;
    const QString who = r1 - r0 == 1 ? tr("rank %1").arg(r0) : tr("ranks %1").arg(QString::fromStdString(cppl::rankRangeText(r0, r1 - 1)));
    const QString when = clockText(qint64(std::max(0.0, m_times[size_t(c)]) + 0.5));
    std::vector<int> without;
    int slowest = -1;
    for (int r = r0; r < r1; ++r) {
        const float v = value(r, c);
        if (std::isnan(v))
            without.push_back(r);
        else if (slowest < 0 || v < value(slowest, c))
            slowest = r;
    }
    if (!without.empty()) {
        if (r1 - r0 == 1)
            return tr("%1 at %2: no data yet (no progress message from it by then; a rank sends its first once it has "
                      "evaluated its first batch)").arg(who, when);
        return tr("%1 at %2: no data yet from %3 (no progress message by then; a rank sends its first once it has "
                  "evaluated its first batch)")
            .arg(who, when,
                 (without.size() == 1 ? tr("rank %1") : tr("ranks %1")).arg(QString::fromStdString(cppl::rankListText(without))));
    }
    const QString rate = tr("%1 tok/s").arg(QLocale().toString(double(value(slowest, c)), 'f', 0));
    return r1 - r0 == 1 ? tr("%1 at %2: %3").arg(who, when, rate) : tr("%1 at %2: slowest rank %3, %4").arg(who, when).arg(slowest).arg(rate);
}

} // namespace cppl::app
