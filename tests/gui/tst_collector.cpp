// SPDX-License-Identifier: MIT
// The collector: pure merge logic with a fake clock, then real ZeroMQ sockets on 127.0.0.1 with
// simulated ranks (raw PUSH) and real agent publishers.
#include "cli/cli_run.h"
#include "cppl/errors.h"
#include "telemetry/collector.h"
#include "telemetry/collector_object.h"
#include "telemetry/message_peek.h"
#include "telemetry/publisher.h"
#include "telemetry_fixtures.h"
#include "test_exact.h"

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <latch>

using namespace cppl::core::telemetry;
using cppl::NllStats;
using cppl::telemetry::Kind;
using cppl::test::header;
using cppl::test::progressOf;
using cppl::test::RawPush;

namespace {

Snapshot waitForReceived(Collector &c, std::int64_t n, int timeoutMs = 20000)
{
    QElapsedTimer t;
    t.start();
    while (c.messagesReceived() < n && t.elapsed() < timeoutMs)
        QTest::qSleep(10);
    return c.snapshot();
}

cppl::telemetry::Credentials serverCredentials(const cppl::telemetry::RunCredentials &r)
{
    return r.collector;
}

// The wire of `ranks` simulated ranks, interleaved at random, each rank's own stream perturbed:
// heartbeats and log lines between progress (unless left out), messages dropped on the way,
// neighbours swapped, a duplicate; plus two garbage messages. finals: each rank's last totals; lost:
// its expected gaps; senders: the rank of each message before the garbage.
struct Wire
{
    std::vector<std::string> messages;
    std::vector<NllStats> finals;
    std::vector<std::int64_t> lost;
    std::vector<int> senders;
};

struct WireOptions
{
    int tokensPerStep = 20;
    bool heartbeatsAndLogs = true;
};

Wire perturbedWire(const std::string &run, int ranks, int steps, std::uint64_t seed, WireOptions o = {})
{
    Wire w;
    std::mt19937_64 rng(seed);
    w.finals.resize(static_cast<std::size_t>(ranks));
    w.lost.resize(static_cast<std::size_t>(ranks));
    std::vector<std::vector<std::string>> perRank(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        NllStats s;
        auto &mine = perRank[static_cast<std::size_t>(r)];
        std::int64_t seq = 0;
        for (int k = 0; k < steps; ++k) {
            cppl::test::addTokens(s, rng, o.tokensPerStep);
            const bool last = k + 1 == steps;
            if (o.heartbeatsAndLogs && k % 4 == 2) {
                auto hb = header(run, r, ranks, seq++, k % 8 == 2 ? Kind::Heartbeat : Kind::Log);
                hb.text = "[round] \"rank\":999, \"seq\":0 in a log line";
                mine.push_back(cppl::telemetry::encode(hb));
            }
            if (!last && k > 0 && rng() % 5 == 0) { // dropped on the way (never the first or last)
                ++w.lost[static_cast<std::size_t>(r)];
                ++seq;
                continue;
            }
            mine.push_back(cppl::telemetry::encode(progressOf(run, r, ranks, seq++, s, steps)));
        }
        for (std::size_t i = 1; i + 2 < mine.size(); i += 3) // swap neighbours: reordering
            if (rng() % 2)
                std::swap(mine[i], mine[i + 1]);
        if (mine.size() > 2)
            mine.push_back(mine[1]); // a duplicate
        w.finals[static_cast<std::size_t>(r)] = s;
    }
    std::vector<std::size_t> next(static_cast<std::size_t>(ranks), 0);
    std::vector<int> pending;
    for (int r = 0; r < ranks; ++r)
        pending.push_back(r);
    while (!pending.empty()) {
        const std::size_t k = rng() % pending.size();
        const auto r = static_cast<std::size_t>(pending[k]);
        w.messages.push_back(perRank[r][next[r]++]);
        w.senders.push_back(pending[k]);
        if (next[r] == perRank[r].size()) {
            pending[k] = pending.back();
            pending.pop_back();
        }
    }
    w.messages.push_back("{\"v\":1,");
    w.messages.push_back("[]");
    return w;
}

/// What Collector::receiveBatch() does with one drained batch, without sockets.
void ingestCoalesced(CollectorState &st, const std::vector<std::string> &batch, double now)
{
    std::vector<std::optional<PeekedHeader>> peeks;
    for (const auto &m : batch)
        peeks.push_back(peekHeader(m));
    std::vector<char> superseded;
    markSuperseded(peeks, superseded);
    for (std::size_t i = 0; i < batch.size(); ++i)
        if (!(superseded[i] && st.skipSuperseded(*peeks[i], now)))
            (void)st.ingest(batch[i], now);
}

} // namespace

class TestCollector : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void sequenceGapsReorderingAndDuplicates()
    {
        CollectorState st({});
        auto send = [&](std::int64_t seq) { return st.apply(header("r", 0, 2, seq, Kind::Heartbeat), 0.0); };
        QVERIFY(send(5)); // first message: joined mid-stream, no gap before it
        QVERIFY(send(6));
        QVERIFY(send(9)); // 7 and 8 missing
        auto v = st.snapshot(0).ranks[0];
        QCOMPARE(v.lost, 2);
        QVERIFY(send(8)); // late: fills its gap
        v = st.snapshot(0).ranks[0];
        QCOMPARE(v.lost, 1);
        QCOMPARE(v.reordered, 1);
        QVERIFY(!send(8)); // duplicate: dropped
        QVERIFY(!send(9));
        v = st.snapshot(0).ranks[0];
        QCOMPARE(v.duplicates, 2);
        QCOMPARE(v.received, 4);
        QVERIFY(send(4)); // before the first one seen: reordered, but never counted as lost
        QCOMPARE(st.snapshot(0).ranks[0].lost, 1);
        QVERIFY(send(200)); // a jump beyond the window
        QCOMPARE(st.snapshot(0).ranks[0].lost, 1 + 190);
        QCOMPARE(st.snapshot(0).ranks[1].state, RankState::Connecting); // never heard from
    }

    void memoryFiguresReachTheRankView()
    {
        // Rank 0 on a GPU (what the agent's NVML reading adds), rank 1 without one: through the
        // wire form (encode -> decode) into the collector's per-rank state.
        CollectorState st({});
        NllStats s;
        std::mt19937_64 rng(7);
        cppl::test::addTokens(s, rng, 10);
        auto gpu = progressOf("r", 0, 2, 0, s, 4);
        gpu.progress.deviceMemoryBytes = std::int64_t(13) << 30;
        gpu.progress.deviceMemoryTotalBytes = std::int64_t(80) << 30;
        gpu.progress.gpuUtilizationPercent = 97;
        for (auto m : {gpu, progressOf("r", 1, 2, 0, s, 4)}) {
            cppl::telemetry::Message wire;
            QVERIFY(cppl::telemetry::decode(cppl::telemetry::encode(m), wire).ok());
            QVERIFY(st.apply(wire, 0.0));
        }
        const auto snap = st.snapshot(0);
        QCOMPARE(snap.ranks[0].rssBytes, 1 << 20);
        QCOMPARE(snap.ranks[0].deviceMemoryBytes.value(), std::int64_t(13) << 30);
        QCOMPARE(snap.ranks[0].deviceMemoryTotalBytes.value(), std::int64_t(80) << 30);
        QCOMPARE(snap.ranks[0].gpuUtilizationPercent.value(), 97);
        QCOMPARE(snap.ranks[1].rssBytes, 1 << 20);
        QVERIFY(!snap.ranks[1].deviceMemoryBytes && !snap.ranks[1].deviceMemoryTotalBytes && !snap.ranks[1].gpuUtilizationPercent);
    }

    void windowsOfTheRun_data()
    {
        QTest::addColumn<bool>("dynamic");
        QTest::addRow("static shards") << false;
        QTest::addRow("dynamic batches") << true;
    }

    void windowsOfTheRun()
    {
        // 9 windows on 3 ranks. Static: each rank reports its shard (3) and the run's total is
        // their sum. Dynamic: each reports the run's 9 (it has no share of its own; a fast rank
        // does more than an even one): the total is 9, and the CLI's live lines say each rank's
        // count and part of the run, never "5/3".
        QFETCH(bool, dynamic);
        CollectorState::Options o;
        o.windowsGlobal = dynamic;
        CollectorState st(o);
        std::mt19937_64 rng(3);
        const std::int64_t done[] = {dynamic ? 5 : 3, 2, 0};
        for (int r = 0; r < 3; ++r) {
            NllStats s;
            cppl::test::addTokens(s, rng, 10);
            s.windows = done[r];
            QVERIFY(st.apply(progressOf("r", r, 3, 0, s, dynamic ? 9 : 3), 0.0));
        }
        auto snap = st.snapshot(0);
        QCOMPARE(snap.windowsGlobal, dynamic);
        QCOMPARE(snap.windowsTotal, 9);
        QCOMPARE(snap.windowsDone, dynamic ? 7 : 5);
        const QStringList lines = cppl::core::liveLines(snap);
        QCOMPARE(lines.size(), 4);
        if (dynamic) {
            QVERIFY2(lines[0].contains(QStringLiteral(": evaluating, 5 windows (55.6% of the run's 9), ")), qPrintable(lines[0]));
            QVERIFY2(lines[2].contains(QStringLiteral(", 0 windows (0.0% of the run's 9), ")), qPrintable(lines[2]));
            QVERIFY2(lines[3].contains(QStringLiteral(" tokens, windows 7/9 (77.8%), ")), qPrintable(lines[3]));
        } else {
            QVERIFY2(lines[0].contains(QStringLiteral(": evaluating, 3/3 windows of its shard, ")), qPrintable(lines[0]));
            QVERIFY2(lines[3].contains(QStringLiteral(" tokens, windows 5/9 (55.6%), ")), qPrintable(lines[3]));
        }
        QVERIFY(lines[3].startsWith(QStringLiteral("[live] ppl ")));
        if (!dynamic)
            return;
        // A rank not heard from yet (rank 3 of 4, still loading or connecting) is named so: its
        // slot has no host, group or windows, and "(, group 0)" would name a wrong group.
        {
            CollectorState::Options o4;
            o4.windowsGlobal = true;
            CollectorState four(o4);
            NllStats s0;
            cppl::test::addTokens(s0, rng, 10);
            s0.windows = 1;
            QVERIFY(four.apply(progressOf("r", 0, 4, 0, s0, 9), 0.0));
            const QStringList early = cppl::core::liveLines(four.snapshot(0));
            QCOMPARE(early.size(), 5);
            QVERIFY2(early[3] == QStringLiteral("[live]   rank 3: connecting, not heard from yet"), qPrintable(early[3]));
            QVERIFY2(early[0].contains(QStringLiteral(": evaluating, 1 windows (11.1% of the run's 9), ")), qPrintable(early[0]));
        }
        // A rank lost in a run that goes on keeps the windows it counted while the others redo
        // its uncommitted ones: the run never reads more than 100% done.
        NllStats s;
        cppl::test::addTokens(s, rng, 10);
        s.windows = 4;
        QVERIFY(st.apply(progressOf("r", 2, 3, 1, s, 9), 1.0));
        snap = st.snapshot(1.0);
        QCOMPARE(snap.windowsDone, 9);
        QVERIFY2(cppl::core::liveLines(snap).back().contains(QStringLiteral("windows 9/9 (100.0%)")), qPrintable(cppl::core::liveLines(snap).back()));
    }

    void tensorParallelGroupsCountOnce()
    {
        // --tensor-parallel 2 on 4 ranks: groups {0,1} and {2,3}. A follower scores its leader's
        // windows; even one that sent its (the same) totals counts nowhere: the run's sums, tokens
        // and windows are the leaders' alone, and each rank keeps its group and member.
        CollectorState st({});
        std::mt19937_64 rng(11);
        NllStats leaders;
        for (int r = 0; r < 4; ++r) {
            NllStats s;
            cppl::test::addTokens(s, rng, 10 + r);
            s.windows = 2;
            auto m = progressOf("r", r, 4, 0, s, 2);
            m.progress.tpSize = 2;
            m.progress.tpRank = r % 2;
            m.progress.tpCollectiveSecondsTotal = 0.25 * (r + 1);
            QVERIFY(st.apply(m, 0.0));
            if (r % 2 == 0)
                leaders.merge(s);
        }
        const auto snap = st.snapshot(0);
        QVERIFY(snap.global.nll == leaders.nll);
        QVERIFY(snap.global.nllSquared == leaders.nllSquared);
        QCOMPARE(snap.global.tokens, leaders.tokens);
        QCOMPARE(snap.windowsTotal, 4);
        QCOMPARE(snap.windowsDone, 4);
        QCOMPARE(snap.ranks.size(), std::size_t(4));
        QCOMPARE(snap.ranks[0].stats.tokens + snap.ranks[2].stats.tokens, leaders.tokens);
        for (int r = 0; r < 4; ++r) {
            const auto &v = snap.ranks[static_cast<std::size_t>(r)];
            QCOMPARE(v.tpSize, 2);
            QCOMPARE(v.tpRank, r % 2);
            CPPL_COMPARE_BITS(v.tpCollectiveSeconds, 0.25 * (r + 1));
            QVERIFY(r % 2 ? v.stats.tokens == 0 : v.stats.tokens > 0);
        }
    }

    // --reference-model: each rank's running KLD sum, tokens compared and same-top count, over real
    // sockets; the global figures are the exact merge of the ranks' latest sums (an older message
    // arriving late changes nothing), a rank of an old agent (no such keys) is left out, and a
    // tensor-parallel follower's comparison counts nowhere (its leader's is the group's).
    void referenceSumsMergeExactly()
    {
        Collector collector({});
        RawPush push(collector.endpoint());
        const int world = 5;
        std::mt19937_64 rng(29);
        std::uniform_real_distribution<double> kldOf(0.0, 0.3);
        cppl::ExactSum kldAll;
        std::int64_t tokensAll = 0, sameAll = 0;
        std::vector<cppl::telemetry::Progress::Reference> finals(world);
        std::int64_t sent = 0;
        for (int r = 0; r < world; ++r) {
            NllStats s;
            cppl::telemetry::Progress::Reference ref;
            std::string older;
            for (int k = 0; k < 6; ++k) {
                cppl::test::addTokens(s, rng, 30);
                for (int i = 0; i < 30; ++i) {
                    const double kl = i % 7 == 0 ? 1e-300 : kldOf(rng);
                    ref.kld.add(kl);
                    ++ref.tokens;
                    ref.sameTop += kl < 0.1 ? 1 : 0;
                }
                auto m = progressOf("run-k", r, world, k, s, 6);
                if (r != 3) // rank 3: an agent from before these keys
                    m.progress.reference = ref;
                if (r == 4) { // rank 4 follows rank 3 in a group of two: its comparison is its leader's
                    m.progress.tpSize = 2;
                    m.progress.tpRank = 1;
                }
                const std::string bytes = cppl::telemetry::encode(m);
                if (k == 3) {
                    older = bytes; // held back: arrives after the newer ones
                    continue;
                }
                push.sendAll(bytes);
                ++sent;
            }
            push.sendAll(older);
            ++sent;
            finals[static_cast<std::size_t>(r)] = ref;
            if (r < 3) {
                kldAll += ref.kld;
                tokensAll += ref.tokens;
                sameAll += ref.sameTop;
            }
        }
        const Snapshot snap = waitForReceived(collector, sent);
        QCOMPARE(collector.messagesReceived(), sent);
        QVERIFY(snap.reference.has_value());
        QVERIFY(snap.reference->kld == kldAll); // bit for bit
        QCOMPARE(snap.reference->tokens, tokensAll);
        QCOMPARE(snap.reference->sameTop, sameAll);
        CPPL_COMPARE_BITS(snap.reference->kldMean(), kldAll.toDouble() / static_cast<double>(tokensAll));
        CPPL_COMPARE_BITS(snap.reference->sameTopShare(), static_cast<double>(sameAll) / static_cast<double>(tokensAll));
        for (int r = 0; r < 3; ++r) {
            const auto &v = snap.ranks[static_cast<std::size_t>(r)];
            QVERIFY(v.reference.has_value());
            QVERIFY(v.reference->kld == finals[static_cast<std::size_t>(r)].kld);
            QCOMPARE(v.reference->tokens, finals[static_cast<std::size_t>(r)].tokens);
        }
        QVERIFY(!snap.ranks[3].reference);
        QVERIFY(!snap.ranks[4].reference);
        // Without a reference model no rank sends them: no global comparison either.
        CollectorState plain({});
        NllStats s;
        cppl::test::addTokens(s, rng, 10);
        QVERIFY(plain.apply(progressOf("r", 0, 1, 0, s, 1), 0.0));
        QVERIFY(!plain.snapshot(0).reference);
    }

    void statesAndStalls()
    {
        CollectorState st({});
        auto msg = [&](std::int64_t rank, std::int64_t seq, Kind k) { return header("r", rank, 3, seq, k); };
        auto hello = msg(0, 0, Kind::Hello);
        hello.phase = cppl::telemetry::Phase::Loading;
        st.apply(hello, 0);
        QCOMPARE(st.snapshot(0.5).ranks[0].state, RankState::Loading);
        auto sync = msg(0, 1, Kind::Heartbeat);
        sync.phase = cppl::telemetry::Phase::Syncing;
        st.apply(sync, 1);
        QCOMPARE(st.snapshot(1).ranks[0].state, RankState::Syncing);
        NllStats s;
        st.apply(progressOf("r", 0, 3, 2, s, 10), 1.5);
        QCOMPARE(st.snapshot(1.5).ranks[0].state, RankState::Evaluating);
        auto stale = msg(0, 1, Kind::Heartbeat); // a late, older heartbeat does not turn the clock back
        stale.phase = cppl::telemetry::Phase::Loading;
        QVERIFY(!st.apply(stale, 1.6)); // (it is a duplicate of seq 1 anyway)
        QVERIFY(!st.checkStalls(4.4));
        QVERIFY(st.checkStalls(4.6)); // 3 s after its last message
        QCOMPARE(st.snapshot(4.6).ranks[0].state, RankState::Stalled);
        st.apply(msg(0, 3, Kind::Heartbeat), 5); // alive again
        QCOMPARE(st.snapshot(5).ranks[0].state, RankState::Evaluating);
        st.apply(msg(0, 4, Kind::Result), 5);
        QCOMPARE(st.snapshot(100).ranks[0].state, RankState::Done); // done ranks never stall
        auto err = msg(1, 0, Kind::Error);
        err.text = "CUDA out of memory";
        err.exitCode = 4;
        st.apply(err, 5);
        auto bye = msg(2, 0, Kind::Bye);
        bye.exitCode = 5;
        st.apply(bye, 5);
        const auto snap = st.snapshot(6);
        QCOMPARE(snap.ranks[1].state, RankState::Failed);
        QCOMPARE(snap.ranks[1].error, std::string("CUDA out of memory"));
        QCOMPARE(snap.ranks[2].state, RankState::Failed);
        QCOMPARE(snap.stateCounts[static_cast<std::size_t>(RankState::Failed)], 2);
        // Another run's messages are counted and ignored.
        QVERIFY(!st.apply(header("other-run", 0, 3, 9, Kind::Heartbeat), 6));
        QVERIFY(!st.apply(header("r", 0, 4, 9, Kind::Heartbeat), 6));
        QCOMPARE(st.foreign(), 2);
    }

    void resultJudgedOnceEveryRankEnded()
    {
        // Rank 0's result can arrive before another rank's last sums (their streams are not
        // ordered with each other; under load the gap is long): no verdict until every rank said
        // its last word, then the exact comparison, which a rank's missing tokens still fail.
        std::mt19937_64 rng(7);
        NllStats early, late, zero, all;
        cppl::test::addTokens(early, rng, 50);
        late = early;
        cppl::test::addTokens(late, rng, 50);
        cppl::test::addTokens(zero, rng, 80);
        all.merge(zero);
        all.merge(late);
        auto result = header("r", 0, 2, 1, Kind::Result);
        result.resultJson = nlohmann::json{{"nll_sum_exact", all.nll.toString()}, {"nll_sq_sum_exact", all.nllSquared.toString()},
                                           {"tokens_scored", all.tokens}, {"windows", all.windows}}
                                .dump();
        for (const bool lastSumsArrive : {true, false}) {
            CollectorState st({});
            st.apply(progressOf("r", 1, 2, 0, early, 4), 1);
            st.apply(progressOf("r", 0, 2, 0, zero, 4), 1);
            st.apply(result, 1);
            auto snap = st.snapshot(1);
            QVERIFY(!snap.resultJson.empty());
            QVERIFY(!snap.resultMatches.has_value());
            if (lastSumsArrive) {
                st.apply(progressOf("r", 1, 2, 1, late, 4), 2);
                QVERIFY(!st.snapshot(2).resultMatches.has_value()); // rank 1 has not ended yet
            }
            auto bye = header("r", 1, 2, 2, Kind::Bye);
            bye.exitCode = 0;
            st.apply(bye, 2);
            snap = st.snapshot(2);
            QVERIFY(snap.resultMatches.has_value());
            QCOMPARE(*snap.resultMatches, lastSumsArrive);
        }
    }

    void stragglersCommShareAndDeviation()
    {
        CollectorState st({});
        // Round 1: rank 2 arrives last (waits 0), rank 0 waited 0.3 s for it.
        const double waits[3] = {0.3, 0.1, 0.0};
        for (int r = 0; r < 3; ++r) {
            auto m = header("r", r, 3, 0, Kind::Sync);
            m.sync = {1, 4, waits[r], 0.01 * (r + 1)};
            st.apply(m, 0);
        }
        std::mt19937_64 rng(7);
        NllStats s[3];
        for (int r = 0; r < 3; ++r) {
            cppl::test::addTokens(s[r], rng, 500 + 100 * r);
            st.apply(progressOf("r", r, 3, 1, s[r], 10), 0);
        }
        const auto snap = st.snapshot(0);
        QCOMPARE(snap.rounds.size(), std::size_t{1});
        QCOMPARE(snap.rounds[0].straggler, 2);
        QCOMPARE(snap.rounds[0].reported, 3);
        QCOMPARE(snap.rounds[0].stragglerLagSeconds, 0.3);
        QCOMPARE(snap.rounds[0].maxTransferSeconds, 0.03);
        // progressOf: compute 2 s, wait 0.1·(rank % 4), transfer 0.05.
        const auto &r1 = snap.ranks[1];
        QCOMPARE(r1.waitShare, 0.1 / 2.15);
        QCOMPARE(r1.transferShare, 0.05 / 2.15);
        NllStats all;
        for (auto &x : s)
            all.merge(x);
        const auto global = cppl::computePerplexity(all);
        CPPL_COMPARE_BITS(snap.globalPpl.ppl, global.ppl);
        const auto local = cppl::computePerplexity(s[1]);
        CPPL_COMPARE_BITS(r1.local.ppl, local.ppl);
        CPPL_COMPARE_BITS(r1.deviation, local.ppl - global.ppl);
        CPPL_COMPARE_BITS(r1.deviationRelative, local.ppl / global.ppl - 1);
    }

    // Many simulated ranks over a real socket: lost, reordered and duplicated messages, garbage in
    // between, and the merged global equal to the exact merge of every rank's final stats.
    void manyRanksWithLossAndReordering_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("steps");
        QTest::addRow("8 ranks") << 8 << 30;
        QTest::addRow("256 ranks") << 256 << 12;
    }
    void manyRanksWithLossAndReordering()
    {
        QFETCH(int, ranks);
        QFETCH(int, steps);
        Collector collector({});
        RawPush push(collector.endpoint());
        // Progress only (no heartbeats or log lines), interleaved at random keeping each rank's own
        // (already perturbed) order.
        const Wire w = perturbedWire("run-a", ranks, steps, static_cast<std::uint64_t>(ranks), {50, false});
        const std::vector<std::string> &wire = w.messages;
        const std::vector<NllStats> &finals = w.finals;
        const std::vector<std::int64_t> &expectedLost = w.lost;
        // The interleaving is real: most neighbours on the wire come from different ranks.
        std::size_t switches = 0;
        for (std::size_t i = 1; i < w.senders.size(); ++i)
            switches += w.senders[i] != w.senders[i - 1] ? 1 : 0;
        QVERIFY2(2 * switches > w.senders.size(), qPrintable(QStringLiteral("%1 rank switches in %2 messages").arg(switches).arg(w.senders.size())));
        for (const auto &m : wire)
            push.sendAll(m);
        const auto snap = waitForReceived(collector, static_cast<std::int64_t>(wire.size()));
        QCOMPARE(collector.messagesReceived(), static_cast<std::int64_t>(wire.size()));
        QCOMPARE(snap.decode.rejectedTotal(), 2);
        QCOMPARE(snap.decode.accepted + snap.decode.rejectedTotal() + snap.coalescedTotal, static_cast<std::int64_t>(wire.size()));
        NllStats all;
        for (int r = 0; r < ranks; ++r) {
            all.merge(finals[static_cast<std::size_t>(r)]);
            const auto &v = snap.ranks[static_cast<std::size_t>(r)];
            QCOMPARE(v.lost, expectedLost[static_cast<std::size_t>(r)]);
            QVERIFY(v.stats == finals[static_cast<std::size_t>(r)]);
        }
        QVERIFY(snap.global.nll == all.nll); // bit for bit
        QVERIFY(snap.global.nllSquared == all.nllSquared);
        QCOMPARE(snap.global.tokens, all.tokens);
        const auto expected = cppl::computePerplexity(all);
        CPPL_COMPARE_BITS(snap.globalPpl.ppl, expected.ppl);
        CPPL_COMPARE_BITS(snap.globalPpl.pplStderr, expected.pplStderr);
    }

    void peekHeaderFindsTheHeaderOrDeclines()
    {
        auto m = cppl::test::progressOf("run-p", 5, 64, 1234, NllStats{}, 10);
        const std::string wire = cppl::telemetry::encode(m);
        const auto p = peekHeader(wire);
        QVERIFY(p);
        QCOMPARE(std::string(p->run), std::string("run-p"));
        QCOMPARE(p->rank, 5);
        QCOMPARE(p->worldSize, 64);
        QCOMPARE(p->seq, 1234);
        QVERIFY(p->kind == Kind::Progress);
        // A log line that quotes header keys does not fool it.
        auto log = header("run-p", 3, 64, 7, Kind::Log);
        log.text = "\"rank\":9,\"seq\":1,\"kind\":\"progress\"}";
        const auto q = peekHeader(cppl::telemetry::encode(log));
        QVERIFY(q && q->rank == 3 && q->seq == 7 && q->kind == Kind::Log);
        // Key order and spacing are free.
        const auto r = peekHeader(R"( { "seq" : 3 , "kind":"heartbeat","world_size":2,"x":[],"rank":1,"run":"a"} )");
        QVERIFY(!r); // a nested value: left to decode()
        const auto ok = peekHeader(R"( { "seq" : 3 , "kind":"heartbeat","world_size":2,"x":null,"rank":1,"run":"a"} )");
        QVERIFY(ok && ok->seq == 3 && ok->rank == 1 && ok->worldSize == 2 && ok->run == "a" && ok->kind == Kind::Heartbeat);
        // Whatever it does not follow, it leaves to decode().
        for (const char *bad : {R"({"run":"a","rank":1,"world_size":2,"seq":3})",                          // no kind
                                R"({"run":"a","rank":1,"world_size":2,"seq":3,"kind":"progress","seq":4})", // duplicate
                                "{\"run\":\"a\\u0062\",\"rank\":1,\"world_size\":2,\"seq\":3,\"kind\":\"progress\"}", // escaped run
                                "{\"run\":\"a\",\"r\\u0061nk\":1,\"rank\":1,\"world_size\":2,\"seq\":3,\"kind\":\"progress\"}", // escaped key
                                R"({"run":"a","rank":1.0,"world_size":2,"seq":3,"kind":"progress"})",
                                R"({"run":"a","rank":-1,"world_size":2,"seq":3,"kind":"progress"})",
                                R"({"run":"a","rank":"1","world_size":2,"seq":3,"kind":"progress"})",
                                R"({"run":"a","rank":1,"world_size":2,"seq":3,"kind":"nonsense"})",
                                R"({"run":"a","rank":1,"world_size":2,"seq":3,"kind":"progress"} x)",
                                R"({"run":"a","rank":1,"world_size":2,"seq":3,"kind":"progress",})",
                                R"({"run":"a","rank":1,"world_size":2,"seq":3,"kind":"progress")", "", "[]", "{"})
            QVERIFY2(!peekHeader(bad), bad);
    }

    void coalescedBatchesEqualOneByOne()
    {
        // The same perturbed wire applied message by message and in drained batches of every
        // size: the same totals (bit for bit), states and seq counters; only the count of
        // messages not decoded differs.
        const int ranks = 64;
        const Wire w = perturbedWire("run-c", ranks, 40, 11);
        CollectorState one({});
        for (const auto &m : w.messages)
            (void)one.ingest(m, 1.0);
        const auto a = one.snapshot(1.0);
        QCOMPARE(a.coalescedTotal, 0);
        for (const std::size_t batchSize : {std::size_t(1), std::size_t(7), std::size_t(500), w.messages.size()}) {
            CollectorState st({});
            for (std::size_t start = 0; start < w.messages.size(); start += batchSize)
                ingestCoalesced(st, std::vector(w.messages.begin() + std::ptrdiff_t(start),
                                                w.messages.begin() + std::ptrdiff_t(std::min(w.messages.size(), start + batchSize))),
                                1.0);
            const auto b = st.snapshot(1.0);
            QVERIFY(b.global.nll == a.global.nll);
            QVERIFY(b.global.nllSquared == a.global.nllSquared);
            QCOMPARE(b.global.tokens, a.global.tokens);
            CPPL_COMPARE_BITS(b.globalPpl.ppl, a.globalPpl.ppl);
            for (int r = 0; r < ranks; ++r) {
                const auto &x = a.ranks[std::size_t(r)];
                const auto &y = b.ranks[std::size_t(r)];
                QVERIFY(y.stats == w.finals[std::size_t(r)]);
                QVERIFY(y.stats == x.stats);
                QCOMPARE(y.lost, w.lost[std::size_t(r)]);
                QCOMPARE(y.lost, x.lost);
                QCOMPARE(y.reordered, x.reordered);
                QCOMPARE(y.duplicates, x.duplicates);
                QCOMPARE(y.received, x.received);
                QCOMPARE(y.lastSeq, x.lastSeq);
                QCOMPARE(y.state, x.state);
                QCOMPARE(y.lastLog, x.lastLog);
            }
            QCOMPARE(b.decode.rejectedTotal(), a.decode.rejectedTotal());
            QCOMPARE(b.decode.accepted + b.coalescedTotal, a.decode.accepted); // every message decoded or skipped
            if (batchSize == 1)
                QCOMPARE(b.coalescedTotal, 0);
            if (batchSize == w.messages.size()) // one batch: every rank's older progress skipped
                QVERIFY2(b.coalescedTotal > std::int64_t(w.messages.size()) / 2, qPrintable(QString::number(b.coalescedTotal)));
        }
    }

    void laggingCollectorSkipsSupersededMessages()
    {
        // A sender queues 24,000 messages before the collector exists (as when the collector's
        // thread was starved); they arrive at once. The collector reads them in large batches,
        // decodes only each rank's newest, and ends with exactly the ranks' final totals.
        std::string endpoint;
        {
            Collector probe({});
            endpoint = probe.endpoint(); // a free port, free again after this block
        }
        const int ranks = 64, steps = 375;
        RawPush push(endpoint);
        std::vector<NllStats> finals(ranks);
        std::mt19937_64 rng(5);
        std::int64_t sent = 0;
        for (int k = 0; k < steps; ++k)
            for (int r = 0; r < ranks; ++r) {
                cppl::test::addTokens(finals[std::size_t(r)], rng, 4);
                push.sendAll(cppl::telemetry::encode(progressOf("run-l", r, ranks, k, finals[std::size_t(r)], steps)));
                ++sent;
            }
        CollectorOptions o;
        o.bind = endpoint;
        Collector collector(o);
        const auto snap = waitForReceived(collector, sent, 60000);
        QCOMPARE(collector.messagesReceived(), sent);
        NllStats all;
        for (int r = 0; r < ranks; ++r) {
            all.merge(finals[std::size_t(r)]);
            QVERIFY(snap.ranks[std::size_t(r)].stats == finals[std::size_t(r)]);
            QCOMPARE(snap.ranks[std::size_t(r)].lost, 0);
            QCOMPARE(snap.ranks[std::size_t(r)].received, steps);
        }
        QVERIFY(snap.global.nll == all.nll);
        QCOMPARE(snap.global.tokens, all.tokens);
        QCOMPARE(snap.decode.accepted + snap.coalescedTotal, sent);
        qInfo("%lld messages: %lld decoded, %lld superseded and skipped", static_cast<long long>(sent),
              static_cast<long long>(snap.decode.accepted), static_cast<long long>(snap.coalescedTotal));
        QVERIFY(snap.coalescedTotal > 0);
    }

    // Real publishers (the agent's code) as ranks; rank 0's result carries the aggregated result.
    void publishersMergeToTheFinalResultBitForBit()
    {
        Collector collector({});
        const int world = 6;
        std::vector<NllStats> finals(world);
        std::vector<std::thread> threads;
        std::latch allDone(world);
        NllStats all;
        for (int r = 0; r < world; ++r)
            threads.emplace_back([&, r] {
                cppl::agent::telemetry::PublisherOptions o;
                o.progressInterval = std::chrono::milliseconds(5);
                auto pub = cppl::agent::telemetry::Publisher::open(collector.endpoint(), {"run-b", r, "localhost", 0, r, world},
                                                                  std::nullopt, o);
                pub->phase(cppl::telemetry::Phase::Evaluating);
                std::mt19937_64 rng(static_cast<std::uint64_t>(r) + 100);
                NllStats s;
                for (int k = 0; k < 40; ++k) {
                    cppl::test::addTokens(s, rng, 64);
                    auto m = progressOf("run-b", r, world, 0, s, 40);
                    pub->progress(m.progress, k == 39);
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
                finals[static_cast<std::size_t>(r)] = s;
                allDone.arrive_and_wait(); // the final all-reduce
                std::string resultJson;
                if (r == 0) {
                    // Rank 0's aggregated result, as eval writes it.
                    for (auto &x : finals)
                        all.merge(x);
                    resultJson = nlohmann::json{{"nll_sum_exact", all.nll.toString()}, {"nll_sq_sum_exact", all.nllSquared.toString()},
                                                {"tokens_scored", all.tokens}, {"windows", all.windows}}
                                     .dump();
                }
                pub->result(resultJson);
                pub->close(0);
            });
        for (auto &t : threads)
            t.join();
        QElapsedTimer t;
        t.start();
        Snapshot snap;
        do {
            QTest::qSleep(20);
            snap = collector.snapshot();
        } while (!(snap.resultMatches && *snap.resultMatches) && t.elapsed() < 10000);
        QVERIFY(snap.resultMatches.has_value());
        QVERIFY(*snap.resultMatches);
        QVERIFY(snap.global.nll == all.nll);
        CPPL_COMPARE_BITS(snap.globalPpl.ppl, cppl::computePerplexity(all).ppl);
        QCOMPARE(snap.stateCounts[static_cast<std::size_t>(RankState::Done)], world);
        QCOMPARE(snap.lostTotal, 0);
    }

    void stallDetectedWithinThreeSeconds()
    {
        Collector collector({});
        RawPush push(collector.endpoint());
        push.sendAll(cppl::telemetry::encode(header("run-c", 0, 2, 0, Kind::Hello)));
        push.sendAll(cppl::telemetry::encode(header("run-c", 1, 2, 0, Kind::Hello)));
        waitForReceived(collector, 2);
        QElapsedTimer t;
        t.start();
        // Rank 1 keeps heartbeating; rank 0 falls silent.
        std::int64_t seq = 1;
        while (collector.snapshot().ranks[0].state != RankState::Stalled && t.elapsed() < 10000) {
            push.sendAll(cppl::telemetry::encode(header("run-c", 1, 2, seq++, Kind::Heartbeat)));
            QTest::qSleep(100);
        }
        const auto elapsed = t.elapsed();
        const auto snap = collector.snapshot();
        QCOMPARE(snap.ranks[0].state, RankState::Stalled);
        QCOMPARE(snap.ranks[1].state, RankState::Evaluating);
        QVERIFY2(elapsed >= 2900 && elapsed <= 4000, QByteArray::number(elapsed).constData());
        qInfo("rank 0 marked stalled %lld ms after its last message (threshold 3 s)", static_cast<long long>(elapsed));
    }

    void wrongCurveKeysGetNothingThrough()
    {
        const auto run = cppl::telemetry::generateCredentials();
        const auto other = cppl::telemetry::generateCredentials();
        CollectorOptions o;
        o.curve = serverCredentials(run);
        Collector collector(o);
        auto wrongClient = run.agent;
        wrongClient.clientPublic = other.agent.clientPublic; // a key pair this run never admitted
        wrongClient.clientSecret = other.agent.clientSecret;
        auto wrongServer = run.agent;
        wrongServer.serverPublic = other.agent.serverPublic;  // talks to the wrong server key
        {
            RawPush a(collector.endpoint(), wrongClient);
            RawPush b(collector.endpoint(), wrongServer);
            RawPush c(collector.endpoint()); // plaintext
            for (int i = 0; i < 5; ++i) {
                a.send(cppl::telemetry::encode(header("run-d", 0, 2, i, Kind::Heartbeat)));
                b.send(cppl::telemetry::encode(header("run-d", 0, 2, i, Kind::Heartbeat)));
                c.send(cppl::telemetry::encode(header("run-d", 0, 2, i, Kind::Heartbeat)));
            }
            QTRY_VERIFY_WITH_TIMEOUT(collector.authRejected() >= 3, 10000);
            QTest::qWait(300);
        }
        QCOMPARE(collector.messagesReceived(), 0);
        // The run's own key gets through, over the same server.
        RawPush good(collector.endpoint(), run.agent);
        good.sendAll(cppl::telemetry::encode(header("run-d", 1, 2, 0, Kind::Heartbeat)));
        const auto snap = waitForReceived(collector, 1);
        QCOMPARE(collector.messagesReceived(), 1);
        QVERIFY(snap.ranks[1].heard);
        QVERIFY(!snap.ranks[0].heard);
        QVERIFY(snap.authRejected >= 3);
        qInfo("rejected handshakes: %lld", static_cast<long long>(snap.authRejected));
        // A publisher refuses plaintext beyond loopback.
        auto lan = [] {
            cppl::agent::telemetry::Identity id{"x", 0, "h", 0, 0, 1};
            (void)cppl::agent::telemetry::Publisher::open("tcp://10.255.255.1:5557", id, std::nullopt);
        };
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, lan());
    }

    void collectorRestartMidRun()
    {
        std::string endpoint;
        auto first = std::make_unique<Collector>(CollectorOptions{});
        endpoint = first->endpoint();
        const int world = 4;
        cppl::agent::telemetry::PublisherOptions po;
        po.progressInterval = std::chrono::milliseconds(1);
        std::vector<std::unique_ptr<cppl::agent::telemetry::Publisher>> pubs;
        std::vector<NllStats> stats(world);
        for (int r = 0; r < world; ++r)
            pubs.push_back(cppl::agent::telemetry::Publisher::open(endpoint, {"run-e", r, "localhost", 0, r, world}, std::nullopt, po));
        std::mt19937_64 rng(3);
        auto step = [&](bool final) {
            for (int r = 0; r < world; ++r) {
                cppl::test::addTokens(stats[static_cast<std::size_t>(r)], rng, 32);
                pubs[static_cast<std::size_t>(r)]->progress(progressOf("run-e", r, world, 0, stats[static_cast<std::size_t>(r)], 99).progress, final);
            }
            QTest::qSleep(5);
        };
        for (int k = 0; k < 10; ++k)
            step(false);
        QTRY_VERIFY_WITH_TIMEOUT(first->snapshot().global.tokens > 0, 30000);
        first.reset(); // the dashboard restarts; the port is free again
        for (int k = 0; k < 10; ++k)
            step(false); // sent into the void (or queued by ZeroMQ)
        CollectorOptions o;
        o.bind = endpoint;
        Collector second(o);
        for (int k = 0; k < 10; ++k)
            step(k == 9);
        NllStats all;
        for (auto &s : stats)
            all.merge(s);
        QTRY_VERIFY_WITH_TIMEOUT(second.snapshot().global.nll == all.nll, 10000);
        const auto snap = second.snapshot();
        QCOMPARE(snap.global.tokens, all.tokens);
        QCOMPARE(snap.stateCounts[static_cast<std::size_t>(RankState::Evaluating)], world);
        for (auto &p : pubs)
            p->close();
    }

    void snapshotsAreCoalescedTo25Hz()
    {
        CollectorObject object;
        CollectorOptions o;
        QVERIFY(object.start(o));
        QSignalSpy spy(&object, &CollectorObject::snapshotReady);
        RawPush push(object.endpoint().toStdString());
        QElapsedTimer t;
        t.start();
        std::int64_t seq = 0;
        NllStats s;
        std::mt19937_64 rng(1);
        while (t.elapsed() < 1000) { // ~ thousands of messages in one second
            for (int i = 0; i < 50; ++i) {
                cppl::test::addTokens(s, rng, 1);
                push.send(cppl::telemetry::encode(progressOf("run-f", 0, 1, seq++, s, 1 << 20)));
            }
            QTest::qWait(1); // lets the adapter's coalescing timer fire (never processEvents())
        }
        QTest::qWait(200);
        const double seconds = static_cast<double>(t.elapsed()) / 1000.0;
        qInfo("%lld messages, %lld snapshots in %.2f s", static_cast<long long>(seq), static_cast<long long>(spy.count()), seconds);
        QVERIFY(spy.count() >= 5);
        QVERIFY(spy.count() <= static_cast<int>(25 * seconds) + 2);
        QTRY_COMPARE_WITH_TIMEOUT(object.latest()->global.tokens, s.tokens, 30000);
        QVERIFY(object.latest()->global.nll == s.nll);
        // A bind that cannot work says why.
        QSignalSpy failed(&object, &CollectorObject::failed);
        CollectorOptions bad;
        bad.bind = "tcp://0.0.0.0:0"; // every interface without CURVE
        QVERIFY(!object.start(bad));
        QCOMPARE(failed.count(), 1);
        QVERIFY(failed.at(0).at(0).toString().contains(QStringLiteral("CURVE credentials are required")));
    }

    void plotJugglerRepublish()
    {
        CollectorOptions o;
        o.publishBind = "tcp://127.0.0.1:0";
        Collector collector(o);
        void *ctx = zmq_ctx_new();
        void *sub = zmq_socket(ctx, ZMQ_SUB);
        zmq_setsockopt(sub, ZMQ_SUBSCRIBE, "", 0);
        zmq_connect(sub, collector.publishEndpoint().c_str());
        RawPush push(collector.endpoint());
        NllStats s;
        s.addToken(2.0);
        s.addToken(3.0);
        bool sawRank = false;
        bool sawGlobal = false;
        int rcvTimeout = 100;
        zmq_setsockopt(sub, ZMQ_RCVTIMEO, &rcvTimeout, sizeof rcvTimeout);
        QElapsedTimer t;
        t.start();
        std::int64_t seq = 0;
        while (!(sawRank && sawGlobal) && t.elapsed() < 10000) {
            push.send(cppl::telemetry::encode(progressOf("run-g", 0, 1, seq++, s, 4))); // PUB drops until SUB joins
            char topic[64] = {};
            const int n = zmq_recv(sub, topic, sizeof topic - 1, 0);
            if (n < 0)
                continue;
            char body[4096] = {};
            const int m = zmq_recv(sub, body, sizeof body - 1, 0);
            QVERIFY(m > 0);
            const std::string tp(topic, static_cast<std::size_t>(n));
            const auto j = nlohmann::json::parse(std::string(body, static_cast<std::size_t>(m)));
            if (tp == "run-g/rank0") {
                sawRank = true;
                QCOMPARE(j["tokens_scored_total"].get<int>(), 2);
            } else if (tp == "run-g/global") {
                sawGlobal = true;
                CPPL_COMPARE_BITS(j["ppl"].get<double>(), std::exp(2.5)); // the JSON carries every bit
            }
        }
        zmq_close(sub);
        zmq_ctx_term(ctx);
        QVERIFY(sawRank);
        QVERIFY(sawGlobal);
    }
};

QTEST_GUILESS_MAIN(TestCollector)
#include "tst_collector.moc"
