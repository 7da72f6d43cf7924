// SPDX-License-Identifier: MIT
#include "tokenizer.h"

#include "hf_tokenizer.h"
#include "sentencepiece_tokenizer.h"
#include "tokenizer_config.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cppl::agent {

namespace fs = std::filesystem;

std::optional<BosMode> parseBosMode(std::string_view text)
{
    if (text == "auto")
        return BosMode::Auto;
    if (text == "always")
        return BosMode::Always;
    if (text == "never")
        return BosMode::Never;
    return std::nullopt;
}

std::string_view bosModeName(BosMode mode)
{
    switch (mode) {
    case BosMode::Auto:
        return "auto";
    case BosMode::Always:
        return "always";
    case BosMode::Never:
        return "never";
    }
    return "auto";
}

Tokenizer::~Tokenizer() = default;

std::vector<std::uint32_t> Tokenizer::encode(std::string_view text)
{
    std::vector<std::uint32_t> ids;
    encode(text, ids);
    return ids;
}

BosDecision Tokenizer::bosDecision(BosMode mode) const
{
    BosDecision d;
    d.mode = mode;
    const auto noBos = [&](const std::string &why) {
        throw ConfigError(m_path + ": " + why + ", but the tokenizer names no BOS token (" + m_bosSource
                          + "); use --bos never, or a tokenizer_config.json with bos_token next to it");
    };
    switch (mode) {
    case BosMode::Never:
        d.reason = "--bos never";
        return d;
    case BosMode::Always:
        if (!m_bosId)
            noBos("--bos always");
        d.add = true;
        d.reason = "--bos always (" + m_bosSource + ")";
        break;
    case BosMode::Auto:
        if (!m_autoError.empty())
            throw ConfigError(m_path + ": --bos auto cannot decide: " + m_autoError + "; say --bos always or --bos never");
        if (!m_autoAddBos) {
            d.reason = "--bos auto: " + m_autoReason;
            return d;
        }
        if (!m_bosId)
            noBos("--bos auto adds BOS (" + m_autoReason + ")");
        d.add = true;
        d.reason = "--bos auto: " + m_autoReason;
        break;
    }
    d.id = *m_bosId;
    d.token = m_bosToken;
    return d;
}

std::optional<std::size_t> findInvalidUtf8(std::string_view text)
{
    const auto *s = reinterpret_cast<const unsigned char *>(text.data());
    const std::size_t n = text.size();
    std::size_t i = 0;
    while (i < n) {
        // ASCII runs dominate real text: skip them eight bytes at a time.
        while (i + 8 <= n) {
            std::uint64_t word;
            std::memcpy(&word, s + i, 8);
            if (word & 0x8080808080808080ULL)
                break;
            i += 8;
        }
        if (i >= n)
            break;
        const unsigned c = s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        unsigned lo = 0x80;
        unsigned hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0)
                lo = 0xA0; // overlong
            if (c == 0xED)
                hi = 0x9F; // surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0)
                lo = 0x90; // overlong
            if (c == 0xF4)
                hi = 0x8F; // above U+10FFFF
        } else {
            return i;
        }
        if (i + len > n)
            return i;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (std::size_t k = 2; k < len; ++k)
            if ((s[i + k] & 0xC0) != 0x80)
                return i;
        i += len;
    }
    return std::nullopt;
}

TokenizerConfig readTokenizerConfig(const std::string &directory)
{
    TokenizerConfig config;
    std::error_code ec;
    const fs::path file = fs::path(directory) / "tokenizer_config.json";
    if (!fs::exists(file, ec))
        return config;
    config.path = file.string();
    std::ifstream in(file);
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception &e) {
        throw IoError(config.path + ": not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!j.is_object())
        return config;
    if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean())
        config.addBos = j["add_bos_token"].get<bool>();
    if (j.contains("bos_token")) {
        const auto &b = j["bos_token"];
        if (b.is_string())
            config.bosToken = b.get<std::string>();
        else if (b.is_object() && b.contains("content") && b["content"].is_string())
            config.bosToken = b["content"].get<std::string>();
    }
    return config;
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path)
{
    std::error_code ec;
    fs::path file = path;
    if (fs::is_directory(file, ec)) {
        // tokenizer.json first: it needs no shim, and transformers writes it next to tokenizer.model.
        if (fs::exists(file / "tokenizer.json", ec))
            file /= "tokenizer.json";
        else if (fs::exists(file / "tokenizer.model", ec))
            file /= "tokenizer.model";
        else
            throw IoError(path + ": the directory has no tokenizer.json (nor a SentencePiece tokenizer.model); give --tokenizer a "
                                 "tokenizer.json, a tokenizer.model or a model directory holding one");
    } else if (!fs::exists(file, ec)) {
        throw IoError(path + ": no such file or directory; --tokenizer takes a tokenizer.json, a SentencePiece tokenizer.model or a "
                             "model directory holding one");
    }
    const std::string name = file.string();
    if (file.extension() == ".model")
        return std::make_unique<SentencePieceTokenizer>(name, readTokenizerConfig(file.parent_path().string()));
    std::ifstream in(file, std::ios::binary);
    if (!in)
        throw IoError(name + ": cannot open (is it readable?)");
    std::stringstream buffer;
    buffer << in.rdbuf();
    return fromJson(buffer.str(), name, readTokenizerConfig(file.parent_path().string()));
}

std::unique_ptr<Tokenizer> Tokenizer::fromJson(std::string_view content, const std::string &name, const TokenizerConfig &config)
{
    nlohmann::json root;
    try {
        root = nlohmann::json::parse(content.begin(), content.end());
    } catch (const nlohmann::json::exception &e) {
        throw IoError(name + ": not valid JSON (" + std::string(e.what()) + "); is it a Hugging Face tokenizer.json?");
    }
    if (!root.is_object())
        throw IoError(name + ": expected a JSON object at the top level (a Hugging Face tokenizer.json), found " + std::string(root.type_name()));
    try {
        return std::make_unique<hf::HfTokenizer>(name, root, config);
    } catch (const nlohmann::json::exception &e) {
        // The readers check each field's type; this keeps a field they missed a message, not a crash.
        throw ConfigError(name + ": a field has an unexpected type (" + std::string(e.what()) + ")");
    }
}

} // namespace cppl::agent
