// SPDX-License-Identifier: MIT
// The encode path of the Rust `tokenizers` crate for one sequence: added tokens that are not
// normalized are cut out of the raw text, the rest is normalized, normalized added tokens are cut
// out, the pre-tokenizer splits words, and the BPE model turns each word into ids.
#include "hf_tokenizer.h"

#include "cppl/errors.h"

#include <algorithm>
#include <functional>

namespace cppl::agent::hf {

namespace {

/// Rust regex `\w` (Unicode word character), for single_word added tokens.
bool isWordCharAt(std::string_view text, std::size_t at)
{
    static thread_local const Pcre2Regex re(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}])", "built-in word-character regex");
    return re.matchAt(text, at).has_value();
}

std::size_t lastCharStart(std::string_view text)
{
    std::size_t i = text.size();
    while (i > 0) {
        --i;
        if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80)
            return i;
    }
    return 0;
}

/// Start of the whitespace run that ends @p text (Rust: `\s*$`), text.size() when there is none.
std::size_t trailingWhiteSpaceStart(std::string_view text)
{
    std::size_t end = text.size();
    while (end > 0) {
        const std::size_t start = lastCharStart(text.substr(0, end));
        std::size_t length = 0;
        if (!isWhiteSpaceAt(text, start, &length) || start + length != end)
            break;
        end = start;
    }
    return end;
}

/// Length of the whitespace run that starts @p text (Rust: `^\s*`).
std::size_t leadingWhiteSpaceLength(std::string_view text)
{
    std::size_t at = 0;
    std::size_t length = 0;
    while (at < text.size() && isWhiteSpaceAt(text, at, &length))
        at += length;
    return at;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Added tokens
// ---------------------------------------------------------------------------------------------

void AddedTokenMatcher::add(Token token)
{
    if (token.content.empty())
        return; // the crate ignores empty added tokens
    m_tokens.push_back(std::move(token));
    auto &list = m_byFirstByte[static_cast<unsigned char>(m_tokens.back().content[0])];
    list.push_back(m_tokens.size() - 1);
    std::stable_sort(list.begin(), list.end(), [this](std::size_t a, std::size_t b) { return m_tokens[a].content.size() > m_tokens[b].content.size(); });
}

std::optional<std::pair<std::size_t, std::size_t>> AddedTokenMatcher::findAt(std::string_view text, std::size_t from) const
{
    for (std::size_t pos = from; pos < text.size(); ++pos) {
        const auto &candidates = m_byFirstByte[static_cast<unsigned char>(text[pos])];
        for (const std::size_t index : candidates)
            if (text.substr(pos).starts_with(m_tokens[index].content))
                return std::pair{pos, index};
    }
    return std::nullopt;
}

template<typename OnPiece, typename OnToken>
void AddedTokenMatcher::split(std::string_view text, OnPiece &&piece, OnToken &&token) const
{
    std::size_t startOffset = 0;
    std::size_t searchFrom = 0;
    if (!m_tokens.empty()) {
        while (const auto found = findAt(text, searchFrom)) {
            const Token &t = m_tokens[found->second];
            std::size_t start = found->first;
            std::size_t stop = start + t.content.size();
            searchFrom = stop;
            if (t.singleWord) {
                const bool spaceBefore = start == 0 || !isWordCharAt(text, lastCharStart(text.substr(0, start)));
                const bool spaceAfter = stop == text.size() || !isWordCharAt(text, stop);
                if (!spaceBefore || !spaceAfter)
                    continue;
            }
            if (t.lstrip)
                start = std::max(trailingWhiteSpaceStart(text.substr(0, start)), startOffset);
            if (t.rstrip)
                stop += leadingWhiteSpaceLength(text.substr(stop));
            if (startOffset < start)
                piece(startOffset, start);
            token(t.id);
            startOffset = stop;
        }
    }
    if (startOffset < text.size())
        piece(startOffset, text.size());
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

HfTokenizer::HfTokenizer(const std::string &path, const nlohmann::json &root, const TokenizerConfig &config)
{
    m_path = path;
    const JsonContext ctx{path};
    const auto member = [&](const char *key) -> const nlohmann::json & {
        static const nlohmann::json null;
        const auto it = root.find(key);
        return it == root.end() ? null : *it;
    };

    const auto &model = ctx.require(root, "(top level)", "model");
    if (!model.is_object())
        ctx.fail("model", "expected an object, found " + std::string(model.type_name()));
    // Files written by old versions of the crate have no model.type; BPE is the one with merges.
    const std::string type = model.contains("type") ? ctx.type(model, "model") : model.contains("merges") ? "BPE" : "(no type)";
    if (type != "BPE")
        ctx.fail("model.type", "model \"" + type
                                   + "\" is not supported (supported: BPE, including byte-level BPE and SentencePiece-style BPE with "
                                     "byte_fallback; WordPiece, WordLevel and Unigram models are not)");
    m_model = std::make_unique<BpeModel>(ctx, model, "model");
    m_normalizer = makeNormalizer(ctx, member("normalizer"), "normalizer");
    m_preTokenizer = makePreTokenizer(ctx, member("pre_tokenizer"), "pre_tokenizer");
    m_decoder = makeDecoder(ctx, member("decoder"), "decoder", m_decoderUnsupported);
    readAddedTokens(ctx, root);

    if (const auto &t = member("truncation"); !t.is_null())
        m_notes.push_back(path + ": the \"truncation\" block" + (t.contains("max_length") ? " (max_length " + t["max_length"].dump() + ")" : std::string())
                          + " is ignored: evaluation never truncates text");
    if (const auto &p = member("padding"); !p.is_null())
        m_notes.push_back(path + ": the \"padding\" block is ignored: evaluation never pads");
    decideBos(ctx, root, config);

    const bool byteLevel = [&] {
        const auto &pre = member("pre_tokenizer");
        return pre.dump().find("\"ByteLevel\"") != std::string::npos;
    }();
    m_description = "Hugging Face tokenizer.json, BPE (" + std::string(byteLevel ? "byte-level" : m_model->byteFallback() ? "byte_fallback" : "characters")
                    + "), " + std::to_string(vocabSize()) + " ids, " + std::to_string(m_model->mergeCount()) + " merges, "
                    + std::to_string(m_addedText.size()) + " added tokens";
}

HfTokenizer::~HfTokenizer() = default;

void HfTokenizer::readAddedTokens(const JsonContext &ctx, const nlohmann::json &root)
{
    const auto it = root.find("added_tokens");
    if (it == root.end() || it->is_null())
        return;
    if (!it->is_array())
        ctx.fail("added_tokens", "expected an array");
    for (std::size_t i = 0; i < it->size(); ++i) {
        const auto &t = (*it)[i];
        const std::string path = "added_tokens[" + std::to_string(i) + "]";
        const auto &idValue = ctx.require(t, path, "id");
        if (!idValue.is_number_unsigned() || idValue.get<std::uint64_t>() > (1u << 28))
            ctx.fail(path + ".id", "expected a non-negative id, found " + idValue.dump());
        AddedTokenMatcher::Token token;
        const auto fileId = idValue.get<std::uint32_t>();
        token.content = ctx.string(t, path, "content");
        token.singleWord = ctx.boolean(t, path, "single_word", false);
        token.lstrip = ctx.boolean(t, path, "lstrip", false);
        token.rstrip = ctx.boolean(t, path, "rstrip", false);
        const bool special = ctx.boolean(t, path, "special", false);
        const bool normalized = ctx.boolean(t, path, "normalized", !special);
        if (token.content.empty())
            continue; // the crate ignores empty added tokens
        // The crate does not take the file's id: a known text keeps its id (added tokens first, then
        // the model's); a new one gets the next free id after the model's vocabulary and the added
        // tokens so far (AddedVocabulary::add_tokens). Files saved by the crate agree with it.
        if (const auto known = tokenId(token.content))
            token.id = *known;
        else if (!m_maxAddedId || (*m_maxAddedId < m_model->vocabEntries() && m_model->vocabEntries() > 0))
            token.id = static_cast<std::uint32_t>(m_model->vocabEntries());
        else
            token.id = *m_maxAddedId + 1;
        if (token.id != fileId) {
            ++m_reassignedIds;
            if (m_reassignedIds == 1)
                m_reassignedExample = path + " \"" + token.content + "\" has id " + std::to_string(fileId) + " in the file but gets "
                                      + std::to_string(token.id);
        }
        m_addedIds[token.content] = token.id;
        m_addedText[token.id] = token.content;
        m_maxAddedId = std::max(m_maxAddedId.value_or(0), token.id);
        if (normalized) {
            // The crate matches normalized tokens by their normalized form.
            if (m_normalizer)
                m_normalizer->normalize(token.content);
            m_normalizedTokens.add(std::move(token));
        } else {
            m_rawTokens.add(std::move(token));
        }
    }
    if (m_reassignedIds > 0)
        m_notes.push_back(m_path + ": " + std::to_string(m_reassignedIds) + " added token(s) get other ids than the file says, as Hugging Face assigns them ("
                          + m_reassignedExample + "); the ids Hugging Face uses are used");
}

/// What the post-processor puts around the text (decideBos, step 1).
struct HfTokenizer::PostProcessorBos
{
    std::optional<std::uint32_t> bos;                        ///< the one special token before the text, if any
    std::string token;                                       ///< its text
    std::string reason = "the tokenizer has no post_processor"; ///< whether it adds a BOS, and why (the default's reason)
    std::vector<std::string> appended;                       ///< special tokens after the text: noted, never scored
};

void HfTokenizer::decideBos(const JsonContext &ctx, const nlohmann::json &root, const TokenizerConfig &config)
{
    // 1. What the post-processor puts before the text.
    PostProcessorBos post;
    if (const auto it = root.find("post_processor"); it != root.end())
        readPostProcessor(ctx, *it, "post_processor", post);
    if (!post.appended.empty()) {
        std::string list;
        for (const auto &a : post.appended)
            list += (list.empty() ? "" : ", ") + a;
        m_notes.push_back(m_path + ": the post_processor appends " + list + " after the text; evaluation scores the text's own ids and appends nothing");
    }

    // 2. tokenizer_config.json: transformers rebuilds the template from add_bos_token when it is given.
    const std::optional<bool> configAddBos = config.addBos;
    const std::string &configBos = config.bosToken;
    const std::string &configPath = config.path;

    if (post.bos) {
        m_bosId = post.bos;
        m_bosToken = post.token;
        m_bosSource = "BOS " + post.token + " = " + std::to_string(*post.bos) + " from the post_processor";
    } else if (!configBos.empty()) {
        const auto id = tokenId(configBos);
        if (!id)
            throw ConfigError(configPath + ": bos_token \"" + configBos + "\" is not in the vocabulary of " + m_path);
        m_bosId = id;
        m_bosToken = configBos;
        m_bosSource = "BOS " + configBos + " = " + std::to_string(*id) + " from tokenizer_config.json bos_token";
    } else {
        m_bosSource = configPath.empty() ? "no post_processor template and no tokenizer_config.json"
                                         : "no post_processor template and no bos_token in tokenizer_config.json";
    }
    if (configAddBos) {
        m_autoAddBos = *configAddBos;
        m_autoReason = std::string("tokenizer_config.json add_bos_token = ") + (*configAddBos ? "true" : "false");
        m_autoError.clear();
    } else {
        m_autoAddBos = post.bos.has_value();
        m_autoReason = post.reason;
    }
}

void HfTokenizer::readPostProcessor(const JsonContext &ctx, const nlohmann::json &p, const std::string &path, PostProcessorBos &post)
{
    if (p.is_null())
        return;
    const std::string type = ctx.type(p, path);
    if (type == "ByteLevel") {
        if (!post.bos)
            post.reason = "post_processor ByteLevel adds no special tokens";
    } else if (type == "TemplateProcessing") {
        readTemplateProcessing(ctx, p, path, post);
    } else if (type == "RobertaProcessing" || type == "BertProcessing") {
        const auto &cls = ctx.require(p, path, "cls");
        if (!cls.is_array() || cls.size() != 2 || !cls[0].is_string() || !cls[1].is_number_unsigned())
            ctx.fail(path + ".cls", "expected [\"token\", id]");
        if (!post.bos) {
            post.bos = cls[1].get<std::uint32_t>();
            post.token = cls[0].get<std::string>();
            post.reason = "post_processor " + type + " puts " + post.token + " before the text";
        }
        if (p.contains("sep") && p["sep"].is_array() && !p["sep"].empty() && p["sep"][0].is_string())
            post.appended.push_back(p["sep"][0].get<std::string>());
    } else if (type == "Sequence") {
        const auto &list = ctx.require(p, path, "processors");
        if (!list.is_array())
            ctx.fail(path + ".processors", "expected an array");
        for (std::size_t i = 0; i < list.size(); ++i)
            readPostProcessor(ctx, list[i], path + ".processors[" + std::to_string(i) + "]", post);
    } else {
        m_autoError = "post_processor type \"" + type + "\" is not understood (known: TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence)";
    }
}

void HfTokenizer::readTemplateProcessing(const JsonContext &ctx, const nlohmann::json &p, const std::string &path, PostProcessorBos &post)
{
    const auto &single = ctx.require(p, path, "single");
    const auto &specials = p.contains("special_tokens") ? p["special_tokens"] : nlohmann::json::object();
    if (!single.is_array())
        ctx.fail(path + ".single", "expected an array");
    bool seenSequence = false;
    std::vector<std::pair<std::uint32_t, std::string>> before;
    for (std::size_t i = 0; i < single.size(); ++i) {
        const std::string where = path + ".single[" + std::to_string(i) + "]";
        const auto &item = single[i];
        if (item.contains("Sequence")) {
            seenSequence = true;
            continue;
        }
        if (!item.contains("SpecialToken"))
            ctx.fail(where, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
        const std::string name = ctx.string(item["SpecialToken"], where + ".SpecialToken", "id");
        for (const auto id : specialTokenIds(ctx, specials, name, where, path)) {
            if (seenSequence)
                post.appended.push_back(name);
            else
                before.emplace_back(id, name);
        }
    }
    if (before.size() > 1)
        ctx.fail(path + ".single", std::to_string(before.size()) + " special tokens come before the text; only one (a BOS) is supported");
    if (!before.empty() && !post.bos) {
        post.bos = before.front().first;
        post.token = before.front().second;
        post.reason = "post_processor TemplateProcessing puts " + post.token + " before the text";
    } else if (!post.bos) {
        post.reason = "post_processor TemplateProcessing puts nothing before the text";
    }
}

std::vector<std::uint32_t> HfTokenizer::specialTokenIds(const JsonContext &ctx, const nlohmann::json &specials, const std::string &name,
                                                        const std::string &where, const std::string &path) const
{
    // The template's special_tokens entry names its ids; without one, the vocabulary's token.
    std::vector<std::uint32_t> ids;
    if (specials.contains(name) && specials[name].contains("ids") && specials[name]["ids"].is_array()) {
        for (const auto &v : specials[name]["ids"])
            if (v.is_number_unsigned())
                ids.push_back(v.get<std::uint32_t>());
    } else if (const auto id = tokenId(name)) {
        ids.push_back(*id);
    } else {
        ctx.fail(where + ".SpecialToken.id", "\"" + name + "\" is neither in " + path + ".special_tokens nor in the vocabulary");
    }
    return ids;
}

// ---------------------------------------------------------------------------------------------
// Encode / decode
// ---------------------------------------------------------------------------------------------

void HfTokenizer::encode(std::string_view text, std::vector<std::uint32_t> &out)
{
    if (const auto bad = findInvalidUtf8(text))
        throw IoError("invalid UTF-8 at byte offset " + std::to_string(*bad)
                      + "; tokenizers take UTF-8 text (convert it, e.g. iconv -f LATIN1 -t UTF-8)");
    m_rawTokens.split(
        text,
        [&](std::size_t start, std::size_t end) {
            const std::string_view piece = text.substr(start, end - start);
            if (!m_normalizer) {
                encodeNormalizedPiece(piece, start == 0, out);
                return;
            }
            std::string normalized(piece);
            m_normalizer->normalize(normalized);
            encodeNormalizedPiece(normalized, start == 0, out);
        },
        [&](std::uint32_t id) { out.push_back(id); });
}

void HfTokenizer::encodeNormalizedPiece(std::string_view text, bool atStart, std::vector<std::uint32_t> &out)
{
    auto toModel = [&](Piece word) { m_model->tokenize(word.text, out); };
    m_normalizedTokens.split(
        text,
        [&](std::size_t start, std::size_t end) {
            const Piece piece{text.substr(start, end - start), atStart && start == 0};
            if (m_preTokenizer)
                m_preTokenizer->run(piece, toModel);
            else
                toModel(piece);
        },
        [&](std::uint32_t id) { out.push_back(id); });
}

std::string HfTokenizer::decode(std::span<const std::uint32_t> ids) const
{
    if (!m_decoderUnsupported.empty())
        throw ConfigError(m_path + ": " + m_decoderUnsupported + "; this tokenizer can encode but not decode");
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::uint32_t id = ids[i];
        if (const auto it = m_addedText.find(id); it != m_addedText.end()) {
            tokens.push_back(it->second);
        } else if (const std::string *t = m_model->tokenText(id)) {
            tokens.push_back(*t);
        } else {
            throw IoError("id " + std::to_string(id) + " at position " + std::to_string(i) + " is not in the vocabulary of " + m_path
                          + " (ids 0.." + std::to_string(vocabSize() - 1) + ")");
        }
    }
    std::string out;
    if (!m_decoder) {
        // The crate joins undecoded tokens with spaces.
        for (std::size_t i = 0; i < tokens.size(); ++i)
            out += (i ? " " : "") + tokens[i];
        return out;
    }
    m_decoder->decode(tokens);
    for (const auto &t : tokens)
        out += t;
    return out;
}

std::int64_t HfTokenizer::vocabSize() const
{
    return std::int64_t{std::max(m_model->maxId(), m_maxAddedId.value_or(0))} + 1;
}

std::optional<std::uint32_t> HfTokenizer::tokenId(std::string_view token) const
{
    if (const auto it = m_addedIds.find(token); it != m_addedIds.end())
        return it->second;
    return m_model->tokenId(token);
}

} // namespace cppl::agent::hf
