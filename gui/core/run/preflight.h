// SPDX-License-Identifier: MIT
#pragma once

// Pre-flight: `clusterppl-agent preflight --json` once per host, through the run's own launcher,
// before any rank starts. These are the pure parts: which command each host runs, and how its
// answers become reasons to refuse the launch.

#include "launch/launch_plan.h"
#include "launch/launcher.h"

#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <map>
#include <vector>

namespace cppl::core::run {

struct HostPreflight;

/// One "rank" per host (its first rank's command, with `preflight` arguments), in host order.
[[nodiscard]] LaunchPlan preflightPlan(const ClusterProfile &profile, const LaunchPlan &plan);
/// Reports from the pre-flight launcher: @p json by pre-flight rank (the agent's one JSON line).
[[nodiscard]] std::vector<HostPreflight> judgePreflight(const LaunchPlan &preflight, const std::map<int, QString> &json,
                                                        const std::map<int, RankEnd> &ends);
/// Every reason to refuse, each naming its host; a different agent version on any host is one.
[[nodiscard]] QStringList preflightRefusals(const std::vector<HostPreflight> &reports);

/// One line for a host's report (✓/✗, agent, LibTorch, GPUs, NCCL, free memory, paths, problems):
/// the dashboard's Pre-flight column and the CLI's `check` both show it.
[[nodiscard]] QString preflightSummary(const QJsonObject &report, const QStringList &problems);
/// Everything the host reported, one finding per line (GPU names, each path's status, the
/// rendezvous check, every problem), for a tooltip or the CLI's per-host block.
[[nodiscard]] QString preflightDetails(const QJsonObject &report, const QStringList &problems);

} // namespace cppl::core::run
