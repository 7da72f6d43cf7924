// SPDX-License-Identifier: MIT
#pragma once

// What the run history keeps about one run, as plain values (QtCore only): the dashboard's History
// and Compare pages, the reports and the CLI all read these. docs/run-history.md describes the
// tables they mirror.

#include "cppl/cluster_profile.h"

#include <QByteArray>
#include <QDateTime>
#include <QJsonArray>
#include <QJsonObject>
#include <QMetaType>
#include <QString>

#include <cstdint>
#include <optional>
#include <vector>

namespace cppl::core::history {

enum class RunStatus { Running, Finished, Failed, Stopped, Interrupted };
[[nodiscard]] QString statusName(RunStatus status);
[[nodiscard]] std::optional<RunStatus> parseStatus(const QString &name);

/// One per-rank sample of the live telemetry (downsampled: docs/run-history.md, "Samples").
struct RankSample
{
    double t = 0;              ///< seconds since the run started
    int rank = 0;
    double tokensPerSecond = 0;
    double waitShare = 0;      ///< 0..1 of the rank's own time
    double transferShare = 0;  ///< 0..1
    double deviation = 0;      ///< the rank's running PPL / the global running PPL - 1
    std::int64_t tokens = 0;   ///< scored so far by this rank
};

/// A rank's final figures: from the result's ranks[] (distributed runs), else the last snapshot.
struct RankSummary
{
    int rank = 0;
    QString host;
    int group = 0;
    std::int64_t tokens = 0;
    std::int64_t windows = 0;
    std::int64_t rounds = 0;
    double computeSeconds = 0;
    double waitSeconds = 0;
    double transferSeconds = 0;
    double wallSeconds = 0;
    double tokensPerSecond = 0; ///< tokens / compute seconds
    std::optional<int> exitCode;
};

struct LogLine
{
    int rank = 0;              ///< -1: the launcher's own lines
    std::int64_t seq = 0;      ///< the line's number within its rank (0-based), gaps where lines were dropped
    double t = 0;
    bool isStderr = false;
    QString line;
};

struct StoredAlert
{
    double t = 0;
    QDateTime when;
    int rank = -1;
    QString kind;              ///< run::alertKindName()
    QString message;
};

/// A row of the runs table, and with get() everything else the history holds about the run.
struct RunRecord
{
    std::int64_t id = 0;       ///< the history's row id (0: not stored yet)
    QString runId;
    RunStatus status = RunStatus::Running;
    QDateTime started;         ///< UTC
    QDateTime ended;           ///< UTC; invalid while running
    QString source;            ///< "cli", "dashboard", "sweep", "import"
    QString profileName;
    QJsonObject profile;       ///< profileToJson() of the profile it ran
    QJsonObject settings;      ///< the evaluation settings (model, data, protocol, context, ...)
    QString launcher;          ///< "local" or "ssh"
    int worldSize = 0;
    int groupsCount = 0;
    int nodeCount = 0;         ///< distinct hosts
    QJsonArray hosts;          ///< [{name, address, slots}]
    QJsonArray groups;         ///< [[ranks...]], the first of each is its leader
    QJsonObject versions;      ///< agent, libtorch, nccl, cuda, driver, blas: what is known
    QJsonArray preflight;      ///< [{host, ran, problems, report}]
    QByteArray resultJson;     ///< rank 0's result, exactly as received
    /// --on-rank-loss continue: the ranks the run lost and recovered from, the result's
    /// `lost_ranks` ([{rank, host, round, cause}]); a recovered run is Finished. Derived from
    /// resultJson wherever a record is made or read (lostRanksOf), so no column of its own.
    QJsonArray lostRanks;
    std::optional<double> ppl;
    std::optional<double> pplStderr;
    QString nllSumExact;
    std::int64_t tokensScored = 0;
    std::optional<double> tokensPerSecond;
    std::optional<int> exitCode;
    QString firstCause;
    QString model;             ///< as the settings key sees it (absolute path)
    QString data;
    QString protocol;
    QString settingsKey;       ///< settingsKey(): what must match for a baseline
    QString owner;             ///< "host:pid" of the process recording it (crash detection)

    // Filled by RunHistory::get() only.
    std::vector<RankSample> samples;
    std::vector<RankSummary> ranks;
    std::vector<LogLine> logs;
    std::vector<StoredAlert> alerts;
    std::vector<std::pair<int, std::int64_t>> logsDropped; ///< (rank, lines not kept), only ranks that dropped some
};

/// list() filters; empty fields do not filter.
struct RunFilter
{
    QString model;             ///< substring of the model path
    QString data;              ///< substring of the data path
    QString protocol;          ///< exact
    std::optional<RunStatus> status;
    QDateTime from, to;        ///< started within [from, to]
    int worldSize = 0;
    int nodeCount = 0;
    QString text;              ///< substring of run id, profile name, model, data, or first cause
    int limit = 0;             ///< 0: all, newest first
};

/// The evaluation settings that decide a result's bits: equal keys mean "the same evaluation".
struct SettingsKeyInputs
{
    QString model, data, protocol, dtype;
    std::int64_t context = 0, stride = 0, batch = 0, maxWindows = 0;
    /// Weights quantized at load (--quantize): "int8/32", "int4-sym/64/head", ...; empty: none
    /// (the key of a float run is what it was before quantization existed).
    QString quantize;
    /// --tensor-parallel N: its matmuls sum in another order than one rank's, so N > 1 is a key of
    /// its own whose baseline is one group (world size N; baselineWorldSize); 1 leaves the key as it was.
    int tensorParallel = 1;
};
[[nodiscard]] SettingsKeyInputs settingsInputsFromProfile(const ClusterProfile &profile, const QString &profileDir);
/// From an agent result JSON (its model.path, data.path, protocol, context, ...).
[[nodiscard]] SettingsKeyInputs settingsInputsFromResult(const QJsonObject &result);
/// sha256 (hex, first 32 digits) over the inputs in a fixed order; paths made absolute and clean.
[[nodiscard]] QString settingsKey(const SettingsKeyInputs &in);
[[nodiscard]] QJsonObject settingsJson(const SettingsKeyInputs &in);
/// The inputs back from settingsJson()'s object (a stored run's settings; other keys ignored).
[[nodiscard]] SettingsKeyInputs settingsInputsFromJson(const QJsonObject &settings);
/// The tensor-parallel group size @p run's result names (tensor_parallel.size); 1 without.
[[nodiscard]] int tensorParallelOf(const RunRecord &run);
/// The world size of @p run's baseline: one rank, or one tensor-parallel group (bit-identical for
/// any data-parallel width of the same N; against N = 1 only within float rounding: docs/models.md).
[[nodiscard]] inline int baselineWorldSize(const RunRecord &run) { return tensorParallelOf(run); }
/// A tensor-parallel run's settings key had it run at N = 1 (the same model, data, protocol, dtype,
/// context, batch, windows and quantization): the key of the one-rank run its deviation is shown
/// against. Empty for N = 1 and for a run without stored settings.
[[nodiscard]] QString oneRankSettingsKey(const RunRecord &run);
/// The dtype @p run's result says it ran in ("float32", "bfloat16"); empty without a result.
[[nodiscard]] QString resultDtype(const RunRecord &run);

/// Fills ppl, ppl_stderr, nll_sum_exact, tokens, tokens/s, world size, groups and rank summaries
/// (from ranks[]) of @p rec from its resultJson. False when it is not a JSON object.
bool applyResult(RunRecord &rec);
/// @brief The result's `lost_ranks` (empty when none, or no result).
[[nodiscard]] QJsonArray lostRanksOf(const QByteArray &resultJson);
/// One rank's figures from a result JSON's ranks[] row or an exported run's rank_summary row (the
/// same names): all but tokensPerSecond and exitCode, which the two fill differently.
[[nodiscard]] RankSummary rankSummaryFromJson(const QJsonObject &o);
/// The fields rankSummaryFromJson reads, under the same keys (tokens/s and the exit code are the caller's).
[[nodiscard]] QJsonObject rankSummaryJson(const RankSummary &s);
/// The versions a result JSON and pre-flight reports carry, merged (pre-flight first host wins).
[[nodiscard]] QJsonObject versionsFrom(const QJsonArray &preflight, const QJsonObject &result);

/// "host:pid" of this process.
[[nodiscard]] QString currentOwner();

} // namespace cppl::core::history

Q_DECLARE_METATYPE(cppl::core::history::RunRecord)
