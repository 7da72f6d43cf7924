// SPDX-License-Identifier: MIT
#pragma once

// One row per rank of the latest snapshot. update() replaces all rows at once and announces them
// with one dataChanged over the rows that changed (the view repaints once, not per cell; columns
// from State on unless a rank's identity changed); the row count changes only when the world
// size does.

#include "telemetry/collector_state.h"

#include <QAbstractTableModel>
#include <QString>

#include <map>
#include <optional>
#include <vector>

namespace cppl::app {

class RankTableModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    enum Column { ColRank, ColHost, ColGroup, ColState, ColTokens, ColRate, ColComm, ColLost, ColHeartbeat, ColMemory, ColumnCount };
    /// Numbers for sorting (the display text of 1.2 GiB does not sort).
    static constexpr int SortRole = Qt::UserRole + 1;
    static constexpr int RankRole = Qt::UserRole + 2;

    explicit RankTableModel(QObject *parent = nullptr);

    void update(const cppl::core::telemetry::Snapshot &snapshot);
    /// Group names by layout group index (the snapshot carries indices).
    void setGroupNames(std::vector<QString> names);
    /// The profile's evaluation.tensor_parallel N: rank r is in tensor-parallel group r / N, shown
    /// in the Group column beside its node group ("by-host · TP 1"); 1: none.
    void setTensorParallel(int n);
    /// "TP 1" for @p rank's tensor-parallel group; "" when N is 1.
    [[nodiscard]] static QString tensorParallelText(qint64 rank, int n);
    void clear();
    /// A rank's process ended (RunEngine::rankFinished): shown even when its telemetry never says
    /// so (a killed rank sends nothing). @p stopped: ended by Stop, not failed.
    void setRankExit(int rank, int exitCode, bool stopped);
    /// A run that finished without these ranks (--on-rank-loss continue): each shows "lost,
    /// recovered" with @p lost's text (rank -> "rank R (HOST): CAUSE; lost after round N") as its
    /// tooltip, whatever its exit or last telemetry said.
    /// With @p runGoesOn (the run is still going, RunEngine::rankLost) they read "lost · going on".
    void setLostRanks(std::map<int, QString> lost, bool runGoesOn = false);
    [[nodiscard]] const cppl::core::telemetry::RankView *rankAt(int row) const;
    /// The Memory column: "12.3/80 GiB · 97%" (GPU used/total · utilisation) or "1.8 GiB RSS".
    [[nodiscard]] static QString memoryText(const cppl::core::telemetry::RankView &rank);
    [[nodiscard]] static QString memoryToolTip(const cppl::core::telemetry::RankView &rank);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    // data() by role: a lost rank's state cell first, then sorting, tooltips and the text shown.
    [[nodiscard]] std::optional<QVariant> lostStateData(const QString &cause, int role) const;
    [[nodiscard]] QVariant sortData(const cppl::core::telemetry::RankView &r, int column) const;
    [[nodiscard]] QVariant toolTip(const cppl::core::telemetry::RankView &r, int column) const;
    [[nodiscard]] QVariant displayData(const cppl::core::telemetry::RankView &r, int column) const;
    [[nodiscard]] QString stateText(const cppl::core::telemetry::RankView &r) const;
    /// It exited non-zero on its own (not stopped) before it was done.
    [[nodiscard]] bool exitFailed(const cppl::core::telemetry::RankView &r) const;

    std::vector<cppl::core::telemetry::RankView> m_ranks;
    std::vector<QString> m_groupNames;
    int m_tensorParallel = 1;
    struct Exit
    {
        int code = 0;
        bool stopped = false;
    };
    std::map<int, Exit> m_exits;
    std::map<int, QString> m_lost;
    bool m_lostLive = false;
};

/// Human-readable byte counts (KiB, MiB, GiB).
[[nodiscard]] QString formatBytes(double bytes);
/// The state as a word and a symbol, so it reads without colour.
[[nodiscard]] QString rankStateLabel(cppl::core::telemetry::RankState state);
/// Whether @p rank's comm share is known: it has reported communication time (its progress after
/// its first sync round), or it finished (a rank that ended without any, e.g. alone, had none).
/// Until then its share is not 0 but unknown: the table shows "—", the comm bars no bar.
[[nodiscard]] bool commShareKnown(const cppl::core::telemetry::RankView &rank);

} // namespace cppl::app
