// SPDX-License-Identifier: MIT
#include "comm_share_bars.h"

#include "rank_table_model.h" // commShareKnown

#include <algorithm>
#include <limits>

using namespace Qt::StringLiterals;
using cppl::charts::Hit;
using cppl::charts::ValueFormat;
using cppl::core::telemetry::Snapshot;

namespace cppl::app {

CommShareBars::CommShareBars(QObject *parent)
    : StackedBarChart(parent)
{
    setTitle(tr("Comm share per rank"));
    setSegmentNames({tr("waiting for stragglers"), tr("transfer")});
    m_tensorParallel = false;
    setXAxis({tr("rank"), ValueFormat::Plain, {}, {}, false});
    setYAxis({QString(), ValueFormat::Percent, {}, {}, true});
    setBinning(cppl::charts::BarBinning::Largest);
    setBinnedAxisTitle(tr("rank (each bar: the most of %1 ranks)"));
    setMinBarPitch(2); // at least two pixels a bar
    setEmptyText(tr("no data yet"));
}

QString CommShareBars::description()
{
    return tr("Share of each rank's time spent communicating: solid = waiting for stragglers, hatched = "
              "transfer (the sync rounds); with tensor parallelism a third part, the group's reductions inside "
              "the forward passes. The dashed line is the alert threshold (of the sync rounds' share). Click a "
              "bar to select its rank.");
}

double CommShareBars::tensorParallelShare(const cppl::core::telemetry::RankView &r)
{
    const double wall = r.computeSeconds + r.waitSeconds + r.transferSeconds;
    return wall > 0 ? std::clamp(r.tpCollectiveSeconds / wall, 0.0, 1.0) : 0.0;
}

void CommShareBars::setData(const Snapshot &snapshot, double alertShare)
{
    constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
    // Tensor parallelism: the group's reductions are communication too, apart from the sync rounds.
    const bool tp = std::any_of(snapshot.ranks.begin(), snapshot.ranks.end(), [](const auto &r) { return r.tpSize > 1; });
    if (tp != m_tensorParallel || segmentCount() == 0) {
        m_tensorParallel = tp;
        QStringList names{tr("waiting for stragglers"), tr("transfer")};
        if (tp)
            names << tr("tensor-parallel reductions");
        setSegmentNames(names);
    }
    std::vector<double> values;
    values.reserve(size_t(segmentCount()) * snapshot.ranks.size());
    for (const auto &r : snapshot.ranks) {
        // A rank that has not reported communication time yet gets no bar: unknown, not 0 %.
        const bool known = commShareKnown(r) || (tp && r.tpCollectiveSeconds > 0);
        values.push_back(known ? r.waitShare : kUnknown);
        values.push_back(known ? r.transferShare : kUnknown);
        if (tp)
            values.push_back(known ? tensorParallelShare(r) : kUnknown);
    }
    setValues(std::move(values));
    // The threshold only on the scale, which ends at 100 %.
    std::vector<cppl::charts::ReferenceLine> lines;
    if (alertShare > 0 && alertShare <= 1.0)
        lines.push_back({alertShare, tr("alert threshold"), {}, Qt::DashLine});
    setReferenceLines(std::move(lines));
    setEmptyText(snapshot.ranks.empty() ? tr("no data yet") : tr("none known before the first sync round"));
}

int CommShareBars::rankOf(const Hit &hit) const
{
    if (hit.kind != Hit::Kind::Bar)
        return -1;
    return hit.shown >= 0 ? hit.shown : hit.column; // the rank the bar shows
}

} // namespace cppl::app
