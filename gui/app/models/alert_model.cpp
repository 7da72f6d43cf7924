// SPDX-License-Identifier: MIT
#include "alert_model.h"

#include "clock_text.h"

#include "cppl/cluster_profile.h"

#include <QColor>
#include <QLocale>

#include <algorithm>
#include <climits>

using namespace Qt::StringLiterals;
using cppl::core::run::AlertKind;
using cppl::core::run::RunAlert;

namespace cppl::app {

namespace {
// Time into the run as the Run page's "elapsed 6:12" writes it, the second cut (an alert raised at
// 6:12.9 was raised in that second).
QString clock(double seconds)
{
    return clockText(std::max<qint64>(0, qint64(seconds)));
}

bool severe(AlertKind k)
{
    return k == AlertKind::Failed || k == AlertKind::ResultMismatch;
}
} // namespace

AlertModel::AlertModel(QObject *parent)
    : QAbstractTableModel(parent)
{
    m_overflowRow.fill(-1);
}

void AlertModel::append(const RunAlert &alert)
{
    append(std::vector<RunAlert>{alert});
}

void AlertModel::append(const std::vector<RunAlert> &alerts)
{
    if (alerts.empty())
        return;
    // Existing rows are updated first and announced with one dataChanged after the insertion;
    // new rows go in with one beginInsertRows, so a batch of thousands costs the view one layout.
    const int oldRows = rowCount();
    std::vector<Row> added;
    auto rowAt = [&](int row) -> Row & { return row < oldRows ? m_rows[size_t(row)] : added[size_t(row - oldRows)]; };
    int minChanged = INT_MAX, maxChanged = -1;
    m_all.reserve(m_all.size() + alerts.size());
    for (const RunAlert &a : alerts) {
        const std::size_t at = m_all.size();
        m_all.push_back(a);
        const auto key = std::make_pair(a.rank, int(a.kind));
        int row = -1;
        if (a.kind == AlertKind::RankLost && !m_rowOf.count(key)) {
            // Its "ended: killed by signal 9" row read as the run's failure; the run went on.
            const auto failed = m_rowOf.find(std::make_pair(a.rank, int(AlertKind::Failed)));
            if (failed != m_rowOf.end() && !rowAt(failed->second).overflow) {
                Row &r = rowAt(failed->second);
                r.kind = AlertKind::RankLost;
                r.first = at;
                r.count = 0;
                m_rowOf.emplace(key, failed->second);
                m_rowOf.erase(failed);
            }
        }
        if (const auto it = m_rowOf.find(key); it != m_rowOf.end()) {
            row = it->second;
        } else if (m_ownRows < kMaxRows || a.rank < 0) { // run-wide alerts (once per run) always listed
            row = oldRows + int(added.size());
            Row r;
            r.rank = r.maxRank = a.rank;
            r.kind = a.kind;
            r.first = at;
            added.push_back(r);
            ++m_ownRows;
            m_rowOf.emplace(key, row);
        } else {
            int &overflow = m_overflowRow[size_t(a.kind)];
            if (overflow < 0) {
                overflow = oldRows + int(added.size());
                Row r;
                r.rank = r.maxRank = a.rank;
                r.kind = a.kind;
                r.first = at;
                r.ranks = 0;
                r.overflow = true;
                added.push_back(r);
            }
            row = overflow;
            Row &r = rowAt(row);
            ++r.ranks;
            r.listed.push_back(a.rank);
            r.rank = std::min(r.rank, a.rank);
            r.maxRank = std::max(r.maxRank, a.rank);
            m_rowOf.emplace(key, row);
        }
        Row &r = rowAt(row);
        r.last = at;
        // A lost rank's alert said again is the same event told better (its cause once its process
        // ended, how the run ended): the row shows the latest words, not "×2".
        if (!(a.kind == AlertKind::RankLost && !r.overflow && r.count > 0))
            ++r.count;
        if (row < oldRows) {
            minChanged = std::min(minChanged, row);
            maxChanged = std::max(maxChanged, row);
        }
    }
    if (!added.empty()) {
        beginInsertRows({}, oldRows, oldRows + int(added.size()) - 1);
        m_rows.insert(m_rows.end(), added.begin(), added.end());
        endInsertRows();
    }
    if (maxChanged >= 0)
        Q_EMIT dataChanged(index(minChanged, 0), index(maxChanged, ColumnCount - 1));
}

void AlertModel::clear()
{
    if (m_all.empty())
        return;
    beginResetModel();
    m_all.clear();
    m_rows.clear();
    m_rowOf.clear();
    m_overflowRow.fill(-1);
    m_ownRows = 0;
    endResetModel();
}

const RunAlert &AlertModel::alertAt(int row) const
{
    return m_all.at(m_rows.at(size_t(row)).last);
}

QString AlertModel::allAlertsAsText() const
{
    QString text = u"seconds\tutc\trank\tkind\tmessage\n"_s;
    for (const RunAlert &a : m_all)
        text += u"%1\t%2\t%3\t%4\t%5\n"_s.arg(a.seconds, 0, 'f', 1)
                    .arg(a.when.toString(Qt::ISODate))
                    .arg(a.rank < 0 ? u"all"_s : QString::number(a.rank))
                    .arg(cppl::core::run::alertKindName(a.kind))
                    .arg(QString(a.message).replace(u'\t', u' ').replace(u'\n', u' '));
    return text;
}

int AlertModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_rows.size());
}

int AlertModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant AlertModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const Row &row = m_rows[size_t(index.row())];
    const RunAlert &a = m_all[row.last];
    switch (role) {
    case RankRole: return a.rank;
    case CountRole: return row.count;
    case OverflowRole: return row.overflow;
    case Qt::ToolTipRole: {
        const QLocale loc;
        QString tip = a.message + u"\n"_s + a.when.toLocalTime().toString(Qt::ISODate);
        if (row.overflow && row.ranks > 1)
            tip = tr("%1 %2 alerts of %3 more ranks (ranks %4), not listed one by one; the latest:\n")
                      .arg(loc.toString(row.count), cppl::core::run::alertKindName(a.kind), loc.toString(row.ranks), ranksText(row, true))
                  + tip + tr("\nRight-click › Copy all alerts for every one of them.");
        else if (row.count > 1)
            tip += tr("\nRaised %1 times: first at %2, latest at %3").arg(loc.toString(row.count), clock(m_all[row.first].seconds), clock(a.seconds));
        return tip;
    }
    case Qt::ForegroundRole:
        if (index.column() == ColKind && severe(a.kind))
            return QColor(0xd5, 0x5e, 0x00);
        return {};
    case Qt::DisplayRole: break;
    default: return {};
    }
    switch (index.column()) {
    case ColTime: return clock(a.seconds);
    case ColRank:
        if (row.overflow && row.ranks > 1)
            return tr("+%1").arg(QLocale().toString(row.ranks));
        return a.rank < 0 ? tr("all") : QString::number(a.rank);
    case ColKind: {
        QString text = (severe(a.kind) ? u"✗ "_s : u"⚠ "_s) + cppl::core::run::alertKindName(a.kind);
        if (row.count > 1)
            text += u" ×%1"_s.arg(QLocale().toString(row.count));
        return text;
    }
    case ColMessage:
        // What the row stands for: further ranks with this kind of alert (the Kind column counts
        // their alerts), which ranks, and the latest of them.
        if (row.overflow && row.ranks > 1)
            return tr("… and %1 more ranks with this alert (ranks %2), not listed one by one; latest: %3")
                .arg(QLocale().toString(row.ranks), ranksText(row, false), a.message);
        return a.message;
    default: return {};
    }
}

QString AlertModel::ranksText(const Row &row, bool full)
{
    const QString all = QString::fromStdString(rankListText(row.listed));
    constexpr int kRuns = 3; // "0–3, 6, 8–9": more runs than this are for the tooltip
    const QStringList runs = all.split(u", "_s);
    return full || runs.size() <= kRuns ? all : runs.mid(0, kRuns).join(u", "_s) + u", …"_s;
}

QVariant AlertModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case ColTime: return tr("Time");
    case ColRank: return tr("Rank");
    case ColKind: return tr("Kind");
    case ColMessage: return tr("Message");
    default: return {};
    }
}

} // namespace cppl::app
