// SPDX-License-Identifier: MIT
// The C interface of libclusterppl_spm.so, the SentencePiece shim (docs/tokenizers.md).
//
// Why a shim: Debian's libsentencepiece carries its own protobuf 3.14 runtime, and it aborts in any
// process that also loads the libprotobuf 3.21 LibTorch pulls in. The agent never links it; it
// dlopen()s this library with RTLD_LOCAL | RTLD_DEEPBIND, so the shim's protobuf symbols resolve
// inside the shim. Only plain C types cross the boundary, and no memory is freed on the other side
// of it: results come back through sink callbacks. Both sides include this header; the agent checks
// cppl_spm_abi_version() against CPPL_SPM_ABI_VERSION before using anything else.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CPPL_SPM_ABI_VERSION 1
#define CPPL_SPM_SHIM_FILE_NAME "libclusterppl_spm.so"

typedef struct CpplSpm CpplSpm;

/* Receives results; called at most once per call that takes it, and not at all on failure. */
typedef void (*CpplSpmIdSink)(void *context, const uint32_t *ids, size_t count);
typedef void (*CpplSpmByteSink)(void *context, const char *bytes, size_t size);

typedef int (*CpplSpmAbiVersionFn)(void);
/* NULL on failure, with SentencePiece's message in error (NUL-terminated, cut to error_size). */
typedef CpplSpm *(*CpplSpmLoadFn)(const char *path, char *error, size_t error_size);
typedef void (*CpplSpmFreeFn)(CpplSpm *spm);
/* 0 on success; -1 with a message in error. */
typedef int (*CpplSpmEncodeFn)(const CpplSpm *spm, const char *text, size_t size, CpplSpmIdSink sink, void *context,
                               char *error, size_t error_size);
typedef int (*CpplSpmDecodeFn)(const CpplSpm *spm, const uint32_t *ids, size_t count, CpplSpmByteSink sink, void *context,
                               char *error, size_t error_size);
typedef int32_t (*CpplSpmVocabSizeFn)(const CpplSpm *spm);
/* -1 when the text is not a piece of the model (SentencePiece itself would answer unk_id). */
typedef int32_t (*CpplSpmPieceToIdFn)(const CpplSpm *spm, const char *piece, size_t size);
/* 0 and the piece through sink, or -1 when id is out of range. */
typedef int (*CpplSpmIdToPieceFn)(const CpplSpm *spm, uint32_t id, CpplSpmByteSink sink, void *context);
/* bos_id, eos_id, unk_id, pad_id: -1 when the model has none. */
typedef int32_t (*CpplSpmSpecialIdFn)(const CpplSpm *spm);

/* The exported names, one per typedef above. */
#define CPPL_SPM_SYMBOLS(X)                                                                                            \
    X(abi_version, CpplSpmAbiVersionFn)                                                                                \
    X(load, CpplSpmLoadFn)                                                                                             \
    X(free, CpplSpmFreeFn)                                                                                             \
    X(encode, CpplSpmEncodeFn)                                                                                         \
    X(decode, CpplSpmDecodeFn)                                                                                         \
    X(vocab_size, CpplSpmVocabSizeFn)                                                                                  \
    X(piece_to_id, CpplSpmPieceToIdFn)                                                                                 \
    X(id_to_piece, CpplSpmIdToPieceFn)                                                                                 \
    X(bos_id, CpplSpmSpecialIdFn)                                                                                      \
    X(eos_id, CpplSpmSpecialIdFn)                                                                                      \
    X(unk_id, CpplSpmSpecialIdFn)                                                                                      \
    X(pad_id, CpplSpmSpecialIdFn)

#ifdef __cplusplus
}
#endif
