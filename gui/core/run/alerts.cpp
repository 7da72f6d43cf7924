// SPDX-License-Identifier: MIT
#include "run/alerts.h"

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

QString alertKindName(AlertKind kind)
{
    switch (kind) {
    case AlertKind::Stalled: return u"stalled"_s;
    case AlertKind::Failed: return u"failed"_s;
    case AlertKind::CommShare: return u"comm share"_s;
    case AlertKind::LostMessages: return u"lost telemetry"_s;
    case AlertKind::ResultMismatch: return u"result mismatch"_s;
    case AlertKind::Deviation: return u"deviation"_s;
    case AlertKind::RankLost: return u"rank lost"_s;
    }
    return u"?"_s;
}

void AlertMonitor::reset(const Thresholds &thresholds, Options options)
{
    m_thresholds = thresholds;
    m_options = options;
    m_active.clear();
    m_alerts.clear();
}

bool &AlertMonitor::active(int rank, AlertKind kind)
{
    const auto row = static_cast<std::size_t>(std::max(rank, -1) + 1);
    if (row >= m_active.size())
        m_active.resize(row + 1, std::array<bool, kKinds>{});
    return m_active[row][static_cast<std::size_t>(kind)];
}

const RunAlert &AlertMonitor::raise(double seconds, int rank, AlertKind kind, const QString &message)
{
    active(rank, kind) = true;
    if (kind == AlertKind::RankLost) // its process's end, or its telemetry's last word, is no failure of the run
        active(rank, AlertKind::Failed) = true;
    m_alerts.push_back(RunAlert{seconds, QDateTime::currentDateTimeUtc(), rank, kind, message});
    return m_alerts.back();
}

std::vector<RunAlert> AlertMonitor::update(double seconds, const telemetry::Snapshot &snapshot)
{
    std::vector<RunAlert> raised;
    // Raises once when a condition starts; clears silently so that a second episode alerts again.
    auto edge = [&](int rank, AlertKind kind, bool on, auto &&message) {
        const bool was = active(rank, kind);
        active(rank, kind) = on;
        if (on && !was)
            raised.push_back(raise(seconds, rank, kind, message()));
    };
    using telemetry::RankState;
    for (const auto &r : snapshot.ranks) {
        const int rank = static_cast<int>(r.rank);
        const auto host = [&r] { return QString::fromStdString(r.host); }; // for a message only
        edge(rank, AlertKind::Stalled, r.state == RankState::Stalled, [&] {
            return u"rank %1 on %2: no telemetry for %3 s (threshold %4 s); last state before: %5"_s.arg(rank)
                .arg(host())
                .arg(r.silentSeconds, 0, 'f', 1)
                .arg(m_thresholds.stallSeconds, 0, 'f', 0)
                .arg(r.lastLog.empty() ? u"no log line"_s : QString::fromStdString(r.lastLog));
        });
        if (r.state == RankState::Failed) {
            // Failure is final: never cleared, so never raised twice.
            if (!active(rank, AlertKind::Failed))
                raised.push_back(raise(seconds, rank, AlertKind::Failed,
                                       u"rank %1 on %2 failed%3%4"_s.arg(rank)
                                           .arg(host())
                                           .arg(r.exitCode ? u" (exit %1)"_s.arg(*r.exitCode) : QString())
                                           .arg(r.error.empty() ? QString() : u": "_s + QString::fromStdString(r.error))));
        }
        const double ownSeconds = r.computeSeconds + r.waitSeconds + r.transferSeconds;
        const bool overShare = m_thresholds.commShareAlert > 0 && ownSeconds >= m_options.commShareMinSeconds
                               && r.commShare > m_thresholds.commShareAlert;
        edge(rank, AlertKind::CommShare, overShare, [&] {
            return u"rank %1 on %2: communication %3% of its time (waiting %4%, transfer %5%), over the %6% threshold"_s.arg(rank)
                .arg(host())
                .arg(100 * r.commShare, 0, 'f', 1)
                .arg(100 * r.waitShare, 0, 'f', 1)
                .arg(100 * r.transferShare, 0, 'f', 1)
                .arg(100 * m_thresholds.commShareAlert, 0, 'g', 3);
        });
        edge(rank, AlertKind::LostMessages, r.lost > 0, [&] {
            return u"rank %1 on %2: %3 telemetry messages lost (the live view may lag; the result is not affected)"_s.arg(rank)
                .arg(host())
                .arg(r.lost);
        });
    }
    return raised;
}

} // namespace cppl::core::run
