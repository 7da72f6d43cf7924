// SPDX-License-Identifier: MIT
// Hugging Face tokenizer.json (BPE model). Internal: use Tokenizer::load().
#pragma once

#include "bpe_model.h"
#include "hf_pipeline.h"
#include "tokenizer.h"
#include "tokenizer_config.h"

#include <array>
#include <memory>

namespace cppl::agent::hf {

/// Finds added tokens leftmost-longest (the crate's Aho-Corasick MatchKind::LeftmostLongest) and
/// applies their single_word / lstrip / rstrip rules.
class AddedTokenMatcher
{
public:
    struct Token
    {
        std::string content;
        std::uint32_t id = 0;
        bool singleWord = false;
        bool lstrip = false;
        bool rstrip = false;
    };

    void add(Token token);
    [[nodiscard]] bool empty() const { return m_tokens.empty(); }

    /// Calls piece(start, end) for text between tokens and token(id) for each token, in order.
    template<typename OnPiece, typename OnToken>
    void split(std::string_view text, OnPiece &&piece, OnToken &&token) const;

private:
    [[nodiscard]] std::optional<std::pair<std::size_t, std::size_t>> findAt(std::string_view text, std::size_t from) const;
    std::vector<Token> m_tokens;
    std::array<std::vector<std::size_t>, 256> m_byFirstByte; ///< token indices, longest first
};

class HfTokenizer : public Tokenizer
{
public:
    HfTokenizer(const std::string &path, const nlohmann::json &root, const TokenizerConfig &config);
    ~HfTokenizer() override;

    void encode(std::string_view text, std::vector<std::uint32_t> &out) override;
    using Tokenizer::encode;
    [[nodiscard]] std::string decode(std::span<const std::uint32_t> ids) const override;
    [[nodiscard]] std::int64_t vocabSize() const override;
    [[nodiscard]] std::optional<std::uint32_t> tokenId(std::string_view token) const override;
    [[nodiscard]] std::int64_t droppedBytes() const override { return m_model->droppedBytes(); }

private:
    void encodeNormalizedPiece(std::string_view text, bool atStart, std::vector<std::uint32_t> &out);
    void readAddedTokens(const JsonContext &ctx, const nlohmann::json &root);
    /// Whether `bos` adds a BOS, which, and why: from the post-processor, else tokenizer_config.json.
    void decideBos(const JsonContext &ctx, const nlohmann::json &root, const TokenizerConfig &config);
    struct PostProcessorBos;
    /// The post-processor @p p at @p path, into @p post (a Sequence: each of its processors in order).
    void readPostProcessor(const JsonContext &ctx, const nlohmann::json &p, const std::string &path, PostProcessorBos &post);
    void readTemplateProcessing(const JsonContext &ctx, const nlohmann::json &p, const std::string &path, PostProcessorBos &post);
    [[nodiscard]] std::vector<std::uint32_t> specialTokenIds(const JsonContext &ctx, const nlohmann::json &specials, const std::string &name,
                                                             const std::string &where, const std::string &path) const;

    std::unique_ptr<Normalizer> m_normalizer;
    std::unique_ptr<PreTokenizer> m_preTokenizer;
    std::unique_ptr<BpeModel> m_model;
    std::unique_ptr<Decoder> m_decoder;
    std::string m_decoderUnsupported;
    AddedTokenMatcher m_rawTokens;        ///< normalized: false, matched in the input text
    AddedTokenMatcher m_normalizedTokens; ///< normalized: true, matched after the normalizer
    StringMap<std::uint32_t> m_addedIds;
    std::unordered_map<std::uint32_t, std::string> m_addedText;
    std::optional<std::uint32_t> m_maxAddedId;
    int m_reassignedIds = 0;
    std::string m_reassignedExample;
};

} // namespace cppl::agent::hf
