// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cppl {

/// @brief A count and its noun, "1 rank" or "4 ranks": the singular for exactly one, as English
/// reads (not "4 rank(s)"). Messages meant for translation use tr()'s %n instead.
[[nodiscard]] inline std::string counted(std::int64_t n, std::string_view one, std::string_view many)
{
    return std::to_string(n) + ' ' + std::string(n == 1 ? one : many);
}

} // namespace cppl
