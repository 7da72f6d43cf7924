// SPDX-License-Identifier: MIT
// The memory-mapped checkpoint as tensors in the evaluation dtype and device.
#pragma once

#include "language_model.h"

#include "model/safetensors.h"
#include "staged_upload.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cppl::agent {

/**
 * Owns the mapping and hands out tensors in the evaluation dtype/device, each checked against the
 * shape config.json implies. A tensor whose stored dtype and device already match is used in place
 * (from_blob over the read-only mapping), anything else is converted (a copy). Weights that are
 * repacked (the agent's kernels, oneDNN) release their mapped pages once packed, so the load never
 * holds both copies of more than one tensor (peak RSS ~ weights, not 2x).
 *
 * On a GPU the weights go through a StagedUpload (--weight-upload pinned, the default): pinned
 * buffers filled on the host while the device copies the last one, and each chunk's mapped pages
 * released once read, so the host holds about two chunks of the checkpoint, not all of it.
 *
 * Slices are what tensor parallelism reads (docs/models.md, "Tensor parallelism"): a
 * column-parallel weight's rows (q/k/v, gate/up, the vocabulary's rows of the embedding and head),
 * a row-parallel weight's columns (o_proj, down_proj). Only the slice's bytes are read and
 * counted, and only its pages released.
 */
class WeightSource
{
public:
    WeightSource(SafetensorsCheckpoint ckpt, const LoadOptions &options);
    /// With the upload given (tests: a StagedUpload over a ThreadCopyQueue on the CPU); null: none.
    WeightSource(SafetensorsCheckpoint ckpt, const LoadOptions &options, std::unique_ptr<StagedUpload> upload);
    ~WeightSource();
    WeightSource(const WeightSource &) = delete;
    WeightSource &operator=(const WeightSource &) = delete;

    /// The whole tensor `name`, which must have shape `expected`.
    [[nodiscard]] at::Tensor get(const std::string &name, const std::vector<std::int64_t> &expected);
    /// Rows [row0, row0 + rows) of `name` (shape `expected`, sliced along its first dimension).
    [[nodiscard]] at::Tensor getRows(const std::string &name, const std::vector<std::int64_t> &expected, std::int64_t row0, std::int64_t rows);
    /// Columns [col0, col0 + cols) of the 2-D tensor `name`: a strided view in place, else a contiguous copy.
    [[nodiscard]] at::Tensor getColumns(const std::string &name, const std::vector<std::int64_t> &expected, std::int64_t col0, std::int64_t cols);
    [[nodiscard]] bool has(const std::string &name) const { return m_ckpt.contains(name); }
    /// The whole tensor `name` as float32 on the CPU (in place over the mapping when stored F32),
    /// whatever the evaluation's dtype and device: what a storage reads to repack (quantized,
    /// bfloat16 panels). Its parameters are counted, its bytes are the storage's to count.
    [[nodiscard]] at::Tensor getFloat(const std::string &name, const std::vector<std::int64_t> &expected);
    /// Rows [row0, row0 + rows) and (2-D) columns [col0, col0 + cols) of `name` as contiguous float32
    /// on the CPU: a tensor-parallel rank's slice, to quantize (only the slice's parameters counted).
    [[nodiscard]] at::Tensor getFloatSlice(const std::string &name, const std::vector<std::int64_t> &expected, std::int64_t row0, std::int64_t rows,
                                           std::int64_t col0 = 0, std::int64_t cols = 0);
    /// Counts parameters a storage read straight from view()'s bytes.
    void countParams(std::int64_t n) { m_params += n; }
    /// The stored tensor itself (its dtype and mapped bytes), checked against `expected`.
    [[nodiscard]] const TensorView &view(const std::string &name, const std::vector<std::int64_t> &expected) const
    {
        return checked(name, expected);
    }

    /// Drops the mapped pages of `name` from the resident set (after it was repacked).
    void release(const std::string &name) const;
    /// The same for rows [row0, row0 + rows) of `name`.
    void releaseRows(const std::string &name, std::int64_t row0, std::int64_t rows) const;
    /// The same for columns [col0, col0 + cols) of the 2-D tensor `name`: the whole pages inside each
    /// row's span of them (none where a row's span is shorter than a page).
    void releaseColumns(const std::string &name, std::int64_t col0, std::int64_t cols) const;

    /// Parameters and bytes (in the evaluation dtype) handed out so far.
    [[nodiscard]] std::int64_t params() const { return m_params; }
    [[nodiscard]] std::int64_t bytes() const { return m_bytes; }
    [[nodiscard]] const SafetensorsCheckpoint &checkpoint() const { return m_ckpt; }
    /// How the tensors handed out reached the device so far.
    [[nodiscard]] WeightUploadInfo uploadInfo() const;

private:
    const TensorView &checked(const std::string &name, const std::vector<std::int64_t> &expected) const;
    at::Tensor place(const TensorView &v, const unsigned char *data, const std::vector<std::int64_t> &sizes,
                     const std::vector<std::int64_t> &strides);
    /// Drops the mapped pages of the units StagedUpload has read from @p src (a tensor over v's bytes).
    static void releaseRead(const TensorView &v, const at::Tensor &src, std::int64_t first, std::int64_t count);
    /// A tensor over the mapped bytes in their stored dtype (no conversion, nothing counted).
    static at::Tensor mapped(const TensorView &v, const unsigned char *data, const std::vector<std::int64_t> &sizes,
                             const std::vector<std::int64_t> &strides);

    SafetensorsCheckpoint m_ckpt;
    LoadOptions m_opts;
    std::int64_t m_params = 0;
    std::int64_t m_bytes = 0;
    std::unique_ptr<StagedUpload> m_upload; ///< null: Tensor::to (pageable), or in place on the CPU
    std::string m_uploadNote;               ///< why not pinned, where it was the default
};

} // namespace cppl::agent
