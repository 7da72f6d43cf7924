// SPDX-License-Identifier: MIT
#include "run_fingerprint.h"

#include "fault_hooks.h"
#include "distributed/distributed_run.h"
#include "distributed/rendezvous_store.h"
#include "model/mapped_file.h"

#include <filesystem>
#include <thread>
#include <utility>

namespace cppl::agent {

namespace {

/// The fingerprint of @p weightFiles, @p tokens and @p plan; an empty one, read by nobody, once
/// @p stop is set.
dist::RunFingerprint fingerprintOf(const std::vector<std::string> &weightFiles, const std::shared_ptr<const std::vector<std::uint32_t>> &tokens,
                                   std::string plan, const std::atomic<bool> &stop)
{
    // CLUSTERPPL_TEST_HOLD_FINGERPRINT=MS: the hashing starts MS ms late, as on a host whose disk or
    // cores are busy, so that a test sees a run end before its fingerprint is ready.
    if (const auto hold = faultHooks().holdFingerprint; hold.count() > 0) {
        const auto until = std::chrono::steady_clock::now() + hold;
        while (!stop && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::string models;
    for (const std::string &f : weightFiles) {
        if (stop)
            return {};
        models += std::filesystem::path(f).filename().string() + ' ' + sha256File(f, &stop) + '\n';
    }
    if (stop)
        return {};
    return {sha256Bytes(models.data(), models.size()), sha256Bytes(tokens->data(), tokens->size() * sizeof(std::uint32_t)), std::move(plan)};
}

std::shared_future<dist::RunFingerprint> readyNow(dist::RunFingerprint f)
{
    std::promise<dist::RunFingerprint> ready;
    ready.set_value(std::move(f));
    return ready.get_future().share();
}

} // namespace

CheckpointFingerprint::~CheckpointFingerprint()
{
    *m_stop = true; // the hashing thread then ends within a chunk; m_fingerprint's future waits for it
}

void CheckpointFingerprint::prepare(std::vector<std::string> weightFiles, std::shared_ptr<const std::vector<std::uint32_t>> tokens, std::string plan)
{
    m_compute = [files = std::move(weightFiles), tokens = std::move(tokens), text = std::move(plan), stop = m_stop] {
        return fingerprintOf(files, tokens, text, *stop);
    };
}

dist::RunFingerprint CheckpointFingerprint::hashNow()
{
    const dist::RunFingerprint now = m_compute();
    m_fingerprint = readyNow(now);
    return now;
}

void CheckpointFingerprint::hashInBackground()
{
    m_fingerprint = std::async(std::launch::async, m_compute).share();
}

const dist::RunFingerprint *CheckpointFingerprint::ready(dist::DistributedRun &run, std::chrono::milliseconds timeout)
{
    if (!m_fingerprint.valid())
        adopt(run, timeout); // a reporting rank after rank 0's loss
    if (!m_fingerprint.valid() || m_fingerprint.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
        return nullptr;
    const dist::RunFingerprint &f = m_fingerprint.get();
    if (run.tolerant() && run.rank() == 0 && !m_shared) { // once, for a reporting rank after this one
        run.store().set(kFingerprintKey, f.model + '\n' + f.data + '\n' + f.plan);
        m_shared = true;
    }
    return &f;
}

/// Rank 0's fingerprint from the store, or (rank 0 was lost before it had one) hashed here, beside
/// the evaluation, as rank 0 does.
void CheckpointFingerprint::adopt(dist::DistributedRun &run, std::chrono::milliseconds timeout)
{
    if (!m_compute)
        return;
    if (run.store().check({kFingerprintKey})) {
        const std::string text = run.store().get(kFingerprintKey, timeout).value_or("");
        const auto a = text.find('\n'), b = a == std::string::npos ? a : text.find('\n', a + 1);
        if (b != std::string::npos) {
            m_fingerprint = readyNow({text.substr(0, a), text.substr(a + 1, b - a - 1), text.substr(b + 1)});
            return;
        }
    }
    m_fingerprint = std::async(std::launch::async, m_compute).share();
}

} // namespace cppl::agent
