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

/// A precision sweep's run of @p profile at precision @p quantize (none, int8, int4, int4-sym,
/// int4-asym): with @p reference as its reference model, else the profile's, else the model itself
/// (at the profile's dtype). Every run, the unquantized one too, evaluates the same reference, so
/// their tokens per second compare (each includes the reference's pass).
[[nodiscard]] ClusterProfile profileWithPrecision(ClusterProfile profile, const QString &quantize, const QString &reference);

/// One run of a sweep: its profile and the run id's tail ("r4", or "r4-int8" in a precision sweep).
struct SweepRun
{
    ClusterProfile profile;
    int ranks = 0;
    QString precision; ///< empty: not a precision sweep
    QString idSuffix;
};
/// Every run of a sweep over @p counts and, when @p precisions is not empty, each precision at each
/// count (profileWithPrecision with @p reference), in that order. Every count is checked first
/// (profileForRanks' ConfigError).
[[nodiscard]] std::vector<SweepRun> planSweep(const ClusterProfile &profile, const std::vector<int> &counts, const QStringList &precisions,
                                              const QString &reference);

} // namespace cppl::core::history
