// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

struct TokenizerConfig; // tokenizer_config.h

/// `--bos auto|always|never`: perplexity depends on whether the first token is conditioned on BOS.
enum class BosMode { Auto, Always, Never };

[[nodiscard]] std::optional<BosMode> parseBosMode(std::string_view text);
[[nodiscard]] std::string_view bosModeName(BosMode mode);

/// What was decided about BOS, so the caller can apply it and record it in its result.
struct BosDecision
{
    BosMode mode = BosMode::Auto;
    bool add = false;
    std::uint32_t id = 0;  ///< valid when add
    std::string token;     ///< the BOS token's text, when known
    std::string reason;    ///< where the decision came from, for logs and result JSON
};

/**
 * @brief A tokenizer the way the model was trained with it: text -> ids -> bytes.
 *
 * Loaded from a Hugging Face `tokenizer.json` (BPE; see docs/tokenizers.md for the supported
 * components), a SentencePiece `tokenizer.model` (through the libclusterppl_spm.so shim), or a
 * directory holding one. encode() keeps a cache of pre-tokenized words, so an
 * instance is not thread-safe: give each thread its own.
 */
class Tokenizer
{
public:
    virtual ~Tokenizer();

    /**
     * @brief Loads @p path: a tokenizer.json, a SentencePiece *.model, or a directory with
     * tokenizer.json or else tokenizer.model (and optionally tokenizer_config.json next to it for
     * add_bos_token / bos_token). Throws IoError (missing, unreadable, not JSON) or ConfigError
     * (unsupported or inconsistent content, not a SentencePiece model, no SentencePiece shim) naming
     * the file and the JSON path.
     */
    [[nodiscard]] static std::unique_ptr<Tokenizer> load(const std::string &path);

    /// @brief A tokenizer.json from its text (`source` names it in messages). Throws only IoError or
    /// ConfigError naming the JSON path (a fuzz target, tests/fuzz).
    [[nodiscard]] static std::unique_ptr<Tokenizer> fromJson(std::string_view content, const std::string &source,
                                                             const TokenizerConfig &config);

    /// @brief Appends the ids of @p text (no BOS/EOS). Throws IoError on invalid UTF-8 with its offset.
    virtual void encode(std::string_view text, std::vector<std::uint32_t> &out) = 0;
    [[nodiscard]] std::vector<std::uint32_t> encode(std::string_view text);

    /// @brief The bytes the ids stand for. Lossless inverse of encode() for byte-level tokenizers.
    [[nodiscard]] virtual std::string decode(std::span<const std::uint32_t> ids) const = 0;

    /// @brief One past the largest id the tokenizer can produce (model vocabulary and added tokens).
    [[nodiscard]] virtual std::int64_t vocabSize() const = 0;
    /// @brief The id of a token's text (added tokens first, then the model vocabulary).
    [[nodiscard]] virtual std::optional<std::uint32_t> tokenId(std::string_view token) const = 0;
    /// @brief Bytes encode() dropped so far because no token covered them (Hugging Face drops
    /// characters missing from a BPE vocabulary that has neither byte_fallback nor unk_token).
    [[nodiscard]] virtual std::int64_t droppedBytes() const { return 0; }

    /// @brief Throws ConfigError for `always` when no BOS token is known (the message says why).
    [[nodiscard]] BosDecision bosDecision(BosMode mode) const;

    /// @brief Things the user should hear once (e.g. an ignored `truncation` block), one line each.
    [[nodiscard]] const std::vector<std::string> &notes() const { return m_notes; }
    /// @brief The file actually loaded, and a one-line description ("BPE, byte-level, 50257 ids").
    [[nodiscard]] const std::string &path() const { return m_path; }
    [[nodiscard]] const std::string &description() const { return m_description; }

protected:
    std::string m_path;
    std::string m_description;
    std::vector<std::string> m_notes;
    /// What `auto` does and why (filled by the loader from the post-processor / tokenizer_config.json).
    bool m_autoAddBos = false;
    std::string m_autoReason;
    std::string m_autoError; ///< set when `auto` cannot be decided (an unknown post-processor)
    /// The BOS token `always` (and `auto` when it adds one) uses; empty when none is known.
    std::optional<std::uint32_t> m_bosId;
    std::string m_bosToken;
    std::string m_bosSource;
};

/// @brief Byte offset of the first invalid UTF-8 sequence (overlong, surrogate, > U+10FFFF, truncated).
[[nodiscard]] std::optional<std::size_t> findInvalidUtf8(std::string_view text);

} // namespace cppl::agent
