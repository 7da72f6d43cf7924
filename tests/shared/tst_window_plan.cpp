// SPDX-License-Identifier: MIT
// Window plans against scored-token sets computed by hand from each reference loop.
#include "cppl/errors.h"
#include "cppl/window_plan.h"

#include <QTest>

#include <set>

using namespace cppl;
using Windows = std::vector<Window>;
Q_DECLARE_METATYPE(Windows)
Q_DECLARE_METATYPE(std::vector<std::int64_t>)

namespace {

std::set<std::int64_t> scoredSet(const WindowPlan &plan)
{
    std::set<std::int64_t> s;
    for (const Window &w : plan.windows)
        for (std::int64_t t = w.scoredBegin; t < w.scoredEnd; ++t) {
            const bool fresh = s.insert(t).second;
            if (!fresh)
                throw std::logic_error("target scored twice");
        }
    return s;
}

std::set<std::int64_t> range(std::int64_t a, std::int64_t b)
{
    std::set<std::int64_t> s;
    for (std::int64_t i = a; i < b; ++i)
        s.insert(i);
    return s;
}

} // namespace

class TestWindowPlan : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void hfSliding_data()
    {
        QTest::addColumn<std::int64_t>("n");
        QTest::addColumn<std::int64_t>("context");
        QTest::addColumn<std::int64_t>("stride");
        QTest::addColumn<Windows>("expected");
        // S = C: the first token of every window is context only and never scored.
        QTest::addRow("S = C leaves window starts unscored")
            << std::int64_t{10} << std::int64_t{4} << std::int64_t{4}
            << Windows{{0, 4, 1, 4}, {4, 8, 5, 8}, {8, 10, 9, 10}};
        QTest::addRow("S = C/2 scores everything after token 0")
            << std::int64_t{10} << std::int64_t{4} << std::int64_t{2}
            << Windows{{0, 4, 1, 4}, {2, 6, 4, 6}, {4, 8, 6, 8}, {6, 10, 8, 10}};
        QTest::addRow("odd stride, last window short")
            << std::int64_t{10} << std::int64_t{4} << std::int64_t{3}
            << Windows{{0, 4, 1, 4}, {3, 7, 4, 7}, {6, 10, 7, 10}};
        QTest::addRow("stream shorter than the context")
            << std::int64_t{3} << std::int64_t{4} << std::int64_t{4} << Windows{{0, 3, 1, 3}};
        QTest::addRow("single-token tail has no target")
            << std::int64_t{5} << std::int64_t{4} << std::int64_t{4} << Windows{{0, 4, 1, 4}};
        QTest::addRow("stride 1") << std::int64_t{5} << std::int64_t{3} << std::int64_t{1}
                                  << Windows{{0, 3, 1, 3}, {1, 4, 3, 4}, {2, 5, 4, 5}};
    }
    void hfSliding()
    {
        QFETCH(std::int64_t, n);
        QFETCH(std::int64_t, context);
        QFETCH(std::int64_t, stride);
        QFETCH(Windows, expected);
        const WindowPlan plan = planStream({Protocol::HfSliding, context, stride}, n);
        QCOMPARE(plan.windows, expected);
        std::int64_t scored = 0;
        for (const Window &w : expected)
            scored += w.scored();
        QCOMPARE(plan.scoredTokens, scored);
        QCOMPARE(plan.droppedTokens, n - scored);
        QCOMPARE(static_cast<std::int64_t>(scoredSet(plan).size()), scored);
    }

    void hfSlidingOverlapScoresAllButFirst()
    {
        for (std::int64_t stride : {1, 2, 3, 5, 7}) {
            const WindowPlan plan = planStream({Protocol::HfSliding, 8, stride}, 101);
            QCOMPARE(scoredSet(plan), range(1, 101));
        }
    }

    void llamaCpp()
    {
        // C = 512: 255 targets per chunk (positions 257..511), the leftover tail dropped.
        const WindowPlan plan = planStream({Protocol::LlamaCpp, 512, 0, true, 1}, 512 * 3 + 100);
        QCOMPARE(plan.windows.size(), std::size_t{3});
        QCOMPARE(plan.scoredTokens, std::int64_t{3 * 255});
        for (std::int64_t c = 0; c < 3; ++c) {
            const Window &w = plan.windows[c];
            QCOMPARE(w, (Window{512 * c, 512 * c + 512, 512 * c + 257, 512 * c + 512, true}));
        }
        QCOMPARE(plan.droppedTokens, std::int64_t{512 * 3 + 100 - 765});
        // Small hand-checked cases, odd context included.
        QCOMPARE(planStream({Protocol::LlamaCpp, 8}, 20).windows, (Windows{{0, 8, 5, 8}, {8, 16, 13, 16}}));
        QCOMPARE(planStream({Protocol::LlamaCpp, 7}, 7).windows, (Windows{{0, 7, 4, 7}}));
    }

    void lmEvalRolling()
    {
        // Documents of 2 (< C), 4 (= C) and 9 (> 2C) tokens, C = 4; each preceded by its prefix token.
        const std::vector<std::int64_t> lengths{2, 4, 9};
        QCOMPARE(documentOffsets(Protocol::LmEvalRolling, lengths), (std::vector<std::int64_t>{0, 3, 8}));
        const WindowPlan plan = planDocuments({Protocol::LmEvalRolling, 4}, lengths);
        // From get_rolling_token_windows + make_disjoint_window, worked by hand:
        // doc0: ([P,t0],[t0,t1]); doc1: ([P,t0,t1,t2],[t0..t3]);
        // doc2: ([P,t0,t1,t2],[t0..t3]), ([t3],[t4..t7]) -> input t3..t6, ([t4..t7],[t8]) -> input t4..t7.
        QCOMPARE(plan.windows, (Windows{{0, 2, 1, 3}, {3, 7, 4, 8}, {8, 12, 9, 13}, {12, 16, 13, 17}, {13, 17, 17, 18}}));
        QCOMPARE(plan.scoredTokens, std::int64_t{15}); // every document token, once
        QCOMPARE(plan.droppedTokens, std::int64_t{0});
        QCOMPARE(plan.flatLength, std::int64_t{18});
        auto expected = range(1, 3);
        for (auto t : range(4, 8))
            expected.insert(t);
        for (auto t : range(9, 18))
            expected.insert(t);
        QCOMPARE(scoredSet(plan), expected);
        for (const Window &w : plan.windows)
            QVERIFY(w.inputLength() <= 4);
    }

    void lmEvalEmptyDocumentsAreCounted()
    {
        const std::vector<std::int64_t> lengths{0, 3, 0};
        const WindowPlan plan = planDocuments({Protocol::LmEvalRolling, 4}, lengths);
        QCOMPARE(plan.emptyDocuments, std::int64_t{2});
        QCOMPARE(plan.windows, (Windows{{1, 4, 2, 5}}));
    }

    void streamProtocolsPerDocument()
    {
        const std::vector<std::int64_t> lengths{5, 3};
        const WindowPlan plan = planDocuments({Protocol::HfSliding, 4, 4}, lengths);
        QCOMPARE(plan.windows, (Windows{{0, 4, 1, 4}, {5, 8, 6, 8}})); // doc0's 1-token tail has no target
    }

    void badInput_data()
    {
        QTest::addColumn<int>("protocol");
        QTest::addColumn<std::int64_t>("context");
        QTest::addColumn<std::int64_t>("stride");
        QTest::addColumn<std::int64_t>("n");
        QTest::addColumn<QString>("message");
        QTest::addRow("stride larger than context") << 0 << std::int64_t{4} << std::int64_t{5} << std::int64_t{100}
                                                     << "stride 5 is larger than the context 4";
        QTest::addRow("context below 2") << 0 << std::int64_t{1} << std::int64_t{0} << std::int64_t{100} << "context 1 is too small";
        QTest::addRow("negative stride") << 0 << std::int64_t{4} << std::int64_t{-1} << std::int64_t{100} << "stride -1 must be at least 1";
        QTest::addRow("empty stream") << 0 << std::int64_t{4} << std::int64_t{0} << std::int64_t{0} << "token stream is empty";
        QTest::addRow("one token") << 0 << std::int64_t{4} << std::int64_t{0} << std::int64_t{1} << "needs at least 2";
        QTest::addRow("llama.cpp shorter than a chunk") << 1 << std::int64_t{512} << std::int64_t{0} << std::int64_t{300}
                                                        << "needs at least one full chunk: the stream has 300 tokens";
        QTest::addRow("stride with llama.cpp") << 1 << std::int64_t{512} << std::int64_t{256} << std::int64_t{3000}
                                               << "stride applies to hf-sliding only";
        QTest::addRow("lm-eval on a stream") << 2 << std::int64_t{512} << std::int64_t{0} << std::int64_t{3000}
                                             << "lm-eval-rolling plans documents";
    }
    void badInput()
    {
        QFETCH(int, protocol);
        QFETCH(std::int64_t, context);
        QFETCH(std::int64_t, stride);
        QFETCH(std::int64_t, n);
        QFETCH(QString, message);
        try {
            (void)planStream({static_cast<Protocol>(protocol), context, stride}, n);
            QFAIL("expected a ConfigError");
        } catch (const ConfigError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    void protocolNamesRoundTrip()
    {
        for (auto p : {Protocol::HfSliding, Protocol::LlamaCpp, Protocol::LmEvalRolling})
            QCOMPARE(parseProtocol(protocolName(p)), std::optional<Protocol>(p));
        QVERIFY(!parseProtocol("llamacpp").has_value());
    }
};

QTEST_APPLESS_MAIN(TestWindowPlan)
#include "tst_window_plan.moc"
