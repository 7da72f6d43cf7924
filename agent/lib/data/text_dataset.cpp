// SPDX-License-Identifier: MIT
#include "text_dataset.h"

#include "tokenizer/tokenizer.h"

#include "cppl/errors.h"
#include "cppl/statistics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cppl::agent {

namespace fs = std::filesystem;

std::optional<DatasetFormat> parseDatasetFormat(std::string_view name)
{
    for (auto f : {DatasetFormat::Plain, DatasetFormat::WikiText, DatasetFormat::Jsonl, DatasetFormat::Directory})
        if (datasetFormatName(f) == name)
            return f;
    return std::nullopt;
}

std::string_view datasetFormatName(DatasetFormat f)
{
    switch (f) {
    case DatasetFormat::Plain:
        return "plain";
    case DatasetFormat::WikiText:
        return "wikitext";
    case DatasetFormat::Jsonl:
        return "jsonl";
    case DatasetFormat::Directory:
        return "dir";
    }
    return "?";
}

namespace {

// Length of the valid UTF-8 sequence at p, or -(length of its maximal invalid subpart).
int sequenceAt(std::string_view t, std::size_t p)
{
    const auto b0 = static_cast<unsigned char>(t[p]);
    if (b0 < 0x80)
        return 1;
    int need = 0;
    unsigned lo = 0x80, hi = 0xbf;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
        need = 1;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
        need = 2;
        if (b0 == 0xe0)
            lo = 0xa0;
        if (b0 == 0xed)
            hi = 0x9f; // no surrogates
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
        need = 3;
        if (b0 == 0xf0)
            lo = 0x90;
        if (b0 == 0xf4)
            hi = 0x8f; // <= U+10FFFF
    } else {
        return -1;
    }
    for (int k = 1; k <= need; ++k) {
        if (p + static_cast<std::size_t>(k) >= t.size())
            return -k;
        const auto b = static_cast<unsigned char>(t[p + static_cast<std::size_t>(k)]);
        const unsigned min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xbf;
        if (b < min || b > max)
            return -k;
    }
    return need + 1;
}

std::string readFile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError(path + ": cannot open (does it exist and is it readable?)");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

TextDocument makeDocument(std::string source, std::string text)
{
    TextDocument d;
    d.source = std::move(source);
    d.bytes = static_cast<std::int64_t>(text.size());
    d.words = countWords(text);
    d.text = std::move(text);
    return d;
}

} // namespace

std::int64_t replaceInvalidUtf8(std::string &text)
{
    if (!findInvalidUtf8(text)) // the tokenizer's validator: one definition of valid UTF-8
        return 0;
    std::string out;
    out.reserve(text.size() + 16);
    std::int64_t replaced = 0;
    for (std::size_t p = 0; p < text.size();) {
        const int n = sequenceAt(text, p);
        if (n > 0) {
            out.append(text, p, static_cast<std::size_t>(n));
            p += static_cast<std::size_t>(n);
        } else {
            out += "\xef\xbf\xbd";
            ++replaced;
            p += static_cast<std::size_t>(-n);
        }
    }
    text = std::move(out);
    return replaced;
}

std::vector<std::string> splitWikiText(std::string_view text)
{
    // A top-level heading is a whole line " = Title = " with exactly one '=' on each side.
    auto isHeading = [](std::string_view line) {
        if (line.size() < 5 || !line.starts_with(" = ") || !line.ends_with(" = "))
            return false;
        return line[3] != '=' && line[line.size() - 4] != '=';
    };
    std::vector<std::string> docs;
    std::string current;
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t end = text.find('\n', at);
        end = end == std::string_view::npos ? text.size() : end + 1;
        const std::string_view line = text.substr(at, end - at);
        std::string_view bare = line;
        while (!bare.empty() && (bare.back() == '\n' || bare.back() == '\r'))
            bare.remove_suffix(1);
        if (isHeading(bare) && !current.empty()) {
            if (current.find_first_not_of(" \t\r\n") != std::string::npos)
                docs.push_back(std::move(current));
            current.clear();
        }
        current.append(line);
        at = end;
    }
    if (current.find_first_not_of(" \t\r\n") != std::string::npos)
        docs.push_back(std::move(current));
    return docs;
}

TextDataset loadTextDataset(const std::string &path, DatasetFormat format, const std::string &jsonlField, InvalidUtf8 invalid)
{
    TextDataset ds;
    ds.path = path;
    ds.format = format;
    auto checkUtf8 = [&](std::string &text, const std::string &where) {
        if (invalid == InvalidUtf8::Replace) {
            ds.replacedSequences += replaceInvalidUtf8(text);
        } else if (const auto bad = findInvalidUtf8(text)) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(text[*bad]));
            throw IoError(where + ": invalid UTF-8 at byte offset " + std::to_string(*bad) + " (byte " + hex
                          + "); fix the file or pass --on-invalid-utf8 replace to replace and count such bytes");
        }
    };
    if (format == DatasetFormat::Directory) {
        if (!fs::is_directory(path))
            throw IoError(path + ": not a directory (the dir dataset reads every *.txt file in a directory)");
        std::vector<fs::path> files;
        for (const auto &e : fs::directory_iterator(path))
            if (e.is_regular_file() && e.path().extension() == ".txt")
                files.push_back(e.path());
        std::sort(files.begin(), files.end());
        for (const auto &f : files) {
            std::string text = readFile(f.string());
            checkUtf8(text, f.string());
            ds.documents.push_back(makeDocument(f.string(), std::move(text)));
        }
        if (ds.documents.empty())
            throw IoError(path + ": no *.txt files in the directory");
        return ds;
    }
    std::string text = readFile(path);
    if (text.empty())
        throw IoError(path + ": the text file is empty");
    switch (format) {
    case DatasetFormat::Plain:
        checkUtf8(text, path);
        ds.documents.push_back(makeDocument(path, std::move(text)));
        break;
    case DatasetFormat::WikiText:
        checkUtf8(text, path);
        for (auto &doc : splitWikiText(text))
            ds.documents.push_back(makeDocument(path, std::move(doc)));
        break;
    case DatasetFormat::Jsonl: {
        std::size_t lineNo = 0;
        std::istringstream lines(text);
        std::string line;
        while (std::getline(lines, line)) {
            ++lineNo;
            const std::string where = path + ":" + std::to_string(lineNo);
            if (line.find_first_not_of(" \t\r") == std::string::npos)
                continue;
            nlohmann::json j;
            try {
                j = nlohmann::json::parse(line);
            } catch (const nlohmann::json::exception &e) {
                throw IoError(where + ": not a JSON object (" + std::string(e.what()) + ")");
            }
            if (!j.is_object() || !j.contains(jsonlField))
                throw IoError(where + ": no \"" + jsonlField + "\" field (choose the field with --jsonl-field)");
            if (!j[jsonlField].is_string())
                throw IoError(where + ": \"" + jsonlField + "\" is not a string");
            std::string doc = j[jsonlField].get<std::string>();
            checkUtf8(doc, where);
            ds.documents.push_back(makeDocument(where, std::move(doc)));
        }
        break;
    }
    case DatasetFormat::Directory:
        break;
    }
    if (ds.documents.empty())
        throw IoError(path + ": no documents in the " + std::string(datasetFormatName(format)) + " dataset");
    return ds;
}

} // namespace cppl::agent
