// SPDX-License-Identifier: MIT
// Weights on their way to a GPU through pinned host buffers (docs/speed.md, "Loading"): the host
// reads (and converts) chunk k+1 of the mapped checkpoint into one buffer while the device copies
// chunk k out of the other, on a copy stream of its own. Tensor::to from the mapping instead copies
// pageable memory: the driver stages it itself, synchronously, one tensor at a time.
#pragma once

#include "model_info.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace cppl::agent {

/**
 * @brief The device side of a staged upload: host buffers the device can copy from while the host
 * goes on, a queue of copies in order, and fences the host can wait for.
 */
class CopyQueue
{
public:
    virtual ~CopyQueue() = default;
    /// A host buffer of @p bytes (kByte) the queue copies from asynchronously (page-locked on a GPU).
    [[nodiscard]] virtual at::Tensor hostBuffer(std::int64_t bytes) = 0;
    /// Enqueues dst <- src: same dtype and shape, both contiguous; src lies in a hostBuffer().
    virtual void enqueue(const at::Tensor &dst, const at::Tensor &src) = 0;
    /// Fence @p slot now stands after every copy enqueued so far.
    virtual void mark(int slot) = 0;
    /// Returns once the copies before fence @p slot are done (at once if it was never marked).
    virtual void wait(int slot) = 0;
    /// Whatever runs on the device after this call sees every copy enqueued so far (on a GPU the
    /// compute stream waits for the copy stream; the host does not wait).
    virtual void publish() = 0;
    /// What the result's model.weight_upload says about this queue.
    [[nodiscard]] virtual std::string name() const = 0;
};

/// A GPU's queue: pinned buffers (LibTorch's pinned allocator), a stream from LibTorch's pool for
/// the copies, an event per buffer. Device-generic c10 calls only, so this builds without CUDA headers.
[[nodiscard]] std::unique_ptr<CopyQueue> makeDeviceCopyQueue(c10::Device device);

/**
 * @brief A queue whose copies a thread of its own makes later, each after a delay: the staged
 * upload's order checked on a CPU (tests, CLUSTERPPL_TEST_STAGED_UPLOAD). A buffer reused before its
 * fence would be copied after the host overwrote it, and the bits would differ.
 */
class ThreadCopyQueue final : public CopyQueue
{
public:
    explicit ThreadCopyQueue(int delayMicroseconds);
    ~ThreadCopyQueue() override;
    ThreadCopyQueue(const ThreadCopyQueue &) = delete;
    ThreadCopyQueue &operator=(const ThreadCopyQueue &) = delete;

    [[nodiscard]] at::Tensor hostBuffer(std::int64_t bytes) override;
    void enqueue(const at::Tensor &dst, const at::Tensor &src) override;
    void mark(int slot) override;
    void wait(int slot) override;
    void publish() override;
    [[nodiscard]] std::string name() const override;
    /// The most copies enqueued and not yet made when another was enqueued (the overlap seen).
    [[nodiscard]] int maxQueued() const;

private:
    struct State;
    std::unique_ptr<State> m_state;
};

/// What a staged upload did: for docs/speed.md's figures and the tests.
struct StagedUploadStats
{
    std::int64_t tensors = 0;
    std::int64_t chunks = 0;
    std::int64_t bytes = 0;     ///< copied to the device (the evaluation dtype)
    double hostSeconds = 0;     ///< reading the mapping into the buffers (page faults and conversion included)
    double waitSeconds = 0;     ///< the host waiting for a buffer's copy to finish
};

/**
 * @brief Uploads host tensors (over the mapped checkpoint, any dtype, a 2-D strided column slice
 * included) as contiguous device tensors of the evaluation dtype, a chunk at a time through
 * `buffers` host buffers of `chunkBytes`. The bits are those of Tensor::to (the conversion runs on
 * the host, as Tensor::to's does for a host-to-device copy).
 */
class StagedUpload
{
public:
    StagedUpload(std::unique_ptr<CopyQueue> queue, std::int64_t chunkBytes, int buffers = 2);
    /// Waits for the last copies: the buffers are freed only once nothing reads them.
    ~StagedUpload();
    StagedUpload(const StagedUpload &) = delete;
    StagedUpload &operator=(const StagedUpload &) = delete;

    /// Called with (first, count) of the source's units (elements of a contiguous source, rows of a
    /// strided one) once they are in a buffer: their mapped pages may go.
    using ReadCallback = std::function<void(std::int64_t first, std::int64_t count)>;

    /// @p src as a new contiguous tensor of @p dtype on @p device (the queue's device).
    [[nodiscard]] at::Tensor upload(const at::Tensor &src, at::ScalarType dtype, c10::Device device, const ReadCallback &read = {});
    /// Allocates every buffer now (the first upload would): a host that refuses pinned memory says so
    /// before any weight is read.
    void reserve();
    /// The unit upload() cuts @p src in: 1 (elements) when contiguous, else its rows (2-D only).
    [[nodiscard]] static bool byRows(const at::Tensor &src);

    [[nodiscard]] const StagedUploadStats &stats() const { return m_stats; }
    /// The result's model.weight_upload.
    [[nodiscard]] WeightUploadInfo info() const;

private:
    at::Tensor buffer(int slot, std::int64_t bytes);
    void copyChunk(const at::Tensor &from, const at::Tensor &to);

    std::unique_ptr<CopyQueue> m_queue;
    std::int64_t m_chunkBytes;
    std::vector<at::Tensor> m_buffers;
    std::vector<std::int64_t> m_pending; ///< per slot: the chunk number its fence stands after (-1: none)
    std::int64_t m_enqueued = 0;         ///< chunks enqueued so far
    StagedUploadStats m_stats;
};

} // namespace cppl::agent
