// SPDX-License-Identifier: MIT
#pragma once

// The exact totals' int64 words as the dynamic schedule adds and subtracts them (batch_schedule.cpp,
// batch_schedule_recovery.cpp): internal to them.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cppl::agent::dist::schedule {

using Words = std::vector<std::int64_t>;

// Integer words add and subtract with wrap-around: the exact accumulator's limbs are summed by
// int64 addition across ranks, so differences of sums are exact whatever the order.
[[nodiscard]] inline std::int64_t plus(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}

[[nodiscard]] inline std::int64_t minus(std::int64_t a, std::int64_t b)
{
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

[[nodiscard]] inline Words orZeros(const Words &w, std::size_t n)
{
    return w.empty() ? Words(n, 0) : w;
}

/// Where rank @p r says what it holds when the survivors regroup for epoch @p epoch (recoverOnce, step 1).
[[nodiscard]] inline std::string stateKey(int epoch, int r)
{
    return "cppl/epoch" + std::to_string(epoch) + "/state/" + std::to_string(r);
}

} // namespace cppl::agent::dist::schedule
