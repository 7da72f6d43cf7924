// SPDX-License-Identifier: MIT
// The eval command's round loop (agent/lib/eval/round_loop.h) without a model: a one-rank run over a
// scorer whose NLLs are known gives exactly their sums, counts the document totals once, prints its
// progress unless quiet, and refuses non-finite sums. Also the torch-free dtype and device names
// against c10's.
#ifndef Q_MOC_RUN // moc cannot parse <chrono>, which the loop's headers include
#include "eval/compute_spec.h"
#include "eval/compute_spec_c10.h"
#include "eval/evaluator.h"
#include "eval/round_loop.h"
#include "eval/run_fingerprint.h"
#include "exit_codes.h"

#include "cppl/errors.h"
#include "cppl/sharding.h"
#include "cppl/window_plan.h"
#endif

#include <QTest>

#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

using namespace cppl;
using namespace cppl::agent;

namespace {

/// Scores token t of the stream as nll(t), a value that depends on nothing else.
class KnownScorer final : public WindowScorer
{
public:
    explicit KnownScorer(const WindowPlan &plan, double poison = 0) : m_plan(plan), m_poison(poison) {}

    static double nll(std::int64_t t) { return 0.25 + 1.0 / static_cast<double>(t + 3); }

    void run(std::int64_t first, std::int64_t end, NllStats &stats, const Progress &progress) override
    {
        EvalProgress p;
        p.windowsTotal = end - first;
        for (std::int64_t w = first; w < end; ++w) {
            const Window &win = m_plan.windows[static_cast<std::size_t>(w)];
            for (std::int64_t t = win.scoredBegin; t < win.scoredEnd; ++t)
                stats.addToken(m_poison != 0 && t == win.scoredBegin ? m_poison : nll(t));
            ++stats.windows;
            ++p.windowsDone;
            p.tokensDone += win.scored();
            p.tokensTotal += win.scored();
            p.seconds = 1;
            if (progress)
                progress(p, stats);
        }
    }

private:
    const WindowPlan &m_plan;
    double m_poison;
};

EvalPlan planOf(std::int64_t tokens, int shards, std::int64_t batch)
{
    PlanOptions opts;
    opts.context = 16;
    EvalPlan p;
    p.flat = std::make_shared<const std::vector<std::uint32_t>>(static_cast<std::size_t>(tokens), 7u);
    p.windows = planStream(opts, tokens);
    p.shards = shardPlanByBatch(p.windows, shards, batch);
    return p;
}

EvalOptions oneRank(std::int64_t batch)
{
    EvalOptions o;
    o.batch = batch;
    return o;
}

struct LoopRun
{
    EvalOutcome outcome;
    std::string err;
};

LoopRun runLoop(const EvalOptions &o, const EvalPlan &plan, const EvalInput &input, WindowScorer &scorer)
{
    std::ostringstream out, err;
    CheckpointFingerprint fingerprint;
    RoundLoop loop(o, {out, err, nullptr, nullptr, fingerprint}, scorer, input, plan);
    LoopRun r{loop.run(), {}};
    r.err = err.str();
    return r;
}

} // namespace

class TestRoundLoop : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void oneRankSumsAreTheScorersExactly()
    {
        const EvalPlan plan = planOf(200, 1, 4);
        KnownScorer scorer(plan.windows);
        const LoopRun r = runLoop(oneRank(4), plan, EvalInput(), scorer);
        NllStats expected;
        for (const Window &w : plan.windows.windows) {
            for (std::int64_t t = w.scoredBegin; t < w.scoredEnd; ++t)
                expected.addToken(KnownScorer::nll(t));
            ++expected.windows;
        }
        QVERIFY(r.outcome.stats == expected);
        QCOMPARE(r.outcome.stats.tokens, plan.windows.scoredTokens);
        QCOMPARE(r.outcome.rounds, 1);
        QVERIFY(r.outcome.reports.empty());
        QVERIFY(!r.outcome.overlapRan);
    }

    // The document's bytes and words are counted once, by shard 0; the other shards' sums are
    // their windows alone, and the shards together are the whole run's, bit for bit.
    void shardsCountTheDocumentOnce()
    {
        const EvalPlan plan = planOf(300, 3, 2);
        EvalInput input;
        input.bytes = 1234;
        input.words = 210;
        NllStats merged;
        for (int s = 0; s < 3; ++s) {
            EvalOptions o = oneRank(2);
            o.shardRank = s;
            o.shardCount = 3;
            KnownScorer scorer(plan.windows);
            const LoopRun r = runLoop(o, plan, input, scorer);
            QCOMPARE(r.outcome.stats.bytes, s == 0 ? 1234 : 0);
            QCOMPARE(r.outcome.stats.words, s == 0 ? 210 : 0);
            QCOMPARE(r.outcome.stats.windows, plan.shards[static_cast<std::size_t>(s)].windows());
            merged.merge(r.outcome.stats);
        }
        KnownScorer whole(plan.windows);
        const LoopRun one = runLoop(oneRank(2), planOf(300, 1, 2), input, whole);
        QVERIFY(merged == one.outcome.stats);
    }

    void progressLineUnlessQuiet()
    {
        const EvalPlan plan = planOf(100, 1, 8);
        KnownScorer scorer(plan.windows);
        const LoopRun loud = runLoop(oneRank(8), plan, EvalInput(), scorer);
        const std::string last = "[" + std::to_string(plan.windows.windows.size()) + "/" + std::to_string(plan.windows.windows.size()) + " windows] ppl ";
        QVERIFY2(loud.err.find(last) != std::string::npos, loud.err.c_str());
        EvalOptions quiet = oneRank(8);
        quiet.quiet = true;
        const LoopRun silent = runLoop(quiet, plan, EvalInput(), scorer);
        QVERIFY2(silent.err.empty(), silent.err.c_str());
    }

    void nonFiniteSumsAreARuntimeFailure()
    {
        const EvalPlan plan = planOf(64, 1, 4);
        KnownScorer scorer(plan.windows, std::numeric_limits<double>::quiet_NaN());
        EvalOptions o = oneRank(4);
        o.dtype = Dtype::BFloat16;
        try {
            (void)runLoop(o, plan, EvalInput(), scorer);
            QFAIL("non-finite NLLs were accepted");
        } catch (const ExitError &e) {
            QCOMPARE(e.code(), static_cast<int>(kExitRuntime));
            const std::string what = e.what();
            QVERIFY2(what.find("overflowed in bfloat16; try --dtype float32") != std::string::npos, e.what());
        }
    }

    void dtypeNames()
    {
        for (const Dtype d : {Dtype::Float32, Dtype::BFloat16, Dtype::Float16}) {
            QCOMPARE(dtypeFromName(dtypeName(d)), d);
            QCOMPARE(bytesPerElement(d), static_cast<int>(c10::elementSize(toScalarType(d))));
        }
        QCOMPARE(toScalarType(Dtype::Float32), c10::ScalarType::Float);
        QCOMPARE(toScalarType(Dtype::BFloat16), c10::ScalarType::BFloat16);
        QCOMPARE(toScalarType(Dtype::Float16), c10::ScalarType::Half);
        try {
            (void)dtypeFromName("float64");
            QFAIL("float64 was accepted");
        } catch (const ConfigError &e) {
            QCOMPARE(std::string(e.what()), std::string("--dtype \"float64\" is not supported (float32, bfloat16, float16)"));
        }
    }

    // The result's "device" is what c10::Device::str() wrote before the options became torch-free.
    void deviceNamesAreC10s()
    {
        for (const DeviceSpec d : {DeviceSpec{}, DeviceSpec{true, -1}, DeviceSpec{true, 0}, DeviceSpec{true, 3}}) {
            QCOMPARE(d.str(), toDevice(d).str());
            const DeviceSpec back = toDeviceSpec(toDevice(d));
            QCOMPARE(back.cuda, d.cuda);
            QCOMPARE(back.index, d.index);
        }
    }

    void gemmNames()
    {
        QCOMPARE(gemmFromName("auto"), GemmBackend::Auto);
        QCOMPARE(gemmFromName("native"), GemmBackend::Native);
        QCOMPARE(gemmFromName("onednn"), GemmBackend::OneDnn);
        QCOMPARE(gemmFromName("blas"), GemmBackend::Blas);
        QVERIFY_THROWS_EXCEPTION(ConfigError, (void)gemmFromName("mkl"));
    }
};

QTEST_GUILESS_MAIN(TestRoundLoop)
#include "tst_round_loop.moc"
