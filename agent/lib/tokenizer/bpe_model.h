// SPDX-License-Identifier: MIT
#pragma once

#include "hf_pipeline.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cppl::agent::hf {

/// Hashes std::string and std::string_view alike, so lookups by view allocate nothing.
struct StringHash
{
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template<typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

/**
 * The BPE model of tokenizer.json, merging as the Rust crate's Word::merge_all does: the lowest
 * merge rank first, the leftmost position on ties, stale queue entries skipped. Words already seen
 * are answered from a cache (ids only depend on the word).
 */
class BpeModel
{
public:
    /// Reads model.vocab / merges / unk_token / byte_fallback / ignore_merges / ...; throws
    /// ConfigError naming the JSON path (a merge with a token missing from the vocab, ...).
    BpeModel(const JsonContext &ctx, const nlohmann::json &model, const std::string &path);

    /// Appends the ids of one pre-tokenized word.
    void tokenize(std::string_view word, std::vector<std::uint32_t> &out);

    [[nodiscard]] std::optional<std::uint32_t> tokenId(std::string_view token) const;
    [[nodiscard]] const std::string *tokenText(std::uint32_t id) const;
    [[nodiscard]] std::uint32_t maxId() const { return m_maxId; }
    [[nodiscard]] std::size_t vocabEntries() const { return m_vocab.size(); }
    [[nodiscard]] std::size_t mergeCount() const { return m_merges.size(); }
    [[nodiscard]] bool byteFallback() const { return m_byteFallback; }
    /// Bytes of characters that had no token, no byte fallback and no unk token: the crate drops them.
    [[nodiscard]] std::int64_t droppedBytes() const { return m_droppedBytes; }

private:
    struct MergeTarget
    {
        std::uint32_t rank;
        std::uint32_t id;
    };
    struct Symbol
    {
        std::uint32_t id;
        std::int32_t prev;
        std::int32_t next;
        bool removed;
    };
    struct QueueEntry
    {
        std::uint32_t rank;
        std::uint32_t pos;
        std::uint32_t id;
    };
    static std::uint64_t pairKey(std::uint32_t a, std::uint32_t b) { return (std::uint64_t{a} << 32) | b; }
    void readVocab(const JsonContext &ctx, const nlohmann::json &model, const std::string &path);
    /// Affixes, unk, byte fallback, dropout (refused unless 0), ignore_merges.
    void readOptions(const JsonContext &ctx, const nlohmann::json &model, const std::string &path);
    void readMerges(const JsonContext &ctx, const nlohmann::json &model, const std::string &path);
    /// The ids of one word not in the cache: its characters as symbols, merged.
    void mergeWord(std::string_view word, std::vector<std::uint32_t> &out);
    /// One symbol per character of @p word (its token, byte-fallback tokens, or unk), into m_symbols.
    void toSymbols(std::string_view word);
    /// Word::merge_all over m_symbols.
    void mergeSymbols();
    [[nodiscard]] const MergeTarget *findMerge(std::uint32_t a, std::uint32_t b) const;

    StringMap<std::uint32_t> m_vocab;
    std::vector<std::string> m_idToToken;
    std::vector<bool> m_hasId;
    std::unordered_map<std::uint64_t, MergeTarget> m_merges;
    std::optional<std::uint32_t> m_unkId;
    std::string m_continuingSubwordPrefix;
    std::string m_endOfWordSuffix;
    bool m_fuseUnk = false;
    bool m_byteFallback = false;
    bool m_ignoreMerges = false;
    std::uint32_t m_maxId = 0;
    std::array<std::optional<std::uint32_t>, 256> m_byteTokens; ///< "<0xXX>" ids for byte_fallback
    std::int64_t m_droppedBytes = 0;

    // Cache: word -> a run of ids in m_cachePool. Cleared when full (it only saves time).
    struct CacheEntry
    {
        std::uint32_t offset;
        std::uint32_t length;
    };
    StringMap<CacheEntry> m_cache;
    std::vector<std::uint32_t> m_cachePool;

    // Scratch for mergeWord, kept to avoid allocating per word.
    std::vector<Symbol> m_symbols;
    std::vector<QueueEntry> m_queue;
    std::string m_scratch;
};

} // namespace cppl::agent::hf
