// SPDX-License-Identifier: MIT
#include "weight_source.h"

#include "cppl/errors.h"
#include "fault_hooks.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <sstream>

namespace cppl::agent {

namespace {

std::string shapeText(at::IntArrayRef s)
{
    std::ostringstream o;
    o << '[';
    for (std::size_t i = 0; i < s.size(); ++i)
        o << (i ? ", " : "") << s[i];
    o << ']';
    return o.str();
}

at::ScalarType storedType(StoredDtype d)
{
    // SafetensorsCheckpoint::at() hands out float tensors only; integer ones (quantized checkpoints)
    // are read by their own readers (quant/gptq_awq.h).
    switch (d) {
    case StoredDtype::F32:
        return at::kFloat;
    case StoredDtype::F16:
        return at::kHalf;
    case StoredDtype::BF16:
        return at::kBFloat16;
    default:
        CPPL_ENFORCE(false, "a float tensor (SafetensorsCheckpoint::at refuses the others)");
    }
    return at::kFloat;
}

std::size_t elementBytes(const TensorView &v) { return storedDtypeSize(v.dtype); }

std::vector<std::int64_t> contiguousStrides(const std::vector<std::int64_t> &shape)
{
    std::vector<std::int64_t> strides(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;)
        strides[i - 1] = strides[i] * shape[i];
    return strides;
}

/// The whole pages inside each of @p rows spans of @p spanBytes, @p strideBytes apart from @p first:
/// a column slice's part of every row (releaseColumns, and the rows a staged upload has read).
void releaseSpans(const MappedFile &file, const unsigned char *first, std::size_t strideBytes, std::size_t spanBytes, std::int64_t rows)
{
    for (std::int64_t r = 0; r < rows; ++r)
        file.releaseRange(first + static_cast<std::size_t>(r) * strideBytes, spanBytes);
}

/// Each pinned buffer: large enough that a copy's fixed cost vanishes (~10 us against ~2 ms at
/// 30 GB/s), small enough that two of them are nothing beside a GPU rank's host memory.
constexpr std::int64_t kUploadChunkBytes = std::int64_t{64} << 20;
/// The test queue's delay per copy (CLUSTERPPL_TEST_STAGED_UPLOAD): long beside a small chunk's fill.
constexpr int kTestQueueDelayMicroseconds = 200;

/// The upload @p o asks for: null for Tensor::to (pageable) and on the CPU. Where pinned is only the
/// default and the host refuses pinned memory, pageable instead, and @p note says why.
std::unique_ptr<StagedUpload> stagedUploadFor(const LoadOptions &o, std::string &note)
{
    if (const std::int64_t chunk = faultHooks().stagedUploadChunk; chunk > 0 && o.device.is_cpu())
        return std::make_unique<StagedUpload>(std::make_unique<ThreadCopyQueue>(kTestQueueDelayMicroseconds), chunk);
    if (o.device.is_cpu() || o.upload == WeightUpload::Pageable)
        return nullptr;
    auto upload = std::make_unique<StagedUpload>(makeDeviceCopyQueue(o.device), kUploadChunkBytes);
    try {
        upload->reserve();
    } catch (const std::exception &e) {
        const std::string what = e.what(); // LibTorch's errors carry a backtrace after the first line
        const std::string why = "pinned host memory for the weights' upload was refused (" + what.substr(0, std::min(what.find('\n'), std::size_t{300})) + ")";
        if (o.upload == WeightUpload::Pinned)
            throw ConfigError(why + "; --weight-upload pageable copies them through Tensor::to instead");
        note = why + ": the weights came through Tensor::to (pageable)";
        return nullptr;
    }
    return upload;
}

} // namespace

WeightSource::WeightSource(SafetensorsCheckpoint ckpt, const LoadOptions &options) : m_ckpt(std::move(ckpt)), m_opts(options)
{
    m_upload = stagedUploadFor(options, m_uploadNote);
}

WeightSource::WeightSource(SafetensorsCheckpoint ckpt, const LoadOptions &options, std::unique_ptr<StagedUpload> upload)
    : m_ckpt(std::move(ckpt)), m_opts(options), m_upload(std::move(upload))
{
}

WeightSource::~WeightSource() = default;

WeightUploadInfo WeightSource::uploadInfo() const
{
    if (m_upload)
        return m_upload->info();
    WeightUploadInfo info;
    info.method = m_opts.device.is_cpu() ? "host" : "pageable";
    info.note = m_uploadNote;
    return info;
}

const TensorView &WeightSource::checked(const std::string &name, const std::vector<std::int64_t> &expected) const
{
    const TensorView &v = m_ckpt.at(name);
    if (v.shape != expected)
        throw IoError(m_ckpt.directory() + ": tensor \"" + name + "\" has shape " + shapeText(v.shape) + ", expected " + shapeText(expected)
                      + " from config.json");
    return v;
}

at::Tensor WeightSource::mapped(const TensorView &v, const unsigned char *data, const std::vector<std::int64_t> &sizes,
                                const std::vector<std::int64_t> &strides)
{
    // The mapping is read-only and the tensor is never written; from_blob needs a non-const pointer.
    // The deleter holds the mapping, so it lives exactly as long as any tensor over it.
    return at::from_blob(
        const_cast<unsigned char *>(data), sizes, strides, [file = v.file](void *) {}, at::TensorOptions().dtype(storedType(v.dtype)));
}

at::Tensor WeightSource::place(const TensorView &v, const unsigned char *data, const std::vector<std::int64_t> &sizes,
                               const std::vector<std::int64_t> &strides)
{
    const at::Tensor src = mapped(v, data, sizes, strides);
    at::Tensor t = src;
    if (m_upload)
        t = m_upload->upload(src, m_opts.dtype, m_opts.device, [&](std::int64_t first, std::int64_t count) { releaseRead(v, src, first, count); });
    else if (t.scalar_type() != m_opts.dtype || !m_opts.device.is_cpu())
        t = t.to(m_opts.device, m_opts.dtype);
    m_params += t.numel();
    m_bytes += t.numel() * static_cast<std::int64_t>(c10::elementSize(m_opts.dtype));
    return t;
}

/// The mapped pages of units [first, first + count) of @p src (StagedUpload's: elements of a
/// contiguous tensor, else rows), once they are in a pinned buffer.
void WeightSource::releaseRead(const TensorView &v, const at::Tensor &src, std::int64_t first, std::int64_t count)
{
    const auto esz = static_cast<std::int64_t>(elementBytes(v));
    const auto *base = static_cast<const unsigned char *>(src.data_ptr());
    if (!StagedUpload::byRows(src)) {
        v.file->releaseRange(base + first * esz, static_cast<std::size_t>(count * esz));
        return;
    }
    const auto stride = static_cast<std::size_t>(src.stride(0) * esz);
    releaseSpans(*v.file, base + static_cast<std::size_t>(first) * stride, stride, static_cast<std::size_t>(src.size(1) * esz), count);
}

at::Tensor WeightSource::get(const std::string &name, const std::vector<std::int64_t> &expected)
{
    const TensorView &v = checked(name, expected);
    return place(v, v.data, v.shape, contiguousStrides(v.shape));
}

at::Tensor WeightSource::getFloat(const std::string &name, const std::vector<std::int64_t> &expected)
{
    const TensorView &v = checked(name, expected);
    at::Tensor t = mapped(v, v.data, v.shape, contiguousStrides(v.shape));
    if (t.scalar_type() != at::kFloat)
        t = t.to(at::kFloat);
    m_params += t.numel();
    return t;
}

at::Tensor WeightSource::getFloatSlice(const std::string &name, const std::vector<std::int64_t> &expected, std::int64_t row0, std::int64_t rows,
                                       std::int64_t col0, std::int64_t cols)
{
    const TensorView &v = checked(name, expected);
    const bool twoD = v.shape.size() == 2;
    CPPL_ENFORCE(!v.shape.empty() && row0 >= 0 && rows >= 0 && row0 + rows <= v.shape[0]
                     && (!twoD || (col0 >= 0 && cols >= 0 && col0 + cols <= v.shape[1])),
                 "a slice inside the tensor");
    std::vector<std::int64_t> sizes = v.shape;
    sizes[0] = rows;
    if (twoD)
        sizes[1] = cols;
    const std::vector<std::int64_t> strides = contiguousStrides(v.shape);
    const std::int64_t first = row0 * strides[0] + (twoD ? col0 : 0);
    const at::Tensor t = mapped(v, v.data + static_cast<std::size_t>(first) * elementBytes(v), sizes, strides).to(at::kFloat).contiguous();
    m_params += t.numel();
    return t;
}

at::Tensor WeightSource::getRows(const std::string &name, const std::vector<std::int64_t> &expected, std::int64_t row0, std::int64_t rows)
{
    const TensorView &v = checked(name, expected);
    CPPL_ENFORCE(!v.shape.empty() && row0 >= 0 && rows >= 0 && row0 + rows <= v.shape[0], "a row slice inside the tensor");
    std::vector<std::int64_t> sizes = v.shape;
    sizes[0] = rows;
    const std::vector<std::int64_t> strides = contiguousStrides(v.shape);
    return place(v, v.data + static_cast<std::size_t>(row0 * strides[0]) * elementBytes(v), sizes, strides);
}

at::Tensor WeightSource::getColumns(const std::string &name, const std::vector<std::int64_t> &expected, std::int64_t col0, std::int64_t cols)
{
    const TensorView &v = checked(name, expected);
    CPPL_ENFORCE(v.shape.size() == 2 && col0 >= 0 && cols >= 0 && col0 + cols <= v.shape[1], "a column slice inside a 2-D tensor");
    return place(v, v.data + static_cast<std::size_t>(col0) * elementBytes(v), {v.shape[0], cols}, {v.shape[1], 1});
}

void WeightSource::release(const std::string &name) const
{
    const TensorView &v = m_ckpt.at(name);
    v.file->releaseRange(v.data, v.bytes);
}

void WeightSource::releaseRows(const std::string &name, std::int64_t row0, std::int64_t rows) const
{
    const TensorView &v = m_ckpt.at(name);
    const auto rowBytes = static_cast<std::size_t>(v.bytes / static_cast<std::size_t>(v.shape[0]));
    v.file->releaseRange(v.data + static_cast<std::size_t>(row0) * rowBytes, static_cast<std::size_t>(rows) * rowBytes);
}

void WeightSource::releaseColumns(const std::string &name, std::int64_t col0, std::int64_t cols) const
{
    const TensorView &v = m_ckpt.at(name);
    CPPL_ENFORCE(v.shape.size() == 2, "columns of a 2-D tensor");
    const std::size_t rowBytes = static_cast<std::size_t>(v.shape[1]) * elementBytes(v);
    releaseSpans(*v.file, v.data + static_cast<std::size_t>(col0) * elementBytes(v), rowBytes, static_cast<std::size_t>(cols) * elementBytes(v), v.shape[0]);
}

} // namespace cppl::agent
