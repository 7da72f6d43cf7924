// SPDX-License-Identifier: MIT
#include "compare_model.h"

#include <QLocale>

using namespace Qt::StringLiterals;
using cppl::core::history::ScalingPoint;

namespace cppl::app {

CompareModel::CompareModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void CompareModel::setComparison(const cppl::core::history::Comparison &comparison)
{
    beginResetModel();
    m_points = comparison.points;
    m_threshold = comparison.threshold;
    endResetModel();
}

int CompareModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_points.size());
}

int CompareModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CompareModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const ScalingPoint &p = m_points[std::size_t(index.row())];
    if (role == Qt::TextAlignmentRole)
        return int((index.column() == ColRunId || index.column() == ColTopology || index.column() == ColDeviation ? Qt::AlignLeft
                                                                                                               : Qt::AlignRight)
                   | Qt::AlignVCenter);
    if (role == SortRole) {
        switch (index.column()) {
        case ColRanks: return p.worldSize;
        case ColGroups: return p.groups;
        case ColNodes: return p.nodes;
        case ColRate: return p.tokensPerSecond;
        case ColIdeal: return p.idealTokensPerSecond;
        case ColEfficiency: return p.efficiency;
        case ColWait: return p.waitShare;
        case ColTransfer: return p.transferShare;
        case ColPpl: return p.ppl.value_or(-1);
        default: role = Qt::DisplayRole;
        }
    }
    if (role == Qt::ToolTipRole && (index.column() == ColRanks || index.column() == ColRunId) && !p.sharedHosts.isEmpty())
        return tr("%1: its throughput measures that host's contention, not scaling across machines; the projection is "
                  "fitted without it.")
            .arg(p.sharedHosts);
    if (role == Qt::ToolTipRole && index.column() == ColEfficiency)
        return tr("tok/s ÷ ideal tok/s; the ideal is the smallest run's rate scaled linearly by ranks. %1 the %2% threshold.")
            .arg(p.efficiency >= m_threshold ? tr("At or above") : tr("Below"))
            .arg(100 * m_threshold, 0, 'f', 0);
    if (role != Qt::DisplayRole)
        return {};
    const QLocale loc;
    switch (index.column()) {
    case ColRunId: return p.runId;
    case ColRanks: return p.sharedHosts.isEmpty() ? QVariant(p.worldSize) : QVariant(u"%1 ⚠"_s.arg(p.worldSize)); // shared a host
    case ColGroups: return p.groups;
    case ColNodes: return p.nodes;
    case ColTopology: return p.topology;
    // Whole and grouped, as the Run page and History write tok/s ("73,612").
    case ColRate: return loc.toString(p.tokensPerSecond, 'f', 0);
    case ColIdeal: return loc.toString(p.idealTokensPerSecond, 'f', 0);
    case ColEfficiency:
        // A mark besides the number: below the threshold reads without colour.
        return u"%1%%2"_s.arg(100 * p.efficiency, 0, 'f', 1).arg(p.efficiency >= m_threshold ? QString() : u" ▼"_s);
    case ColWait: return u"%1%"_s.arg(100 * p.waitShare, 0, 'f', 1);
    case ColTransfer: return u"%1%"_s.arg(100 * p.transferShare, 0, 'f', 1);
    case ColPpl:
        if (!p.ppl)
            return u"—"_s;
        return p.pplStderr ? u"%1 ± %2"_s.arg(*p.ppl, 0, 'f', 6).arg(*p.pplStderr, 0, 'f', 6) : QString::number(*p.ppl, 'f', 6);
    case ColDeviation:
        // The one-rank run the others are measured against: its own deviation says nothing.
        // A tensor-parallel run: bit for bit against its own N, and its deviation from one rank (N = 1) beside it.
        return QString((p.runId == p.baselineRunId ? tr("baseline (this run)") : p.deviationText())
                       + (p.oneRankDeviation ? QString(u"; "_s + p.oneRankDeviationText()) : QString()));
    default: return {};
    }
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    static const char *const names[] = {QT_TR_NOOP("Run"),        QT_TR_NOOP("Ranks"),     QT_TR_NOOP("Groups"),
                                        QT_TR_NOOP("Nodes"),      QT_TR_NOOP("Topology"),  QT_TR_NOOP("tok/s"),
                                        QT_TR_NOOP("Ideal tok/s"), QT_TR_NOOP("Efficiency"), QT_TR_NOOP("Wait"),
                                        QT_TR_NOOP("Transfer"),   QT_TR_NOOP("PPL ± stderr"), QT_TR_NOOP("vs 1-rank baseline")};
    return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

} // namespace cppl::app
