// SPDX-License-Identifier: MIT
// libFuzzer target for Hugging Face tokenizer.json (agent/lib/tokenizer/hf_*, bpe_model.*,
// docs/fuzzing.md): any bytes are refused with IoError/ConfigError naming the JSON path, or give a
// tokenizer whose ids for sample text (and for the input's own first bytes, when UTF-8) are all
// below vocabSize() and decode without failing.
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "tokenizer/hf_tokenizer.h"

#include <nlohmann/json.hpp>

namespace {

constexpr std::string_view kSample = "Hello, world! It's 2026: 12345 tokens\n\n\tcaf\xC3\xA9  na\xC3\xAFve "
                                     "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80<|endoftext|> \xE2\x96\x81x";

void encodeChecked(cppl::agent::Tokenizer &tokenizer, std::string_view text)
{
    const auto ids = tokenizer.encode(text);
    for (const std::uint32_t id : ids)
        if (static_cast<std::int64_t>(id) >= tokenizer.vocabSize())
            cppl::fuzz::fail("encode() gave an id >= vocabSize()", std::to_string(id));
    (void)tokenizer.decode(ids);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    const std::string_view input = fuzz::asText(data, size);
    // Tokenizer::load() reads the file and parses it this way before building the tokenizer.
    const nlohmann::json root = nlohmann::json::parse(input, nullptr, false);
    if (root.is_discarded() || !root.is_object())
        return 0;
    try {
        agent::hf::HfTokenizer tokenizer("tokenizer.json", root, agent::TokenizerConfig{});
        if (tokenizer.vocabSize() < 0)
            fuzz::fail("a negative vocabSize()");
        encodeChecked(tokenizer, kSample);
        std::string_view head = input.substr(0, 64);
        if (const auto bad = agent::findInvalidUtf8(head))
            head = head.substr(0, *bad);
        encodeChecked(tokenizer, head);
        for (const auto mode : {agent::BosMode::Auto, agent::BosMode::Always, agent::BosMode::Never}) {
            try {
                const auto d = tokenizer.bosDecision(mode);
                if (d.add && static_cast<std::int64_t>(d.id) >= tokenizer.vocabSize())
                    fuzz::fail("the BOS id is >= vocabSize()", std::to_string(d.id));
            } catch (const ConfigError &) {
            }
        }
    } catch (const Error &e) {
        if (std::string_view(e.what()).empty())
            fuzz::fail("an empty error message");
    }
    return 0;
}
