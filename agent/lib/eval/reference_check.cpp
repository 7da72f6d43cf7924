// SPDX-License-Identifier: MIT
#include "reference_check.h"

#include "model/mapped_file.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

namespace cppl::agent {

namespace {

namespace fs = std::filesystem;

/// config.json as JSON, or null when there is none (a TorchScript file, a directory without one).
nlohmann::json configOf(const std::string &path)
{
    const fs::path config = fs::path(path) / "config.json";
    if (!fs::is_directory(path) || !fs::is_regular_file(config))
        return nullptr;
    std::ifstream in(config);
    try {
        return nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception &) {
        return nullptr; // the model's own loading names a broken config.json
    }
}

void compareIds(const std::string &modelPath, const std::string &referencePath)
{
    const nlohmann::json a = configOf(modelPath), b = configOf(referencePath);
    if (!a.is_object() || !b.is_object())
        return;
    for (const char *key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
        if (!a.contains(key) || !b.contains(key) || a[key].is_null() || b[key].is_null() || a[key] == b[key])
            continue;
        throw ConfigError("--reference-model " + referencePath + ": its config.json's " + key + " is " + b[key].dump() + ", the model's ("
                          + modelPath + ") is " + a[key].dump() + ": a reference must read the same tokens (the same tokenizer)");
    }
}

} // namespace

std::vector<std::string> checkSameTokenizer(const std::string &modelPath, std::int64_t modelVocab, const std::string &referencePath,
                                            std::int64_t referenceVocab)
{
    std::error_code ec;
    if (fs::equivalent(modelPath, referencePath, ec))
        return {};
    if (modelVocab != referenceVocab)
        throw ConfigError("--reference-model " + referencePath + ": its vocabulary has " + std::to_string(referenceVocab) + " tokens, the model's ("
                          + modelPath + ") " + std::to_string(modelVocab)
                          + ": a reference must read the same tokens (the same tokenizer), so that their distributions can be compared");
    compareIds(modelPath, referencePath);
    std::vector<std::string> notes;
    for (const char *file : {"tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt"}) {
        const fs::path a = fs::path(modelPath) / file, b = fs::path(referencePath) / file;
        const bool inA = fs::is_regular_file(a), inB = fs::is_regular_file(b);
        if (inA != inB) {
            notes.push_back(std::string(file) + " is in " + (inA ? modelPath : referencePath) + " only: not compared");
            continue;
        }
        if (inA && sha256File(a.string()) != sha256File(b.string()))
            throw ConfigError("--reference-model " + referencePath + ": its " + file + " differs from the model's (" + modelPath
                              + ") (SHA-256): a reference must read the same tokens (the same tokenizer)");
    }
    return notes;
}

} // namespace cppl::agent
