// SPDX-License-Identifier: MIT
#include "sentencepiece_tokenizer.h"

#include "spm_shim_loader.h"

#include "cppl/errors.h"

#include <array>
#include <fstream>
#include <sstream>

namespace cppl::agent {

namespace spm {

namespace {

// ---------------------------------------------------------------------------------------------
// Protobuf wire format, just enough to recognise a ModelProto (sentencepiece_model.proto):
//   ModelProto      1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
//   SentencePiece   1 piece (string), 2 score (float), 3 type (NORMAL 1 ... BYTE 6)
//   TrainerSpec     3 model_type, 35 byte_fallback
//   NormalizerSpec  1 name, 3 add_dummy_prefix, 4 remove_extra_whitespaces
// ---------------------------------------------------------------------------------------------

enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

struct WireError
{
    std::string what;
    std::size_t offset;
};

struct Field
{
    std::uint32_t number = 0;
    int wireType = 0;
    std::uint64_t varint = 0;
    std::string_view bytes; ///< kLengthDelimited
    std::size_t offset = 0; ///< of the tag, in the file
};

/// Calls onField(field) for each field of the message in @p data (at file offset @p base).
template<typename OnField>
void forEachField(std::string_view data, std::size_t base, OnField &&onField)
{
    std::size_t i = 0;
    const auto varint = [&](const char *what) {
        const std::size_t start = i;
        std::uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (i >= data.size())
                throw WireError{std::string("truncated ") + what, base + start};
            const auto byte = static_cast<unsigned char>(data[i++]);
            value |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
            if ((byte & 0x80) == 0)
                return value;
        }
        throw WireError{std::string("overlong ") + what, base + start};
    };
    while (i < data.size()) {
        Field f;
        f.offset = base + i;
        const std::uint64_t tag = varint("field tag");
        f.number = static_cast<std::uint32_t>(tag >> 3);
        f.wireType = static_cast<int>(tag & 7);
        if (f.number == 0 || tag >> 32 != 0)
            throw WireError{"invalid field number", f.offset};
        switch (f.wireType) {
        case kVarint:
            f.varint = varint("number");
            break;
        case kFixed64:
        case kFixed32: {
            const std::size_t n = f.wireType == kFixed64 ? 8 : 4;
            if (data.size() - i < n)
                throw WireError{"truncated fixed-size field", f.offset};
            i += n;
            break;
        }
        case kLengthDelimited: {
            const std::uint64_t n = varint("length");
            if (n > data.size() - i)
                throw WireError{"a field of " + std::to_string(n) + " bytes runs past the end of the file", f.offset};
            f.bytes = data.substr(i, static_cast<std::size_t>(n));
            i += static_cast<std::size_t>(n);
            break;
        }
        default: // 3, 4: groups, which ModelProto never uses; 6, 7 do not exist
            throw WireError{"wire type " + std::to_string(f.wireType) + " of field " + std::to_string(f.number)
                                + " is not used by SentencePiece models",
                            f.offset};
        }
        onField(f);
    }
}

void expectWireType(const Field &f, int wireType, const char *name)
{
    if (f.wireType != wireType)
        throw WireError{std::string(name) + " has the wrong wire type " + std::to_string(f.wireType), f.offset};
}

} // namespace

std::string_view modelTypeName(int modelType)
{
    static constexpr std::array<std::string_view, 5> kNames = {"unknown", "Unigram", "BPE", "Word", "Char"};
    return modelType >= 1 && modelType <= 4 ? kNames[static_cast<std::size_t>(modelType)] : kNames[0];
}

ModelFileSummary readModelFile(const std::string &path, std::string_view bytes)
{
    const auto notModel = [&](const std::string &why) {
        return ConfigError(path + ": not a SentencePiece model: " + why
                           + " (a tokenizer.model is the binary protobuf spm_train writes and models ship; check the file, or "
                             "give --tokenizer the model's tokenizer.json)");
    };
    if (bytes.empty())
        throw notModel("the file is empty");
    if (bytes.starts_with("version https://git-lfs"))
        throw ConfigError(path + ": not a SentencePiece model but a Git LFS pointer; fetch the real file (git lfs pull)");
    const std::size_t first = bytes.find_first_not_of(" \t\r\n");
    if (first != std::string_view::npos && (bytes[first] == '{' || bytes[first] == '[')) {
        // A tokenizer.json saved under the wrong name is the likely mix-up.
        throw ConfigError(path + ": not a SentencePiece model: the file is JSON text; if it is a Hugging Face tokenizer.json, "
                                 "give it a .json name (or pass its directory)");
    }
    ModelFileSummary s;
    try {
        forEachField(bytes, 0, [&](const Field &f) {
            if (f.number == 1) {
                expectWireType(f, kLengthDelimited, "a piece");
                bool hasText = false;
                forEachField(f.bytes, f.offset, [&](const Field &p) {
                    if (p.number == 1) {
                        expectWireType(p, kLengthDelimited, "a piece's text");
                        hasText = true;
                    } else if (p.number == 3 && p.wireType == kVarint && p.varint == 6) {
                        ++s.bytePieces;
                    }
                });
                if (!hasText)
                    throw WireError{"piece " + std::to_string(s.pieces) + " has no text", f.offset};
                ++s.pieces;
            } else if (f.number == 2) {
                expectWireType(f, kLengthDelimited, "trainer_spec");
                forEachField(f.bytes, f.offset, [&](const Field &t) {
                    if (t.number == 3 && t.wireType == kVarint)
                        s.modelType = static_cast<int>(t.varint);
                    else if (t.number == 35 && t.wireType == kVarint)
                        s.byteFallback = t.varint != 0;
                });
            } else if (f.number == 3) {
                expectWireType(f, kLengthDelimited, "normalizer_spec");
                forEachField(f.bytes, f.offset, [&](const Field &n) {
                    if (n.number == 1 && n.wireType == kLengthDelimited)
                        s.normalizer = std::string(n.bytes);
                    else if (n.number == 3 && n.wireType == kVarint)
                        s.addDummyPrefix = n.varint != 0;
                    else if (n.number == 4 && n.wireType == kVarint)
                        s.removeExtraWhitespaces = n.varint != 0;
                });
            }
        });
    } catch (const WireError &e) {
        throw notModel("the protobuf is malformed at byte " + std::to_string(e.offset) + ": " + e.what);
    }
    if (s.pieces == 0)
        throw notModel("it holds no pieces (vocabulary)");
    return s;
}

} // namespace spm

namespace {

std::string readBinaryFile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError(path + ": cannot open (is it readable?)");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad())
        throw IoError(path + ": read failed");
    return std::move(buffer).str();
}

void appendIds(void *context, const std::uint32_t *ids, std::size_t count)
{
    auto *out = static_cast<std::vector<std::uint32_t> *>(context);
    out->insert(out->end(), ids, ids + count);
}

void appendBytes(void *context, const char *bytes, std::size_t size)
{
    static_cast<std::string *>(context)->append(bytes, size);
}

constexpr std::size_t kErrorSize = 1024;

} // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string &path, const TokenizerConfig &config)
{
    m_path = path;
    // Format first (the agent's own check, with or without the shim), then the shim, then SentencePiece.
    m_summary = spm::readModelFile(path, readBinaryFile(path));
    m_api = &spm::shimApi(path);
    std::array<char, kErrorSize> error{};
    m_model = m_api->load(path.c_str(), error.data(), error.size());
    if (m_model == nullptr)
        throw ConfigError(path + ": SentencePiece refuses the model: " + error.data()
                          + " (is it a SentencePiece tokenizer.model? Otherwise give --tokenizer the model's tokenizer.json)");
    m_vocabSize = m_api->vocab_size(m_model);
    m_description = "SentencePiece " + std::string(spm::modelTypeName(m_summary.modelType)) + ", " + std::to_string(m_vocabSize) + " ids"
                    + (m_summary.byteFallback ? ", byte_fallback" : "") + ", normalizer "
                    + (m_summary.normalizer.empty() ? std::string("(none named)") : m_summary.normalizer)
                    + (m_summary.addDummyPrefix ? ", dummy prefix" : "") + "; shim " + m_api->path;
    decideBos(config);
}

SentencePieceTokenizer::~SentencePieceTokenizer()
{
    if (m_model != nullptr)
        m_api->free(m_model);
}

std::string SentencePieceTokenizer::piece(std::uint32_t id) const
{
    std::string text;
    if (m_api->id_to_piece(m_model, id, appendBytes, &text) != 0)
        return {};
    return text;
}

void SentencePieceTokenizer::decideBos(const TokenizerConfig &config)
{
    const std::int32_t modelBos = m_api->bos_id(m_model);
    if (!config.bosToken.empty()) {
        if (const auto id = tokenId(config.bosToken)) {
            m_bosId = *id;
            m_bosToken = config.bosToken;
            m_bosSource = "bos_token of " + config.path;
        } else {
            m_notes.push_back(config.path + ": bos_token \"" + config.bosToken + "\" is not a piece of " + m_path
                              + "; the model's own BOS is used instead");
        }
    }
    if (!m_bosId && modelBos >= 0) {
        m_bosId = static_cast<std::uint32_t>(modelBos);
        m_bosToken = piece(*m_bosId);
        m_bosSource = "bos_id of the SentencePiece model";
    }
    if (!m_bosId)
        m_bosSource = "the SentencePiece model has bos_id -1"
                      + (config.path.empty() ? std::string(" and no tokenizer_config.json is next to it") : " and " + config.path + " names no bos_token");

    if (config.addBos) {
        m_autoAddBos = *config.addBos;
        m_autoReason = "add_bos_token " + std::string(*config.addBos ? "true" : "false") + " in " + config.path;
    } else if (modelBos >= 0) {
        m_autoAddBos = true;
        m_autoReason = "the SentencePiece model defines BOS " + piece(static_cast<std::uint32_t>(modelBos)) + " = " + std::to_string(modelBos)
                       + " and SentencePiece tokenizers (Llama's) add it by default ("
                       + (config.path.empty() ? std::string("no tokenizer_config.json next to it") : config.path + " has no add_bos_token")
                       + ")";
    } else {
        m_autoAddBos = false;
        m_autoReason = "the SentencePiece model has no BOS (bos_id -1)";
    }
}

void SentencePieceTokenizer::encode(std::string_view text, std::vector<std::uint32_t> &out)
{
    // SentencePiece would quietly treat broken sequences as characters; refuse them like tokenizer.json does.
    if (const auto bad = findInvalidUtf8(text))
        throw IoError("invalid UTF-8 at byte offset " + std::to_string(*bad)
                      + "; tokenizers take UTF-8 text (convert it, e.g. iconv -f LATIN1 -t UTF-8)");
    std::array<char, kErrorSize> error{};
    if (m_api->encode(m_model, text.data(), text.size(), appendIds, &out, error.data(), error.size()) != 0)
        throw IoError(m_path + ": SentencePiece failed to encode " + std::to_string(text.size()) + " bytes of text: " + error.data());
}

std::string SentencePieceTokenizer::decode(std::span<const std::uint32_t> ids) const
{
    for (std::size_t i = 0; i < ids.size(); ++i)
        if (ids[i] >= m_vocabSize)
            throw IoError("id " + std::to_string(ids[i]) + " at position " + std::to_string(i) + " is not in the vocabulary of " + m_path
                          + " (ids 0.." + std::to_string(m_vocabSize - 1) + ")");
    std::string text;
    std::array<char, kErrorSize> error{};
    if (m_api->decode(m_model, ids.data(), ids.size(), appendBytes, &text, error.data(), error.size()) != 0)
        throw IoError(m_path + ": SentencePiece failed to decode " + std::to_string(ids.size()) + " ids: " + error.data());
    return text;
}

std::optional<std::uint32_t> SentencePieceTokenizer::tokenId(std::string_view token) const
{
    const std::int32_t id = m_api->piece_to_id(m_model, token.data(), token.size());
    if (id < 0)
        return std::nullopt;
    return static_cast<std::uint32_t>(id);
}

} // namespace cppl::agent
