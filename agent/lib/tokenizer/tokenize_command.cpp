// SPDX-License-Identifier: MIT
#include "tokenize_command.h"

#include "tokenizer.h"

#include "args.h"
#include "exit_codes.h"

#include "cppl/errors.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>

namespace cppl::agent {

namespace {

std::string readWholeFile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError(path + ": cannot open the text file (does it exist and is it readable?)");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad())
        throw IoError(path + ": read failed");
    return std::move(buffer).str();
}

void writeU32(const std::string &path, const std::vector<std::uint32_t> &ids)
{
    std::string bytes(ids.size() * 4, '\0');
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::size_t b = 0; b < 4; ++b)
            bytes[4 * i + b] = static_cast<char>((ids[i] >> (8 * b)) & 0xFF); // little-endian on any host
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f || !f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())))
        throw IoError(path + ": cannot write the token file (is the directory writable, is the disk full?)");
}

} // namespace

int tokenizeCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream &err)
{
    const Args a(argv, {"--tokenizer", "--text", "--out", "--bos"}, {"--quiet"});
    const std::string tokenizerPath = a.require("--tokenizer", "a tokenizer.json or a SentencePiece tokenizer.model, or a model directory holding one");
    const std::string textPath = a.require("--text", "the UTF-8 text file to tokenize");
    const std::string outPath = a.require("--out", "where to write the ids (little-endian uint32, .u32)");
    const std::string bosText = a.get("--bos").value_or("auto");
    const auto bosMode = parseBosMode(bosText);
    if (!bosMode)
        throw ConfigError("--bos \"" + bosText + "\" is unknown (expected auto, always or never)");
    const bool quiet = a.has("--quiet");

    std::unique_ptr<Tokenizer> tokenizer;
    BosDecision bos;
    try {
        tokenizer = Tokenizer::load(tokenizerPath);
        bos = tokenizer->bosDecision(*bosMode);
    } catch (const Error &e) {
        throw ExitError(kExitBadModel, e.what()); // the tokenizer belongs to the model
    }
    for (const auto &note : tokenizer->notes())
        err << "clusterppl-agent: note: " << note << '\n';

    const std::string text = readWholeFile(textPath);
    std::vector<std::uint32_t> ids;
    ids.reserve(text.size() / 3 + 16);
    if (bos.add)
        ids.push_back(bos.id);
    const auto t0 = std::chrono::steady_clock::now();
    try {
        tokenizer->encode(text, ids);
    } catch (const IoError &e) {
        throw IoError(textPath + ": " + e.what());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    writeU32(outPath, ids);

    if (tokenizer->droppedBytes() > 0)
        err << "clusterppl-agent: warning: " << tokenizer->droppedBytes()
            << " bytes of text had no token (no byte_fallback, no unk_token) and were dropped, as Hugging Face drops them\n";
    if (!quiet) {
        const double safe = seconds > 0 ? seconds : 1e-9;
        char speed[160];
        std::snprintf(speed, sizeof speed, "%.0f ids/s, %.2f MB/s (%.3f s, encode only, one thread; MB = 10^6 bytes)",
                      static_cast<double>(ids.size()) / safe, static_cast<double>(text.size()) / 1e6 / safe, seconds);
        out << "tokenizer  " << tokenizer->path() << " (" << tokenizer->description() << ")\n"
            << "bos        " << (bos.add ? "adds " + bos.token + " = " + std::to_string(bos.id) : std::string("none")) << " (" << bos.reason
            << ")\n"
            << "text       " << textPath << " (" << text.size() << " bytes)\n"
            << "ids        " << ids.size() << " -> " << outPath << " (u32)\n"
            << "speed      " << speed << '\n';
    }
    return kExitOk;
}

} // namespace cppl::agent
