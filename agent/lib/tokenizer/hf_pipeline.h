// SPDX-License-Identifier: MIT
// The stages of a Hugging Face tokenizer.json pipeline (normalizers, pre-tokenizers, decoders),
// built from their JSON. Internal to the tokenizer: the public API is tokenizer.h.
#pragma once

#include "pcre2_regex.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent::hf {

/// Where a JSON value sits, for messages: "<file>: <json path>: <what>".
struct JsonContext
{
    std::string file;

    [[noreturn]] void fail(const std::string &jsonPath, const std::string &what) const;
    [[nodiscard]] const nlohmann::json &require(const nlohmann::json &object, const std::string &jsonPath, const char *key) const;
    [[nodiscard]] std::string string(const nlohmann::json &object, const std::string &jsonPath, const char *key) const;
    [[nodiscard]] std::string optionalString(const nlohmann::json &object, const std::string &jsonPath, const char *key,
                                             const std::string &fallback) const;
    [[nodiscard]] bool boolean(const nlohmann::json &object, const std::string &jsonPath, const char *key, bool fallback) const;
    [[nodiscard]] std::string type(const nlohmann::json &object, const std::string &jsonPath) const;
};

/// A piece of text on its way to the model. Views stay valid until the stage that made them returns.
struct Piece
{
    std::string_view text;
    bool atStart = false; ///< starts at offset 0 of the original text (Metaspace prepend_scheme "first")
};

/// A non-owning callback, cheaper than std::function on the per-word path.
class PieceSink
{
public:
    template<typename F>
    PieceSink(F &f) // NOLINT(google-explicit-constructor): stages pass lambdas
        : m_object(&f), m_call([](void *o, Piece p) { (*static_cast<F *>(o))(p); })
    {
    }
    void operator()(Piece p) const { m_call(m_object, p); }

private:
    void *m_object;
    void (*m_call)(void *, Piece);
};

class Normalizer
{
public:
    virtual ~Normalizer() = default;
    virtual void normalize(std::string &text) const = 0;
};

/// Splits one piece and hands each non-empty sub-piece to the sink. Stages own scratch buffers,
/// so they are not reentrant and not thread-safe.
class PreTokenizer
{
public:
    virtual ~PreTokenizer() = default;
    virtual void run(Piece piece, PieceSink sink) = 0;
};

/// Hugging Face decoders work on the list of token strings; here they are byte strings.
class Decoder
{
public:
    virtual ~Decoder() = default;
    virtual void decode(std::vector<std::string> &tokens) const = 0;
};

/// SplitDelimiterBehavior of the Rust crate.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// `nullptr` for JSON null. Throw ConfigError naming the JSON path and listing what is supported.
[[nodiscard]] std::unique_ptr<Normalizer> makeNormalizer(const JsonContext &ctx, const nlohmann::json &j, const std::string &path);
[[nodiscard]] std::unique_ptr<PreTokenizer> makePreTokenizer(const JsonContext &ctx, const nlohmann::json &j, const std::string &path);
/// Unsupported decoders are not an error at load time (evaluation never decodes): @p unsupported
/// receives their description and decode() refuses later.
[[nodiscard]] std::unique_ptr<Decoder> makeDecoder(const JsonContext &ctx, const nlohmann::json &j, const std::string &path,
                                                   std::string &unsupported);

/// GPT-2's byte <-> printable character table (bytes_to_unicode), as UTF-8 strings.
[[nodiscard]] const std::array<std::string, 256> &byteLevelChars();

/// The regex Hugging Face's ByteLevel pre-tokenizer uses when use_regex is true.
inline constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

/// Rust's char::is_whitespace (Unicode White_Space), as PCRE2 knows it.
[[nodiscard]] bool isWhiteSpaceAt(std::string_view text, std::size_t at, std::size_t *length = nullptr);

} // namespace cppl::agent::hf

namespace cppl::agent::hf {
/// Length in bytes of the first UTF-8 character of @p text (1 for a stray byte; 0 when empty).
[[nodiscard]] std::size_t findFirstCharEnd(std::string_view text);
} // namespace cppl::agent::hf
