// SPDX-License-Identifier: MIT
#pragma once

#include "run/alerts.h"

#include <QAbstractTableModel>

#include <vector>

namespace cppl::app {

/// The run's alerts, newest last: time since start, rank, kind, message.
class AlertModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    enum Column { ColTime, ColRank, ColKind, ColMessage, ColumnCount };
    static constexpr int RankRole = Qt::UserRole + 1;

    explicit AlertModel(QObject *parent = nullptr);

    void append(const cppl::core::run::RunAlert &alert);
    void clear();
    [[nodiscard]] const cppl::core::run::RunAlert &alertAt(int row) const { return m_alerts.at(size_t(row)); }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<cppl::core::run::RunAlert> m_alerts;
};

} // namespace cppl::app
