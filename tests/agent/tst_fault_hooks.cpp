// SPDX-License-Identifier: MIT
// The agent's fault hooks (agent/lib/fault_hooks.h): every CLUSTERPPL_TEST_* variable parsed in one
// place; each malformed value refused with the variable, its value and the form it must have.
#ifndef Q_MOC_RUN // moc cannot parse <chrono>, which fault_hooks.h includes; the test class needs none of it
#include "fault_hooks.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#endif

#include <QTest>

#include <map>
#include <string>

using cppl::agent::FaultHooks;
using cppl::agent::parseFaultHooks;

namespace {

FaultHooks parse(const std::map<std::string, std::string> &vars)
{
    return parseFaultHooks([&](const char *name) -> const char * {
        const auto it = vars.find(name);
        return it == vars.end() ? nullptr : it->second.c_str();
    });
}

} // namespace

class TestFaultHooks : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void noneSetIsEmpty()
    {
        const FaultHooks f = parse({});
        QCOMPARE(f.slowCollective.count(), 0);
        QVERIFY(f.die.empty());
        QVERIFY(!f.holdConnect.appliesTo(0));
        QCOMPARE(f.holdConnectUntilCollective, -1);
        QVERIFY(!f.slows(0));
        QVERIFY(!f.everyRoundLine);
        QVERIFY(f.gpuFreeBytes.empty());
        QCOMPARE(f.meshCandidates, 0);
        QVERIFY(!f.noGloo);
        QVERIFY(f.deathPoint(0).empty());
    }

    void wellFormed()
    {
        QVERIFY(CLUSTERPPL_FAULT_HOOKS);
        const FaultHooks f = parse({{"CLUSTERPPL_TEST_SLOW_COLLECTIVE", "150"},
                                    {"CLUSTERPPL_TEST_DIE", "2:gather,0:closing"},
                                    {"CLUSTERPPL_TEST_HOLD_CONNECT", "3:collective"},
                                    {"CLUSTERPPL_TEST_HOLD_WATCHDOG", "1:250"},
                                    {"CLUSTERPPL_TEST_HOLD_FINISH", "0:hub,2:40"},
                                    {"CLUSTERPPL_TEST_HOLD_RESULT", "0:900"},
                                    {"CLUSTERPPL_TEST_SLOW_LOAD", "1:8000"},
                                    {"CLUSTERPPL_TEST_HOLD_FINGERPRINT", "5000"},
                                    {"CLUSTERPPL_TEST_SLOW_RANK", "*:30"},
                                    {"CLUSTERPPL_TEST_ROUND_LINES", "all"},
                                    {"CLUSTERPPL_TEST_GPU_FREE_BYTES", "1000,2000"},
                                    {"CLUSTERPPL_TEST_MESH_CANDIDATES", "1"},
                                    {"CLUSTERPPL_TEST_TRACE_WATCHDOG", "1"},
                                    {"CLUSTERPPL_TEST_NO_GLOO", "1"},
                                    {"CLUSTERPPL_TEST_LONG_LINES", "3000"},
                                    {"CLUSTERPPL_TEST_STAGED_UPLOAD", "4096"}});
        QCOMPARE(f.slowCollective.count(), 150);
        QCOMPARE(f.deathPoint(2), std::string("gather"));
        QCOMPARE(f.deathPoint(0), std::string("closing"));
        QVERIFY(f.deathPoint(1).empty());
        QCOMPARE(f.holdConnectUntilCollective, 3);
        QVERIFY(!f.holdConnect.appliesTo(3));
        QCOMPARE(f.holdWatchdog.forRank(1).count(), 250);
        QCOMPARE(f.holdWatchdog.forRank(0).count(), 0);
        QCOMPARE(f.holdFinish.size(), std::size_t(2));
        QVERIFY(f.holdFinish[0].untilHub);
        QCOMPARE(f.holdFinish[1].rank, 2);
        QCOMPARE(f.holdFinish[1].ms.count(), 40);
        QVERIFY(f.holdResult.appliesTo(0));
        QCOMPARE(f.slowLoad.forRank(1).count(), 8000);
        QCOMPARE(f.slowLoad.forRank(0).count(), 0);
        QCOMPARE(f.holdFingerprint.count(), 5000);
        QVERIFY(f.slows(0) && f.slows(7));
        QCOMPARE(f.slowMs.count(), 30);
        QVERIFY(f.everyRoundLine);
        QCOMPARE(f.gpuFreeBytes, (std::vector<std::int64_t>{1000, 2000}));
        QCOMPARE(f.meshCandidates, 1);
        QVERIFY(f.traceWatchdog);
        QVERIFY(f.noGloo);
        QCOMPARE(f.longLines, std::size_t(3000));
        QCOMPARE(f.stagedUploadChunk, std::int64_t{4096});
        const FaultHooks one = parse({{"CLUSTERPPL_TEST_SLOW_RANK", "2:400"}, {"CLUSTERPPL_TEST_HOLD_CONNECT", "1:300"}});
        QVERIFY(one.slows(2) && !one.slows(0));
        QCOMPARE(one.holdConnect.forRank(1).count(), 300);
    }

    void malformedIsRefused_data()
    {
        QTest::addColumn<QString>("name");
        QTest::addColumn<QString>("value");
        QTest::addColumn<QString>("form");
        QTest::addRow("slow collective, not a number") << "CLUSTERPPL_TEST_SLOW_COLLECTIVE" << "fast" << "milliseconds (0-60000)";
        QTest::addRow("slow collective, too long") << "CLUSTERPPL_TEST_SLOW_COLLECTIVE" << "60001" << "milliseconds (0-60000)";
        QTest::addRow("die, unknown point") << "CLUSTERPPL_TEST_DIE" << "1:later" << "RANK:POINT";
        QTest::addRow("die, no rank") << "CLUSTERPPL_TEST_DIE" << "gather" << "RANK:POINT";
        QTest::addRow("hold connect, negative") << "CLUSTERPPL_TEST_HOLD_CONNECT" << "1:-5" << "RANK:collective";
        QTest::addRow("slow load, no rank") << "CLUSTERPPL_TEST_SLOW_LOAD" << "8000" << "RANK:MILLISECONDS";
        QTest::addRow("hold failure, trailing text") << "CLUSTERPPL_TEST_HOLD_FAILURE" << "1:50ms" << "RANK:MILLISECONDS";
        QTest::addRow("hold finish, bad item") << "CLUSTERPPL_TEST_HOLD_FINISH" << "0:hub,x" << "RANK:hub";
        QTest::addRow("slow rank, no ms") << "CLUSTERPPL_TEST_SLOW_RANK" << "2" << "*:MILLISECONDS";
        QTest::addRow("round lines, not all") << "CLUSTERPPL_TEST_ROUND_LINES" << "some" << "\"all\"";
        QTest::addRow("free bytes, empty item") << "CLUSTERPPL_TEST_GPU_FREE_BYTES" << "10,,20" << "byte counts";
        QTest::addRow("mesh candidates, zero") << "CLUSTERPPL_TEST_MESH_CANDIDATES" << "0" << "(1-1000000)";
        QTest::addRow("long lines, too long") << "CLUSTERPPL_TEST_LONG_LINES" << "2000000" << "(1-1048576)";
        QTest::addRow("staged upload, no chunk") << "CLUSTERPPL_TEST_STAGED_UPLOAD" << "0" << "a chunk size in bytes (1-1073741824)";
    }
    void malformedIsRefused()
    {
        QFETCH(QString, name);
        QFETCH(QString, value);
        QFETCH(QString, form);
        try {
            (void)parse({{name.toStdString(), value.toStdString()}});
            QFAIL("accepted");
        } catch (const cppl::ConfigError &e) {
            const QString what = QString::fromStdString(e.what());
            QVERIFY2(what.contains(name) && what.contains(value) && what.contains(form), qPrintable(what));
        }
    }
};

QTEST_GUILESS_MAIN(TestFaultHooks)
#include "tst_fault_hooks.moc"
