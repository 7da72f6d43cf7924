// SPDX-License-Identifier: MIT
// The run's fingerprint (checkpoint.h: the weights, the token stream as the model sees it, the
// plan) as checkpoint lines carry it and a resume checks it. Torch-free.
#pragma once

#include "distributed/checkpoint.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace cppl::agent {

namespace dist {
class DistributedRun;
}

/// Tolerant runs with checkpoints: rank 0's fingerprint (model, data, plan; one line each), for a
/// reporting rank after it, which then need not hash the weights again.
inline const std::string kFingerprintKey = "cppl/fingerprint";

/// Hashing the weights takes seconds for large models: rank 0 does it beside the evaluation
/// unless a resume must check it first, and every rank keeps the means, because after rank 0's
/// loss the new reporting rank writes the checkpoints.
class CheckpointFingerprint
{
public:
    CheckpointFingerprint() = default;
    /// Stops a fingerprint still being hashed (nobody waits for it any more), then waits for its thread.
    ~CheckpointFingerprint();
    CheckpointFingerprint(const CheckpointFingerprint &) = delete;
    CheckpointFingerprint &operator=(const CheckpointFingerprint &) = delete;

    /// What it hashes. The thread that hashes owns @p tokens: a short run ends, and its plan goes,
    /// before the hash is done.
    void prepare(std::vector<std::string> weightFiles, std::shared_ptr<const std::vector<std::uint32_t>> tokens, std::string plan);
    /// Hashed here and now (rank 0, to check a resume before any batch); ready from then on.
    dist::RunFingerprint hashNow();
    /// Hashed on a thread of its own, beside the evaluation (rank 0).
    void hashInBackground();
    /// At a checkpoint: the fingerprint once it is hashed, else nullptr (the words are cumulative:
    /// a later round's checkpoint covers this one). A reporting rank after rank 0's loss first
    /// takes rank 0's from the store, or hashes it itself; rank 0 of a tolerant run puts its own
    /// there once, for such a reporter.
    const dist::RunFingerprint *ready(dist::DistributedRun &run, std::chrono::milliseconds timeout);

private:
    void adopt(dist::DistributedRun &run, std::chrono::milliseconds timeout);

    std::function<dist::RunFingerprint()> m_compute; ///< set by prepare(), on every rank
    std::shared_future<dist::RunFingerprint> m_fingerprint; ///< valid once hashing started (or was adopted)
    std::shared_ptr<std::atomic<bool>> m_stop = std::make_shared<std::atomic<bool>>(false); ///< ends the hashing early (the destructor)
    bool m_shared = false; ///< rank 0 put it in the store (kFingerprintKey) for a reporter after it
};

} // namespace cppl::agent
