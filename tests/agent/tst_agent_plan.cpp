// SPDX-License-Identifier: MIT
// The agent's `plan` command as a user runs it: a real process, its output, JSON and exit codes.
#include "agent_cli.h"
#include "exit_codes.h"

#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

using namespace cppl::agent;

using cppl::test::kText;

namespace {

using Run = cppl::test::ProcessResult;

Run runAgent(const QStringList &args)
{
    return cppl::test::runProcess(cppl::test::kAgent, args, 60000);
}

} // namespace

class TestAgentPlan : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void planCoversEveryWindowOnce_data()
    {
        QTest::addColumn<QString>("protocol");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<QString>("sync");
        QTest::addRow("llama.cpp, 4 ranks") << "llama.cpp" << 4 << "8192";
        QTest::addRow("hf-sliding, 7 ranks, every batch") << "hf-sliding" << 7 << "0";
        QTest::addRow("lm-eval-rolling, 3 ranks, at the end") << "lm-eval-rolling" << 3 << "end";
        QTest::addRow("more ranks than windows") << "llama.cpp" << 500 << "0";
    }
    void planCoversEveryWindowOnce()
    {
        QFETCH(QString, protocol);
        QFETCH(int, ranks);
        QFETCH(QString, sync);
        QTemporaryDir dir;
        const QString json = dir.filePath(QStringLiteral("plan.json"));
        QStringList args{QStringLiteral("plan"), QStringLiteral("--text"), kText, QStringLiteral("--tokenizer"), QStringLiteral("bytes"),
                         QStringLiteral("--protocol"), protocol, QStringLiteral("--context"), QStringLiteral("256"),
                         QStringLiteral("--ranks"), QString::number(ranks), QStringLiteral("--sync-every-tokens"), sync,
                         QStringLiteral("--json"), json};
        if (protocol == QStringLiteral("hf-sliding"))
            args << QStringLiteral("--stride") << QStringLiteral("128");
        const Run r = runAgent(args);
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.err));
        QVERIFY(r.out.contains(QStringLiteral("111540 tokens")));
        std::ifstream in(json.toStdString());
        const auto j = nlohmann::json::parse(in);
        QCOMPARE(j["world_size"].get<int>(), ranks);
        const auto windows = j["windows"].get<std::int64_t>();
        std::int64_t next = 0;
        std::int64_t scored = 0;
        const int rounds = j["rounds"].get<int>();
        for (const auto &s : j["shards"]) {
            QCOMPARE(s["first_window"].get<std::int64_t>(), next); // contiguous: nothing dropped or repeated
            QCOMPARE(static_cast<int>(s["rounds"].size()), rounds); // every rank, every round
            next = s["end_window"].get<std::int64_t>();
            scored += s["tokens_scored"].get<std::int64_t>();
        }
        QCOMPARE(next, windows);
        QCOMPARE(scored, j["tokens_scored"].get<std::int64_t>());
        if (protocol == QStringLiteral("lm-eval-rolling"))
            QCOMPARE(scored, std::int64_t{111540}); // every byte is a target exactly once
        if (sync == QStringLiteral("end"))
            QCOMPARE(rounds, 1);
    }

    void dynamicNamesTheGlobalBatches_data()
    {
        QTest::addColumn<QString>("schedule"); // empty: the default
        QTest::addRow("default (dynamic)") << QString();
        QTest::addRow("dynamic") << QStringLiteral("dynamic");
        QTest::addRow("static") << QStringLiteral("static");
    }
    void dynamicNamesTheGlobalBatches()
    {
        // The dynamic schedule (the default) evaluates global batches of --batch windows that the
        // ranks claim as they go: plan says how many and what they hold, and shows the static
        // shards only for comparison. Static shows the shards as the run's, as before.
        QFETCH(QString, schedule);
        QTemporaryDir dir;
        const QString json = dir.filePath(QStringLiteral("plan.json"));
        QStringList args{QStringLiteral("plan"), QStringLiteral("--text"), kText, QStringLiteral("--tokenizer"), QStringLiteral("bytes"),
                         QStringLiteral("--protocol"), QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("256"),
                         QStringLiteral("--ranks"), QStringLiteral("4"), QStringLiteral("--batch"), QStringLiteral("16"),
                         QStringLiteral("--json"), json};
        if (!schedule.isEmpty())
            args << QStringLiteral("--schedule") << schedule;
        const Run r = runAgent(args);
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.err));
        std::ifstream in(json.toStdString());
        const auto j = nlohmann::json::parse(in);
        const auto windows = j["windows"].get<std::int64_t>(); // 111540 bytes / 256: 435 chunks
        QCOMPARE(windows, std::int64_t{435});
        const auto &g = j["global_batches"];
        QCOMPARE(g["count"].get<std::int64_t>(), std::int64_t{28}); // 27 of 16 and one of 3
        QCOMPARE(g["windows_per_batch"].get<std::int64_t>(), std::int64_t{16});
        QCOMPARE(g["last_batch_windows"].get<std::int64_t>(), std::int64_t{3});
        QCOMPARE(g["tokens_scored_max"].get<std::int64_t>(), std::int64_t{16 * 127}); // llama.cpp: 127 of each 256
        QVERIFY(g["tokens_scored_min"].get<std::int64_t>() <= g["tokens_scored_max"].get<std::int64_t>());
        QCOMPARE(j["shards"].size(), std::size_t{4}); // the static split, kept for readers of the plan
        const bool dynamic = schedule != QStringLiteral("static");
        QCOMPARE(j["schedule"].get<std::string>(), std::string(dynamic ? "dynamic" : "static"));
        if (dynamic) {
            CPPL_VERIFY2(r.out.contains(QStringLiteral("  global batches  28 of 16 windows (the last of 3), ")), qPrintable(r.out));
            CPPL_VERIFY2(r.out.contains(QStringLiteral("claim global batches")), qPrintable(r.out));
            CPPL_VERIFY2(r.out.contains(QStringLiteral("For comparison, the static split (--schedule static): ")), qPrintable(r.out));
            QVERIFY(!r.out.contains(QStringLiteral("contiguous shards")));
        } else {
            QVERIFY(!r.out.contains(QStringLiteral("global batches")) && !r.out.contains(QStringLiteral("comparison")));
            CPPL_VERIFY2(r.out.contains(QStringLiteral("contiguous shards balanced by scored tokens")), qPrintable(r.out));
        }
    }

    void badArgumentsExitTwo_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::addRow("no command") << QStringList{} << "Usage:";
        QTest::addRow("unknown command") << QStringList{QStringLiteral("evaluate")} << "unknown command \"evaluate\"";
        QTest::addRow("unknown flag") << QStringList{QStringLiteral("plan"), QStringLiteral("--contxt"), QStringLiteral("5")}
                                      << "unknown argument \"--contxt\"";
        QTest::addRow("stride above context")
            << QStringList{QStringLiteral("plan"), QStringLiteral("--text"), kText, QStringLiteral("--tokenizer"), QStringLiteral("bytes"),
                           QStringLiteral("--context"), QStringLiteral("8"), QStringLiteral("--stride"), QStringLiteral("9")}
            << "stride 9 is larger than the context 8";
        QTest::addRow("context 1") << QStringList{QStringLiteral("plan"), QStringLiteral("--context"), QStringLiteral("1")}
                                   << "--context must be between 2 and";
        QTest::addRow("not a number") << QStringList{QStringLiteral("plan"), QStringLiteral("--ranks"), QStringLiteral("four")}
                                      << "--ranks expects an integer, got \"four\"";
        QTest::addRow("no data") << QStringList{QStringLiteral("plan")} << "give the data as --tokens FILE or --text FILE, or --model DIR for the memory plan";
        QTest::addRow("unknown schedule") << QStringList{QStringLiteral("plan"), QStringLiteral("--schedule"), QStringLiteral("guided")}
                                          << "--schedule \"guided\" is not one of static, dynamic";
        QTest::addRow("unknown protocol") << QStringList{QStringLiteral("plan"), QStringLiteral("--protocol"), QStringLiteral("ppl")}
                                          << "--protocol \"ppl\" is unknown";
    }
    void badArgumentsExitTwo()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const Run r = runAgent(args);
        QCOMPARE(r.exitCode, int(kExitBadArguments));
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.err));
    }

    void badDataExitFour()
    {
        QTemporaryDir dir;
        const QString empty = dir.filePath(QStringLiteral("empty.u32"));
        std::ofstream(empty.toStdString()).flush();
        Run r = runAgent({QStringLiteral("plan"), QStringLiteral("--tokens"), empty});
        QCOMPARE(r.exitCode, int(kExitBadData));
        CPPL_VERIFY2(r.err.contains(empty + QStringLiteral(": the token file is empty")), qPrintable(r.err));
        const QString shortFile = dir.filePath(QStringLiteral("short.txt"));
        std::ofstream(shortFile.toStdString()) << "tiny";
        r = runAgent({QStringLiteral("plan"), QStringLiteral("--text"), shortFile, QStringLiteral("--tokenizer"), QStringLiteral("bytes"),
                      QStringLiteral("--protocol"), QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("512")});
        QCOMPARE(r.exitCode, int(kExitBadArguments)); // the data is fine; the context is too long for it
        CPPL_VERIFY2(r.err.contains(QStringLiteral("the stream has 4 tokens but --context is 512")), qPrintable(r.err));
    }

    void inProcessMatchesBinary()
    {
        std::ostringstream out;
        std::ostringstream err;
        // plan and --version are torch-free: this test links no LibTorch, and they never reach its runner.
        int torchCommands = 0;
        const TorchCommandRunner noTorch = [&torchCommands](const std::vector<std::string> &, std::ostream &, std::ostream &) {
            ++torchCommands;
            return int(kExitRuntime);
        };
        const int rc = agentMain({"plan", "--text", kText.toStdString(), "--tokenizer", "bytes", "--ranks", "2"}, out, err, noTorch);
        QCOMPARE(rc, int(kExitOk));
        const Run r = runAgent({QStringLiteral("plan"), QStringLiteral("--text"), kText, QStringLiteral("--tokenizer"),
                                QStringLiteral("bytes"), QStringLiteral("--ranks"), QStringLiteral("2")});
        QCOMPARE(r.out, QString::fromStdString(out.str()));
        std::ostringstream version;
        QCOMPARE(agentMain({"--version"}, version, err, noTorch), int(kExitOk));
        QVERIFY(version.str().starts_with("clusterppl-agent "));
        QCOMPARE(torchCommands, 0);
    }
};

QTEST_GUILESS_MAIN(TestAgentPlan)
#include "tst_agent_plan.moc"
