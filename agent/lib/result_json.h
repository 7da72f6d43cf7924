// SPDX-License-Identifier: MIT
#pragma once

#include "distributed/distributed_run.h"

#include "cppl/statistics.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

/// @brief What `merge` needs from one `eval --shard R/N --json` result (docs/result-json.md).
struct ShardResult
{
    NllStats stats;
    int rank = 0;
    int count = 1;
    /// The values every shard of one run must share (protocol, context, stride, batch, dtype,
    /// model.sha256, data.sha256), each as compact JSON text; absent keys map to "null".
    std::map<std::string, std::string> runIdentity;
};

/// @brief Parses and validates one result JSON. Throws IoError naming `source` and the field
/// (missing, wrong type, negative count, shard rank outside 0..count-1, an exact sum that does not
/// parse). Never anything else: it is a fuzz target (tests/fuzz).
[[nodiscard]] ShardResult parseResultJson(std::string_view text, const std::string &source);

/// @brief The result's `ranks` array: one object per rank's report; with the dynamic schedule each
/// also names the global batches it evaluated (`batches`, e.g. "0-3,8"; @p batchRuns by rank).
[[nodiscard]] nlohmann::ordered_json ranksJson(const std::vector<dist::RankReport> &reports, const std::vector<std::string> &batchRuns,
                                               bool tensorParallel = false);

} // namespace cppl::agent
