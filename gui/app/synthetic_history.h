// SPDX-License-Identifier: MIT
#pragma once

// A stored node-count sweep for screenshots and tests of the History and Compare pages: the same
// evaluation (model, data, settings: one settings key) at 1, 2, 4, 8, ... ranks on nodes of four
// GPUs, one failed run and one run that lost a rank and recovered. Every run goes into a RunStore
// through its writer as RunRecorder records a real one (beginRun, pre-flight, samples, logs,
// alerts, finishRun with the result JSON applied by applyResult), so the pages read exactly what
// they read of real runs. The figures come from a small model of a GPU cluster: per-rank rates a
// little slower with more ranks, global batches claimed as ranks go (the dynamic schedule), a
// sync round every 65,536 tokens per rank whose waiting and transfer grow with the ranks and the
// nodes, and the ranks that finish early waiting for the last batch.

#include <QDateTime>
#include <QString>
#include <QStringList>
#include <QTimeZone>

#include <vector>

namespace cppl::core::store {
class RunStore;
}

namespace cppl::app {

struct SyntheticSweep
{
    QStringList sweepRunIds;   ///< the finished runs of the sweep, by world size (the first is the one-rank baseline)
    std::vector<int> worldSizes; ///< of those runs
    QString failedRunId;       ///< a static-schedule run whose rank was killed (on_rank_loss fail): failed, no result
    QString lostRankRunId;     ///< the largest size again, one rank lost and the run finished without it
    QString otherDriverRunId;  ///< the sweep run on nodes with another CUDA driver: not bit-identical to the baseline
    int ranksPerNode = 4;
};

/// 1, 2, 4, ... up to @p maxRanks (at least 8, at most 4096), and @p maxRanks itself when it is
/// not a power of two.
[[nodiscard]] std::vector<int> syntheticSweepSizes(int maxRanks);

/// Writes the sweep up to @p maxRanks ranks into @p store (its writer, then flush()); the runs
/// start at @p start (UTC), one after another. Throws cppl::IoError when the store refuses them
/// (an id already stored).
SyntheticSweep writeSyntheticSweep(cppl::core::store::RunStore &store, int maxRanks,
                                   const QDateTime &start = QDateTime(QDate(2026, 11, 30), QTime(8, 0), QTimeZone::utc()));

} // namespace cppl::app
