// SPDX-License-Identifier: MIT
// clusterppl-cli as a user runs it: profile check, hostfile import/export, errors and exit codes.
#include "cli/cli_commands.h"

#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_verify.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include "cppl/cluster_profile.h"

using namespace cppl::core;

namespace {

using Run = cppl::test::ProcessResult;

Run runCli(const QStringList &args)
{
    return cppl::test::runProcess(cppl::test::kCli, args, 30000);
}

void writeText(const QString &path, const QByteArray &text)
{
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(text);
}

#ifdef CPPL_AGENT_EXE
/// The blocks of consecutive "[live]" lines in a run's stderr, each joined into one string.
QStringList liveBlocks(const QString &err)
{
    QStringList blocks;
    QString block;
    for (const QString &line : err.split(u'\n')) {
        if (line.startsWith(QStringLiteral("[live]"))) {
            block += line + u'\n';
            continue;
        }
        if (!block.isEmpty())
            blocks << block;
        block.clear();
    }
    if (!block.isEmpty())
        blocks << block;
    return blocks;
}
#endif

} // namespace

class TestCli : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void checksEmbeddedDefault()
    {
        const Run r = runCli({QStringLiteral("profile"), QStringLiteral("check"),
                              QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/local-default.json")});
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.err));
        QVERIFY(r.out.contains(QStringLiteral("ranks      4")));
        CPPL_VERIFY2(r.out.contains(QStringLiteral("ranks 2–3: ranks 2–3 (leader 2)")), qPrintable(r.out)); // en dashes, as every rank range reads
        CPPL_VERIFY2(r.out.contains(QStringLiteral("batch auto, dtype auto (bfloat16 on GPUs, else float32)")), qPrintable(r.out));
    }

    void hostfileImportExportRoundTrip()
    {
        QTemporaryDir dir;
        const QString profile = dir.filePath(QStringLiteral("racks.json"));
        Run r = runCli({QStringLiteral("hostfile"), QStringLiteral("import"),
                        QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile"), QStringLiteral("--exclude"),
                        QStringLiteral("node04:6,7"), QStringLiteral("-o"), profile});
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.err));
        const cppl::ClusterProfile p = cppl::loadProfile(profile.toStdString());
        QCOMPARE(p.hosts.size(), std::size_t{4});
        QCOMPARE(p.hosts[3].slots, 6);
        const cppl::RankLayout layout = cppl::rankLayout(p);
        QCOMPARE(layout.worldSize(), 30);
        QCOMPARE(layout.groups.size(), std::size_t{2});
        QCOMPARE(layout.groups[1].ranks.front(), 16); // rackB's leader
        r = runCli({QStringLiteral("hostfile"), QStringLiteral("export"), profile});
        QCOMPARE(r.exitCode, int(kCliOk));
        QVERIFY(r.out.contains(QStringLiteral("node04 slots=6 group=rackB\n")));
        // Without the options each host keeps the defaults; with them every host gets them.
        QCOMPARE(p.hosts[0].agent, std::string("clusterppl-agent"));
        r = runCli({QStringLiteral("hostfile"), QStringLiteral("import"), QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile"),
                    QStringLiteral("--agent"), QStringLiteral("/shared/opt/clusterppl/bin/clusterppl-agent"), QStringLiteral("--workdir"),
                    QStringLiteral("/scratch/eval"), QStringLiteral("--ssh-user"), QStringLiteral("eval"), QStringLiteral("-o"), profile});
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.err));
        const cppl::ClusterProfile shared = cppl::loadProfile(profile.toStdString());
        QCOMPARE(shared.hosts.size(), std::size_t{4});
        for (const cppl::HostSpec &h : shared.hosts) {
            QCOMPARE(h.agent, std::string("/shared/opt/clusterppl/bin/clusterppl-agent"));
            QCOMPARE(h.workdir, std::string("/scratch/eval"));
            QCOMPARE(h.ssh.user, std::string("eval"));
        }
    }

    void hostfileImportLikeAProfile()
    {
        // --like: the evaluation, thresholds and name from a profile, and what all its hosts share
        // (not what they do not: the alias, or a user only one has); --ssh-user still wins.
        QTemporaryDir dir;
        const QString like = dir.filePath(QStringLiteral("old.json"));
        QFile f(like);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(R"({"format": "clusterppl-profile", "version": 1, "name": "eval-70b", "launcher": "ssh",
  "hosts": [{"name": "a", "slots": 8, "agent": "/shared/bin/clusterppl-agent", "workdir": "/scratch/e", "env": {"NCCL_DEBUG": "WARN"},
             "ssh": {"user": "eval", "port": 2222, "alias": "a-login", "identity_file": "~/.ssh/id_eval"}},
            {"name": "b", "slots": 8, "agent": "/shared/bin/clusterppl-agent", "workdir": "/scratch/e", "env": {"NCCL_DEBUG": "WARN"},
             "ssh": {"user": "eval", "port": 2222, "identity_file": "~/.ssh/id_other"}}],
  "evaluation": {"model": "/models/llama", "tokens": "/data/wiki.u32", "context": 4096, "batch": 4, "dtype": "bfloat16"},
  "thresholds": {"sync_every_tokens": 1000000, "stall_seconds": 120}})");
        f.close();
        const QString out = dir.filePath(QStringLiteral("racks.json"));
        Run r = runCli({QStringLiteral("hostfile"), QStringLiteral("import"), QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile"),
                        QStringLiteral("--like"), like, QStringLiteral("-o"), out});
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.err));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("the evaluation, the thresholds, and on every host agent, workdir, env, ssh user, ssh port")),
                     qPrintable(r.err));
        cppl::ClusterProfile p = cppl::loadProfile(out.toStdString());
        QCOMPARE(p.name, std::string("eval-70b"));
        QCOMPARE(p.hosts.size(), std::size_t{4});
        QCOMPARE(p.evaluation.model, std::string("/models/llama"));
        QCOMPARE(p.evaluation.context, std::int64_t{4096});
        QCOMPARE(p.evaluation.dtype, std::string("bfloat16"));
        QCOMPARE(p.thresholds.syncEveryTokens, std::int64_t{1000000});
        QCOMPARE(p.thresholds.stallSeconds, 120.0);
        for (const cppl::HostSpec &h : p.hosts) {
            QCOMPARE(h.agent, std::string("/shared/bin/clusterppl-agent"));
            QCOMPARE(h.workdir, std::string("/scratch/e"));
            QCOMPARE(h.env.at("NCCL_DEBUG"), std::string("WARN"));
            QCOMPARE(h.ssh.user, std::string("eval"));
            QCOMPARE(h.ssh.port, 2222);
            QCOMPARE(h.ssh.alias, std::string());        // one host's own
            QCOMPARE(h.ssh.identityFile, std::string()); // not shared
        }
        QCOMPARE(p.hosts[2].group, std::string("rackB")); // the hostfile's groups stay
        r = runCli({QStringLiteral("hostfile"), QStringLiteral("import"), QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile"),
                    QStringLiteral("--like"), like, QStringLiteral("--ssh-user"), QStringLiteral("bob"), QStringLiteral("-o"), out});
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.err));
        p = cppl::loadProfile(out.toStdString());
        QCOMPARE(p.hosts[0].ssh.user, std::string("bob"));

        // A local profile's relative paths mean its own directory: they become absolute, so the
        // new profile elsewhere finds the same files.
        r = runCli({QStringLiteral("hostfile"), QStringLiteral("import"), QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile"),
                    QStringLiteral("--like"), QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/local-default.json"), QStringLiteral("--launcher"),
                    QStringLiteral("local"), QStringLiteral("-o"), out});
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.err));
        p = cppl::loadProfile(out.toStdString());
        QCOMPARE(QString::fromStdString(p.evaluation.model), QStringLiteral(CPPL_SOURCE_DIR "/resources/models/shakespeare-byte-llama"));
        QCOMPARE(QString::fromStdString(p.evaluation.text), QStringLiteral(CPPL_SOURCE_DIR "/resources/data/tinyshakespeare-heldout.txt"));
        QCOMPARE(p.evaluation.tokenizer, std::string("bytes"));
        QCOMPARE(p.hosts[0].env.at("OMP_NUM_THREADS"), std::string("1")); // the one host's env, shared by all of "them"

        r = runCli({QStringLiteral("hostfile"), QStringLiteral("import"), QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile"),
                    QStringLiteral("--like"), dir.filePath(QStringLiteral("nope.json"))});
        QCOMPARE(r.exitCode, int(kCliIoError));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("nope.json: the profile does not exist")), qPrintable(r.err));
    }

#ifdef CPPL_AGENT_EXE
    void oneRankReadsInTheSingular()
    {
        // A one-rank run as a user starts it: "1 rank on 1 host", "0/1 rank evaluating", never "1 ranks".
        QTemporaryDir dir;
        const QString profile = dir.filePath(QStringLiteral("one.json"));
        writeText(profile, cppl::test::localProfileJson(QStringLiteral("one"), cppl::test::kAgent, 1, QStringLiteral("by-host"), 4).toUtf8());
        const Run r = cppl::test::runProcess(cppl::test::kCli, {QStringLiteral("run"), QStringLiteral("--profile"), profile, QStringLiteral("--no-preflight"),
                                                                QStringLiteral("--no-store"), QStringLiteral("--log-dir"), dir.filePath(QStringLiteral("logs"))},
                                             300000);
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.contains(QStringLiteral(": 1 rank on 1 host (local)")), qPrintable(r.err));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("clusterppl-cli: telemetry: 1 rank, ")), qPrintable(r.err));
        // What the CLI writes itself (the ranks' own lines are the agent's).
        for (const QString &line : r.err.split(u'\n'))
            if (line.startsWith(QStringLiteral("clusterppl-cli:")) || line.startsWith(QStringLiteral("[live]")))
                CPPL_VERIFY2(!line.contains(QStringLiteral("1 ranks")), qPrintable(line));
    }

    void liveBlockOnlyWhenItChanged()
    {
        // Rank 1 holds on for 4.5 s after the last tokens, so two or three of the 2-second ticks
        // and the end of the run find the same figures: each block is printed once (the final
        // totals were printed twice or more at the end of a run).
        QTemporaryDir dir;
        const QString profile = dir.filePath(QStringLiteral("two.json"));
        writeText(profile, cppl::test::localProfileJson(QStringLiteral("two"), cppl::test::kAgent, 2, QStringLiteral("by-host"), 16).toUtf8());
        qputenv("CLUSTERPPL_TEST_HOLD_FINISH", "1:4500"); // the local launcher passes it to the ranks
        const Run r = cppl::test::runProcess(cppl::test::kCli, {QStringLiteral("run"), QStringLiteral("--profile"), profile, QStringLiteral("--no-preflight"),
                                                                QStringLiteral("--no-store"), QStringLiteral("--log-dir"), dir.filePath(QStringLiteral("logs"))},
                                             300000);
        qunsetenv("CLUSTERPPL_TEST_HOLD_FINISH");
        CPPL_VERIFY2(r.exitCode == kCliOk, qPrintable(r.describe()));
        const QStringList blocks = liveBlocks(r.err);
        CPPL_VERIFY2(!blocks.isEmpty() && blocks.back().contains(QStringLiteral("windows 16/16 (100.0%)")), qPrintable(r.err));
        for (qsizetype i = 1; i < blocks.size(); ++i)
            CPPL_VERIFY2(blocks[i] != blocks[i - 1], qPrintable(QStringLiteral("block %1 repeats the one before it:\n").arg(i) + r.err));
    }
#endif

    void errors_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QByteArray>("fileText");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        const QString file = QStringLiteral("@FILE@");
        QTest::addRow("unknown command") << QStringList{QStringLiteral("profile"), QStringLiteral("lint")} << QByteArray()
                                         << int(kCliBadArguments) << "unknown command \"profile lint\"";
        QTest::addRow("missing profile") << QStringList{QStringLiteral("profile"), QStringLiteral("check"), QStringLiteral("/nope.json")}
                                         << QByteArray() << int(kCliIoError) << "/nope.json: the profile does not exist";
        QTest::addRow("invalid profile") << QStringList{QStringLiteral("profile"), QStringLiteral("check"), file}
                                         << QByteArray(R"({"format": "clusterppl-profile", "version": 1, "hosts": [{"name": "a", "slots": 0}]})")
                                         << int(kCliBadArguments) << "invalid profile:\n  hosts[0].slots: expected an integer >= 1 and <= 1048576, got 0";
        QTest::addRow("duplicate host in hostfile") << QStringList{QStringLiteral("hostfile"), QStringLiteral("import"), file}
                                                    << QByteArray("a slots=2\na slots=4\n") << int(kCliBadArguments)
                                                    << ":2: host \"a\" is listed twice (first on line 1)";
        QTest::addRow("both filters") << QStringList{QStringLiteral("hostfile"), QStringLiteral("import"), file, QStringLiteral("--include"),
                                                     QStringLiteral("a"), QStringLiteral("--exclude"), QStringLiteral("a")}
                                      << QByteArray("a slots=2\n") << int(kCliBadArguments) << "cannot be used together";
    }
    void errors()
    {
        QFETCH(QStringList, args);
        QFETCH(QByteArray, fileText);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("input"));
        writeText(file, fileText);
        args.replaceInStrings(QStringLiteral("@FILE@"), file);
        const Run r = runCli(args);
        QCOMPARE(r.exitCode, exitCode);
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
