// SPDX-License-Identifier: MIT
// NCCL's regrouping after a lost rank, the parts that need no GPU: the store keys per epoch, what
// each survivor publishes, the shrink's exclude list (positions in the old communicator), and the
// choice between ncclCommShrink and a new communicator. The GPU run itself: tst_gpu_eval
// (ncclSurvivesKilledRank) and scripts/gpu-check.sh ("lost rank nccl").
#include "distributed/nccl_recovery.h"

#include "cppl/errors.h"

#include <QTest>

#include <vector>

using namespace cppl::agent::dist;

Q_DECLARE_METATYPE(std::vector<int>)
Q_DECLARE_METATYPE(ShrinkAbility)

class TestNcclRecovery : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void versionText()
    {
        QCOMPARE(ncclVersionText(22809), std::string("2.28.9"));
        QCOMPARE(ncclVersionText(22700), std::string("2.27.0"));
        QCOMPARE(ncclVersionText(21805), std::string("2.18.5"));
        QCOMPARE(ncclVersionText(kNcclShrinkVersion), std::string("2.27.0"));
    }

    void keysPerEpoch()
    {
        QCOMPARE(ncclKeyPrefix(0), std::string("cppl/nccl/"));
        QCOMPARE(ncclKeyPrefix(1), std::string("cppl/epoch1/nccl/"));
        QCOMPARE(ncclKeyPrefix(12), std::string("cppl/epoch12/nccl/"));
        // The Gloo path's prefix for the same epoch is another key space.
        QVERIFY(ncclKeyPrefix(3) != "cppl/epoch3/gloo/");
    }

    void abilityRoundTrip()
    {
        for (const ShrinkAbility &a : {ShrinkAbility{22809, true, true}, ShrinkAbility{22605, false, true}, ShrinkAbility{22809, true, false},
                                       ShrinkAbility{0, false, false}}) {
            const std::string text = formatShrinkAbility(a);
            const auto back = parseShrinkAbility(text);
            QVERIFY2(back.has_value(), text.c_str());
            QVERIFY(*back == a);
        }
        QCOMPARE(formatShrinkAbility({22809, true, false}), std::string("v22809 s1 p0"));
    }

    void abilityMalformed_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addRow("empty") << QString();
        QTest::addRow("no version") << QStringLiteral("v s1 p1");
        QTest::addRow("negative") << QStringLiteral("v-1 s1 p1");
        QTest::addRow("flag 2") << QStringLiteral("v22809 s2 p1");
        QTest::addRow("swapped") << QStringLiteral("v22809 p1 s1");
        QTest::addRow("trailing") << QStringLiteral("v22809 s1 p1 ");
        QTest::addRow("short") << QStringLiteral("v22809 s1");
        QTest::addRow("no v") << QStringLiteral("22809 s1 p1");
    }
    void abilityMalformed()
    {
        QFETCH(QString, text);
        QVERIFY(!parseShrinkAbility(text.toStdString()).has_value());
    }

    void excluded_data()
    {
        QTest::addColumn<std::vector<int>>("oldMembers");
        QTest::addColumn<std::vector<int>>("newMembers");
        QTest::addColumn<std::vector<int>>("exclude");
        QTest::addRow("rank 2 of 4") << std::vector<int>{0, 1, 2, 3} << std::vector<int>{0, 1, 3} << std::vector<int>{2};
        QTest::addRow("last of 2") << std::vector<int>{0, 1} << std::vector<int>{0} << std::vector<int>{1};
        QTest::addRow("two at once") << std::vector<int>{0, 1, 2, 3, 4} << std::vector<int>{0, 2, 4} << std::vector<int>{1, 3};
        // A second loss: the old communicator's ranks are places among the earlier survivors.
        QTest::addRow("rank 3 after rank 1") << std::vector<int>{0, 2, 3, 5} << std::vector<int>{0, 2, 5} << std::vector<int>{2};
        QTest::addRow("nobody") << std::vector<int>{0, 1, 2} << std::vector<int>{0, 1, 2} << std::vector<int>{};
    }
    void excluded()
    {
        QFETCH(std::vector<int>, oldMembers);
        QFETCH(std::vector<int>, newMembers);
        QFETCH(std::vector<int>, exclude);
        QCOMPARE(excludedRanks(oldMembers, newMembers), exclude);
    }

    void excludedRefusesStrangers()
    {
        QVERIFY_THROWS_EXCEPTION(cppl::ProtocolError, (void)excludedRanks({0, 1, 2}, {0, 7}));
        QVERIFY_THROWS_EXCEPTION(cppl::ProtocolError, (void)excludedRanks({0, 1, 2}, {0, 0}));
    }

    void order()
    {
        QVERIFY(keepsOrder({0, 1, 2, 3}, {0, 1, 3}));
        QVERIFY(keepsOrder({0, 2, 3, 5}, {2, 5}));
        QVERIFY(!keepsOrder({0, 1, 2, 3}, {0, 3, 1}));
        QVERIFY(!keepsOrder({0, 1, 2}, {0, 4}));
    }

    /// Every survivor able: shrink the world without the lost rank's place.
    void shrinkWhenAllCan()
    {
        const ShrinkAbility ok{22809, true, true};
        const NcclRebuildPlan p = planNcclRebuild({0, 1, 2, 3}, {0, 1, 3}, {ok, ok, ok});
        QVERIFY(p.shrink);
        QCOMPARE(p.exclude, (std::vector<int>{2}));
        QCOMPARE(p.reason, std::string("ncclCommShrink of the world communicator without 1 rank"));
        const NcclRebuildPlan second = planNcclRebuild({0, 2, 3, 5}, {0, 5}, {ok, ok});
        QVERIFY(second.shrink);
        QCOMPARE(second.exclude, (std::vector<int>{1, 2}));
        QCOMPARE(second.reason, std::string("ncclCommShrink of the world communicator without 2 ranks"));
    }

    /// One survivor unable is enough for all to build a new communicator (and the reason names it).
    void reinitWhenOneCannot_data()
    {
        QTest::addColumn<ShrinkAbility>("third");
        QTest::addColumn<QString>("reason");
        QTest::addRow("NCCL 2.26") << ShrinkAbility{22605, false, true}
                                   << QStringLiteral("rank 3's NCCL 2.26.5 has no ncclCommShrink (needs 2.27.0): a new communicator from a fresh unique id");
        QTest::addRow("2.27 but no symbol") << ShrinkAbility{22703, false, true}
                                            << QStringLiteral("rank 3's NCCL 2.27.3 has no ncclCommShrink (needs 2.27.0): a new communicator from a fresh unique id");
        QTest::addRow("world aborted") << ShrinkAbility{22809, true, false}
                                       << QStringLiteral("rank 3 has no intact world communicator to shrink (aborted after an error or a timeout): a "
                                                         "new communicator from a fresh unique id");
    }
    void reinitWhenOneCannot()
    {
        QFETCH(ShrinkAbility, third);
        QFETCH(QString, reason);
        const ShrinkAbility ok{22809, true, true};
        const NcclRebuildPlan p = planNcclRebuild({0, 1, 2, 3}, {0, 1, 3}, {ok, ok, third});
        QVERIFY(!p.shrink);
        QVERIFY(p.exclude.empty());
        QCOMPARE(QString::fromStdString(p.reason), reason);
    }

    void reinitWhenOrderChanges()
    {
        const ShrinkAbility ok{22809, true, true};
        const NcclRebuildPlan p = planNcclRebuild({0, 1, 2, 3}, {0, 3, 1}, {ok, ok, ok});
        QVERIFY(!p.shrink);
        QVERIFY(p.reason.find("not in the old order") != std::string::npos);
    }

    void planRefusesMismatchedLists()
    {
        const ShrinkAbility ok{22809, true, true};
        QVERIFY_THROWS_EXCEPTION(cppl::ProtocolError, (void)planNcclRebuild({0, 1, 2}, {0, 1}, {ok}));
        QVERIFY_THROWS_EXCEPTION(cppl::ProtocolError, (void)planNcclRebuild({0, 1, 2}, {0, 9}, {ok, ok}));
    }
};

QTEST_GUILESS_MAIN(TestNcclRecovery)
#include "tst_nccl_recovery.moc"
