// SPDX-License-Identifier: MIT
// Normalizers, pre-tokenizers and decoders of Hugging Face tokenizer.json, with the semantics of the
// Rust `tokenizers` crate (split behaviours, Oniguruma match iteration, empty pieces dropped).
#include "hf_pipeline.h"

#include "unicode_nfc.h"

#include "cppl/errors.h"

#include <optional>
#include <unordered_map>

namespace cppl::agent::hf {

// ---------------------------------------------------------------------------------------------
// JSON access with paths in every message
// ---------------------------------------------------------------------------------------------

void JsonContext::fail(const std::string &jsonPath, const std::string &what) const
{
    throw ConfigError(file + ": " + jsonPath + ": " + what);
}

const nlohmann::json &JsonContext::require(const nlohmann::json &object, const std::string &jsonPath, const char *key) const
{
    if (!object.is_object())
        fail(jsonPath, "expected an object, found " + std::string(object.type_name()));
    const auto it = object.find(key);
    if (it == object.end())
        fail(jsonPath, std::string("missing \"") + key + "\"");
    return *it;
}

std::string JsonContext::string(const nlohmann::json &object, const std::string &jsonPath, const char *key) const
{
    const auto &v = require(object, jsonPath, key);
    if (!v.is_string())
        fail(jsonPath + "." + key, "expected a string, found " + std::string(v.type_name()));
    return v.get<std::string>();
}

std::string JsonContext::optionalString(const nlohmann::json &object, const std::string &jsonPath, const char *key,
                                        const std::string &fallback) const
{
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        return fallback;
    if (!it->is_string())
        fail(jsonPath + "." + key, "expected a string, found " + std::string(it->type_name()));
    return it->get<std::string>();
}

bool JsonContext::boolean(const nlohmann::json &object, const std::string &jsonPath, const char *key, bool fallback) const
{
    const auto it = object.find(key);
    if (it == object.end() || it->is_null())
        return fallback;
    if (!it->is_boolean())
        fail(jsonPath + "." + key, "expected true or false, found " + std::string(it->type_name()));
    return it->get<bool>();
}

std::string JsonContext::type(const nlohmann::json &object, const std::string &jsonPath) const
{
    return string(object, jsonPath, "type");
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

const std::array<std::string, 256> &byteLevelChars()
{
    // GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the rest to U+0100...
    static const std::array<std::string, 256> table = [] {
        std::array<std::string, 256> t;
        auto utf8 = [](unsigned cp) {
            std::string s;
            if (cp < 0x80) {
                s += static_cast<char>(cp);
            } else {
                s += static_cast<char>(0xC0 | (cp >> 6));
                s += static_cast<char>(0x80 | (cp & 0x3F));
            }
            return s;
        };
        unsigned n = 0;
        for (unsigned b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            t[b] = utf8(printable ? b : 256 + n++);
        }
        return t;
    }();
    return table;
}

bool isWhiteSpaceAt(std::string_view text, std::size_t at, std::size_t *length)
{
    static thread_local const Pcre2Regex re(R"(\p{White_Space})", "built-in White_Space regex");
    const auto m = re.matchAt(text, at);
    if (!m)
        return false;
    if (length)
        *length = m->end - m->start;
    return true;
}

namespace {

struct Segment
{
    std::size_t start;
    std::size_t end;
    bool isMatch;
};

/// Applies a split behaviour to the segments a matcher produces, streaming (one segment of state).
/// `forEachMatch(text, f)` must call f(start, end) for each match left to right.
template<typename ForEachMatch, typename Emit>
void splitSegments(std::string_view text, ForEachMatch &&forEachMatch, SplitBehavior behavior, bool invert, Emit &&emit)
{
    std::optional<Segment> pending;
    bool previousMatch = false;
    auto flush = [&] {
        if (pending && pending->end > pending->start)
            emit(pending->start, pending->end);
        pending.reset();
    };
    auto feed = [&](Segment s) {
        if (invert)
            s.isMatch = !s.isMatch;
        switch (behavior) {
        case SplitBehavior::Isolated:
            if (s.end > s.start)
                emit(s.start, s.end);
            break;
        case SplitBehavior::Removed:
            if (!s.isMatch && s.end > s.start)
                emit(s.start, s.end);
            break;
        case SplitBehavior::Contiguous:
            if (pending && s.isMatch == previousMatch) {
                pending->end = s.end;
            } else {
                flush();
                pending = s;
            }
            break;
        case SplitBehavior::MergedWithPrevious:
            if (pending && s.isMatch && !previousMatch) {
                pending->end = s.end;
            } else {
                flush();
                pending = s;
            }
            break;
        case SplitBehavior::MergedWithNext:
            // The crate folds from the right: a match joins the piece after it when that is no match.
            if (pending && previousMatch && !s.isMatch) {
                pending->end = s.end;
                flush();
            } else {
                flush();
                pending = s;
            }
            break;
        }
        previousMatch = s.isMatch;
    };
    if (text.empty())
        return;
    std::size_t previous = 0;
    forEachMatch(text, [&](std::size_t start, std::size_t end) {
        if (previous != start)
            feed({previous, start, false});
        feed({start, end, true});
        previous = end;
    });
    if (previous != text.size())
        feed({previous, text.size(), false});
    flush();
}

struct RegexMatcher
{
    const Pcre2Regex &re;
    template<typename F>
    void operator()(std::string_view text, F &&f) const
    {
        re.forEachMatch(text, f);
    }
};

struct LiteralMatcher
{
    std::string_view literal;
    template<typename F>
    void operator()(std::string_view text, F &&f) const
    {
        for (std::size_t at = text.find(literal); at != std::string_view::npos; at = text.find(literal, at + literal.size()))
            f(at, at + literal.size());
    }
};

/// `{"String": "..."}` (a literal) or `{"Regex": "..."}` (Oniguruma syntax, compiled by PCRE2).
struct Pattern
{
    std::string literal;
    std::optional<Pcre2Regex> regex;

    template<typename F>
    void forEachMatch(std::string_view text, F &&f) const
    {
        if (regex)
            RegexMatcher{*regex}(text, f);
        else
            LiteralMatcher{literal}(text, f);
    }
};

Pattern readPattern(const JsonContext &ctx, const nlohmann::json &j, const std::string &path)
{
    const auto &p = ctx.require(j, path, "pattern");
    const std::string where = path + ".pattern";
    if (p.is_object() && p.size() == 1 && p.contains("String") && p["String"].is_string()) {
        Pattern out;
        out.literal = p["String"].get<std::string>();
        if (out.literal.empty())
            ctx.fail(where + ".String", "an empty pattern matches everywhere; give at least one character");
        return out;
    }
    if (p.is_object() && p.size() == 1 && p.contains("Regex") && p["Regex"].is_string()) {
        Pattern out;
        out.regex.emplace(p["Regex"].get<std::string>(), ctx.file + ": " + where + ".Regex");
        return out;
    }
    ctx.fail(where, "expected {\"String\": \"...\"} or {\"Regex\": \"...\"}, found " + p.dump());
}

std::string replaceAll(std::string_view text, const Pattern &pattern, std::string_view content)
{
    std::string out;
    out.reserve(text.size());
    std::size_t previous = 0;
    pattern.forEachMatch(text, [&](std::size_t start, std::size_t end) {
        out.append(text.substr(previous, start - previous));
        out.append(content);
        previous = end;
    });
    out.append(text.substr(previous));
    return out;
}

std::string readChar(const JsonContext &ctx, const nlohmann::json &j, const std::string &path, const char *key)
{
    const std::string c = ctx.string(j, path, key);
    if (c.empty() || findFirstCharEnd(c) != c.size())
        ctx.fail(path + "." + key, "expected exactly one character, found \"" + c + "\"");
    return c;
}

// ---------------------------------------------------------------------------------------------
// Normalizers
// ---------------------------------------------------------------------------------------------

class PrependNormalizer : public Normalizer
{
public:
    explicit PrependNormalizer(std::string prefix) : m_prefix(std::move(prefix)) {}
    void normalize(std::string &text) const override
    {
        if (!text.empty())
            text.insert(0, m_prefix);
    }

private:
    std::string m_prefix;
};

class ReplaceNormalizer : public Normalizer
{
public:
    ReplaceNormalizer(Pattern pattern, std::string content) : m_pattern(std::move(pattern)), m_content(std::move(content)) {}
    void normalize(std::string &text) const override { text = replaceAll(text, m_pattern, m_content); }

private:
    Pattern m_pattern;
    std::string m_content;
};

// Qwen2/Qwen3: Unicode NFC (unicode_nfc.h).
class NfcNormalizer : public Normalizer
{
public:
    void normalize(std::string &text) const override { text = unicodeNfc(text); }
};

class SequenceNormalizer : public Normalizer
{
public:
    explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> stages) : m_stages(std::move(stages)) {}
    void normalize(std::string &text) const override
    {
        for (const auto &s : m_stages)
            s->normalize(text);
    }

private:
    std::vector<std::unique_ptr<Normalizer>> m_stages;
};

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers
// ---------------------------------------------------------------------------------------------

class ByteLevelPreTokenizer : public PreTokenizer
{
public:
    ByteLevelPreTokenizer(bool addPrefixSpace, bool useRegex) : m_addPrefixSpace(addPrefixSpace)
    {
        if (useRegex)
            m_regex.emplace(kGpt2Pattern, "built-in GPT-2 ByteLevel regex");
    }

    void run(Piece piece, PieceSink sink) override
    {
        std::string_view text = piece.text;
        if (m_addPrefixSpace && !text.starts_with(' ')) {
            m_prefixed.assign(1, ' ');
            m_prefixed.append(text);
            text = m_prefixed;
        }
        const auto &chars = byteLevelChars();
        auto emitMapped = [&](std::size_t start, std::size_t end) {
            m_mapped.resize(2 * (end - start));
            char *out = m_mapped.data();
            for (std::size_t i = start; i < end; ++i) {
                const std::string &c = chars[static_cast<unsigned char>(text[i])];
                *out++ = c[0];
                if (c.size() == 2)
                    *out++ = c[1];
            }
            sink(Piece{std::string_view(m_mapped.data(), static_cast<std::size_t>(out - m_mapped.data())), piece.atStart && start == 0});
        };
        if (m_regex)
            splitSegments(text, RegexMatcher{*m_regex}, SplitBehavior::Isolated, false, emitMapped);
        else if (!text.empty())
            emitMapped(0, text.size());
    }

private:
    bool m_addPrefixSpace;
    std::optional<Pcre2Regex> m_regex;
    std::string m_prefixed;
    std::string m_mapped;
};

class SplitPreTokenizer : public PreTokenizer
{
public:
    SplitPreTokenizer(Pattern pattern, SplitBehavior behavior, bool invert)
        : m_pattern(std::move(pattern)), m_behavior(behavior), m_invert(invert)
    {
    }
    void run(Piece piece, PieceSink sink) override
    {
        auto matcher = [this](std::string_view text, auto &&f) { m_pattern.forEachMatch(text, f); };
        splitSegments(piece.text, matcher, m_behavior, m_invert, [&](std::size_t start, std::size_t end) {
            sink(Piece{piece.text.substr(start, end - start), piece.atStart && start == 0});
        });
    }

private:
    Pattern m_pattern;
    SplitBehavior m_behavior;
    bool m_invert;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer : public PreTokenizer
{
public:
    MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
        : m_replacement(std::move(replacement)), m_scheme(scheme), m_split(split)
    {
    }
    void run(Piece piece, PieceSink sink) override
    {
        m_buffer.clear();
        for (const char c : piece.text) {
            if (c == ' ')
                m_buffer += m_replacement;
            else
                m_buffer += c;
        }
        const bool prepend = m_scheme == PrependScheme::Always || (m_scheme == PrependScheme::First && piece.atStart);
        if (prepend && !std::string_view(m_buffer).starts_with(m_replacement))
            m_buffer.insert(0, m_replacement);
        const std::string_view text = m_buffer;
        if (!m_split) {
            if (!text.empty())
                sink(Piece{text, piece.atStart});
            return;
        }
        splitSegments(text, LiteralMatcher{m_replacement}, SplitBehavior::MergedWithNext, false,
                      [&](std::size_t start, std::size_t end) { sink(Piece{text.substr(start, end - start), piece.atStart && start == 0}); });
    }

private:
    std::string m_replacement;
    PrependScheme m_scheme;
    bool m_split;
    std::string m_buffer;
};

class SequencePreTokenizer : public PreTokenizer
{
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> stages) : m_stages(std::move(stages)) {}
    void run(Piece piece, PieceSink sink) override { runFrom(0, piece, sink); }

private:
    void runFrom(std::size_t stage, Piece piece, PieceSink sink)
    {
        if (stage == m_stages.size()) {
            sink(piece);
            return;
        }
        auto next = [&](Piece sub) { runFrom(stage + 1, sub, sink); };
        m_stages[stage]->run(piece, next);
    }
    std::vector<std::unique_ptr<PreTokenizer>> m_stages;
};

std::optional<SplitBehavior> parseBehavior(const std::string &s)
{
    if (s == "Removed")
        return SplitBehavior::Removed;
    if (s == "Isolated")
        return SplitBehavior::Isolated;
    if (s == "MergedWithPrevious")
        return SplitBehavior::MergedWithPrevious;
    if (s == "MergedWithNext")
        return SplitBehavior::MergedWithNext;
    if (s == "Contiguous")
        return SplitBehavior::Contiguous;
    return std::nullopt;
}

PrependScheme readPrependScheme(const JsonContext &ctx, const nlohmann::json &j, const std::string &path)
{
    if (j.contains("prepend_scheme") && !j["prepend_scheme"].is_null()) {
        const std::string s = ctx.string(j, path, "prepend_scheme");
        if (s == "always")
            return PrependScheme::Always;
        if (s == "first")
            return PrependScheme::First;
        if (s == "never")
            return PrependScheme::Never;
        ctx.fail(path + ".prepend_scheme", "\"" + s + "\" is unknown (expected always, first or never)");
    }
    // Files written before prepend_scheme existed say add_prefix_space.
    return ctx.boolean(j, path, "add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
}

// ---------------------------------------------------------------------------------------------
// Decoders
// ---------------------------------------------------------------------------------------------

class ByteLevelDecoder : public Decoder
{
public:
    ByteLevelDecoder()
    {
        const auto &chars = byteLevelChars();
        for (unsigned b = 0; b < 256; ++b)
            m_reverse.emplace(chars[b], static_cast<char>(b));
    }
    void decode(std::vector<std::string> &tokens) const override
    {
        std::string bytes;
        for (const auto &t : tokens) {
            // A token with a character outside the table (an added token like "<|im_start|>\n" is
            // fine; one with a raw space is not) is copied as is, as the crate does.
            std::string mapped;
            bool ok = true;
            for (std::size_t i = 0; i < t.size();) {
                const std::size_t n = findFirstCharEnd(std::string_view(t).substr(i));
                const auto it = m_reverse.find(t.substr(i, n));
                if (it == m_reverse.end()) {
                    ok = false;
                    break;
                }
                mapped += it->second;
                i += n;
            }
            bytes += ok ? mapped : t;
        }
        tokens.assign(1, std::move(bytes));
    }

private:
    std::unordered_map<std::string, char> m_reverse;
};

class MetaspaceDecoder : public Decoder
{
public:
    MetaspaceDecoder(std::string replacement, bool dropFirst) : m_replacement(std::move(replacement)), m_dropFirst(dropFirst) {}
    void decode(std::vector<std::string> &tokens) const override
    {
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            std::string out;
            const std::string &t = tokens[i];
            for (std::size_t at = 0; at < t.size();) {
                if (std::string_view(t).substr(at).starts_with(m_replacement)) {
                    if (!(i == 0 && m_dropFirst))
                        out += ' ';
                    at += m_replacement.size();
                } else {
                    out += t[at++];
                }
            }
            tokens[i] = std::move(out);
        }
    }

private:
    std::string m_replacement;
    bool m_dropFirst;
};

class ReplaceDecoder : public Decoder
{
public:
    ReplaceDecoder(Pattern pattern, std::string content) : m_pattern(std::move(pattern)), m_content(std::move(content)) {}
    void decode(std::vector<std::string> &tokens) const override
    {
        for (auto &t : tokens)
            t = replaceAll(t, m_pattern, m_content);
    }

private:
    Pattern m_pattern;
    std::string m_content;
};

class ByteFallbackDecoder : public Decoder
{
public:
    void decode(std::vector<std::string> &tokens) const override
    {
        // The crate turns byte runs that are not valid UTF-8 into U+FFFD; bytes are kept here, so
        // decode() stays lossless.
        std::vector<std::string> out;
        std::string bytes;
        bool inBytes = false;
        for (auto &t : tokens) {
            unsigned value = 0;
            if (t.size() == 6 && t.starts_with("<0x") && t.back() == '>' && parseHexByte(t.substr(3, 2), value)) {
                bytes += static_cast<char>(value);
                inBytes = true;
                continue;
            }
            if (inBytes) {
                out.push_back(std::move(bytes));
                bytes.clear();
                inBytes = false;
            }
            out.push_back(std::move(t));
        }
        if (inBytes)
            out.push_back(std::move(bytes));
        tokens = std::move(out);
    }

private:
    static bool parseHexByte(std::string_view hex, unsigned &value)
    {
        value = 0;
        for (const char c : hex) {
            value <<= 4;
            if (c >= '0' && c <= '9')
                value |= static_cast<unsigned>(c - '0');
            else if (c >= 'A' && c <= 'F')
                value |= static_cast<unsigned>(c - 'A' + 10);
            else if (c >= 'a' && c <= 'f')
                value |= static_cast<unsigned>(c - 'a' + 10);
            else
                return false;
        }
        return true;
    }
};

class FuseDecoder : public Decoder
{
public:
    void decode(std::vector<std::string> &tokens) const override
    {
        std::string all;
        for (const auto &t : tokens)
            all += t;
        tokens.assign(1, std::move(all));
    }
};

class StripDecoder : public Decoder
{
public:
    StripDecoder(std::string content, std::size_t start, std::size_t stop) : m_content(std::move(content)), m_start(start), m_stop(stop) {}
    void decode(std::vector<std::string> &tokens) const override
    {
        for (auto &t : tokens) {
            std::string_view v = t;
            for (std::size_t i = 0; i < m_start && v.starts_with(m_content); ++i)
                v.remove_prefix(m_content.size());
            for (std::size_t i = 0; i < m_stop && v.ends_with(m_content); ++i)
                v.remove_suffix(m_content.size());
            t = std::string(v);
        }
    }

private:
    std::string m_content;
    std::size_t m_start;
    std::size_t m_stop;
};

class SequenceDecoder : public Decoder
{
public:
    explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> stages) : m_stages(std::move(stages)) {}
    void decode(std::vector<std::string> &tokens) const override
    {
        for (const auto &s : m_stages)
            s->decode(tokens);
    }

private:
    std::vector<std::unique_ptr<Decoder>> m_stages;
};

} // namespace

std::size_t findFirstCharEnd(std::string_view text)
{
    if (text.empty())
        return 0;
    const auto c = static_cast<unsigned char>(text[0]);
    const std::size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return n <= text.size() ? n : text.size();
}

std::unique_ptr<Normalizer> makeNormalizer(const JsonContext &ctx, const nlohmann::json &j, const std::string &path)
{
    if (j.is_null())
        return nullptr;
    const std::string type = ctx.type(j, path);
    if (type == "Prepend")
        return std::make_unique<PrependNormalizer>(ctx.string(j, path, "prepend"));
    if (type == "Replace")
        return std::make_unique<ReplaceNormalizer>(readPattern(ctx, j, path), ctx.string(j, path, "content"));
    if (type == "NFC")
        return std::make_unique<NfcNormalizer>();
    if (type == "Sequence") {
        const auto &list = ctx.require(j, path, "normalizers");
        if (!list.is_array())
            ctx.fail(path + ".normalizers", "expected an array");
        std::vector<std::unique_ptr<Normalizer>> stages;
        for (std::size_t i = 0; i < list.size(); ++i)
            if (auto n = makeNormalizer(ctx, list[i], path + ".normalizers[" + std::to_string(i) + "]"))
                stages.push_back(std::move(n));
        return std::make_unique<SequenceNormalizer>(std::move(stages));
    }
    ctx.fail(path + ".type", "normalizer \"" + type + "\" is not supported (supported: Prepend, Replace, NFC, Sequence, or null)");
}

std::unique_ptr<PreTokenizer> makePreTokenizer(const JsonContext &ctx, const nlohmann::json &j, const std::string &path)
{
    if (j.is_null())
        return nullptr;
    const std::string type = ctx.type(j, path);
    if (type == "ByteLevel")
        return std::make_unique<ByteLevelPreTokenizer>(ctx.boolean(j, path, "add_prefix_space", true),
                                                       ctx.boolean(j, path, "use_regex", true));
    if (type == "Split") {
        const std::string behaviorText = ctx.string(j, path, "behavior");
        const auto behavior = parseBehavior(behaviorText);
        if (!behavior)
            ctx.fail(path + ".behavior", "\"" + behaviorText
                                             + "\" is unknown (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
        return std::make_unique<SplitPreTokenizer>(readPattern(ctx, j, path), *behavior, ctx.boolean(j, path, "invert", false));
    }
    if (type == "Metaspace")
        return std::make_unique<MetaspacePreTokenizer>(readChar(ctx, j, path, "replacement"), readPrependScheme(ctx, j, path),
                                                       ctx.boolean(j, path, "split", true));
    if (type == "Digits") {
        Pattern digits;
        digits.regex.emplace(R"(\p{N})", "built-in Digits regex"); // char::is_numeric: Nd, Nl, No
        const bool individual = ctx.boolean(j, path, "individual_digits", false);
        return std::make_unique<SplitPreTokenizer>(std::move(digits), individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous,
                                                   false);
    }
    if (type == "Sequence") {
        const auto &list = ctx.require(j, path, "pretokenizers");
        if (!list.is_array())
            ctx.fail(path + ".pretokenizers", "expected an array");
        std::vector<std::unique_ptr<PreTokenizer>> stages;
        for (std::size_t i = 0; i < list.size(); ++i)
            if (auto p = makePreTokenizer(ctx, list[i], path + ".pretokenizers[" + std::to_string(i) + "]"))
                stages.push_back(std::move(p));
        return std::make_unique<SequencePreTokenizer>(std::move(stages));
    }
    ctx.fail(path + ".type", "pre-tokenizer \"" + type + "\" is not supported (supported: ByteLevel, Split, Metaspace, Digits, Sequence, or null)");
}

std::unique_ptr<Decoder> makeDecoder(const JsonContext &ctx, const nlohmann::json &j, const std::string &path, std::string &unsupported)
{
    if (j.is_null())
        return nullptr;
    const std::string type = ctx.type(j, path);
    if (type == "ByteLevel")
        return std::make_unique<ByteLevelDecoder>();
    if (type == "Metaspace")
        return std::make_unique<MetaspaceDecoder>(readChar(ctx, j, path, "replacement"), readPrependScheme(ctx, j, path) != PrependScheme::Never);
    if (type == "Replace")
        return std::make_unique<ReplaceDecoder>(readPattern(ctx, j, path), ctx.string(j, path, "content"));
    if (type == "ByteFallback")
        return std::make_unique<ByteFallbackDecoder>();
    if (type == "Fuse")
        return std::make_unique<FuseDecoder>();
    if (type == "Strip") {
        auto count = [&](const char *key) {
            const auto &v = ctx.require(j, path, key);
            if (!v.is_number_unsigned())
                ctx.fail(path + "." + key, "expected a non-negative integer");
            return v.get<std::size_t>();
        };
        return std::make_unique<StripDecoder>(readChar(ctx, j, path, "content"), count("start"), count("stop"));
    }
    if (type == "Sequence") {
        const auto &list = ctx.require(j, path, "decoders");
        if (!list.is_array())
            ctx.fail(path + ".decoders", "expected an array");
        std::vector<std::unique_ptr<Decoder>> stages;
        for (std::size_t i = 0; i < list.size(); ++i) {
            auto d = makeDecoder(ctx, list[i], path + ".decoders[" + std::to_string(i) + "]", unsupported);
            if (!unsupported.empty())
                return nullptr;
            if (d)
                stages.push_back(std::move(d));
        }
        return std::make_unique<SequenceDecoder>(std::move(stages));
    }
    unsupported = path + ".type: decoder \"" + type
                  + "\" is not supported (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence, or null)";
    return nullptr;
}

} // namespace cppl::agent::hf
