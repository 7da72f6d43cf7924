// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, steps 2 to 7 (private to agent/lib/eval): EvalSession runs one evaluation
// from the rendezvous to the result, each step a member, in the order run() calls them. The steps
// live in three files: eval_command.cpp (the command, connect, data, model, plan, default batch and
// checkpoints: the one eval TU with ATen), eval_evaluate.cpp (step 6, the rounds) and
// eval_result.cpp (step 7, the estimate and the result JSON).
#pragma once

#include "cpu_affinity.h"
#include "eval_data.h"
#include "eval_options.h"
#include "runtime_info.h"
#include "distributed/batch_schedule.h"
#include "distributed/checkpoint.h"
#include "distributed/distributed_run.h"
#include "telemetry/publisher.h"

#include "cppl/sharding.h"
#include "cppl/statistics.h"
#include "cppl/telemetry.h"
#include "cppl/window_plan.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace cppl::agent {

class LanguageModel;

/// H:MM:SS for the log lines; "--:--" when unknown.
std::string clock(double seconds);

/// Step 3's result: the token stream as the model sees it, the windows over it, this rank's share.
struct EvalPlan
{
    /// The token stream the windows index. Shared: the fingerprint's hashing thread reads it too,
    /// and may outlive the plan (a short run, a failure).
    std::shared_ptr<const std::vector<std::uint32_t>> flat;
    WindowPlan windows;
    std::vector<Shard> shards;
};

/// Step 4's result: the totals of every rank (exact), and how long it took.
struct EvalOutcome
{
    NllStats stats;
    int rounds = 0;
    double seconds = 0;
    std::vector<dist::RankReport> reports;
    std::vector<std::string> batchRuns; ///< dynamic schedule, rank 0: each rank's batches ("0-3,8")
    NllStats resumedBase;               ///< a resumed run: the committed global totals it started from
    std::vector<dist::DynamicSchedule::LostRank> lostRanks; ///< --on-rank-loss continue: who was lost, and when
    std::string batchesRedone;          ///< ... and the batches evaluated again for them
    double warmupSeconds = 0;           ///< GPU: the warm-up batch before the clock (Evaluator::warmUp)
};

using dist::kReportedKey;

/// Tolerant runs with checkpoints: rank 0's fingerprint (model, data, plan; one line each), for a
/// reporting rank after it, which then need not hash the weights again.
inline const std::string kFingerprintKey = "cppl/fingerprint";

/// One evaluation from the rendezvous to the result; each step is a member, in the order run() calls them.
class EvalSession
{
public:
    EvalSession(const Args &a, EvalOptions o, std::ostream &out, std::ostream &err) : m_a(a), m_o(std::move(o)), m_out(out), m_err(err) {}
    /// Stops a fingerprint still being hashed (nobody waits for it any more), then waits for its thread.
    ~EvalSession();
    EvalSession(const EvalSession &) = delete;
    EvalSession &operator=(const EvalSession &) = delete;

    int run();

    /// A rank that fails tells the others and telemetry before it exits (eval_command.cpp).
    [[noreturn]] void fail(const std::exception &e);

private:
    void logLine(const std::string &line, cppl::telemetry::LogLevel level = cppl::telemetry::LogLevel::Info);

    // eval_command.cpp: steps 2 to 5.
    void connect();
    EvalInput loadData();
    std::unique_ptr<LanguageModel> loadModel();
    EvalPlan makePlan(const EvalInput &input, LanguageModel &model, double loadSeconds);
    void prepareCheckpoints(const ModelInfo &mi, const EvalPlan &p);
    void adoptFingerprint(dist::DistributedRun &run);
    void chooseDefaultBatch(const WindowPlan &plan, const ModelInfo &mi);

    // eval_evaluate.cpp: step 6.
    EvalOutcome evaluate(LanguageModel &model, const EvalInput &input, const EvalPlan &planned);

    // eval_result.cpp: step 7.
    int writeResult(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome);

    const Args &m_a;
    EvalOptions m_o;
    std::ostream &m_out;
    std::ostream &m_err;
    std::unique_ptr<dist::DistributedRun> m_run; ///< set when this is one rank of several
    std::unique_ptr<telemetry::Publisher> m_tel; ///< set with --telemetry
    RuntimeInfo m_runtime;
    CpuPlan m_cpu;
    std::int64_t m_batchCount = 0;                          ///< global batches (with checkpoints)
    std::shared_future<dist::RunFingerprint> m_fingerprint; ///< the reporting rank with checkpoints: ready once hashed
    std::function<dist::RunFingerprint()> m_computeFingerprint; ///< with checkpoints, every rank: hashes the run's fingerprint
    std::shared_ptr<std::atomic<bool>> m_stopHashing = std::make_shared<std::atomic<bool>>(false); ///< ends that hashing early (the destructor)
    bool m_fingerprintShared = false; ///< rank 0 put it in the store (kFingerprintKey) for a reporter after it
    bool m_overlapRan = false; ///< the rounds' collectives ran behind the next round's compute (the result's overlap_sync)
    bool m_memoryKnown = false; ///< the default batch's figures (autoBatch): the GPU before the weights loaded
    std::int64_t m_freeBytes = 0;
    std::int64_t m_totalBytes = 0;
    nlohmann::ordered_json m_batchFrom; ///< how the batch was chosen, for the result
};

} // namespace cppl::agent
