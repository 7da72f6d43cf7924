// SPDX-License-Identifier: MIT
#include "alert_model.h"

#include <QColor>

using namespace Qt::StringLiterals;
using cppl::core::run::AlertKind;

namespace cppl::app {

AlertModel::AlertModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void AlertModel::append(const cppl::core::run::RunAlert &alert)
{
    const int row = rowCount();
    beginInsertRows({}, row, row);
    m_alerts.push_back(alert);
    endInsertRows();
}

void AlertModel::clear()
{
    if (m_alerts.empty())
        return;
    beginResetModel();
    m_alerts.clear();
    endResetModel();
}

int AlertModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_alerts.size());
}

int AlertModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant AlertModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount())
        return {};
    const auto &a = m_alerts[size_t(index.row())];
    if (role == RankRole)
        return a.rank;
    if (role == Qt::ToolTipRole)
        return QString(a.message + u"\n"_s + a.when.toLocalTime().toString(Qt::ISODate));
    if (role == Qt::ForegroundRole && index.column() == ColKind
        && (a.kind == AlertKind::Failed || a.kind == AlertKind::ResultMismatch))
        return QColor(0xd5, 0x5e, 0x00);
    if (role != Qt::DisplayRole)
        return {};
    switch (index.column()) {
    case ColTime: {
        const int s = int(a.seconds);
        return u"%1:%2"_s.arg(s / 60, 2, 10, QLatin1Char('0')).arg(s % 60, 2, 10, QLatin1Char('0'));
    }
    case ColRank: return a.rank < 0 ? tr("all") : QString::number(a.rank);
    case ColKind: {
        const QString name = cppl::core::run::alertKindName(a.kind);
        const bool severe = a.kind == AlertKind::Failed || a.kind == AlertKind::ResultMismatch;
        return QString((severe ? u"✗ "_s : u"⚠ "_s) + name);
    }
    case ColMessage: return a.message;
    default: return {};
    }
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
