// SPDX-License-Identifier: MIT
#pragma once

// Runs against node count: throughput with the ideal line, scaling efficiency, comm share (wait
// and transfer), PPL and its deviation from the one-rank baseline, a recommendation, and a fitted
// projection to 16..1024 ranks. Pure functions of stored runs (formulas: docs/run-history.md).

#include "history/run_record.h"

#include <QJsonObject>
#include <QString>
#include <QStringList>

#include <optional>
#include <vector>

namespace cppl::core::history {

class RunHistory;

struct ScalingPoint
{
    QString runId;
    int worldSize = 0;
    int groups = 0;
    int nodes = 0;
    QString topology;                 ///< "hierarchical", "flat", "none" (one rank)
    std::int64_t tokens = 0;
    std::int64_t rounds = 0;
    double tokensPerSecond = 0;       ///< the result's (scored tokens per second of evaluation, all ranks)
    double idealTokensPerSecond = 0;  ///< smallest run's throughput x worldSize / its worldSize
    double efficiency = 0;            ///< tokensPerSecond / idealTokensPerSecond, 0..1+
    double waitShare = 0;             ///< sum of wait / sum of (compute + wait + transfer) over ranks
    double transferShare = 0;
    double commShare = 0;             ///< wait + transfer
    double computeSpeedPerRank = 0;   ///< mean over ranks of tokens / compute seconds
    double commSecondsPerRound = 0;   ///< mean over ranks of (wait + transfer) / rounds; 0 for one rank
    std::optional<double> ppl, pplStderr;
    QString baselineRunId;            ///< empty: no one-rank run of the same settings
    std::optional<bool> bitIdentical; ///< exact sums and token counts equal the baseline's
    std::optional<double> relativeDeviation; ///< ppl / baseline ppl - 1
    /// Where its ranks outnumbered a host's cores (a CPU run) or GPUs (a GPU run): "4 ranks share
    /// the 2 CPU cores of localhost" (host_resources.h); empty when they did not, or it is not known.
    /// Such a run measures that host's contention: the projection is fitted without it.
    QString sharedHosts;
    /// --tensor-parallel N > 1: its baseline above is a run of the same N (bit-identical expected).
    /// Against a one-rank run (N = 1) of the same model, data, protocol and dtype, the matmuls sum
    /// in another order: that is a deviation, never a failure (float32: expected within
    /// kTensorParallelFloat32Bound relative, docs/models.md).
    int tensorParallel = 1;
    QString oneRankRunId;                     ///< the N = 1 run compared with; empty: none stored
    std::optional<double> oneRankDeviation;   ///< ppl / its ppl - 1
    std::optional<double> oneRankBound;       ///< the expected bound (float32 only; other dtypes: measured)
    [[nodiscard]] QString deviationText() const; ///< "bit-identical", "+1.2e-06", or "no baseline"
    /// "deviation from N = 1: +3.1e-07 (float32: within the expected 1e-06)"; empty without one.
    [[nodiscard]] QString oneRankDeviationText() const;
};

/// Tensor parallelism against one rank, float32: the PPL within this relative bound (docs/models.md).
inline constexpr double kTensorParallelFloat32Bound = 1e-6;

/// A relative deviation as History, Compare and the reports write it: three significant digits,
/// signed, no trailing zeros ("+3.1e-07", "-0.0125").
[[nodiscard]] QString relativeDeviationText(double relative);

/// y = a + b·x by least squares, x per the model.
struct LinearFit
{
    QString model;       ///< "flat", "hierarchical", "power"
    QString formula;     ///< with the fitted numbers
    double a = 0, b = 0;
    double rmsError = 0; ///< root mean square of the residuals, in the fitted quantity's unit
    int points = 0;
};

struct ProjectionPoint
{
    int ranks = 0;
    double tokensPerSecond = 0;
    double efficiency = 0;
    double commShare = 0;
};

struct HeldOutCheck
{
    bool available = false;
    QString why;                      ///< when not available
    int ranks = 0;                    ///< the held-out (largest) world size
    double predictedEfficiency = 0, measuredEfficiency = 0;
    double predictedCommShare = 0, measuredCommShare = 0;
    double predictedTokensPerSecond = 0, measuredTokensPerSecond = 0;
    [[nodiscard]] double efficiencyErrorPoints() const { return 100 * (predictedEfficiency - measuredEfficiency); }
    [[nodiscard]] double commShareErrorPoints() const { return 100 * (predictedCommShare - measuredCommShare); }
    [[nodiscard]] double throughputRelativeError() const
    {
        return measuredTokensPerSecond > 0 ? predictedTokensPerSecond / measuredTokensPerSecond - 1 : 0;
    }
};

struct Projection
{
    bool available = false;
    QString why;
    QString topology;                 ///< the collective model used: the runs' topology
    std::int64_t tokens = 0;          ///< the workload projected (the largest run's tokens_scored)
    std::int64_t syncEveryTokens = -1; ///< -1: once at the end
    LinearFit computeSpeed;           ///< log s(R) = log s1 - α·log R
    LinearFit collectiveFlat;         ///< c(R) = a + b·R
    LinearFit collectiveHierarchical; ///< c(R) = a + b·log2 R
    QString formula;                  ///< the whole model, in words
    QStringList excluded;             ///< runs left out of the fit: their ranks shared a host's cores or GPUs
    std::vector<ProjectionPoint> points;
    HeldOutCheck heldOut;
};

struct CompareOptions
{
    double threshold = 0.75;          ///< efficiency the recommendation must keep
    std::vector<int> projectTo = {16, 32, 64, 128, 256, 512, 1024};
};

struct Comparison
{
    std::vector<ScalingPoint> points; ///< by world size, then start time
    double threshold = 0.75;
    std::optional<int> recommendedWorldSize;
    QString recommendation;           ///< one sentence
    Projection projection;
    QStringList warnings;
};

/// The figures of one run (efficiency and baseline fields left for compareRuns()).
[[nodiscard]] ScalingPoint scalingPoint(const RunRecord &run);
/// @p extraBaselines: one-rank runs from the history to compare against when the selection has none.
[[nodiscard]] Comparison compareRuns(const std::vector<RunRecord> &runs, const std::vector<RunRecord> &extraBaselines = {},
                                     const CompareOptions &options = {});
/// Fits on @p points (but those whose ranks shared a host's cores or GPUs) and projects; the
/// held-out check refits without the largest world size fitted.
[[nodiscard]] Projection project(const std::vector<ScalingPoint> &points, std::int64_t tokens, std::int64_t syncEveryTokens,
                                 const QString &topology, const std::vector<int> &projectTo);
[[nodiscard]] LinearFit fitLine(const std::vector<double> &x, const std::vector<double> &y);

/// The stored runs @p run is compared with: the baseline of its settings (one rank, or one group
/// of its N), and with --tensor-parallel N > 1 also the one-rank run of its settings at N = 1
/// (oneRankSettingsKey), if stored. @p excludeRunId: not @p run itself.
[[nodiscard]] std::vector<RunRecord> storedBaselines(const RunHistory &store, const RunRecord &run, const QString &excludeRunId = {});

[[nodiscard]] QJsonObject comparisonToJson(const Comparison &c);
/// The scaling table, the recommendation and the projection as text (the CLI's compare).
[[nodiscard]] QString formatComparison(const Comparison &c);

} // namespace cppl::core::history
