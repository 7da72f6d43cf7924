// SPDX-License-Identifier: MIT
#include "staged_upload.h"

#include "cppl/errors.h"

#include <ATen/ops/empty.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace cppl::agent {

namespace {

double secondsSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// A GPU's queue: LibTorch's pinned allocator, a stream from its pool, one event per buffer slot.
class DeviceCopyQueue final : public CopyQueue
{
public:
    explicit DeviceCopyQueue(c10::Device device) : m_impl(device.type()), m_device(device.has_index() ? device : m_impl.getDevice())
    {
        m_stream = m_impl.getStreamFromGlobalPool(m_device);
    }

    at::Tensor hostBuffer(std::int64_t bytes) override
    {
        return at::empty({bytes}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
    }

    void enqueue(const at::Tensor &dst, const at::Tensor &src) override
    {
        const c10::StreamGuard onCopyStream(m_stream);
        dst.copy_(src, /*non_blocking=*/true);
    }

    void mark(int slot) override
    {
        while (static_cast<int>(m_events.size()) <= slot)
            m_events.push_back(std::make_unique<c10::Event>(m_device.type()));
        m_events[static_cast<std::size_t>(slot)]->record(m_stream);
    }

    void wait(int slot) override
    {
        if (slot >= static_cast<int>(m_events.size()))
            return;
        // c10::Event has no host wait in every LibTorch this builds with (1.13 has none); a chunk's
        // copy takes milliseconds, so polling every 20 us costs nothing measurable.
        while (!m_events[static_cast<std::size_t>(slot)]->query())
            std::this_thread::sleep_for(std::chrono::microseconds(20));
    }

    void publish() override
    {
        c10::Event copied(m_device.type());
        copied.record(m_stream);
        copied.block(m_impl.getStream(m_device)); // the compute stream waits on the device, not the host
    }

    std::string name() const override { return "pinned"; }

private:
    c10::impl::VirtualGuardImpl m_impl;
    c10::Device m_device;
    c10::Stream m_stream{c10::Stream::DEFAULT, c10::Device(c10::DeviceType::CPU)};
    std::vector<std::unique_ptr<c10::Event>> m_events;
};

} // namespace

std::unique_ptr<CopyQueue> makeDeviceCopyQueue(c10::Device device) { return std::make_unique<DeviceCopyQueue>(device); }

// ---- ThreadCopyQueue ------------------------------------------------------------------------

struct ThreadCopyQueue::State
{
    std::chrono::microseconds delay;
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::pair<at::Tensor, at::Tensor>> jobs; ///< (dst, src) not yet copied
    std::int64_t enqueued = 0, done = 0;
    std::vector<std::int64_t> marks; ///< per slot: the copies enqueued when it was marked
    int maxQueued = 0;
    bool stop = false;
    std::thread worker;

    void run()
    {
        std::unique_lock lock(mutex);
        for (;;) {
            changed.wait(lock, [&] { return stop || !jobs.empty(); });
            if (jobs.empty())
                return;
            auto [dst, src] = jobs.front();
            lock.unlock();
            std::this_thread::sleep_for(delay); // the host goes on meanwhile, as with a DMA engine
            dst.copy_(src);
            lock.lock();
            jobs.pop_front();
            ++done;
            changed.notify_all();
        }
    }
};

ThreadCopyQueue::ThreadCopyQueue(int delayMicroseconds) : m_state(std::make_unique<State>())
{
    m_state->delay = std::chrono::microseconds(delayMicroseconds);
    m_state->worker = std::thread([s = m_state.get()] { s->run(); });
}

ThreadCopyQueue::~ThreadCopyQueue()
{
    {
        const std::lock_guard lock(m_state->mutex);
        m_state->stop = true;
    }
    m_state->changed.notify_all();
    m_state->worker.join();
}

at::Tensor ThreadCopyQueue::hostBuffer(std::int64_t bytes) { return at::empty({bytes}, at::TensorOptions().dtype(at::kByte)); }

void ThreadCopyQueue::enqueue(const at::Tensor &dst, const at::Tensor &src)
{
    CPPL_ENFORCE(dst.scalar_type() == src.scalar_type() && dst.sizes() == src.sizes() && dst.is_contiguous() && src.is_contiguous(),
                 "a copy between contiguous tensors of one dtype and shape");
    const std::lock_guard lock(m_state->mutex);
    m_state->jobs.emplace_back(dst, src);
    ++m_state->enqueued;
    m_state->maxQueued = std::max(m_state->maxQueued, static_cast<int>(m_state->jobs.size()));
    m_state->changed.notify_all();
}

void ThreadCopyQueue::mark(int slot)
{
    const std::lock_guard lock(m_state->mutex);
    if (static_cast<int>(m_state->marks.size()) <= slot)
        m_state->marks.resize(static_cast<std::size_t>(slot) + 1, 0);
    m_state->marks[static_cast<std::size_t>(slot)] = m_state->enqueued;
}

void ThreadCopyQueue::wait(int slot)
{
    std::unique_lock lock(m_state->mutex);
    const std::int64_t mark = slot < static_cast<int>(m_state->marks.size()) ? m_state->marks[static_cast<std::size_t>(slot)] : 0;
    m_state->changed.wait(lock, [&] { return m_state->done >= mark; });
}

void ThreadCopyQueue::publish()
{
    // The CPU has no stream to order after the copies: the "device" is the host, so it waits.
    std::unique_lock lock(m_state->mutex);
    m_state->changed.wait(lock, [&] { return m_state->done == m_state->enqueued; });
}

std::string ThreadCopyQueue::name() const { return "staged (test queue: copies on a thread, " + std::to_string(m_state->delay.count()) + " us late)"; }

int ThreadCopyQueue::maxQueued() const
{
    const std::lock_guard lock(m_state->mutex);
    return m_state->maxQueued;
}

// ---- StagedUpload ---------------------------------------------------------------------------

StagedUpload::StagedUpload(std::unique_ptr<CopyQueue> queue, std::int64_t chunkBytes, int buffers)
    : m_queue(std::move(queue)), m_chunkBytes(chunkBytes), m_buffers(static_cast<std::size_t>(buffers)), m_pending(static_cast<std::size_t>(buffers), -1)
{
    CPPL_ENFORCE(m_queue && chunkBytes > 0 && buffers >= 1, "a queue, a positive chunk size and at least one buffer");
}

StagedUpload::~StagedUpload()
{
    try {
        for (std::size_t slot = 0; slot < m_pending.size(); ++slot)
            if (m_pending[slot] >= 0)
                m_queue->wait(static_cast<int>(slot));
    } catch (...) { // a device error: already reported by the load that failed; the process leaves
    }
}

void StagedUpload::reserve()
{
    for (std::size_t slot = 0; slot < m_buffers.size(); ++slot)
        (void)buffer(static_cast<int>(slot), m_chunkBytes);
}

bool StagedUpload::byRows(const at::Tensor &src) { return !src.is_contiguous(); }

at::Tensor StagedUpload::upload(const at::Tensor &src, at::ScalarType dtype, c10::Device device, const ReadCallback &read)
{
    const bool rows = byRows(src);
    CPPL_ENFORCE(!rows || (src.dim() == 2 && src.stride(1) == 1), "a contiguous tensor or a 2-D slice of whole-stride rows");
    const at::Tensor out = at::empty(src.sizes(), at::TensorOptions().dtype(dtype).device(device));
    const at::Tensor from = rows ? src : src.reshape({-1});
    const at::Tensor to = rows ? out : out.view({-1});
    const std::int64_t units = from.size(0);
    const std::int64_t unitBytes = (rows ? from.size(1) : 1) * static_cast<std::int64_t>(c10::elementSize(dtype));
    const std::int64_t perChunk = std::max<std::int64_t>(1, m_chunkBytes / std::max<std::int64_t>(1, unitBytes));
    for (std::int64_t first = 0; first < units; first += perChunk) {
        const std::int64_t n = std::min(perChunk, units - first);
        copyChunk(from.narrow(0, first, n), to.narrow(0, first, n));
        if (read)
            read(first, n);
    }
    m_queue->publish();
    ++m_stats.tensors;
    return out;
}

at::Tensor StagedUpload::buffer(int slot, std::int64_t bytes)
{
    at::Tensor &b = m_buffers[static_cast<std::size_t>(slot)];
    if (!b.defined() || b.numel() < bytes) // only after wait(slot): no copy reads the old one
        b = m_queue->hostBuffer(std::max(bytes, m_chunkBytes));
    return b;
}

/// One chunk: wait until its buffer's last copy is done, read (and convert) the chunk into it on
/// the host, enqueue its copy to the device and mark the buffer's fence after it.
void StagedUpload::copyChunk(const at::Tensor &from, const at::Tensor &to)
{
    const int slot = static_cast<int>(m_enqueued % static_cast<std::int64_t>(m_buffers.size()));
    auto t0 = std::chrono::steady_clock::now();
    if (m_pending[static_cast<std::size_t>(slot)] >= 0)
        m_queue->wait(slot);
    m_stats.waitSeconds += secondsSince(t0);
    const std::int64_t bytes = to.numel() * static_cast<std::int64_t>(c10::elementSize(to.scalar_type()));
    t0 = std::chrono::steady_clock::now();
    const at::Tensor host = buffer(slot, bytes).narrow(0, 0, bytes).view(to.scalar_type()).view(to.sizes());
    host.copy_(from); // page faults on the mapping, and the conversion to the evaluation dtype
    m_stats.hostSeconds += secondsSince(t0);
    m_queue->enqueue(to, host);
    m_queue->mark(slot);
    m_pending[static_cast<std::size_t>(slot)] = m_enqueued++;
    ++m_stats.chunks;
    m_stats.bytes += bytes;
}

WeightUploadInfo StagedUpload::info() const
{
    return {m_queue->name(), m_chunkBytes, static_cast<int>(m_buffers.size()), m_stats.chunks, m_stats.bytes, m_stats.hostSeconds, m_stats.waitSeconds, {}};
}

} // namespace cppl::agent
