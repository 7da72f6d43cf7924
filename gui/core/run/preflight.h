// SPDX-License-Identifier: MIT
#pragma once

// Pre-flight: `clusterppl-agent preflight --json` once per host, through the run's own launcher,
// before any rank starts. These are the pure parts: which command each host runs, and how its
// answers become reasons to refuse the launch.

#include "launch/launch_plan.h"
#include "launch/launcher.h"

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

} // namespace cppl::core::run
