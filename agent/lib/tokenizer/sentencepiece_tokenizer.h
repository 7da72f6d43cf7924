// SPDX-License-Identifier: MIT
// SentencePiece tokenizer.model through the shim library. Internal: use Tokenizer::load().
#pragma once

#include "tokenizer.h"
#include "tokenizer_config.h"

#include <cstdint>
#include <string>
#include <string_view>

struct CpplSpm;

namespace cppl::agent {

namespace spm {
struct ShimApi;

/// What the agent reads from a tokenizer.model itself (protobuf wire format, no protobuf library),
/// before the shim is involved: whether it is a SentencePiece ModelProto at all, and what it is.
struct ModelFileSummary
{
    std::int64_t pieces = 0;
    std::int64_t bytePieces = 0;       ///< pieces of type BYTE (<0x00>..<0xFF>)
    int modelType = 1;                 ///< TrainerSpec.model_type: 1 unigram, 2 BPE, 3 word, 4 char
    bool byteFallback = false;         ///< TrainerSpec.byte_fallback
    std::string normalizer;            ///< NormalizerSpec.name (nmt_nfkc, identity, ...)
    bool addDummyPrefix = true;        ///< NormalizerSpec.add_dummy_prefix
    bool removeExtraWhitespaces = true; ///< NormalizerSpec.remove_extra_whitespaces
};

/// @brief Checks @p bytes (the content of @p path) is a SentencePiece model. Throws ConfigError
/// "PATH: not a SentencePiece model: WHY" with what to do.
[[nodiscard]] ModelFileSummary readModelFile(const std::string &path, std::string_view bytes);

[[nodiscard]] std::string_view modelTypeName(int modelType);
} // namespace spm

class SentencePieceTokenizer : public Tokenizer
{
public:
    /// Throws IoError (unreadable) or ConfigError (not a SentencePiece model, shim missing or refusing).
    SentencePieceTokenizer(const std::string &path, const TokenizerConfig &config);
    ~SentencePieceTokenizer() override;
    SentencePieceTokenizer(const SentencePieceTokenizer &) = delete;
    SentencePieceTokenizer &operator=(const SentencePieceTokenizer &) = delete;

    void encode(std::string_view text, std::vector<std::uint32_t> &out) override;
    using Tokenizer::encode;
    /// SentencePiece's own decoding: "▁" becomes a space, the dummy prefix is dropped, control
    /// pieces (BOS, EOS) vanish, byte pieces become their bytes (U+FFFD where they are not UTF-8).
    [[nodiscard]] std::string decode(std::span<const std::uint32_t> ids) const override;
    [[nodiscard]] std::int64_t vocabSize() const override { return m_vocabSize; }
    [[nodiscard]] std::optional<std::uint32_t> tokenId(std::string_view token) const override;

    [[nodiscard]] const spm::ModelFileSummary &summary() const { return m_summary; }
    /// @brief The piece text of @p id, empty when out of range.
    [[nodiscard]] std::string piece(std::uint32_t id) const;

private:
    void decideBos(const TokenizerConfig &config);

    const spm::ShimApi *m_api = nullptr;
    CpplSpm *m_model = nullptr;
    std::int64_t m_vocabSize = 0;
    spm::ModelFileSummary m_summary;
};

} // namespace cppl::agent
