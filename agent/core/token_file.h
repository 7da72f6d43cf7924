// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
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
