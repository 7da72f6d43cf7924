// SPDX-License-Identifier: MIT
// Small hand-made tokenizer.json files for the tokenizer tests. Every expected id list in the tests
// is derived by hand from these vocabularies and merge ranks (the derivations are in the rows'
// comments); tst_tokenizer_reference also runs them through the Rust `tokenizers` crate.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace fixtures {

inline nlohmann::json vocabOf(const std::vector<std::string> &tokens)
{
    nlohmann::json v = nlohmann::json::object();
    for (std::size_t i = 0; i < tokens.size(); ++i)
        v[tokens[i]] = i;
    return v;
}

inline nlohmann::json bpe(const std::vector<std::string> &vocab, const std::vector<std::string> &merges, bool ignoreMerges = false)
{
    return {{"type", "BPE"},           {"dropout", nullptr},      {"unk_token", nullptr},   {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", ignoreMerges},
            {"vocab", vocabOf(vocab)}, {"merges", merges}};
}

inline nlohmann::json tokenizerJson(nlohmann::json model, nlohmann::json normalizer, nlohmann::json preTokenizer, nlohmann::json decoder,
                                    nlohmann::json addedTokens = nlohmann::json::array(), nlohmann::json postProcessor = nullptr)
{
    return {{"version", "1.0"},       {"truncation", nullptr},    {"padding", nullptr},
            {"added_tokens", addedTokens}, {"normalizer", normalizer}, {"pre_tokenizer", preTokenizer},
            {"post_processor", postProcessor}, {"decoder", decoder}, {"model", model}};
}

inline nlohmann::json addedToken(int id, const std::string &content, bool special, bool normalized, bool lstrip = false, bool rstrip = false)
{
    return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", lstrip},
            {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

inline const char *kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// Byte-level vocabulary shared by the Llama-3-style and GPT-2-style fixtures (Ġ = space, Ċ = \n).
inline const std::vector<std::string> kByteLevelVocab = {
    "I", "'", "M", "Ġ", "1", "2", "3", "4", "5", "o",       //  0.. 9
    "k", "Ċ", "X", "34", "12", "123", "45", "'M", "Ġo", "Ġok", // 10..19
    "ĊĊ", "h", "e", "l", "he", "ll", "hello"};                 // 20..26
/// Ranks 0..9. "3 4" outranks "12 3": a digit run split wrongly would show.
inline const std::vector<std::string> kByteLevelMerges = {"3 4", "1 2", "12 3", "4 5", "' M", "Ġ o", "Ġo k", "Ċ Ċ", "h e", "l l"};

inline nlohmann::json byteLevelDecoder()
{
    return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
}

/// Llama 3: Split (the \p{N}{1,3} regex, Isolated) then ByteLevel without its own regex.
inline nlohmann::json llama3Style(bool ignoreMerges)
{
    nlohmann::json pre = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
    return tokenizerJson(bpe(kByteLevelVocab, kByteLevelMerges, ignoreMerges), nullptr, pre, byteLevelDecoder());
}

/// GPT-2: ByteLevel with its built-in regex.
inline nlohmann::json gpt2Style()
{
    nlohmann::json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    return tokenizerJson(bpe(kByteLevelVocab, kByteLevelMerges), nullptr, pre, byteLevelDecoder());
}

/// Added tokens on a byte-level model without merges: a=0 b=1 Ġ=2 x=3 y=4, added <|eot|>=5,
/// <mask>=6 (lstrip, rstrip), [x]=7 (normalized), <keep>=8. The normalizer turns "Q" into "[x]", so
/// the normalized added token "[x]" also matches a "Q". @p firstId other than 5 leaves a gap that
/// Hugging Face closes: it numbers added tokens that the model lacks from the vocabulary's size on.
inline nlohmann::json addedTokens(int firstId = 5)
{
    nlohmann::json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    nlohmann::json normalizer = {{"type", "Replace"}, {"pattern", {{"String", "Q"}}}, {"content", "[x]"}};
    nlohmann::json added = nlohmann::json::array({addedToken(firstId, "<|eot|>", true, false), addedToken(firstId + 1, "<mask>", true, false, true, true),
                                                  addedToken(firstId + 2, "[x]", false, true), addedToken(firstId + 3, "<keep>", true, false)});
    return tokenizerJson(bpe({"a", "b", "Ġ", "x", "y"}, {}), normalizer, pre, byteLevelDecoder(), added);
}

/// SentencePiece-style BPE (Llama 2 / TinyLlama): 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>,
/// then pieces 259.. and ten merges building "▁hello" (271) and "▁world" (276).
inline std::vector<std::string> sentencePieceVocab()
{
    std::vector<std::string> v = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.emplace_back(name);
    }
    for (const char *t : {"▁", "h", "e", "l", "o", "w", "r", "d", "▁h", "el", "▁hel", "lo", "▁hello", "▁w", "or", "▁wor", "ld", "▁world"})
        v.emplace_back(t);
    return v;
}

/// @p legacy: normalizer Prepend("▁") + Replace(" ", "▁") and no pre-tokenizer (as Llama 2's file);
/// otherwise Metaspace(prepend_scheme "first", split false) as files saved by newer transformers.
inline nlohmann::json sentencePieceStyle(bool legacy)
{
    nlohmann::json model = bpe(sentencePieceVocab(), {"▁ h", "e l", "▁h el", "l o", "▁hel lo", "▁ w", "o r", "▁w or", "l d", "▁wor ld"});
    model["byte_fallback"] = true;
    model["fuse_unk"] = true;
    model["unk_token"] = "<unk>";
    nlohmann::json added = nlohmann::json::array({addedToken(0, "<unk>", true, false), addedToken(1, "<s>", true, false), addedToken(2, "</s>", true, false)});
    nlohmann::json post = {{"type", "TemplateProcessing"},
                           {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                           {"pair", nlohmann::json::array()},
                           {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
    if (legacy) {
        nlohmann::json normalizer = {{"type", "Sequence"},
                                     {"normalizers",
                                      {{{"type", "Prepend"}, {"prepend", "▁"}},
                                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
        nlohmann::json decoder = {{"type", "Sequence"},
                                  {"decoders",
                                   {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                                    {{"type", "ByteFallback"}},
                                    {{"type", "Fuse"}},
                                    {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
        return tokenizerJson(model, normalizer, nullptr, decoder, added, post);
    }
    nlohmann::json pre = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
    nlohmann::json decoder = {{"type", "Sequence"},
                              {"decoders",
                               {{{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}}}}};
    return tokenizerJson(model, nullptr, pre, decoder, added, post);
}

/// A character-level BPE without byte fallback: <unk>=0 h=1 e=2, no pre-tokenizer, no merges.
inline nlohmann::json unknownCharacters(bool fuseUnk)
{
    nlohmann::json model = bpe({"<unk>", "h", "e"}, {});
    model["unk_token"] = "<unk>";
    model["fuse_unk"] = fuseUnk;
    return tokenizerJson(model, nullptr, nullptr, nullptr);
}

inline nlohmann::json byName(const std::string &name)
{
    if (name == "unk fused")
        return unknownCharacters(true);
    if (name == "unk")
        return unknownCharacters(false);
    if (name == "llama3")
        return llama3Style(false);
    if (name == "llama3 ignore_merges")
        return llama3Style(true);
    if (name == "gpt2")
        return gpt2Style();
    if (name == "added")
        return addedTokens();
    if (name == "added, ids 10..13 in the file")
        return addedTokens(10);
    if (name == "spm legacy")
        return sentencePieceStyle(true);
    return sentencePieceStyle(false); // "spm metaspace"
}

struct EncodeRow
{
    const char *name;
    const char *fixture; ///< a byName() name
    std::string text;
    std::vector<int> expected;
};

/// Every expected list is derived by hand from the fixture's vocabulary and merge ranks.
inline const std::vector<EncodeRow> &encodeRows()
{
    static const std::vector<EncodeRow> rows = {
        // Llama-3 regex: I | 'M (case-insensitive contraction) | " " (a space before a digit stands
        // alone) | 123 | 45 (digits in threes) | " ok" | "\n\n" | X. BPE: 'M by "' M" (17);
        // 123 by "1 2" then "12 3" (15); 45 (16); Ġok by "Ġ o", "Ġo k" (19); ĊĊ (20).
        {"Llama 3 Split: 'M in any case, digits in threes, newline run", "llama3", "I'M 12345 ok\n\nX", {0, 17, 3, 15, 16, 19, 20, 12}},
        // GPT-2 regex: I | ' | M | " 12345" | " ok" | \n | \n | X. " 12345": "3 4" (rank 0) first
        // -> Ġ 1 2 34 5, then "1 2" -> Ġ 12 34 5; "12 3" and "4 5" no longer apply.
        {"GPT-2 ByteLevel regex on the same text", "gpt2", "I'M 12345 ok\n\nX", {0, 1, 2, 3, 14, 13, 8, 19, 11, 11, 12}},
        // "hello" (26) is in the vocab but no merge builds it: ignore_merges takes it whole...
        {"ignore_merges: a word in the vocab is taken whole", "llama3 ignore_merges", "hello", {26}},
        // ...without it, "h e" -> he (24), "l l" -> ll (25), o (9).
        {"without ignore_merges the same word is merged", "llama3", "hello", {24, 25, 9}},
        // a b | <|eot|> (5) | b a; no merges in this vocab.
        {"special token cut out of the text", "added", "ab<|eot|>ba", {0, 1, 5, 1, 0}},
        // lstrip takes the "  " before <mask>, rstrip the "  " after: a | 6 | b.
        {"lstrip/rstrip swallow the spaces around <mask>", "added", "a  <mask>  b", {0, 6, 1}},
        // <keep> strips nothing: "a " -> a, Ġ ; " b" -> Ġ b.
        {"without lstrip/rstrip the spaces stay", "added", "a <keep> b", {0, 2, 8, 2, 1}},
        // The normalizer turns Q into [x]; the normalized added token [x] (7) then matches it.
        {"normalized added token matches after the normalizer", "added", "aQb", {0, 7, 1}},
        {"added token inside a word", "added", "x<|eot|>y", {3, 5, 4}},
        // The file says 10..13, but the model has 5 entries: Hugging Face numbers them 5..8.
        {"added token ids as Hugging Face assigns them", "added, ids 10..13 in the file", "a<mask>b<keep>", {0, 6, 1, 8}},
        // Prepend + Replace: "▁hello▁world", one word; ranks 0..9 build ▁hello (271), ▁world (276).
        {"SentencePiece legacy normalizer: one word, merged", "spm legacy", "hello world", {271, 276}},
        {"SentencePiece Metaspace first: prepended at the start", "spm metaspace", "hello world", {271, 276}},
        // "▁hi€": ▁ h -> ▁h (267); i and € are no pieces: 0x69 -> 3 + 0x69 = 108; E2 82 AC -> 229 133 175.
        {"byte_fallback: unknown characters become <0xXX>", "spm legacy", "hi\xE2\x82\xAC", {267, 108, 229, 133, 175}},
        // <s> (1) is cut out first; Prepend applies to the piece after it as well: ▁hello (271).
        {"legacy Prepend also after a special token", "spm legacy", "<s>hello", {1, 271}},
        // prepend_scheme first: the piece after <s> does not start the text, so no ▁: h el lo.
        {"Metaspace first: nothing prepended after a special token", "spm metaspace", "<s>hello", {1, 260, 268, 270}},
        // "  " -> Prepend -> "▁  " -> Replace -> "▁▁▁"; no merge joins ▁ ▁.
        {"spaces only", "spm legacy", "  ", {259, 259, 259}},
        {"empty text", "gpt2", "", {}},
        // "?" and "\xC3\xA9" have no piece and there is no byte fallback: <unk> (0), one for the run...
        {"fuse_unk: a run of unknown characters is one <unk>", "unk fused", "h?\xC3\xA9" "e", {1, 0, 2}},
        // ...or one per character.
        {"without fuse_unk: one <unk> per character", "unk", "h?\xC3\xA9" "e", {1, 0, 0, 2}},
        // No unk_token, no byte fallback: "z" (not in the tiny byte-level vocab) is dropped, as the crate does.
        {"characters without any token are dropped", "gpt2", "Iz", {0}},
    };
    return rows;
}

} // namespace fixtures
