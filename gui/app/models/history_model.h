// SPDX-License-Identifier: MIT
#pragma once

// The History page's table: one row per stored run (RunHistory::list(), all of them, newest first)
// and a proxy that filters by model, data, protocol, date range, status, node count and a search
// text, and sorts by the numbers (SortRole), not the display text.

#include "resume_state.h"
#include "history/run_record.h"

#include <QAbstractTableModel>
#include <QDateTime>
#include <QJsonArray>
#include <QSortFilterProxyModel>
#include <QStringList>

#include <optional>
#include <vector>

namespace cppl::app {

class HistoryModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    enum Column { ColStarted, ColRunId, ColStatus, ColModel, ColData, ColProtocol, ColWorld, ColGroups, ColNodes, ColPpl,
                  ColTokens, ColRate, ColBaseline, ColumnCount };
    static constexpr int SortRole = Qt::UserRole + 1;
    static constexpr int RunIdRole = Qt::UserRole + 2;

    explicit HistoryModel(QObject *parent = nullptr);

    /// Replaces every row; the "vs baseline" column is worked out among these runs.
    void setRuns(std::vector<cppl::core::history::RunRecord> runs);
    [[nodiscard]] const cppl::core::history::RunRecord &runAt(int row) const { return m_runs.at(std::size_t(row)); }
    [[nodiscard]] int rowOf(const QString &runId) const;
    /// "bit-identical", "+1.2e-06", "baseline" (the one-rank run others compare to), or empty.
    [[nodiscard]] QString baselineText(int row) const { return m_baseline.at(std::size_t(row)); }
    /// What a resume of the run would do (read from its run directory when the rows were set).
    [[nodiscard]] const ResumeState &resumeState(int row) const { return m_resume.at(std::size_t(row)); }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    // data() by role, for the run in @p row.
    [[nodiscard]] QVariant toolTip(int row, int column) const;
    [[nodiscard]] QString statusToolTip(int row) const;
    /// A column's own sort key; invalid where its text sorts.
    [[nodiscard]] QVariant sortKey(int row, int column) const;
    [[nodiscard]] QVariant displayData(int row, int column) const;
    [[nodiscard]] QString statusText(int row) const;

    std::vector<cppl::core::history::RunRecord> m_runs;
    std::vector<QString> m_baseline;
    std::vector<ResumeState> m_resume;
};

/// A status as a symbol and a word, so it reads without colour ("✓ finished", "✗ failed", ...).
[[nodiscard]] QString statusLabel(cppl::core::history::RunStatus status);
/// The last path component (models and data are absolute paths in the history).
[[nodiscard]] QString shortPath(const QString &path);
/// A run that finished without some ranks (--on-rank-loss continue), from the result's
/// `lost_ranks`: "rank 2 lost" / "ranks 1, 3 lost"; empty when none.
[[nodiscard]] QString lostRanksSummary(const QJsonArray &lostRanks);
/// One line per lost rank: "rank 2 (node1): CAUSE; lost after round 4".
[[nodiscard]] QStringList lostRanksDetail(const QJsonArray &lostRanks);

class HistoryFilterModel : public QSortFilterProxyModel
{
    Q_OBJECT

public:
    explicit HistoryFilterModel(QObject *parent = nullptr);

    /// Empty strings, nullopt, invalid dates and 0 do not filter.
    void setModelFilter(const QString &text);
    void setDataFilter(const QString &text);
    void setProtocolFilter(const QString &protocol);
    void setStatusFilter(std::optional<cppl::core::history::RunStatus> status);
    void setDateRange(const QDate &from, const QDate &to);
    void setNodeCount(int nodes);
    /// Substring (case-insensitive) of run id, profile name, model, data or first cause.
    void setSearch(const QString &text);

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex &sourceParent) const override;

private:
    QString m_model, m_data, m_protocol, m_search;
    std::optional<cppl::core::history::RunStatus> m_status;
    QDate m_from, m_to;
    int m_nodes = 0;
};

} // namespace cppl::app
