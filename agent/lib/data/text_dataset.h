// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

/// @brief How a text file (or directory) splits into documents.
enum class DatasetFormat {
    Plain,     ///< the whole file is one document (one stream)
    WikiText,  ///< documents start at top-level headings " = Title = " (sub-headings " = = x = = " do not split)
    Jsonl,     ///< one JSON object per line; the document is one string field
    Directory, ///< every *.txt file in a directory, by name, one document each
};
[[nodiscard]] std::optional<DatasetFormat> parseDatasetFormat(std::string_view name);
[[nodiscard]] std::string_view datasetFormatName(DatasetFormat f);

enum class InvalidUtf8 { Error, Replace };

struct TextDocument
{
    std::string source; ///< "file", "file:line" (JSONL) or "file" (directory entry)
    std::string text;
    std::int64_t bytes = 0; ///< UTF-8 length, lm-eval's byte count
    std::int64_t words = 0; ///< len(re.split(r"\s+", text)), lm-eval's word count
};

struct TextDataset
{
    std::string path;
    DatasetFormat format = DatasetFormat::Plain;
    std::vector<TextDocument> documents;
    std::int64_t replacedSequences = 0; ///< invalid UTF-8 sequences replaced by U+FFFD
};

/**
 * @brief Reads documents. Invalid UTF-8 is an IoError naming the file and byte offset, unless
 * `invalid` is Replace: then each maximal invalid subsequence becomes U+FFFD (as Python's
 * errors="replace") and is counted. JSONL errors name the line; an empty dataset is an error.
 */
[[nodiscard]] TextDataset loadTextDataset(const std::string &path, DatasetFormat format, const std::string &jsonlField = "text",
                                          InvalidUtf8 invalid = InvalidUtf8::Error);

/// @brief Replaces each maximal invalid UTF-8 subsequence by U+FFFD; returns how many were replaced.
/// Detection is findInvalidUtf8() from tokenizer/tokenizer.h.
std::int64_t replaceInvalidUtf8(std::string &text);

/// @brief Splits WikiText at top-level headings (lines " = Title = "); text before the first
/// heading is a document of its own when not blank.
[[nodiscard]] std::vector<std::string> splitWikiText(std::string_view text);

} // namespace cppl::agent
