// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

/// @brief Token ids read from disk, with where they came from (for messages and result identity).
struct TokenStream
{
    std::vector<std::uint32_t> ids;
    std::string path;
    std::string format; ///< "u16", "u32", "npy:<dtype>", "bytes"
    std::int64_t fileBytes = 0;
};

/// @brief The parts of a .npy header the token reader uses.
struct NpyHeader
{
    std::string dtype;      ///< kind and size without the byte order, e.g. "i4", "u2"
    int itemSize = 0;       ///< bytes per element
    std::uint64_t count = 0; ///< product of the shape (1 for a scalar)
};

/// Longer headers are refused (numpy itself reads at most 10000 bytes by default).
inline constexpr std::size_t kMaxNpyHeader = 1 << 16;

/// @brief Parses the dict literal of a .npy header (after magic, version and length). Throws
/// IoError naming `source` and what is wrong; never anything else (a fuzz target, tests/fuzz).
[[nodiscard]] NpyHeader parseNpyHeader(std::string_view header, const std::string &source);

/**
 * @brief Reads token ids by extension: .u16/.bin16 and .u32 (raw little-endian, nanoGPT style), .npy
 * (int32, int64, uint16, uint32; 1-D or C-ordered N-D, flattened). Throws IoError naming the file and
 * the problem (missing, empty, truncated, odd length, bad header, negative or too large id + position).
 */
[[nodiscard]] TokenStream readTokenFile(const std::string &path);

/// @brief UTF-8 bytes as ids 0..255, for byte-level models. Throws IoError when unreadable or empty.
[[nodiscard]] TokenStream readTextAsBytes(const std::string &path);

/// @brief Throws IoError naming the first id >= vocab and its position.
void checkVocabulary(const TokenStream &tokens, std::int64_t vocab);

} // namespace cppl::agent
