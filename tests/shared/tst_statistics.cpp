// SPDX-License-Identifier: MIT
#include "cppl/statistics.h"

#include "test_exact.h"

#include <QTest>

#include <cmath>
#include <numbers>
#include <random>

using cppl::NllStats;

class TestStatistics : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void perplexityAndLlamaStderr()
    {
        const std::vector<double> v{2.0, 3.5, 0.25, 7.0, 1.0};
        NllStats s;
        for (double x : v)
            s.addToken(x);
        const auto p = cppl::computePerplexity(s);
        double sum = 0;
        double sum2 = 0;
        for (double x : v) {
            sum += x;
            sum2 += x * x;
        }
        const double n = static_cast<double>(v.size());
        const double mu = sum / n;
        CPPL_COMPARE_BITS(p.meanNll, mu);
        CPPL_COMPARE_BITS(p.ppl, std::exp(mu));
        const double sigma = std::sqrt((sum2 / n - mu * mu) / (n - 1)); // llama.cpp's formula
        QVERIFY(std::fabs(p.pplStderr - p.ppl * sigma) <= 1e-12 * p.ppl);
        QCOMPARE(cppl::formatFinalEstimate(p), std::string("Final estimate: PPL = ")
                                                   + QByteArray::number(std::exp(mu), 'f', 4).toStdString() + " +/- "
                                                   + QByteArray::number(p.ppl * sigma, 'f', 5).toStdString());
    }

    void lmEvalByteAndWordFigures()
    {
        NllStats s;
        s.addToken(10.0);
        s.addToken(4.0);
        s.bytes = 7;
        s.words = 2;
        const auto p = cppl::computePerplexity(s);
        QCOMPARE(p.bitsPerByte, 14.0 / (7 * std::numbers::ln2));
        CPPL_COMPARE_BITS(p.bytePpl, std::exp(2.0));
        CPPL_COMPARE_BITS(p.wordPpl, std::exp(7.0));
    }

    void undefinedFiguresAreNaN()
    {
        NllStats empty;
        const auto p = cppl::computePerplexity(empty);
        QVERIFY(std::isnan(p.ppl));
        QVERIFY(std::isnan(p.bitsPerByte));
        NllStats one;
        one.addToken(1.0);
        QVERIFY(std::isnan(cppl::computePerplexity(one).pplStderr)); // N - 1 = 0
        NllStats bad;
        bad.addToken(INFINITY);
        QVERIFY(std::isnan(cppl::computePerplexity(bad).ppl)); // never a silently wrong number
    }

    void countsBeyondTwoToThe32()
    {
        // Counts are int64 end to end, including through the all-reduce words.
        NllStats a;
        a.tokens = (std::int64_t{1} << 32) + 5;
        a.windows = std::int64_t{1} << 33;
        a.bytes = std::int64_t{3} << 32;
        a.words = std::int64_t{1} << 31;
        a.nll.add(1.0);
        NllStats::Words summed{};
        for (int rank = 0; rank < 3; ++rank) {
            const auto w = a.toWords();
            for (std::size_t i = 0; i < w.size(); ++i)
                summed[i] += w[i];
        }
        const NllStats total = NllStats::fromReducedWords(summed);
        QCOMPARE(total.tokens, 3 * ((std::int64_t{1} << 32) + 5));
        QCOMPARE(total.windows, std::int64_t{3} << 33);
        QCOMPARE(total.bytes, std::int64_t{9} << 32);
        QCOMPARE(total.words, std::int64_t{3} << 31);
        CPPL_COMPARE_BITS(total.nll.toDouble(), 3.0);
        NllStats merged = a;
        merged.merge(a);
        merged.merge(a);
        QVERIFY(merged == total);
    }

    void statsBitIdenticalAcrossShards()
    {
        std::mt19937_64 rng(9);
        std::uniform_real_distribution<double> d(0.0, 20.0);
        std::vector<double> v(3000);
        for (auto &x : v)
            x = d(rng);
        NllStats whole;
        for (double x : v)
            whole.addToken(x);
        for (int ranks : {2, 5, 64}) {
            NllStats total;
            for (int r = 0; r < ranks; ++r) {
                NllStats part;
                for (std::size_t i = static_cast<std::size_t>(r); i < v.size(); i += static_cast<std::size_t>(ranks))
                    part.addToken(v[i]);
                total.merge(part);
            }
            QVERIFY(total == whole);
            const auto a = cppl::computePerplexity(total);
            const auto b = cppl::computePerplexity(whole);
            CPPL_COMPARE_BITS(a.ppl, b.ppl);
            CPPL_COMPARE_BITS(a.pplStderr, b.pplStderr);
        }
    }

    void wordCountMatchesReSplit_data()
    {
        QTest::addColumn<QByteArray>("text");
        QTest::addColumn<qint64>("words");
        // Expected values are len(re.split(r"\s+", text)) in Python 3.
        QTest::addRow("empty") << QByteArray("") << qint64(1);
        QTest::addRow("one word") << QByteArray("hello") << qint64(1);
        QTest::addRow("two words") << QByteArray("hello world") << qint64(2);
        QTest::addRow("runs count once") << QByteArray("a \t\n b") << qint64(2);
        QTest::addRow("leading and trailing runs") << QByteArray(" a b \n") << qint64(4);
        QTest::addRow("only whitespace") << QByteArray("   ") << qint64(2);
        QTest::addRow("no-break space") << QByteArray("a\xc2\xa0" "b") << qint64(2);
        QTest::addRow("ideographic space") << QByteArray("a\xe3\x80\x80" "b") << qint64(2);
        QTest::addRow("non-space multibyte") << QByteArray("caf\xc3\xa9 ok") << qint64(2);
        QTest::addRow("wikitext heading") << QByteArray(" = Robert Boulter = \n") << qint64(6);
    }
    void wordCountMatchesReSplit()
    {
        QFETCH(QByteArray, text);
        QFETCH(qint64, words);
        QCOMPARE(cppl::countWords(std::string_view(text.constData(), static_cast<std::size_t>(text.size()))), words);
    }
};

QTEST_APPLESS_MAIN(TestStatistics)
#include "tst_statistics.moc"
