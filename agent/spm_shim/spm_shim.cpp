// SPDX-License-Identifier: MIT
// libclusterppl_spm.so: Debian's libsentencepiece behind the C interface of cppl_spm.h. Built only
// when libsentencepiece-dev is found, never linked into the agent (dlopen'ed by
// agent/lib/tokenizer/spm_shim_loader.cpp). Everything but the cppl_spm_* functions is hidden.
#include "cppl_spm.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

struct CpplSpm
{
    sentencepiece::SentencePieceProcessor processor;
};

namespace {

void setError(char *error, size_t size, std::string_view message)
{
    if (error == nullptr || size == 0)
        return;
    const size_t n = std::min(size - 1, message.size());
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
}

// Exceptions must not cross the C boundary (the caller is C-like and was built separately); what
// SentencePiece's C++ API can throw here is std::bad_alloc and std::length_error.
template<typename F>
int guarded(char *error, size_t errorSize, F &&body)
{
    try {
        return body();
    } catch (const std::exception &e) {
        setError(error, errorSize, std::string("exception in the SentencePiece shim: ") + e.what());
        return -1;
    }
}

} // namespace

#define CPPL_SPM_EXPORT extern "C" __attribute__((visibility("default")))

CPPL_SPM_EXPORT int cppl_spm_abi_version(void)
{
    return CPPL_SPM_ABI_VERSION;
}

CPPL_SPM_EXPORT CpplSpm *cppl_spm_load(const char *path, char *error, size_t error_size)
{
    CpplSpm *result = nullptr;
    guarded(error, error_size, [&] {
        auto spm = std::make_unique<CpplSpm>();
        const auto status = spm->processor.Load(path);
        if (!status.ok()) {
            setError(error, error_size, status.ToString());
            return -1;
        }
        result = spm.release();
        return 0;
    });
    return result;
}

CPPL_SPM_EXPORT void cppl_spm_free(CpplSpm *spm)
{
    delete spm;
}

CPPL_SPM_EXPORT int cppl_spm_encode(const CpplSpm *spm, const char *text, size_t size, CpplSpmIdSink sink, void *context, char *error,
                                    size_t error_size)
{
    return guarded(error, error_size, [&] {
        std::vector<int> ids;
        const auto status = spm->processor.Encode(std::string_view(text, size), &ids);
        if (!status.ok()) {
            setError(error, error_size, status.ToString());
            return -1;
        }
        // SentencePiece ids are non-negative ints below the piece count.
        std::vector<uint32_t> out(ids.begin(), ids.end());
        sink(context, out.data(), out.size());
        return 0;
    });
}

CPPL_SPM_EXPORT int cppl_spm_decode(const CpplSpm *spm, const uint32_t *ids, size_t count, CpplSpmByteSink sink, void *context, char *error,
                                    size_t error_size)
{
    return guarded(error, error_size, [&] {
        const int pieces = spm->processor.GetPieceSize();
        std::vector<int> in(count);
        for (size_t i = 0; i < count; ++i) {
            if (ids[i] >= static_cast<uint32_t>(pieces)) {
                setError(error, error_size,
                         "id " + std::to_string(ids[i]) + " at position " + std::to_string(i) + " is out of range (the model has "
                             + std::to_string(pieces) + " pieces)");
                return -1;
            }
            in[i] = static_cast<int>(ids[i]);
        }
        std::string text;
        const auto status = spm->processor.Decode(in, &text);
        if (!status.ok()) {
            setError(error, error_size, status.ToString());
            return -1;
        }
        sink(context, text.data(), text.size());
        return 0;
    });
}

CPPL_SPM_EXPORT int32_t cppl_spm_vocab_size(const CpplSpm *spm)
{
    return spm->processor.GetPieceSize();
}

CPPL_SPM_EXPORT int32_t cppl_spm_piece_to_id(const CpplSpm *spm, const char *piece, size_t size)
{
    const std::string_view text(piece, size);
    const int id = spm->processor.PieceToId(text);
    // PieceToId answers unk_id for text it does not know; only the unknown piece itself has that id.
    if (id < 0 || (id == spm->processor.unk_id() && spm->processor.IdToPiece(id) != text))
        return -1;
    return id;
}

CPPL_SPM_EXPORT int cppl_spm_id_to_piece(const CpplSpm *spm, uint32_t id, CpplSpmByteSink sink, void *context)
{
    if (id >= static_cast<uint32_t>(spm->processor.GetPieceSize()))
        return -1;
    const std::string &piece = spm->processor.IdToPiece(static_cast<int>(id));
    sink(context, piece.data(), piece.size());
    return 0;
}

CPPL_SPM_EXPORT int32_t cppl_spm_bos_id(const CpplSpm *spm)
{
    return spm->processor.bos_id();
}

CPPL_SPM_EXPORT int32_t cppl_spm_eos_id(const CpplSpm *spm)
{
    return spm->processor.eos_id();
}

CPPL_SPM_EXPORT int32_t cppl_spm_unk_id(const CpplSpm *spm)
{
    return spm->processor.unk_id();
}

CPPL_SPM_EXPORT int32_t cppl_spm_pad_id(const CpplSpm *spm)
{
    return spm->processor.pad_id();
}

// The definitions above must match the function types the agent casts dlsym()'s results to.
#define CPPL_SPM_CHECK_TYPE(name, type) static_assert(std::is_same_v<decltype(&cppl_spm_##name), type>, "cppl_spm_" #name);
CPPL_SPM_SYMBOLS(CPPL_SPM_CHECK_TYPE)
