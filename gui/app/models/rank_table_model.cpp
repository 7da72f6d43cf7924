// SPDX-License-Identifier: MIT
#include "rank_table_model.h"

#include "cppl/cluster_profile.h"

#include <QColor>
#include <QLocale>

#include <algorithm>
#include <cmath>

using namespace Qt::StringLiterals;
using cppl::core::telemetry::RankState;
using cppl::core::telemetry::RankView;

namespace cppl::app {

QString formatBytes(double bytes)
{
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        ++u;
    }
    return QString::number(bytes, 'f', u == 0 ? 0 : 1) + u' ' + QString::fromLatin1(units[u]);
}

QString RankTableModel::memoryText(const RankView &r)
{
    // "12.3/80 GiB · 97%" with a GPU (used/total in the total's unit), "1.8 GiB RSS" without.
    if (r.deviceMemoryBytes) {
        const double used = double(*r.deviceMemoryBytes);
        QString text;
        if (r.deviceMemoryTotalBytes && *r.deviceMemoryTotalBytes > 0) {
            const double total = double(*r.deviceMemoryTotalBytes);
            int u = 0;
            double scale = 1.0;
            while (total / scale >= 1024.0 && u < 4) {
                scale *= 1024.0;
                ++u;
            }
            const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
            const double t = total / scale;
            text = QString::number(used / scale, 'f', 1) + u'/' + QString::number(t, 'f', t >= 10 ? 0 : 1) + u' '
                   + QString::fromLatin1(units[u]);
        } else {
            text = formatBytes(used) + tr(" GPU");
        }
        if (r.gpuUtilizationPercent)
            text += u" · %1%"_s.arg(*r.gpuUtilizationPercent);
        return text;
    }
    return r.rssBytes > 0 ? QString(formatBytes(double(r.rssBytes)) + tr(" RSS")) : QString();
}

QString RankTableModel::memoryToolTip(const RankView &r)
{
    QStringList lines;
    if (r.deviceMemoryBytes)
        lines << (r.deviceMemoryTotalBytes ? tr("GPU memory: %1 in use of %2").arg(formatBytes(double(*r.deviceMemoryBytes)),
                                                                                     formatBytes(double(*r.deviceMemoryTotalBytes)))
                                           : tr("GPU memory: %1 in use").arg(formatBytes(double(*r.deviceMemoryBytes))));
    if (r.gpuUtilizationPercent)
        lines << tr("GPU utilisation: %1%").arg(*r.gpuUtilizationPercent);
    if (r.rssBytes > 0)
        lines << tr("process resident memory (RSS): %1").arg(formatBytes(double(r.rssBytes)));
    if (!r.deviceMemoryBytes)
        lines << tr("no GPU figures: this rank reports none (no GPU, or no NVML library on its node)");
    return lines.join(u'\n');
}

QString rankStateLabel(RankState s)
{
    switch (s) {
    case RankState::Connecting: return RankTableModel::tr("… connecting");
    case RankState::Loading: return RankTableModel::tr("○ loading");
    case RankState::Evaluating: return RankTableModel::tr("▶ evaluating");
    case RankState::Syncing: return RankTableModel::tr("⇄ syncing");
    case RankState::Done: return RankTableModel::tr("✓ done");
    case RankState::Failed: return RankTableModel::tr("✗ failed");
    case RankState::Stalled: return RankTableModel::tr("‖ stalled");
    }
    return {};
}

bool commShareKnown(const RankView &r)
{
    return r.hasProgress && (r.waitSeconds + r.transferSeconds > 0 || r.state == RankState::Done);
}

RankTableModel::RankTableModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void RankTableModel::setTensorParallel(int n)
{
    m_tensorParallel = std::max(n, 1);
    if (!m_ranks.empty())
        Q_EMIT dataChanged(index(0, ColGroup), index(rowCount() - 1, ColGroup));
}

QString RankTableModel::tensorParallelText(qint64 rank, int n)
{
    return n > 1 && rank >= 0 ? tr("TP %1").arg(rank / n) : QString();
}

void RankTableModel::setGroupNames(std::vector<QString> names)
{
    m_groupNames = std::move(names);
    if (!m_ranks.empty())
        Q_EMIT dataChanged(index(0, ColGroup), index(rowCount() - 1, ColGroup));
}

void RankTableModel::clear()
{
    if (m_ranks.empty())
        return;
    beginResetModel();
    m_ranks.clear();
    m_exits.clear();
    m_lost.clear();
    endResetModel();
}

void RankTableModel::setLostRanks(std::map<int, QString> lost, bool runGoesOn)
{
    m_lost = std::move(lost);
    m_lostLive = runGoesOn;
    if (!m_ranks.empty())
        Q_EMIT dataChanged(index(0, ColState), index(rowCount() - 1, ColState));
}

void RankTableModel::setRankExit(int rank, int exitCode, bool stopped)
{
    m_exits[rank] = {exitCode, stopped};
    for (int row = 0; row < rowCount(); ++row)
        if (m_ranks[size_t(row)].rank == rank)
            Q_EMIT dataChanged(index(row, ColState), index(row, ColState));
}

void RankTableModel::update(const cppl::core::telemetry::Snapshot &snapshot)
{
    const int n = int(snapshot.ranks.size());
    if (n != rowCount()) {
        // Only at the start (or a world-size change): the rows themselves change.
        beginResetModel();
        m_ranks = snapshot.ranks;
        endResetModel();
        return;
    }
    if (n == 0)
        return;
    // One dataChanged over the rows that changed, and from the State column on unless a rank's
    // identity changed: a proxy sorted by rank, host or group then keeps its order without
    // re-sorting 1024 rows. A rank's figures change only with a message from it (received) or
    // with time (silence); the rest is what the collector decides about it.
    int first = n, last = -1;
    bool identity = false;
    for (int row = 0; row < n; ++row) {
        const RankView &a = m_ranks[size_t(row)];
        const RankView &b = snapshot.ranks[size_t(row)];
        const bool same = a.received == b.received && a.silentSeconds == b.silentSeconds && a.heard == b.heard
                          && a.state == b.state && a.lost == b.lost && a.exitCode == b.exitCode && a.error == b.error
                          && a.lastLog == b.lastLog && a.rank == b.rank && a.host == b.host && a.group == b.group;
        if (same)
            continue;
        identity = identity || a.rank != b.rank || a.host != b.host || a.group != b.group;
        first = std::min(first, row);
        last = row;
    }
    m_ranks = snapshot.ranks; // element-wise: the rows' strings keep their storage
    if (last >= 0)
        Q_EMIT dataChanged(index(first, identity ? 0 : int(ColState)), index(last, ColumnCount - 1));
}

const RankView *RankTableModel::rankAt(int row) const
{
    return row >= 0 && row < rowCount() ? &m_ranks[size_t(row)] : nullptr;
}

int RankTableModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_ranks.size());
}

int RankTableModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant RankTableModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const RankView &r = m_ranks[size_t(index.row())];
    const int column = index.column();
    if (role == RankRole)
        return qlonglong(r.rank);
    if (column == ColState)
        if (const auto lost = m_lost.find(int(r.rank)); lost != m_lost.end())
            if (std::optional<QVariant> v = lostStateData(lost->second, role))
                return *v;
    switch (role) {
    case SortRole: return sortData(r, column);
    case Qt::TextAlignmentRole: return column >= ColTokens ? QVariant(int(Qt::AlignRight | Qt::AlignVCenter)) : QVariant();
    case Qt::ForegroundRole:
        if (column == ColState && (exitFailed(r) || r.state == RankState::Failed || r.state == RankState::Stalled))
            return QColor(0xd5, 0x5e, 0x00);
        return {};
    case Qt::ToolTipRole: return toolTip(r, column);
    case Qt::DisplayRole: return displayData(r, column);
    default: return {};
    }
}

bool RankTableModel::exitFailed(const RankView &r) const
{
    const auto exit = m_exits.find(int(r.rank));
    return exit != m_exits.end() && exit->second.code != 0 && !exit->second.stopped && r.state != RankState::Done;
}

std::optional<QVariant> RankTableModel::lostStateData(const QString &cause, int role) const
{
    switch (role) {
    case Qt::DisplayRole: return m_lostLive ? tr("⊘ lost · going on") : tr("⊘ lost, recovered");
    case Qt::ToolTipRole:
        return m_lostLive ? tr("%1\nThe other ranks regrouped without it and go on: they evaluate its unfinished batches again, "
                               "so the result will have the same bits as one rank.")
                                .arg(cause)
                          : tr("%1\nThe other ranks evaluated its unfinished batches again: the result has the same bits as one rank.")
                                .arg(cause);
    case Qt::ForegroundRole: return QColor(0xd5, 0x5e, 0x00);
    case SortRole: return int(RankState::Failed);
    default: return std::nullopt;
    }
}

QVariant RankTableModel::sortData(const RankView &r, int column) const
{
    switch (column) {
    case ColRank: return qlonglong(r.rank);
    case ColHost: return QString::fromStdString(r.host);
    case ColGroup: return qlonglong(r.group);
    case ColState: return exitFailed(r) ? int(RankState::Failed) : int(r.state);
    case ColTokens: return qlonglong(r.stats.tokens);
    case ColRate: return m_lost.count(int(r.rank)) ? 0.0 : r.tokensPerSecond;
    case ColComm: return commShareKnown(r) ? r.commShare : -1.0; // unknown sorts below 0 %
    case ColLost: return qlonglong(r.lost);
    case ColHeartbeat: return r.heard ? r.silentSeconds : 1e300;
    case ColMemory: return r.deviceMemoryBytes ? double(*r.deviceMemoryBytes) : double(r.rssBytes);
    default: return {};
    }
}

QVariant RankTableModel::toolTip(const RankView &r, int column) const
{
    if (column == ColMemory)
        return memoryToolTip(r);
    if (!r.error.empty())
        return QString::fromStdString(r.error);
    if (column == ColComm && !commShareKnown(r))
        return tr("not known yet: a rank reports its communication time after its first sync round");
    if (column == ColComm)
        return tr("waiting for stragglers %1%, transfer %2%").arg(100 * r.waitShare, 0, 'f', 1).arg(100 * r.transferShare, 0, 'f', 1);
    if (column == ColGroup && m_tensorParallel > 1) {
        const qint64 first = r.rank / m_tensorParallel * m_tensorParallel;
        return tr("Tensor-parallel group %1: ranks %2 split the model (its leader: rank %3)")
            .arg(r.rank / m_tensorParallel)
            .arg(QString::fromStdString(rankRangeText(int(first), int(first + m_tensorParallel - 1))))
            .arg(first);
    }
    return r.lastLog.empty() ? QVariant() : QVariant(QString::fromStdString(r.lastLog));
}

QString RankTableModel::stateText(const RankView &r) const
{
    if (const auto exit = m_exits.find(int(r.rank)); exit != m_exits.end() && exit->second.code != 0 && r.state != RankState::Done) {
        const int c = exit->second.code;
        const QString how = c > 128 ? tr("signal %1").arg(c - 128) : tr("exit %1").arg(c);
        return exit->second.stopped ? tr("■ stopped (%1)").arg(how) : tr("✗ failed (%1)").arg(how);
    }
    QString s = rankStateLabel(r.state);
    if (r.exitCode && *r.exitCode != 0)
        s += tr(" (exit %1)").arg(*r.exitCode);
    return s;
}

QVariant RankTableModel::displayData(const RankView &r, int column) const
{
    switch (column) {
    case ColRank: return QString::number(r.rank); // a name, not a count: "1000", as the charts write it (not "1,000")
    case ColHost: return QString::fromStdString(r.host);
    case ColGroup: {
        const QString group = r.group >= 0 && r.group < qint64(m_groupNames.size()) && !m_groupNames[size_t(r.group)].isEmpty()
                                  ? m_groupNames[size_t(r.group)]
                                  : QString::number(r.group);
        return m_tensorParallel > 1 ? group + u" · "_s + tensorParallelText(r.rank, m_tensorParallel) : group;
    }
    case ColState: return stateText(r);
    case ColTokens: return QLocale().toString(qlonglong(r.stats.tokens));
    case ColRate:
        if (m_lost.count(int(r.rank)))
            return u"—"_s; // its last rate no longer counts: it evaluates nothing any more
        // Grouped as the Tokens column and the headline write counts ("9,603", not "9603"); "—"
        // before its first progress (not known).
        return r.hasProgress ? QLocale().toString(r.tokensPerSecond, 'f', 0) : u"—"_s;
    case ColComm: return commShareKnown(r) ? QString::number(100.0 * r.commShare, 'f', 1) + u" %"_s : u"—"_s;
    case ColLost: return qlonglong(r.lost);
    case ColHeartbeat: return r.heard ? QString::number(r.silentSeconds, 'f', 1) + u" s"_s : tr("never heard");
    case ColMemory: return memoryText(r);
    default: return {};
    }
}

QVariant RankTableModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal)
        return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case ColComm: return tr("Share of the rank's time spent communicating: waiting for stragglers + transfer");
        case ColLost: return tr("Telemetry messages lost on the way (sequence gaps); the result is unaffected");
        case ColHeartbeat: return tr("Heartbeat: seconds since the rank was last heard from");
        case ColMemory:
            return tr("With a GPU: its memory in use / its total, and its utilisation (NVML); without one: the agent "
                      "process's resident memory (RSS)");
        default: return {};
        }
    }
    if (role != Qt::DisplayRole)
        return {};
    switch (section) {
    case ColRank: return tr("Rank");
    case ColHost: return tr("Host");
    case ColGroup: return tr("Group");
    case ColState: return tr("State");
    case ColTokens: return tr("Tokens");
    case ColRate: return tr("tok/s");
    case ColComm: return tr("Comm");
    case ColLost: return tr("Msgs lost"); // beside a "⊘ lost" rank, "Lost 0" read as the rank's state
    case ColHeartbeat: return tr("Heard");
    case ColMemory: return tr("Memory");
    default: return {};
    }
}

} // namespace cppl::app
