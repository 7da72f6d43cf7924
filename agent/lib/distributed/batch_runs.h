// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace cppl::agent::dist {

/// @brief Global batches [first, end) (batch indices, not windows).
struct BatchRun
{
    std::int64_t first = 0;
    std::int64_t end = 0;
    friend bool operator==(const BatchRun &, const BatchRun &) noexcept = default;
};

/// @brief "0-3,8,10-11" (inclusive ranges), the form the store and logs carry; and back (empty on bad text).
[[nodiscard]] std::string formatBatchRuns(std::span<const BatchRun> runs);
[[nodiscard]] std::optional<std::vector<BatchRun>> parseBatchRuns(const std::string &text);

} // namespace cppl::agent::dist
