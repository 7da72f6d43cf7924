// SPDX-License-Identifier: MIT
// Leader-driven tensor-parallel groups (docs/models.md, "Tensor parallelism"): only each group's
// leader takes part in the data-parallel machinery; its followers score the windows it tells them
// to, taking part in the forward pass's collectives only. Torch-free.
#pragma once

#include "evaluator.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace cppl::agent {

class TensorParallelGroup;

/// What a member of a group did: for the closing gather's rows and for telemetry.
struct MemberFigures
{
    double computeSeconds = 0;        ///< scoring windows (the forward's collectives included)
    double tensorParallelSeconds = 0; ///< of it, in the group's reductions (TensorParallelGroup::collectiveSeconds)
    double wallSeconds = 0;           ///< since the member started following (the leader: since it started leading)
    std::int64_t ranges = 0;          ///< commands evaluated
};

/**
 * The leader's scorer: every range of windows it scores is first sent to its followers (a
 * command over the group), so that they run the same forward passes beside it, batch for batch,
 * and the group's collectives pair up. The round loop sees an ordinary WindowScorer.
 */
class TensorParallelLeader final : public WindowScorer
{
public:
    /// @p dieAfterFirstRange: CLUSTERPPL_TEST_DIE=R:tp-range names this rank (fault_hooks.h).
    TensorParallelLeader(WindowScorer &inner, TensorParallelGroup &group, bool dieAfterFirstRange = false);
    void run(std::int64_t first, std::int64_t end, NllStats &stats, ReferenceStats *reference, const Progress &progress) override;
    [[nodiscard]] bool comparesReference() const override { return m_inner.comparesReference(); }
    /// Every follower's figures so far, tp_rank 1 .. N-1 (the followers answer, then go on following).
    [[nodiscard]] std::vector<MemberFigures> followerFigures();
    /// The followers leave their loop; nothing is sent after this.
    void finish();
    /// This member's seconds in the group's reductions.
    [[nodiscard]] double collectiveSeconds() const;

private:
    void send(std::int64_t kind, std::int64_t first, std::int64_t end);

    WindowScorer &m_inner;
    TensorParallelGroup &m_group;
    bool m_dieAfterFirstRange;
    bool m_finished = false;
};

/**
 * A follower's whole evaluation: waits for its leader's commands and scores the ranges it is told
 * into scratch totals (the group's sums are the leader's), answers a request for its figures,
 * and returns at the leader's finish. @p afterRange runs after each range (telemetry).
 */
MemberFigures followLeader(WindowScorer &scorer, TensorParallelGroup &group, const std::function<void(const MemberFigures &)> &afterRange = {},
                           bool dieAfterFirstRange = false);

} // namespace cppl::agent
