// SPDX-License-Identifier: MIT
// `clusterppl-agent eval`, steps 2 to 7 (private to agent/lib/eval): EvalSession runs one evaluation
// from the rendezvous to the result, each step a member, in the order run() calls them. The steps
// live in three files: eval_command.cpp (the command, connect, data, model, plan, default batch,
// checkpoints and the evaluation's set-up: the one eval TU with ATen), round_loop.cpp (step 6, the
// rounds: RoundLoop) and eval_result.cpp (step 7, the estimate and the result JSON).
#pragma once

#include "cpu_affinity.h"
#include "model_info.h"
#include "eval_data.h"
#include "eval_options.h"
#include "round_loop.h"
#include "run_fingerprint.h"
#include "runtime_info.h"
#include "tensor_parallel.h"
#include "distributed/distributed_run.h"
#include "telemetry/publisher.h"

#include "cppl/telemetry.h"
#include "cppl/window_plan.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

namespace cppl::agent {

class Evaluator;
class LanguageModel;
class WindowScorer;
struct MemberFigures;

/// One evaluation from the rendezvous to the result; each step is a member, in the order run() calls them.
class EvalSession
{
public:
    EvalSession(const Args &a, EvalOptions o, std::ostream &out, std::ostream &err) : m_a(a), m_o(std::move(o)), m_out(out), m_err(err) {}
    EvalSession(const EvalSession &) = delete;
    EvalSession &operator=(const EvalSession &) = delete;

    int run();

    /// A rank that fails tells the others and telemetry before it exits (eval_command.cpp).
    [[noreturn]] void fail(const std::exception &e);

private:
    void logLine(const std::string &line, cppl::telemetry::LogLevel level = cppl::telemetry::LogLevel::Info);

    // eval_command.cpp: steps 2 to 5.
    void connect();
    void joinRun();
    [[nodiscard]] CpuPlacement cpuPlacement() const;
    void openTelemetry(const std::string &endpoint);
    EvalInput loadData();
    std::unique_ptr<LanguageModel> loadModel();
    std::unique_ptr<LanguageModel> loadReference(const LanguageModel &model);
    EvalPlan makePlan(const EvalInput &input, LanguageModel &model, LanguageModel *reference, double loadSeconds);
    WindowPlan planWindows(const EvalInput &input, const ModelInfo &mi, std::vector<std::uint32_t> &flat);
    void prepareCheckpoints(const ModelInfo &mi, const EvalPlan &p);
    void chooseDefaultBatch(const WindowPlan &plan, const ModelInfo &mi);
    void describePlan(const ModelInfo &mi, const EvalPlan &p, double loadSeconds);

    // eval_command.cpp: step 6's set-up; the rounds are a RoundLoop (round_loop.h).
    EvalOutcome evaluate(LanguageModel &model, LanguageModel *reference, const EvalInput &input, const EvalPlan &plan);
    EvalOutcome follow(WindowScorer &scorer);
    void publishFollower(const MemberFigures &f, bool final);
    double warmUp(Evaluator &evaluator, const ModelInfo &mi, std::int64_t windows);
    void profile(Evaluator &evaluator, const ModelInfo &mi);

    // eval_result.cpp: step 7.
    int writeResult(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome);
    nlohmann::ordered_json resultJson(const EvalInput &input, const ModelInfo &mi, double loadSeconds, const EvalPlan &p, const EvalOutcome &outcome) const;
    void addSettings(nlohmann::ordered_json &j) const;
    void addDistribution(nlohmann::ordered_json &j, const EvalPlan &p, const EvalOutcome &outcome) const;
    void addReference(nlohmann::ordered_json &j, const EvalOutcome &outcome) const;
    void announceResultWritten();

    const Args &m_a;
    EvalOptions m_o;
    std::ostream &m_out;
    std::ostream &m_err;
    std::unique_ptr<dist::DistributedRun> m_run; ///< set when this is one rank of several
    std::unique_ptr<TensorParallelGroup> m_tp;   ///< set with --tensor-parallel N > 1 (outlives the model)
    std::unique_ptr<telemetry::Publisher> m_tel; ///< set with --telemetry
    RuntimeInfo m_runtime;
    CpuPlan m_cpu;
    bool m_memoryKnown = false; ///< the default batch's figures (autoBatch): the GPU before the weights loaded
    std::int64_t m_freeBytes = 0;
    std::int64_t m_totalBytes = 0;
    nlohmann::ordered_json m_batchFrom; ///< how the batch was chosen, for the result
    std::optional<ModelInfo> m_referenceInfo; ///< --reference-model, once loaded
    double m_referenceLoadSeconds = 0;
    std::int64_t m_rssBeforeLoad = 0; ///< resident bytes before the model loaded (the result's model.rss_load_bytes)
    std::int64_t m_rssLoad = 0;       ///< ... and what the load added
    std::int64_t m_rssLoadPeak = 0;   ///< ... and the most it added at any moment (the result's model.rss_load_peak_bytes)
    double m_loadStart = 0;           ///< steadySeconds() when the model's load began (first_token_seconds counts from it)
    /// Last, so destroyed first: a fingerprint still being hashed stops (nobody waits for it any
    /// more) before the rest of the session goes.
    CheckpointFingerprint m_fingerprint;
};

} // namespace cppl::agent
