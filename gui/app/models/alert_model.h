// SPDX-License-Identifier: MIT
#pragma once

#include "run/alerts.h"

#include <QAbstractTableModel>

#include <array>
#include <map>
#include <utility>
#include <vector>

namespace cppl::app {

/**
 * The run's alerts as rows, oldest first: time, rank, kind, message. Every alert is kept
 * (allAlerts(), in the order raised); the rows coalesce them so that a storm (1024 ranks stalling
 * again and again when telemetry lags) stays a short list: one row per rank and kind whose time,
 * message and "×N" follow its latest alert, and beyond kMaxRows rows one row per kind that stands
 * for the ranks not listed ("N more ranks"). Alerts come in batches: one insertion and one
 * dataChanged per append(). A rank lost in a run that goes on (AlertKind::RankLost) takes over
 * that rank's "failed" row: its process ended, but the run did not fail.
 */
class AlertModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    enum Column { ColTime, ColRank, ColKind, ColMessage, ColumnCount };
    static constexpr int RankRole = Qt::UserRole + 1;
    static constexpr int CountRole = Qt::UserRole + 2;   ///< alerts the row stands for
    static constexpr int OverflowRole = Qt::UserRole + 3; ///< true: the "N more ranks" row of a kind
    /// Rows of their own (one rank and kind each); later (rank, kind) pairs share their kind's
    /// overflow row. Enough to read, few enough that the view never measures thousands of rows.
    static constexpr int kMaxRows = 256;

    explicit AlertModel(QObject *parent = nullptr);

    void append(const cppl::core::run::RunAlert &alert);
    void append(const std::vector<cppl::core::run::RunAlert> &alerts);
    void clear();
    /// The latest alert a row stands for.
    [[nodiscard]] const cppl::core::run::RunAlert &alertAt(int row) const;
    /// Every alert, in the order raised (nothing is dropped by the coalescing).
    [[nodiscard]] const std::vector<cppl::core::run::RunAlert> &allAlerts() const noexcept { return m_all; }
    /// Tab-separated: time (s since the start), wall clock (UTC), rank, kind, message; a header line.
    [[nodiscard]] QString allAlertsAsText() const;

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    struct Row
    {
        int rank = -1;                  // overflow rows: the lowest rank they stand for
        int maxRank = -1;               // overflow rows: the highest
        cppl::core::run::AlertKind kind = cppl::core::run::AlertKind::Failed;
        std::size_t first = 0;          // into m_all
        std::size_t last = 0;
        int count = 0;                  // alerts
        int ranks = 1;                  // distinct ranks (overflow rows)
        std::vector<int> listed;        // overflow rows: the ranks they stand for, in arrival order
        bool overflow = false;
    };
    static constexpr int kKinds = 7;
    /// An overflow row's ranks as the rest of the dashboard writes them ("256–1023"; a few runs
    /// at most, then "…"); @p full: every run.
    [[nodiscard]] static QString ranksText(const Row &row, bool full);

    std::vector<cppl::core::run::RunAlert> m_all;
    std::vector<Row> m_rows;
    std::map<std::pair<int, int>, int> m_rowOf; // (rank, kind) -> row (its own, or its kind's overflow row)
    std::array<int, kKinds> m_overflowRow{};
    int m_ownRows = 0;
};

} // namespace cppl::app
