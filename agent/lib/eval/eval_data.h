// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cppl::agent {

/// @brief Where an evaluation's token ids came from, and what a result must record about them.
struct EvalInput
{
    std::vector<std::vector<std::uint32_t>> documents; ///< token ids per document (no BOS/prefix)
    std::string path;
    std::string format;    ///< u32, u16, npy:<dtype>, or <dataset>+<tokenizer>
    std::string tokenizer; ///< description, or "bytes", or "" for pre-tokenised ids
    std::string dataset;   ///< plain, wikitext, jsonl, dir; "" for token files
    std::int64_t bytes = 0; ///< UTF-8 bytes of the documents (text input only)
    std::int64_t words = 0; ///< lm-eval word count of the documents (text input only)
    std::int64_t replacedUtf8 = 0;
    std::string bosMode;   ///< auto/always/never (text input with a tokenizer)
    bool bosAdded = false; ///< stream protocols: one BOS before the stream
    std::int64_t bosId = -1; ///< the tokenizer's BOS id when it names one
    std::string bosReason;
    std::vector<std::string> notes; ///< tokenizer notes to print once
    [[nodiscard]] std::int64_t totalTokens() const;
};

struct EvalInputOptions
{
    std::string tokensPath;   ///< --tokens
    std::string textPath;     ///< --text
    std::string tokenizer;    ///< --tokenizer: "bytes" or a tokenizer.json / directory
    std::string dataset = "plain";
    std::string jsonlField = "text";
    std::string bos = "auto";
    bool replaceInvalidUtf8 = false;
};

/// @brief Reads and tokenises. Throws IoError (bad data) or ConfigError (bad options/tokenizer).
[[nodiscard]] EvalInput loadEvalInput(const EvalInputOptions &options);

} // namespace cppl::agent
