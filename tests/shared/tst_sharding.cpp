// SPDX-License-Identifier: MIT
// Shards: contiguous, complete, disjoint, balanced to within one window; rounds: equal counts everywhere.
#include "cppl/errors.h"
#include "cppl/sharding.h"

#include <QTest>

#include <algorithm>
#include <random>

using namespace cppl;

namespace {

std::vector<std::int64_t> randomScored(std::mt19937_64 &rng, std::size_t n, std::int64_t maxW)
{
    std::vector<std::int64_t> s(n);
    for (auto &x : s)
        x = 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(maxW));
    return s;
}

// Checks the contract; returns "" or what is wrong.
QString checkShards(const std::vector<std::int64_t> &scored, const std::vector<Shard> &shards, int ranks)
{
    if (static_cast<int>(shards.size()) != ranks)
        return QStringLiteral("wrong shard count");
    std::int64_t next = 0;
    std::int64_t lo = INT64_MAX;
    std::int64_t hi = INT64_MIN;
    for (const Shard &s : shards) {
        if (s.firstWindow != next || s.endWindow < s.firstWindow)
            return QStringLiteral("not contiguous at window %1").arg(next); // a gap is a drop, an overlap a duplicate
        std::int64_t sum = 0;
        for (std::int64_t i = s.firstWindow; i < s.endWindow; ++i)
            sum += scored[static_cast<std::size_t>(i)];
        if (sum != s.scoredTokens)
            return QStringLiteral("scoredTokens wrong");
        lo = std::min(lo, sum);
        hi = std::max(hi, sum);
        next = s.endWindow;
    }
    if (next != static_cast<std::int64_t>(scored.size()))
        return QStringLiteral("windows dropped at the end");
    const std::int64_t w = scored.empty() ? 0 : *std::max_element(scored.begin(), scored.end());
    if (hi - lo > w)
        return QStringLiteral("unbalanced: max %1 - min %2 > largest window %3").arg(hi).arg(lo).arg(w);
    return {};
}

} // namespace

class TestSharding : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void balancedForEveryRankCount_data()
    {
        QTest::addColumn<int>("ranks");
        for (int r = 1; r <= 64; ++r)
            QTest::addRow("R=%d", r) << r;
    }
    void balancedForEveryRankCount()
    {
        QFETCH(int, ranks);
        std::mt19937_64 rng(static_cast<unsigned>(ranks));
        for (int trial = 0; trial < 20; ++trial) {
            const std::size_t n = 1 + rng() % 300;
            const auto scored = randomScored(rng, n, 1 + static_cast<std::int64_t>(rng() % 600));
            const auto shards = shardWindows(scored, ranks);
            const QString problem = checkShards(scored, shards, ranks);
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
            QCOMPARE(shardWindows(scored, ranks), shards); // deterministic: any rank computes the same
        }
    }

    void exhaustiveSmallCases()
    {
        // Every vector of 1..6 windows with sizes 1..5 for R = 1..7 (more ranks than windows included).
        std::vector<std::int64_t> scored;
        int cases = 0;
        for (int n = 1; n <= 6; ++n) {
            std::vector<int> digits(static_cast<std::size_t>(n), 0);
            while (true) {
                scored.assign(digits.begin(), digits.end());
                for (auto &s : scored)
                    s += 1;
                for (int r = 1; r <= 7; ++r) {
                    const QString problem = checkShards(scored, shardWindows(scored, r), r);
                    QVERIFY2(problem.isEmpty(), qPrintable(problem));
                    ++cases;
                }
                int i = 0;
                while (i < n && ++digits[static_cast<std::size_t>(i)] == 5)
                    digits[static_cast<std::size_t>(i++)] = 0;
                if (i == n)
                    break;
            }
        }
        QVERIFY(cases > 100000);
    }

    void planShardsAreEqualForUniformWindows()
    {
        // llama.cpp plan, 1000 chunks of 255 targets over 7 ranks: 142 or 143 chunks each.
        const WindowPlan plan = planStream({Protocol::LlamaCpp, 512}, 512 * 1000);
        const auto shards = shardPlan(plan, 7);
        for (const Shard &s : shards) {
            QVERIFY(s.windows() == 142 || s.windows() == 143);
            QCOMPARE(s.scoredTokens, s.windows() * 255);
        }
    }

    void batchAlignedShards()
    {
        const WindowPlan plan = planStream({Protocol::HfSliding, 64, 40}, 5000); // uneven first window
        for (std::int64_t batch : {1, 3, 8}) {
            for (int ranks : {1, 2, 5, 13, 200}) {
                const auto shards = shardPlanByBatch(plan, ranks, batch);
                QCOMPARE(static_cast<int>(shards.size()), ranks);
                std::int64_t next = 0;
                std::int64_t lo = INT64_MAX, hi = 0;
                for (const Shard &s : shards) {
                    QCOMPARE(s.firstWindow, next);
                    QVERIFY(s.firstWindow % batch == 0 || s.firstWindow == static_cast<std::int64_t>(plan.windows.size()));
                    std::int64_t sum = 0;
                    for (std::int64_t w = s.firstWindow; w < s.endWindow; ++w)
                        sum += plan.windows[static_cast<std::size_t>(w)].scored();
                    QCOMPARE(s.scoredTokens, sum);
                    lo = std::min(lo, sum);
                    hi = std::max(hi, sum);
                    next = s.endWindow;
                }
                QCOMPARE(next, static_cast<std::int64_t>(plan.windows.size()));
                QVERIFY(hi - lo <= batch * plan.maxScored); // within one batch of windows
            }
        }
    }

    void batchTokensCoverThePlan()
    {
        // The dynamic schedule's global batches: every window in exactly one, in order, the last short.
        const WindowPlan plan = planStream({Protocol::HfSliding, 64, 40}, 5000);
        const auto n = static_cast<std::int64_t>(plan.windows.size());
        for (std::int64_t batch : {std::int64_t{1}, std::int64_t{3}, std::int64_t{8}, n, n + 5}) {
            const auto tokens = batchTokens(plan, batch);
            QCOMPARE(static_cast<std::int64_t>(tokens.size()), (n + batch - 1) / batch);
            std::int64_t total = 0;
            for (std::size_t b = 0; b < tokens.size(); ++b) {
                std::int64_t sum = 0;
                for (std::int64_t w = static_cast<std::int64_t>(b) * batch; w < std::min(n, static_cast<std::int64_t>(b + 1) * batch); ++w)
                    sum += plan.windows[static_cast<std::size_t>(w)].scored();
                QCOMPARE(tokens[b], sum);
                total += tokens[b];
            }
            QCOMPARE(total, plan.scoredTokens);
        }
        QVERIFY_THROWS_EXCEPTION(ConfigError, (void)batchTokens(plan, 0));
    }

    void rejectsZeroRanks()
    {
        QVERIFY_THROWS_EXCEPTION(ConfigError, (void)shardWindows(std::vector<std::int64_t>{1, 2}, 0));
    }

    void roundsAreEqualAcrossRanks_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<std::int64_t>("sync");
        QTest::addColumn<std::int64_t>("batch");
        QTest::addRow("every batch, 3 ranks") << 3 << std::int64_t{0} << std::int64_t{4};
        QTest::addRow("every 1000 tokens, 5 ranks") << 5 << std::int64_t{1000} << std::int64_t{8};
        QTest::addRow("only at the end") << 4 << kSyncAtEnd << std::int64_t{8};
        QTest::addRow("more ranks than windows") << 50 << std::int64_t{0} << std::int64_t{2};
        QTest::addRow("tiny threshold") << 6 << std::int64_t{1} << std::int64_t{1};
    }
    void roundsAreEqualAcrossRanks()
    {
        QFETCH(int, ranks);
        QFETCH(std::int64_t, sync);
        QFETCH(std::int64_t, batch);
        const WindowPlan plan = planStream({Protocol::HfSliding, 64, 48}, 2000); // 41 windows, uneven first/last
        const auto shards = shardPlan(plan, ranks);
        const RoundPlan rounds(plan, shards, sync, batch);
        std::int64_t maxTokens = 0;
        std::int64_t maxWindows = 0;
        for (const Shard &s : shards) {
            maxTokens = std::max(maxTokens, s.scoredTokens);
            maxWindows = std::max(maxWindows, s.windows());
        }
        if (sync == kSyncAtEnd)
            QCOMPARE(rounds.rounds(), 1);
        else if (sync == 0)
            QCOMPARE(rounds.rounds(), static_cast<int>(std::max<std::int64_t>(1, (maxWindows + batch - 1) / batch)));
        else
            QCOMPARE(rounds.rounds(), static_cast<int>(std::max<std::int64_t>(1, (maxTokens + sync - 1) / sync)));
        for (int r = 0; r < ranks; ++r) {
            std::int64_t next = shards[static_cast<std::size_t>(r)].firstWindow;
            std::int64_t tokens = 0;
            for (int j = 0; j < rounds.rounds(); ++j) {
                const Shard part = rounds.roundOf(r, j);
                QCOMPARE(part.firstWindow, next); // rounds tile the shard in order
                if (sync == 0)
                    QVERIFY(part.windows() <= batch);
                else if (part.endWindow != shards[static_cast<std::size_t>(r)].endWindow)
                    QCOMPARE(part.windows() % batch, std::int64_t{0}); // whole batches except at the end
                next = part.endWindow;
                tokens += part.scoredTokens;
            }
            QCOMPARE(next, shards[static_cast<std::size_t>(r)].endWindow);
            QCOMPARE(tokens, shards[static_cast<std::size_t>(r)].scoredTokens);
        }
    }

    void badRoundParameters()
    {
        const WindowPlan plan = planStream({Protocol::LlamaCpp, 8}, 80);
        const auto shards = shardPlan(plan, 2);
        QVERIFY_THROWS_EXCEPTION(ConfigError, RoundPlan(plan, shards, 100, 0));
        QVERIFY_THROWS_EXCEPTION(ConfigError, RoundPlan(plan, shards, -5, 4));
    }
};

QTEST_APPLESS_MAIN(TestSharding)
#include "tst_sharding.moc"
