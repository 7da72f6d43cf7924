// SPDX-License-Identifier: MIT
#include "bpe_model.h"

#include "cppl/errors.h"

#include <algorithm>
#include <cstdio>

namespace cppl::agent::hf {

namespace {

constexpr std::size_t kMaxCachedWordBytes = 256;     // as the crate: longer words are rare and unique
constexpr std::size_t kMaxCacheEntries = 1u << 20;   // then the cache starts over
constexpr std::uint32_t kMaxTokenId = (1u << 28) - 1; // ids index a vector; refuse absurdly sparse ones

} // namespace

BpeModel::BpeModel(const JsonContext &ctx, const nlohmann::json &model, const std::string &path)
{
    readVocab(ctx, model, path);
    readOptions(ctx, model, path);
    readMerges(ctx, model, path);
}

void BpeModel::readVocab(const JsonContext &ctx, const nlohmann::json &model, const std::string &path)
{
    const auto &vocab = ctx.require(model, path, "vocab");
    if (!vocab.is_object())
        ctx.fail(path + ".vocab", "expected an object {token: id}, found " + std::string(vocab.type_name()));
    m_vocab.reserve(vocab.size());
    for (const auto &[token, idValue] : vocab.items()) {
        if (!idValue.is_number_unsigned() || idValue.get<std::uint64_t>() > kMaxTokenId)
            ctx.fail(path + ".vocab[\"" + token + "\"]", "expected an id between 0 and " + std::to_string(kMaxTokenId) + ", found " + idValue.dump());
        const auto id = idValue.get<std::uint32_t>();
        m_vocab.emplace(token, id);
        m_maxId = std::max(m_maxId, id);
    }
    if (m_vocab.empty())
        ctx.fail(path + ".vocab", "the vocabulary is empty");
    // The id -> token table is dense: a 2 KB file naming one id near 2^28 asked for GBs (found by
    // fuzz_tokenizer_json). Real vocabularies number their tokens 0..n-1 with a few gaps at most.
    if (std::size_t{m_maxId} >= 2 * m_vocab.size() + 1024)
        ctx.fail(path + ".vocab", "ids reach " + std::to_string(m_maxId) + " but only " + std::to_string(m_vocab.size())
                                      + " tokens are listed; a vocabulary numbers its tokens 0..n-1 (a few gaps at most): check the file");
    m_idToToken.resize(std::size_t{m_maxId} + 1);
    m_hasId.assign(std::size_t{m_maxId} + 1, false);
    for (const auto &[token, id] : m_vocab) {
        if (!m_hasId[id]) {
            m_idToToken[id] = token;
            m_hasId[id] = true;
        }
    }
}

void BpeModel::readOptions(const JsonContext &ctx, const nlohmann::json &model, const std::string &path)
{
    m_continuingSubwordPrefix = ctx.optionalString(model, path, "continuing_subword_prefix", "");
    m_endOfWordSuffix = ctx.optionalString(model, path, "end_of_word_suffix", "");
    m_fuseUnk = ctx.boolean(model, path, "fuse_unk", false);
    m_byteFallback = ctx.boolean(model, path, "byte_fallback", false);
    m_ignoreMerges = ctx.boolean(model, path, "ignore_merges", false);
    if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
        if (!it->is_number())
            ctx.fail(path + ".dropout", "expected null or a number");
        if (it->get<double>() != 0.0)
            ctx.fail(path + ".dropout", "BPE dropout " + it->dump()
                                            + " makes tokenization random; perplexity needs the deterministic ids (set it to null)");
    }
    const std::string unk = ctx.optionalString(model, path, "unk_token", "");
    if (!unk.empty()) {
        const auto it = m_vocab.find(unk);
        if (it == m_vocab.end())
            ctx.fail(path + ".unk_token", "\"" + unk + "\" is not in " + path + ".vocab");
        m_unkId = it->second;
    }
    for (unsigned b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        if (const auto it = m_vocab.find(std::string_view(name)); it != m_vocab.end())
            m_byteTokens[b] = it->second;
    }
}

void BpeModel::readMerges(const JsonContext &ctx, const nlohmann::json &model, const std::string &path)
{
    const auto &merges = ctx.require(model, path, "merges");
    if (!merges.is_array())
        ctx.fail(path + ".merges", "expected an array of \"a b\" strings or [a, b] pairs");
    m_merges.reserve(merges.size());
    const std::size_t prefixLength = m_continuingSubwordPrefix.size();
    for (std::size_t i = 0; i < merges.size(); ++i) {
        const auto &m = merges[i];
        const std::string where = path + ".merges[" + std::to_string(i) + "]";
        std::string a;
        std::string b;
        if (m.is_string()) {
            const auto s = m.get<std::string>();
            const auto space = s.find(' ');
            if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                ctx.fail(where, "\"" + s + "\" is not two tokens separated by one space");
            a = s.substr(0, space);
            b = s.substr(space + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            a = m[0].get<std::string>();
            b = m[1].get<std::string>();
        } else {
            ctx.fail(where, "expected \"a b\" or [\"a\", \"b\"], found " + m.dump());
        }
        const auto disagree = [&](const std::string &token, const char *role) {
            ctx.fail(where, "\"" + a + " " + b + "\": " + role + " \"" + token + "\" is not in " + path
                                + ".vocab; the vocab and merges disagree (a file edited by hand, or parts of two tokenizers?)");
        };
        const auto ia = m_vocab.find(a);
        if (ia == m_vocab.end())
            disagree(a, "token");
        const auto ib = m_vocab.find(b);
        if (ib == m_vocab.end())
            disagree(b, "token");
        const std::string merged = a + (prefixLength && b.starts_with(m_continuingSubwordPrefix) ? b.substr(prefixLength) : b);
        const auto im = m_vocab.find(merged);
        if (im == m_vocab.end())
            disagree(merged, "the merged token");
        // A pair listed twice keeps its last rank, as the crate's HashMap collect does.
        m_merges[pairKey(ia->second, ib->second)] = MergeTarget{static_cast<std::uint32_t>(i), im->second};
    }
}

std::optional<std::uint32_t> BpeModel::tokenId(std::string_view token) const
{
    const auto it = m_vocab.find(token);
    if (it == m_vocab.end())
        return std::nullopt;
    return it->second;
}

const std::string *BpeModel::tokenText(std::uint32_t id) const
{
    if (id >= m_idToToken.size() || !m_hasId[id])
        return nullptr;
    return &m_idToToken[id];
}

const BpeModel::MergeTarget *BpeModel::findMerge(std::uint32_t a, std::uint32_t b) const
{
    const auto it = m_merges.find(pairKey(a, b));
    return it == m_merges.end() ? nullptr : &it->second;
}

void BpeModel::tokenize(std::string_view word, std::vector<std::uint32_t> &out)
{
    if (word.empty())
        return;
    if (m_ignoreMerges) {
        if (const auto it = m_vocab.find(word); it != m_vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    const bool cacheable = word.size() < kMaxCachedWordBytes;
    if (cacheable) {
        if (const auto it = m_cache.find(word); it != m_cache.end()) {
            const auto *ids = m_cachePool.data() + it->second.offset;
            out.insert(out.end(), ids, ids + it->second.length);
            return;
        }
    }
    const std::size_t before = out.size();
    mergeWord(word, out);
    if (cacheable) {
        if (m_cache.size() >= kMaxCacheEntries) {
            m_cache.clear();
            m_cachePool.clear();
        }
        const auto offset = static_cast<std::uint32_t>(m_cachePool.size());
        m_cachePool.insert(m_cachePool.end(), out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
        m_cache.emplace(std::string(word), CacheEntry{offset, static_cast<std::uint32_t>(out.size() - before)});
    }
}

void BpeModel::mergeWord(std::string_view word, std::vector<std::uint32_t> &out)
{
    toSymbols(word);
    mergeSymbols();
    for (const Symbol &s : m_symbols)
        if (!s.removed)
            out.push_back(s.id);
}

void BpeModel::toSymbols(std::string_view word)
{
    m_symbols.clear();
    auto add = [this](std::uint32_t id) {
        const auto n = static_cast<std::int32_t>(m_symbols.size());
        m_symbols.push_back(Symbol{id, n - 1, -1, false});
        if (n > 0)
            m_symbols[static_cast<std::size_t>(n - 1)].next = n;
    };
    // An unk waiting to be written (fuse_unk joins a run of unknown characters into one).
    bool unkPending = false;
    const bool affixes = !m_continuingSubwordPrefix.empty() || !m_endOfWordSuffix.empty();
    for (std::size_t i = 0; i < word.size();) {
        const std::size_t n = findFirstCharEnd(word.substr(i));
        std::string_view piece = word.substr(i, n);
        if (affixes) {
            m_scratch.clear();
            if (i > 0)
                m_scratch += m_continuingSubwordPrefix;
            m_scratch += piece;
            if (i + n == word.size())
                m_scratch += m_endOfWordSuffix;
            piece = m_scratch;
        }
        i += n;
        if (const auto it = m_vocab.find(piece); it != m_vocab.end()) {
            if (unkPending) {
                add(*m_unkId);
                unkPending = false;
            }
            add(it->second);
            continue;
        }
        if (m_byteFallback && std::all_of(piece.begin(), piece.end(), [this](char c) { return m_byteTokens[static_cast<unsigned char>(c)].has_value(); })) {
            // The crate does not flush a pending unk here; neither do we (same ids).
            for (const char c : piece)
                add(*m_byteTokens[static_cast<unsigned char>(c)]);
            continue;
        }
        if (m_unkId) {
            if (unkPending && !m_fuseUnk)
                add(*m_unkId);
            unkPending = true;
            continue;
        }
        m_droppedBytes += static_cast<std::int64_t>(n);
    }
    if (unkPending)
        add(*m_unkId);
}

void BpeModel::mergeSymbols()
{
    // Word::merge_all: lowest rank first, then leftmost; entries made stale by earlier merges skipped.
    const auto later = [](const QueueEntry &x, const QueueEntry &y) { return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos; };
    m_queue.clear();
    for (std::size_t p = 0; p + 1 < m_symbols.size(); ++p)
        if (const MergeTarget *m = findMerge(m_symbols[p].id, m_symbols[p + 1].id))
            m_queue.push_back(QueueEntry{m->rank, static_cast<std::uint32_t>(p), m->id});
    std::make_heap(m_queue.begin(), m_queue.end(), later);
    while (!m_queue.empty()) {
        std::pop_heap(m_queue.begin(), m_queue.end(), later);
        const QueueEntry top = m_queue.back();
        m_queue.pop_back();
        Symbol &current = m_symbols[top.pos];
        if (current.removed || current.next < 0)
            continue;
        const Symbol right = m_symbols[static_cast<std::size_t>(current.next)];
        const MergeTarget *m = findMerge(current.id, right.id);
        if (!m || m->id != top.id)
            continue;
        m_symbols[static_cast<std::size_t>(current.next)].removed = true;
        current.id = top.id;
        current.next = right.next;
        if (right.next >= 0)
            m_symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::int32_t>(top.pos);
        if (current.prev >= 0) {
            if (const MergeTarget *left = findMerge(m_symbols[static_cast<std::size_t>(current.prev)].id, current.id)) {
                m_queue.push_back(QueueEntry{left->rank, static_cast<std::uint32_t>(current.prev), left->id});
                std::push_heap(m_queue.begin(), m_queue.end(), later);
            }
        }
        if (current.next >= 0) {
            if (const MergeTarget *next = findMerge(current.id, m_symbols[static_cast<std::size_t>(current.next)].id)) {
                m_queue.push_back(QueueEntry{next->rank, top.pos, next->id});
                std::push_heap(m_queue.begin(), m_queue.end(), later);
            }
        }
    }
}

} // namespace cppl::agent::hf
