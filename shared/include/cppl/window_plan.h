// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cppl {

/// @brief The evaluation protocols ClusterPPL reproduces exactly (see docs/protocols.md).
enum class Protocol {
    HfSliding,     ///< Hugging Face "Perplexity of fixed-length models" sliding-window loop
    LlamaCpp,      ///< llama.cpp perplexity: chunks of C, score the second half
    LmEvalRolling, ///< lm-evaluation-harness loglikelihood_rolling, per document
};

[[nodiscard]] std::string_view protocolName(Protocol p) noexcept;
/// @brief Parses "hf-sliding", "llama.cpp" or "lm-eval-rolling"; nullopt otherwise.
[[nodiscard]] std::optional<Protocol> parseProtocol(std::string_view name) noexcept;

/**
 * @brief One model call. The model reads tokens [inputBegin, inputEnd) of the flat token array;
 * every target t in [scoredBegin, scoredEnd) is scored from the logits at position t - 1 - inputBegin.
 * Invariant: inputBegin < scoredBegin <= scoredEnd <= inputEnd + 1 (a target may be the token just
 * past the input, as in lm-eval's windows).
 */
struct Window
{
    std::int64_t inputBegin = 0;
    std::int64_t inputEnd = 0;
    std::int64_t scoredBegin = 0;
    std::int64_t scoredEnd = 0;
    bool bosFirst = false; ///< the model reads the plan's BOS id instead of token inputBegin

    [[nodiscard]] std::int64_t inputLength() const noexcept { return inputEnd - inputBegin; }
    [[nodiscard]] std::int64_t scored() const noexcept { return scoredEnd - scoredBegin; }
    friend bool operator==(const Window &, const Window &) noexcept = default;
};

struct PlanOptions
{
    Protocol protocol = Protocol::HfSliding;
    /// Maximum tokens the model reads per call. Must be >= 2: one token of context, one target.
    std::int64_t context = 512;
    /// hf-sliding only: distance between window starts, 1 <= stride <= context. 0 means = context.
    std::int64_t stride = 0;
    /// llama.cpp only: overwrite each chunk's first input token with bosToken (llama.cpp's add_bos).
    bool bosFirst = false;
    std::int64_t bosToken = -1;
};

/**
 * @brief A protocol applied to a flat token array. Windows are in evaluation order and never
 * overlap in their scored targets, so Σ scored() == scoredTokens counts every target once.
 */
struct WindowPlan
{
    PlanOptions options;
    std::vector<Window> windows;
    std::int64_t flatLength = 0;   ///< length of the token array the windows index
    std::int64_t scoredTokens = 0; ///< Σ windows[i].scored()
    std::int64_t maxScored = 0;    ///< largest scored() of any window
    std::int64_t maxInput = 0;     ///< largest inputLength(), the padded batch width
    std::int64_t documents = 1;
    std::int64_t emptyDocuments = 0; ///< documents with no tokens: nothing to score
    std::int64_t droppedTokens = 0;  ///< data tokens the protocol never scores (context-only tokens, llama.cpp's tail)
};

/// @brief Throws ConfigError for options no data could make valid (context < 2, stride > context, ...).
void validatePlanOptions(const PlanOptions &options);

/// @brief Plans one token stream of numTokens tokens (hf-sliding, llama.cpp).
/// Throws ConfigError for bad options or too short a stream, naming the value and the fix.
[[nodiscard]] WindowPlan planStream(const PlanOptions &options, std::int64_t numTokens);

/**
 * @brief Plans documents laid out back to back in one flat array.
 *
 * For lm-eval-rolling every document is preceded by one prefix token (BOS/EOT) that the caller
 * stores in the array: document i occupies [offset_i + 1, offset_i + 1 + length_i) and its prefix
 * sits at offset_i. For the stream protocols documents are planned one by one without a prefix.
 * documentOffsets() gives the offsets for a set of lengths.
 */
[[nodiscard]] WindowPlan planDocuments(const PlanOptions &options, std::span<const std::int64_t> lengths);

/// @brief Where each document starts in the flat array planDocuments() expects.
[[nodiscard]] std::vector<std::int64_t> documentOffsets(Protocol protocol, std::span<const std::int64_t> lengths);

} // namespace cppl
