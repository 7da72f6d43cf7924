// SPDX-License-Identifier: MIT
#pragma once

// The Compare page's table: one row per compared run (comparison.h's ScalingPoint), the same
// figures the charts draw.

#include "history/comparison.h"

#include <QAbstractTableModel>

namespace cppl::app {

class CompareModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    enum Column { ColRunId, ColRanks, ColGroups, ColNodes, ColTopology, ColRate, ColIdeal, ColEfficiency, ColWait, ColTransfer,
                  ColPpl, ColDeviation, ColumnCount };
    static constexpr int SortRole = Qt::UserRole + 1;

    explicit CompareModel(QObject *parent = nullptr);
    void setComparison(const cppl::core::history::Comparison &comparison);
    [[nodiscard]] const cppl::core::history::ScalingPoint &pointAt(int row) const { return m_points.at(std::size_t(row)); }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<cppl::core::history::ScalingPoint> m_points;
    double m_threshold = 0.75;
};

} // namespace cppl::app
