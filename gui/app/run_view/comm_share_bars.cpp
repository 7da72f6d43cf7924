// SPDX-License-Identifier: MIT
#include "comm_share_bars.h"

#include "rank_table_model.h" // commShareKnown

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
              "transfer. The dashed line is the alert threshold. Click a bar to select its rank.");
}

void CommShareBars::setData(const Snapshot &snapshot, double alertShare)
{
    constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> values;
    values.reserve(2 * snapshot.ranks.size());
    for (const auto &r : snapshot.ranks) {
        // A rank that has not reported communication time yet gets no bar: unknown, not 0 %.
        const bool known = commShareKnown(r);
        values.push_back(known ? r.waitShare : kUnknown);
        values.push_back(known ? r.transferShare : kUnknown);
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
