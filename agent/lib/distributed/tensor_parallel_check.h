// SPDX-License-Identifier: MIT
// comm-check --tensor-parallel N: the tensor-parallel group's collectives checked bit for bit
// (docs/communication.md, "Tensor-parallel groups"). Torch-free.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace cppl::agent {
class TensorParallelGroup;
}

namespace cppl::agent::dist {

/// @brief Member @p member's float for element @p i: varied exponents and low bits, so that a sum
/// in another order than member order would differ in its last bits.
[[nodiscard]] float tensorParallelCheckValue(int member, std::int64_t i) noexcept;

/**
 * @brief Runs every reduction of @p group on @p sizes elements each: float32 and float64 sums
 * (against the member-order sum computed here), the maximum, the command broadcast, and, on a
 * group that gathers on the device (NCCL), the all-gather of GPU memory. Member 0 of group
 * @p groupIndex writes a line per size to @p out; a mismatch goes to @p err. Returns the number
 * of wrong elements, with the first in @p firstWrong.
 */
std::int64_t checkTensorParallelGroup(TensorParallelGroup &group, int groupIndex, const std::vector<std::int64_t> &sizes, std::ostream &out,
                                      std::ostream &err, std::string &firstWrong);

} // namespace cppl::agent::dist
