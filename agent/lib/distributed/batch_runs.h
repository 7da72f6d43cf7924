// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/agent_lines.h"

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/// @brief Global batches [first, end) (batch indices, not windows): the agent line protocol's
/// BatchRange, which the schedule, the store and the checkpoint lines share.
using BatchRun = cppl::lines::BatchRange;

/// @brief "0-3,8,10-11" (inclusive ranges), the form the store and logs carry; and back (nullopt on
/// bad text). The protocol's own format and parser (shared/src/agent_lines.cpp), under the
/// schedule's names.
[[nodiscard]] inline std::string formatBatchRuns(std::span<const BatchRun> runs)
{
    return cppl::lines::formatBatchRanges(runs);
}
[[nodiscard]] inline std::optional<std::vector<BatchRun>> parseBatchRuns(const std::string &text)
{
    return cppl::lines::parseBatchRanges(text);
}

} // namespace cppl::agent::dist
