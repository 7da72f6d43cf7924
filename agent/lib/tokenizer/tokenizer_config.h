// SPDX-License-Identifier: MIT
// tokenizer_config.json next to a tokenizer: what transformers reads for BOS. Internal.
#pragma once

#include <optional>
#include <string>

namespace cppl::agent {

struct TokenizerConfig
{
    std::string path;             ///< empty when there is none
    std::optional<bool> addBos;   ///< add_bos_token, when given
    std::string bosToken;         ///< bos_token (a string or {"content": ...}), empty when absent or null
};

/// @brief Reads DIR/tokenizer_config.json when it exists; throws IoError when it is not JSON.
[[nodiscard]] TokenizerConfig readTokenizerConfig(const std::string &directory);

} // namespace cppl::agent
