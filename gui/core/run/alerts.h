// SPDX-License-Identifier: MIT
#pragma once

// Turns the collector's snapshots into alerts a user acts on: a rank stalled or failed, a rank's
// communication share over the profile's threshold, lost telemetry, a result that does not check
// out, a final PPL that deviates from the one-rank baseline. Edge-triggered: one alert when a
// condition starts (again after it cleared), never one per snapshot.

#include "telemetry/collector_state.h"

#include "cppl/cluster_profile.h"

#include <QDateTime>
#include <QMetaType>
#include <QString>

#include <array>
#include <cstddef>
#include <vector>

namespace cppl::core::run {

// RankLost: with on_rank_loss continue, the survivors regrouped without a rank and the run goes
// on (a warning: the result stays one rank's bits); it stands in for that rank's Failed alert.
enum class AlertKind { Stalled, Failed, CommShare, LostMessages, ResultMismatch, Deviation, RankLost };
[[nodiscard]] QString alertKindName(AlertKind kind);

struct RunAlert
{
    double seconds = 0;        ///< since the run started (the charts' x axis)
    QDateTime when;            ///< wall clock, UTC
    int rank = -1;             ///< -1: the whole run
    AlertKind kind = AlertKind::Failed;
    QString message;           ///< specific: which rank, on which host, what, how much
};

class AlertMonitor
{
public:
    struct Options
    {
        // A rank's comm share is only judged after this much of its own time, so the first
        // round's rendezvous and warm-up do not raise alerts that mean nothing.
        double commShareMinSeconds = 2.0;
    };

    void reset(const Thresholds &thresholds, Options options);
    void reset(const Thresholds &thresholds) { reset(thresholds, Options{}); }
    /// New alerts raised by this snapshot (also appended to alerts()).
    std::vector<RunAlert> update(double seconds, const telemetry::Snapshot &snapshot);
    /// An alert the engine raises itself (rank exit, result check, baseline).
    const RunAlert &raise(double seconds, int rank, AlertKind kind, const QString &message);
    [[nodiscard]] const std::vector<RunAlert> &alerts() const noexcept { return m_alerts; }

private:
    /// Whether @p kind is active for @p rank (-1: the whole run); grows the table as ranks appear.
    [[nodiscard]] bool &active(int rank, AlertKind kind);

    Thresholds m_thresholds;
    Options m_options;
    // Active conditions, one flag per kind, indexed by rank + 1: looked up for every rank of every
    // snapshot (1024 ranks at up to 25 Hz), so a flat table, not a map.
    static constexpr std::size_t kKinds = static_cast<std::size_t>(AlertKind::RankLost) + 1;
    std::vector<std::array<bool, kKinds>> m_active;
    std::vector<RunAlert> m_alerts;
};

} // namespace cppl::core::run

Q_DECLARE_METATYPE(cppl::core::run::RunAlert)
