// SPDX-License-Identifier: MIT
#pragma once

// A sweep runs the same evaluation at several rank counts; these derive each run's profile.

#include "cppl/cluster_profile.h"

#include <QString>

#include <vector>

namespace cppl::core::history {

/// The profile limited to its first @p ranks slots in host order (hosts past them dropped, the
/// last one's slots cut); groups keep their mode, by-size groups shrink to fit. Throws
/// cppl::ConfigError when the profile has fewer slots than @p ranks.
[[nodiscard]] ClusterProfile profileForRanks(const ClusterProfile &profile, int ranks);
/// "1,2,4,8" -> {1, 2, 4, 8}; ascending, unique, each >= 1. Throws ConfigError naming the bad item.
[[nodiscard]] std::vector<int> parseRankList(const QString &list);

} // namespace cppl::core::history
