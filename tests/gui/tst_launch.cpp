// SPDX-License-Identifier: MIT
// Launching for real: `clusterppl-cli run` with the local launcher and through OpenSSH's sshd,
// started on 127.0.0.1 with its own config, host key and authorized_keys (tests/common/test_sshd.h).
// Hosts in the profiles are ssh_config aliases of 127.0.0.1; the agents are this build's.
#include "launch/launch_plan.h"
#include "launch/launcher.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_skip.h"
#include "test_ssh_echo.h"
#include "test_sshd.h"
#include "test_verify.h"

#include "cppl/agent_lines.h"
#include "cppl/cluster_profile.h"
#include "cppl/errors.h"
#include "cppl/host.h"

#include <QCoreApplication>
#include <QDir>
#include <QEventLoop>
#include <QTimer>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QProcessEnvironment>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <algorithm>
#include <filesystem>
#include <optional>

#include <signal.h>
#include <unistd.h>

using namespace Qt::StringLiterals;
using cppl::test::ProcessResult;
using cppl::test::runProcess;
using cppl::freeLoopbackPort;

using cppl::test::agentsOfRun;
using cppl::test::processesOfRun;
using cppl::test::readFile;
using cppl::test::writeFile;

using cppl::test::kCli;
using cppl::test::kAgent;
using cppl::test::kModel;
using cppl::test::kText;

namespace {

constexpr int kWindows = 37;

/// The agent protocol's events in a rank's log (its stdout lines, "O ..."), decoded (docs/agent-lines.md).
std::vector<cppl::lines::Event> agentEventsOf(const QByteArray &log)
{
    std::vector<cppl::lines::Event> out;
    for (const QByteArray &line : log.split('\n'))
        if (line.startsWith("O "))
            if (cppl::lines::Decoded d = cppl::lines::decode(line.mid(2).toStdString()); d.ok())
                out.push_back(std::move(d.event));
    return out;
}

} // namespace

class TestLaunch : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    cppl::test::TestSshd m_sshd;
    QString m_skip;
    QString m_oneRankExact;

    QString path(const QString &name) const { return m_dir.filePath(name); }

    /// A profile of `hosts` hosts x `slots` slots in groups of `slots` (one group per host).
    QString writeProfile(const QString &name, const QString &launcher, int hosts, int slots, const QString &model = kModel,
                         const QString &identity = QString())
    {
        QString hostList;
        for (int h = 0; h < hosts; ++h) {
            QString ssh = identity.isEmpty() ? u"{\"alias\": \"node%1\"}"_s.arg(h + 1)
                                             : u"{\"alias\": \"node%1\", \"identity_file\": \"%2\"}"_s.arg(h + 1).arg(identity);
            hostList += u"%1{\"name\": \"node%2\", \"address\": \"127.0.0.1\", \"slots\": %3, \"agent\": \"%4\", \"ssh\": %5,"
                        " \"env\": {\"OMP_NUM_THREADS\": \"1\", \"OPENBLAS_NUM_THREADS\": \"1\"}}"_s.arg(h ? u","_s : QString())
                            .arg(h + 1)
                            .arg(slots)
                            .arg(kAgent, ssh);
        }
        const QString json = uR"({"format": "clusterppl-profile", "version": 1, "name": "%1", "launcher": "%2",
  "hosts": [%3], "groups": "by-host",
  "evaluation": {"model": "%4", "text": "%5", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2,
                 "max_windows": %6, "dtype": "float32", "device": "cpu", "backend": "gloo", "topology": "hierarchical"},
  "thresholds": {"sync_every_tokens": 300, "collective_timeout_seconds": 30}})"_s.arg(name, launcher, hostList, model, kText)
                                 .arg(kWindows);
        const QString file = path(name + u".json"_s);
        writeFile(file, json.toUtf8());
        return file;
    }

    QStringList sshArgs(bool acceptNew = false) const
    {
        QStringList a{u"--ssh-config"_s, m_sshd.sshConfigFile(), u"--known-hosts"_s, m_sshd.knownHosts(), u"--connect-timeout"_s, u"5"_s};
        if (acceptNew)
            a << u"--accept-new-host-keys"_s;
        return a;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        qputenv("XDG_STATE_HOME", path(u"state"_s).toUtf8()); // the CLI's per-rank logs stay in the fixture
        // The one-rank reference (same per-rank settings as the profiles).
        const ProcessResult one = cppl::test::oneRankEval(kAgent, kText, kWindows, path(u"one.json"_s));
        CPPL_VERIFY2(one.exitCode == 0, qPrintable(one.describe()));
        m_oneRankExact = cppl::test::readJson(path(u"one.json"_s)).value(u"nll_sum_exact"_s).toString();
        QVERIFY(m_oneRankExact.startsWith(u"xs1:"_s));

        // sshd on 127.0.0.1 with everything in the temporary directory, and a key it does not accept.
        m_skip = m_sshd.start(m_dir.path());
        if (m_skip.isEmpty())
            QVERIFY(cppl::test::TestSshd::keygen(path(u"other_key"_s)));
    }

    void cleanupTestCase() { m_sshd.stop(); }

    void launchPlanQuotesSafely()
    {
        cppl::core::RankCommand r;
        r.hostName = "h";
        r.workdir = "/data/it's here";
        r.env = {{"MODEL_NOTE", "a b;$(rm -rf /)"}};
        r.argv = {"clusterppl-agent", "eval", "--model", "/m/x y"};
        QCOMPARE(QString::fromStdString(cppl::core::remoteCommand(r)),
                 u"cd '/data/it'\\''s here' && exec env 'MODEL_NOTE=a b;$(rm -rf /)' 'clusterppl-agent' 'eval' '--model' '/m/x y'"_s);
        r.argv.push_back("evil\nline");
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)cppl::core::remoteCommand(r));
        r.argv.pop_back();
        r.env = {{"BAD NAME", "x"}};
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)cppl::core::remoteCommand(r));
    }

    void launchPlanLeavesAutoToTheAgents_data()
    {
        QTest::addColumn<QByteArray>("from"); // in the test profile
        QTest::addColumn<QByteArray>("to");
        QTest::addColumn<QStringList>("expected"); // the flag's words in every rank's argv; none: the agents' default
        // batch auto: sized from free GPU memory, 8 on the CPU; dtype auto: bfloat16 on a GPU, float32 on the CPU.
        QTest::addRow("batch auto: no --batch") << QByteArray("\"batch\": 2") << QByteArray("\"batch\": \"auto\"") << QStringList{u"--batch"_s};
        QTest::addRow("batch 6") << QByteArray("\"batch\": 2") << QByteArray("\"batch\": 6") << QStringList{u"--batch"_s, u"6"_s};
        QTest::addRow("dtype auto: no --dtype") << QByteArray("\"dtype\": \"float32\"") << QByteArray("\"dtype\": \"auto\"") << QStringList{u"--dtype"_s};
        QTest::addRow("dtype float32") << QByteArray("\"dtype\": \"float32\"") << QByteArray("\"dtype\": \"float32\"")
                                       << QStringList{u"--dtype"_s, u"float32"_s};
        QTest::addRow("dtype bfloat16") << QByteArray("\"dtype\": \"float32\"") << QByteArray("\"dtype\": \"bfloat16\"")
                                        << QStringList{u"--dtype"_s, u"bfloat16"_s};
    }
    void launchPlanLeavesAutoToTheAgents()
    {
        QFETCH(QByteArray, from);
        QFETCH(QByteArray, to);
        QFETCH(QStringList, expected);
        const QString file = writeProfile(u"plan-auto"_s, u"local"_s, 2, 2);
        QByteArray json = readFile(file);
        QVERIFY(json.contains(from));
        json.replace(from, to);
        const auto parsed = cppl::parseProfile(json.toStdString(), file.toStdString());
        QVERIFY(parsed.ok());
        const cppl::core::LaunchPlan plan = cppl::core::buildLaunchPlan(parsed.profile, {});
        QCOMPARE(plan.ranks.size(), std::size_t{4});
        const std::string flag = expected.front().toStdString();
        for (const auto &r : plan.ranks) {
            const auto at = std::find(r.argv.begin(), r.argv.end(), flag);
            QStringList words{expected.front()};
            if (at != r.argv.end())
                words << QString::fromStdString(*(at + 1));
            QCOMPARE(words, expected);
        }
    }

    void overlapSyncReachesTheAgents_data()
    {
        QTest::addColumn<QString>("field");    // the profile's evaluation.overlap_sync, or none
        QTest::addColumn<QStringList>("flags"); // clusterppl-cli run's
        QTest::addColumn<bool>("expected");     // the result's overlap_sync: what the agents did
        QTest::addRow("profile false") << u"false"_s << QStringList{} << false;
        QTest::addRow("profile false, --overlap-sync on") << u"false"_s << QStringList{u"--overlap-sync"_s, u"on"_s} << true;
        QTest::addRow("default, --overlap-sync off") << QString() << QStringList{u"--overlap-sync"_s, u"off"_s} << false;
    }
    void overlapSyncReachesTheAgents()
    {
        // evaluation.overlap_sync and `run --overlap-sync` (which wins) reach every agent's command
        // line; the result says which way the rounds ran, and the bits are the one-rank run's.
        QFETCH(QString, field);
        QFETCH(QStringList, flags);
        QFETCH(bool, expected);
        const QString file = writeProfile(u"overlap"_s, u"local"_s, 1, 2);
        if (!field.isEmpty()) {
            QByteArray json = readFile(file);
            json.replace("\"topology\": \"hierarchical\"}", QByteArray("\"topology\": \"hierarchical\", \"overlap_sync\": " + field.toUtf8() + '}'));
            writeFile(file, json);
            const auto parsed = cppl::parseProfile(json.toStdString(), file.toStdString());
            QVERIFY(parsed.ok());
            for (const auto &r : cppl::core::buildLaunchPlan(parsed.profile, {}).ranks) {
                const auto at = std::find(r.argv.begin(), r.argv.end(), std::string("--overlap-sync"));
                QVERIFY(at != r.argv.end() && at + 1 != r.argv.end());
                QCOMPARE(*(at + 1), std::string("off"));
            }
        }
        const QString out = path(u"overlap-result.json"_s);
        QFile::remove(out);
        const ProcessResult r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, file, u"--no-preflight"_s, u"--no-store"_s, u"--json"_s, out} + flags,
                                           300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QJsonObject j = QJsonDocument::fromJson(readFile(out)).object();
        CPPL_VERIFY2(j.contains(u"overlap_sync"_s), qPrintable(r.describe()));
        QCOMPARE(j.value(u"overlap_sync"_s).toBool(), expected);
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_oneRankExact);
    }

    void overlapSyncBadValue()
    {
        const QString file = writeProfile(u"overlap-bad"_s, u"local"_s, 1, 1);
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, file, u"--overlap-sync"_s, u"yes"_s}, 60000);
        CPPL_VERIFY2(r.exitCode == 2 && r.err.contains(u"--overlap-sync \"yes\" is not one of on, off"_s), qPrintable(r.describe()));
    }

    void quantizationReachesTheAgents()
    {
        // evaluation.quantize ... reference_quantize become the agents' flags (a relative reference
        // resolved like the model), none of them for a float profile; `run --quantize` and
        // `--reference-model` override the profile, and the result says what the agents did.
        const QString file = writeProfile(u"quant"_s, u"local"_s, 1, 2);
        QByteArray json = readFile(file);
        const auto plain = cppl::parseProfile(json.toStdString(), file.toStdString());
        QVERIFY(plain.ok());
        for (const auto &r : cppl::core::buildLaunchPlan(plain.profile, {}).ranks)
            for (const char *flag : {"--quantize", "--quant-group", "--quantize-head", "--reference-model", "--reference-dtype", "--reference-quantize"})
                QVERIFY2(std::find(r.argv.begin(), r.argv.end(), std::string(flag)) == r.argv.end(), flag);
        QByteArray quantized = json;
        quantized.replace("\"topology\": \"hierarchical\"}", "\"topology\": \"hierarchical\", \"quantize\": \"int4\", \"quant_group\": 64, "
                                                              "\"quantize_head\": true, \"reference_model\": \"ref\", \"reference_dtype\": \"bfloat16\", "
                                                              "\"reference_quantize\": \"int8\"}");
        const auto parsed = cppl::parseProfile(quantized.toStdString(), file.toStdString());
        QVERIFY2(parsed.ok(), quantized.constData());
        const std::string ref = (std::filesystem::path(QFileInfo(file).absolutePath().toStdString()) / "ref").lexically_normal().string();
        cppl::core::LaunchOptions lo;
        lo.profileDir = QFileInfo(file).absolutePath().toStdString();
        for (const auto &r : cppl::core::buildLaunchPlan(parsed.profile, lo).ranks) {
            const auto at = std::find(r.argv.begin(), r.argv.end(), std::string("--quantize"));
            QVERIFY(at != r.argv.end() && r.argv.end() - at >= 11);
            const std::vector<std::string> words(at, at + 11);
            QCOMPARE(words, (std::vector<std::string>{"--quantize", "int4", "--quant-group", "64", "--quantize-head", "--reference-model", ref,
                                                      "--reference-dtype", "bfloat16", "--reference-quantize", "int8"}));
        }
        const QString out = path(u"quant-result.json"_s);
        QFile::remove(out);
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, file, u"--no-preflight"_s, u"--no-store"_s, u"--json"_s, out, u"--quantize"_s,
                                                  u"int8"_s, u"--reference-model"_s, kModel},
                                           300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QJsonObject j = QJsonDocument::fromJson(readFile(out)).object();
        QCOMPARE(j.value(u"quantization"_s).toObject().value(u"method"_s).toString(), u"int8"_s);
        const QJsonObject reference = j.value(u"reference"_s).toObject();
        QVERIFY2(reference.value(u"kld_mean"_s).toDouble() > 0 && reference.value(u"ranks"_s).toArray().size() == 2, qPrintable(r.describe()));
        const ProcessResult bad = runProcess(kCli, {u"run"_s, u"--profile"_s, file, u"--quantize"_s, u"int3"_s}, 60000);
        CPPL_VERIFY2(bad.exitCode == 2 && bad.err.contains(u"--quantize \"int3\" is not one of none, int8, int4, int4-sym, int4-asym"_s),
                     qPrintable(bad.describe()));
    }

    void autoBatchOnTheCpuIsTheFixedDefault()
    {
        // "batch": "auto" passes no --batch: on the CPU every rank keeps the agents' default of 8,
        // says so in the result, and the bits equal the one-rank run's at batch 2. "dtype": "auto"
        // likewise passes no --dtype: float32 on the CPU, which the result names.
        const QString file = writeProfile(u"auto-batch"_s, u"local"_s, 1, 2);
        QByteArray json = readFile(file);
        json.replace("\"batch\": 2", "\"batch\": \"auto\"");
        json.replace("\"dtype\": \"float32\", \"device\": \"cpu\"", "\"dtype\": \"auto\", \"device\": \"auto\"");
        writeFile(file, json);
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, file, u"--no-preflight"_s, u"--no-store"_s, u"--json"_s,
                                                  path(u"auto-batch-result.json"_s)},
                                           300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QJsonObject j = cppl::test::readJson(path(u"auto-batch-result.json"_s));
        QCOMPARE(j.value(u"batch"_s).toInt(), 8);
        QCOMPARE(j.value(u"batch_from"_s).toObject().value(u"source"_s).toString(), u"default"_s);
        QCOMPARE(j.value(u"dtype"_s).toString(), u"float32"_s);
        QCOMPARE(j.value(u"device"_s).toString(), u"cpu"_s);
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_oneRankExact);
    }

    void localLauncherBitIdentical()
    {
        const QString profile = writeProfile(u"local4"_s, u"local"_s, 1, 4);
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile, u"--json"_s, path(u"local4-result.json"_s)}, 300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QVERIFY(r.out.contains(u"Final estimate: PPL = "_s));
        QVERIFY(r.err.contains(u"pre-flight ok"_s));
        CPPL_VERIFY2(r.err.contains(u"live exact merge equals rank 0's result"_s), qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.contains(u"[live]   rank 3 ("_s), qPrintable(r.describe()));
        // Every rank's lines are in its log file too.
        const QStringList runs = QDir(path(u"state/clusterppl/runs"_s)).entryList(QDir::Dirs | QDir::NoDotAndDotDot);
        QVERIFY(!runs.isEmpty());
        const QByteArray rank0 = readFile(path(u"state/clusterppl/runs/"_s + runs.last() + u"/rank-0.log"_s));
        CPPL_VERIFY2(rank0.contains("O Final estimate: PPL = "), rank0.constData());
        const QJsonObject j = cppl::test::readJson(path(u"local4-result.json"_s));
        // Rank 0's result line, kept in its log, decodes to the result the CLI wrote.
        int results = 0;
        for (const auto &e : agentEventsOf(rank0))
            if (const auto *res = std::get_if<cppl::lines::Result>(&e)) {
                ++results;
                QCOMPARE(QJsonDocument::fromJson(QByteArray::fromStdString(res->json)).object().value(u"nll_sum_exact"_s), j.value(u"nll_sum_exact"_s));
            }
        QCOMPARE(results, 1);
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_oneRankExact);
        QCOMPARE(j.value(u"world_size"_s).toInt(), 4);
    }

    void localLauncherRecoversLostRank()
    {
        // --schedule dynamic --on-rank-loss continue through the CLI's local launcher: rank 2 is
        // killed mid-run; the launcher leaves the others running, they regroup, and the CLI says
        // "recovered" and exits 0 with the one-rank bits.
        recoverLostRank(u"local"_s, 1, 4, 2);
        // Bad values are refused before anything starts.
        const QString profile = writeProfile(u"recover-bad"_s, u"local"_s, 1, 2);
        const ProcessResult bad = runProcess(kCli, {u"run"_s, u"--profile"_s, profile, u"--on-rank-loss"_s, u"continue"_s, u"--schedule"_s, u"static"_s}, 60000);
        CPPL_VERIFY2(bad.exitCode == 2 && bad.err.contains(u"on-rank-loss continue needs the dynamic schedule"_s), qPrintable(bad.describe()));
    }

    void localLauncherRecoversRankZero()
    {
        // Rank 0 killed mid-run: the store is not in its process, so the survivors elect a new
        // hub, regroup, and the lowest survivor reports the result; the CLI says "recovered".
        recoverLostRank(u"local"_s, 1, 4, 0);
    }

    void storeKilledMidRunIsNamed()
    {
        // The store process of a tolerant run is SIGKILLed mid-run: the ranks lose it and give up,
        // and the run fails naming the store first, with nothing of the run left.
        QString profile = writeProfile(u"store-killed"_s, u"local"_s, 1, 2);
        QByteArray json = readFile(profile);
        json.replace("\"max_windows\": 37", "\"max_windows\": 0");
        json.replace("\"topology\": \"hierarchical\"}", "\"topology\": \"hierarchical\", \"schedule\": \"dynamic\", \"on_rank_loss\": \"continue\"}");
        // Both ranks sleep 20 ms per batch (about 4 s more): every window of 2 ranks is ~2 s, and
        // the store was killed after a finished run (exit 0) or found gone (2 in 6 runs).
        json.replace("\"OPENBLAS_NUM_THREADS\": \"1\"}", "\"OPENBLAS_NUM_THREADS\": \"1\", \"CLUSTERPPL_TEST_SLOW_RANK\": \"*:20\"}");
        QVERIFY(writeFile(profile, json));
        const QString runId = u"store-killed-run"_s;
        QProcess cli;
        cli.start(kCli, {u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--no-preflight"_s, u"--no-store"_s});
        QVERIFY(cli.waitForStarted());
        QByteArray errSoFar;
        cli.setReadChannel(QProcess::StandardError);
        QElapsedTimer t;
        t.start();
        while (!errSoFar.contains("2/2 ranks evaluating") && cli.state() == QProcess::Running && t.elapsed() < 120000)
            if (cli.waitForReadyRead(500))
                errSoFar += cli.readAllStandardError();
        CPPL_VERIFY2(errSoFar.contains("2/2 ranks evaluating"), errSoFar.constData());
        const QList<qint64> store = processesOfRun(runId, "store");
        QCOMPARE(store.size(), 1);
        QCOMPARE(::kill(static_cast<pid_t>(store.front()), SIGKILL), 0);
        QVERIFY(cli.waitForFinished(120000));
        const QString err = QString::fromUtf8(errSoFar + cli.readAllStandardError());
        CPPL_VERIFY2(cli.exitCode() == 12 && err.contains(u"run failed: the rendezvous store on 127.0.0.1:"_s)
                     && err.contains(u" exited: killed by signal 9"_s),
                 qPrintable(u"exit %1\n%2"_s.arg(cli.exitCode()).arg(err)));
        QTRY_VERIFY_WITH_TIMEOUT(agentsOfRun(runId).isEmpty(), 10000);
    }

    void sshLauncherRecoversLostRank()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // The same over SSH: 2 hosts x 2 ranks, the store on the first host through its own SSH
        // channel, rank 3 (second host) killed mid-run.
        recoverLostRank(u"ssh"_s, 2, 2, 3);
    }

    void sshLauncherRecoversRankZero()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // Rank 0 killed on the first host, whose SSH session also holds the store's channel: the
        // store lives on, the survivors elect a new hub, rank 1 reports the result.
        recoverLostRank(u"ssh"_s, 2, 2, 0);
    }

    void storeThatCannotStartIsNamed()
    {
        // The store's port is taken: the run does not start, and says which store and why.
        QProcess squatter;
        squatter.start(kAgent, {u"store"_s, u"--port"_s, u"0"_s, u"--bind"_s, u"127.0.0.1"_s});
        QVERIFY(squatter.waitForStarted());
        QByteArray line;
        QElapsedTimer t;
        t.start();
        while (!line.contains('\n') && t.elapsed() < 30000)
            if (squatter.waitForReadyRead(200))
                line += squatter.readAllStandardOutput();
        const int port = QJsonDocument::fromJson(line.mid(17, line.indexOf('\n') - 17)).object().value(u"port"_s).toInt();
        CPPL_VERIFY2(port > 0, line.constData());
        const QString profile = writeProfile(u"store-busy"_s, u"local"_s, 1, 2);
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile, u"--no-preflight"_s, u"--schedule"_s, u"dynamic"_s,
                                                  u"--on-rank-loss"_s, u"continue"_s, u"--master-port"_s, QString::number(port)},
                                           120000);
        squatter.closeWriteChannel();
        QVERIFY(squatter.waitForFinished(10000));
        CPPL_VERIFY2(r.exitCode == 11 && r.err.contains(u"the rendezvous store on 127.0.0.1:%1 did not start"_s.arg(port))
                     && r.err.contains(u"port %1 is in use"_s.arg(port)),
                 qPrintable(r.describe()));
    }

    void sshFourRanksTwoGroups()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        QFile::remove(m_sshd.knownHosts());
        const QString profile = writeProfile(u"ssh4"_s, u"ssh"_s, 2, 2);
        // Unknown host key: refused, with the fingerprint, and nothing started.
        ProcessResult r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, profile} + sshArgs(false), 120000);
        CPPL_VERIFY2(r.exitCode != 0 && r.err.contains(u"is not in known_hosts"_s) && r.err.contains(u"SHA256:"_s)
                     && r.err.contains(u"--accept-new-host-keys"_s),
                 qPrintable(r.describe()));
        // Accepted with the flag; then a 4-rank, 2-group evaluation through SSH, same bits as one rank.
        r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--json"_s, path(u"ssh4-result.json"_s)} + sshArgs(true), 300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QVERIFY(r.err.contains(u"accepted new host key"_s));
        // Telemetry came back through the SSH sessions' reverse tunnels, and its live exact merge
        // equals the result.
        CPPL_VERIFY2(r.err.contains(u"live exact merge equals rank 0's result"_s) && r.err.contains(u" 0 lost"_s), qPrintable(r.describe()));
        const QJsonObject j = cppl::test::readJson(path(u"ssh4-result.json"_s));
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), m_oneRankExact);
        QCOMPARE(j.value(u"groups"_s).toVariant().toList().size(), 2);
        // Known now: no flag needed.
        r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, profile} + sshArgs(false), 300000);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
    }

    void changedHostKeyRefused()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // known_hosts records another key of the same type for this host: refuse loudly, like OpenSSH.
        const QByteArray other = readFile(path(u"other_key.pub"_s)).trimmed();
        const QList<QByteArray> parts = other.split(' ');
        QVERIFY(writeFile(m_sshd.knownHosts(), "[127.0.0.1]:" + QByteArray::number(m_sshd.port()) + ' ' + parts[0] + ' ' + parts[1] + '\n'));
        const QString profile = writeProfile(u"ssh-changed"_s, u"ssh"_s, 1, 1);
        const ProcessResult r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, profile} + sshArgs(true), 120000);
        CPPL_VERIFY2(r.exitCode != 0 && r.err.contains(u"HAS CHANGED"_s) && r.err.contains(u"man-in-the-middle"_s), qPrintable(r.describe()));
        QFile::remove(m_sshd.knownHosts());
    }

    void wrongKeyAndUnreachablePort()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        QFile::remove(m_sshd.knownHosts());
        QElapsedTimer t;
        t.start();
        const QString wrong = writeProfile(u"ssh-wrongkey"_s, u"ssh"_s, 1, 1, kModel, path(u"other_key"_s));
        ProcessResult r = runProcess(kCli, QStringList{u"run"_s, u"--profile"_s, wrong} + sshArgs(true), 120000);
        CPPL_VERIFY2(r.exitCode != 0 && r.err.contains(u"authentication to"_s) && r.err.contains(u"failed"_s), qPrintable(r.describe()));
        // Nothing listens on this port: a specific message, within the connect timeout.
        const int closed = freeLoopbackPort();
        const QString cfg = path(u"ssh_config_closed"_s);
        QVERIFY(writeFile(cfg, u"Host node1\n  HostName 127.0.0.1\n  Port %1\n"_s.arg(closed).toUtf8()));
        const QString profile = writeProfile(u"ssh-closed"_s, u"ssh"_s, 1, 1);
        t.restart();
        r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile, u"--ssh-config"_s, cfg, u"--known-hosts"_s, m_sshd.knownHosts(),
                              u"--connect-timeout"_s, u"5"_s},
                       120000);
        CPPL_VERIFY2(r.exitCode != 0 && r.err.contains(u"cannot connect to node1"_s), qPrintable(r.describe()));
        QVERIFY(t.elapsed() < 20000);
    }

private:
    /// The one-rank exact sums of every window (what a tolerant run must still give).
    QJsonObject oneRankFull()
    {
        if (!QFile::exists(path(u"one-full.json"_s))) {
            const ProcessResult full = runProcess(kAgent, {u"eval"_s, u"--model"_s, kModel, u"--text"_s, kText, u"--tokenizer"_s, u"bytes"_s,
                                                           u"--protocol"_s, u"llama.cpp"_s, u"--context"_s, u"128"_s, u"--batch"_s, u"2"_s,
                                                           u"--threads"_s, u"1"_s, u"--blas-threads"_s, u"1"_s, u"--quiet"_s, u"--json"_s,
                                                           path(u"one-full.json"_s)});
            if (full.exitCode != 0)
                qWarning("%s", qPrintable(full.describe()));
        }
        return cppl::test::readJson(path(u"one-full.json"_s));
    }

    /// `clusterppl-cli run` of a tolerant profile (dynamic schedule, on_rank_loss continue, every
    /// window) on @p hosts x @p slots; rank @p victim's agent is SIGKILLed once every rank is in its
    /// evaluation. Expects exit 0, "recovered (rank VICTIM (", the one-rank exact sums, the lost rank
    /// in the result and the history, and no agent or store of the run left.
    void recoverLostRank(const QString &launcher, int hosts, int slots, int victim)
    {
        const QJsonObject one = oneRankFull();
        QVERIFY(!one.value(u"nll_sum_exact"_s).toString().isEmpty());
        const QString name = u"recover-%1-%2"_s.arg(launcher).arg(victim);
        QString profile = writeProfile(name, launcher, hosts, slots);
        QByteArray json = readFile(profile);
        json.replace("\"max_windows\": 37", "\"max_windows\": 0"); // long enough to kill a rank in it
        json.replace("\"topology\": \"hierarchical\"}", "\"topology\": \"hierarchical\", \"schedule\": \"dynamic\", \"on_rank_loss\": \"continue\"}");
        // Every rank sleeps 20 ms per batch (about 2 s more for the run): it still runs when every
        // rank is evaluating, the point where the victim is killed (sooner, a rank could still be
        // joining the watchdog's star: rank 0 lost there ends the run by design).
        json.replace("\"OPENBLAS_NUM_THREADS\": \"1\"}", "\"OPENBLAS_NUM_THREADS\": \"1\", \"CLUSTERPPL_TEST_SLOW_RANK\": \"*:20\"}");
        QVERIFY(writeFile(profile, json));
        const QString runId = name + u"-run"_s;
        const QString store = path(name + u"-history.sqlite"_s);
        QProcess cli;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(u"CLUSTERPPL_STORE"_s, store);
        cli.setProcessEnvironment(env);
        cli.start(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--no-preflight"_s, u"--json"_s,
                                    path(name + u"-result.json"_s)}
                            + (launcher == u"ssh"_s ? sshArgs(true) : QStringList()));
        QVERIFY(cli.waitForStarted());
        QElapsedTimer t;
        t.start();
        const int world = hosts * slots;
        qsizetype seen = 0; // one reading, checked as read (a second one is another moment)
        while ((seen = processesOfRun(runId, "eval").size()) < world && cli.state() == QProcess::Running && t.elapsed() < 60000)
            QThread::msleep(100);
        if (seen != world) {
            cli.waitForReadyRead(1000);
            QByteArray ps;
            for (const qint64 pid : agentsOfRun(runId))
                ps += QByteArray::number(pid) + ' ' + readFile(u"/proc/%1/cmdline"_s.arg(pid)).replace('\0', ' ') + '\n';
            CPPL_VERIFY2(false, u"%1 of %2 ranks after %3 ms, the CLI %4; the run's processes:\n%5the CLI: %6\n%7"_s.arg(seen).arg(world)
                                    .arg(t.elapsed())
                                    .arg(cli.state() == QProcess::Running ? u"running"_s : u"exited"_s, QString::fromUtf8(ps),
                                         QString::fromUtf8(cli.readAllStandardOutput()), QString::fromUtf8(cli.readAllStandardError()))
                                    .toUtf8()
                                    .constData());
        }
        // The store runs in a process of its own, beside the ranks (started before them).
        QCOMPARE(processesOfRun(runId, "store").size(), 1);
        QByteArray errSoFar;
        cli.setReadChannel(QProcess::StandardError);
        // Killed once every rank evaluates (the CLI's live line counts them), not at the first
        // tokens: with the process groups formed behind the first round, one rank may compute
        // while others still join the watchdog's star.
        const QByteArray allEvaluating = QByteArray::number(world) + '/' + QByteArray::number(world) + " ranks evaluating";
        while (!errSoFar.contains(allEvaluating) && cli.state() == QProcess::Running && t.elapsed() < 120000)
            if (cli.waitForReadyRead(500))
                errSoFar += cli.readAllStandardError();
        CPPL_VERIFY2(errSoFar.contains(allEvaluating), errSoFar.constData());
        // Every rank is its LibTorch half by now (evaluating): found at once.
        const QList<qint64> target = processesOfRun(runId, "eval", "RANK=" + QByteArray::number(victim));
        QCOMPARE(target.size(), 1);
        QVERIFY(readFile(u"/proc/%1/environ"_s.arg(target.front())).split('\0').contains("TORCHELASTIC_USE_AGENT_STORE=True"));
        QCOMPARE(::kill(static_cast<pid_t>(target.front()), SIGKILL), 0);
        QVERIFY(cli.waitForFinished(240000));
        const QString err = QString::fromUtf8(errSoFar + cli.readAllStandardError());
        const QString out = QString::fromUtf8(cli.readAllStandardOutput());
        CPPL_VERIFY2(cli.exitStatus() == QProcess::NormalExit && cli.exitCode() == 0, qPrintable(u"exit %1\n%2"_s.arg(cli.exitCode()).arg(err)));
        QVERIFY(out.contains(u"Final estimate: PPL = "_s));
        CPPL_VERIFY2(err.contains(u"clusterppl-cli: recovered (rank %1 ("_s.arg(victim)) && err.contains(u"died: its connection closed"_s), qPrintable(err));
        // The reporting rank said so as the agent protocol's rank-lost line (kept in its log), with the watchdog's cause.
        std::optional<cppl::lines::RankLost> said;
        for (int r = 0; r < world && !said; ++r)
            for (const auto &e : agentEventsOf(readFile(path(u"state/clusterppl/runs/%1/rank-%2.log"_s.arg(runId).arg(r)))))
                if (const auto *l = std::get_if<cppl::lines::RankLost>(&e); l && l->rank == victim)
                    said = *l;
        QVERIFY2(said.has_value(), qPrintable(err));
        CPPL_VERIFY2(said->cause.starts_with("died: its connection closed") && !said->afterLastRound && said->ranksLeft == world - 1,
                     cppl::lines::encode(*said).c_str());
        CPPL_VERIFY2(err.contains(u"the live cross-check is skipped"_s), qPrintable(err));
        CPPL_VERIFY2(!err.contains(u"the rendezvous store on"_s), qPrintable(err));
        // No agent and no store of the run is left (the store ended on its stdin's EOF).
        QTRY_VERIFY_WITH_TIMEOUT(agentsOfRun(runId).isEmpty(), 10000);
        const QJsonObject j = cppl::test::readJson(path(name + u"-result.json"_s));
        QCOMPARE(j.value(u"nll_sum_exact"_s).toString(), one.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(j.value(u"nll_sq_sum_exact"_s).toString(), one.value(u"nll_sq_sum_exact"_s).toString());
        QCOMPARE(j.value(u"tokens_scored"_s).toInteger(), one.value(u"tokens_scored"_s).toInteger());
        QCOMPARE(j.value(u"lost_ranks"_s).toArray().size(), 1);
        QCOMPARE(j.value(u"lost_ranks"_s).toArray().first().toObject().value(u"rank"_s).toInt(), victim);
        // The history keeps it as finished, with its lost rank.
        const ProcessResult h = runProcess(kCli, {u"show"_s, runId, u"--json"_s, u"--store"_s, store}, 60000);
        CPPL_VERIFY2(h.exitCode == 0, qPrintable(h.describe()));
        const QJsonObject run = QJsonDocument::fromJson(h.out.toUtf8()).object().value(u"run"_s).toObject();
        CPPL_VERIFY2(run.value(u"status"_s).toString() == u"finished"_s, qPrintable(h.out.left(3000)));
        const QJsonArray lost = run.value(u"lost_ranks"_s).toArray();
        CPPL_VERIFY2(lost.size() == 1 && lost.first().toObject().value(u"rank"_s).toInt() == victim, qPrintable(h.out.left(3000)));
    }

    /// One rank running `sh -c 'echo ok'` on node1 through the launcher library, with the fixture's files.
    cppl::test::SshEcho runOne(cppl::core::LauncherSettings settings, const std::string &identity = {}) const
    {
        settings.sshConfigFile = m_sshd.sshConfigFile().toStdString();
        settings.knownHostsFile = m_sshd.knownHosts().toStdString();
        settings.connectTimeoutSeconds = 5;
        return cppl::test::runEchoOnNode1(settings, identity);
    }

private Q_SLOTS:
    void sshLauncherSendsTheKeyLineOnStdin()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // The run's telemetry keys reach a remote rank as its first stdin line, inside the SSH
        // channel; the remote command line carries only the flag (docs/launching.md).
        cppl::core::LauncherSettings settings;
        settings.sshConfigFile = m_sshd.sshConfigFile().toStdString();
        settings.knownHostsFile = m_sshd.knownHosts().toStdString();
        settings.connectTimeoutSeconds = 5;
        settings.newHostKeys = cppl::core::NewHostKeys::Accept;
        cppl::core::LaunchPlan plan;
        plan.launcher = "ssh";
        plan.keyLine = cppl::telemetry::formatKeyLine(cppl::telemetry::generateCredentials().agent);
        cppl::core::RankCommand c;
        c.hostName = "node1";
        c.address = "node1";
        c.ssh.alias = "node1";
        // Echoes the line it read and its own command line, then reads on until stdin's EOF.
        c.argv = {"/bin/sh", "-c", "read -r l; echo \"line:$l\"; tr '\\0' ' ' < /proc/$$/cmdline; echo; while read -r x; do :; done; echo eof",
                  "sh", std::string(cppl::core::kKeysStdinFlag)};
        plan.ranks.push_back(c);
        auto launcher = cppl::core::makeSshLauncher(settings);
        QStringList out;
        QEventLoop loop;
        connect(launcher.get(), &cppl::core::Launcher::rankOutput, this, [&](int, bool isErr, const QString &line) {
            if (!isErr)
                out << line;
        });
        connect(launcher.get(), &cppl::core::Launcher::finished, &loop, &QEventLoop::quit);
        launcher->start(plan);
        QTRY_VERIFY_WITH_TIMEOUT(out.size() >= 2, 30000);
        QCOMPARE(out[0], u"line:"_s + QString::fromStdString(plan.keyLine).trimmed());
        CPPL_VERIFY2(out[1].contains(u"--telemetry-keys-stdin"_s) && !out[1].contains(u"clusterppl-telemetry-keys-v1"_s), qPrintable(out[1]));
        QTest::qWait(300);
        CPPL_VERIFY2(!out.contains(u"eof"_s), "the SSH launcher closed stdin after the key line");
        launcher->stop();
        QTimer::singleShot(20000, &loop, &QEventLoop::quit);
        if (!launcher->isFinished())
            loop.exec();
        QVERIFY(launcher->isFinished());
    }

    void askForHostKeyAndPassphrase()
    {
        if (!m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // The dashboard's way: a callback decides about an unknown host key.
        QFile::remove(m_sshd.knownHosts());
        cppl::core::LauncherSettings ask;
        ask.newHostKeys = cppl::core::NewHostKeys::Ask;
        std::string seen;
        ask.askNewHostKey = [&](const std::string &, const std::string &fp) {
            seen = fp;
            return cppl::core::HostKeyAnswer::Refuse;
        };
        cppl::test::SshEcho o = runOne(ask);
        CPPL_VERIFY2(o.hostErrors.size() == 1 && o.hostErrors[0].contains(u"refused"_s), qPrintable(o.hostErrors.join(u'\n')));
        QVERIFY(QString::fromStdString(seen).contains(u"SHA256:"_s));
        ask.askNewHostKey = [](const std::string &, const std::string &) { return cppl::core::HostKeyAnswer::AcceptAlways; };
        o = runOne(ask);
        QCOMPARE(o.out, QStringList{u"ok"_s});
        QCOMPARE(o.exitCode, 0);
        QVERIFY(readFile(m_sshd.knownHosts()).contains("127.0.0.1"));

        // An encrypted key: its passphrase comes from the callback (the CLI asks on the terminal).
        QFile::remove(path(u"enc_key"_s));
        QVERIFY(runProcess(u"ssh-keygen"_s, {u"-q"_s, u"-t"_s, u"ed25519"_s, u"-N"_s, u"s3cret"_s, u"-f"_s, path(u"enc_key"_s)}).exitCode == 0);
        QFile keys(path(u"authorized_keys"_s));
        QVERIFY(keys.open(QIODevice::Append));
        keys.write(readFile(path(u"enc_key.pub"_s)));
        keys.close();
        cppl::core::LauncherSettings pass;
        pass.passphrase = [](const std::string &prompt) -> std::optional<std::string> {
            return prompt.find("enc_key") != std::string::npos ? std::optional<std::string>("s3cret") : std::nullopt;
        };
        o = runOne(pass, path(u"enc_key"_s).toStdString());
        CPPL_VERIFY2(o.exitCode == 0 && o.out == QStringList{u"ok"_s}, qPrintable(o.hostErrors.join(u'\n')));
        pass.passphrase = [](const std::string &) -> std::optional<std::string> { return std::string("wrong"); };
        o = runOne(pass, path(u"enc_key"_s).toStdString());
        CPPL_VERIFY2(o.hostErrors.size() == 1 && o.hostErrors[0].contains(u"cannot read the private key"_s), qPrintable(o.hostErrors.join(u'\n')));
    }

    void preflightRefuses()
    {
        const QString profile = writeProfile(u"local-missing"_s, u"local"_s, 1, 2, path(u"no-such-model"_s));
        const ProcessResult r = runProcess(kCli, {u"run"_s, u"--profile"_s, profile}, 120000);
        CPPL_VERIFY2(r.exitCode == 10 && r.err.contains(u"pre-flight refused the launch"_s) && r.err.contains(u"no-such-model: missing"_s),
                 qPrintable(r.describe()));
    }

    void noOrphans_data()
    {
        QTest::addColumn<QString>("launcher");
        QTest::addColumn<QString>("how");
        QTest::addRow("local, CLI killed") << u"local"_s << u"kill-cli"_s;
        QTest::addRow("ssh, CLI killed") << u"ssh"_s << u"kill-cli"_s;
        QTest::addRow("local, one agent killed") << u"local"_s << u"kill-agent"_s;
        QTest::addRow("ssh, stop (SIGTERM to the CLI)") << u"ssh"_s << u"stop"_s;
    }
    void noOrphans()
    {
        QFETCH(QString, launcher);
        QFETCH(QString, how);
        if (launcher == u"ssh"_s && !m_skip.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(m_skip));
        // A long run, so that there is something to interrupt: every window is 2 s of compute for
        // 4 ranks, done before the CLI's first live line; static shards with rank 3 sleeping
        // 100 ms per batch make it ~11 s (every round waits for rank 3). It fails fast when a
        // rank is killed (on_rank_loss fail, outright).
        QString profile = writeProfile(u"long-"_s + launcher, launcher, launcher == u"ssh"_s ? 2 : 1, launcher == u"ssh"_s ? 2 : 4);
        QByteArray json = readFile(profile);
        json.replace("\"max_windows\": 37", "\"max_windows\": 0, \"schedule\": \"static\", \"on_rank_loss\": \"fail\"");
        json.replace("\"OPENBLAS_NUM_THREADS\": \"1\"}", "\"OPENBLAS_NUM_THREADS\": \"1\", \"CLUSTERPPL_TEST_SLOW_RANK\": \"3:100\"}");
        QVERIFY(writeFile(profile, json));
        const QString runId = u"orphan-test-%1-%2"_s.arg(launcher, how);
        QProcess cli;
        cli.start(kCli, QStringList{u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--no-preflight"_s} + sshArgs(true));
        QVERIFY(cli.waitForStarted());
        QElapsedTimer t;
        t.start();
        qsizetype seen = 0, most = 0;
        while ((seen = agentsOfRun(runId).size()) < 4 && t.elapsed() < 60000) {
            most = std::max(most, seen);
            QThread::msleep(100);
        }
        if (seen != 4) { // what the CLI and its ranks said instead (one rank out before the others came?)
            cli.waitForReadyRead(1000);
            CPPL_VERIFY2(false, u"%1 of 4 agents after %2 ms (at most %3 at once); the CLI: %4\n%5"_s.arg(seen).arg(t.elapsed()).arg(most).arg(
                                    QString::fromUtf8(cli.readAllStandardOutput()), QString::fromUtf8(cli.readAllStandardError()))
                                    .toUtf8()
                                    .constData());
        }
        // Into the evaluation: the CLI prints its global live line once telemetry has counted
        // scored tokens (an event to wait for, not a guess at how long loading takes).
        QByteArray errSoFar;
        cli.setReadChannel(QProcess::StandardError);
        t.restart();
        while (!errSoFar.contains("[live] ppl ") && cli.state() == QProcess::Running && t.elapsed() < 60000)
            if (cli.waitForReadyRead(500))
                errSoFar += cli.readAllStandardError();
        CPPL_VERIFY2(errSoFar.contains("[live] ppl "), errSoFar.constData());
        QCOMPARE(cli.state(), QProcess::Running);
        t.restart();
        if (how == u"kill-cli"_s) {
            ::kill(static_cast<pid_t>(cli.processId()), SIGKILL);
        } else if (how == u"stop"_s) {
            ::kill(static_cast<pid_t>(cli.processId()), SIGTERM);
        } else {
            const auto agents = agentsOfRun(runId);
            ::kill(static_cast<pid_t>(agents[2]), SIGKILL);
        }
        QVERIFY(cli.waitForFinished(30000));
        while (!agentsOfRun(runId).isEmpty() && t.elapsed() < 10000)
            QThread::msleep(100);
        const qint64 took = t.elapsed();
        const QString err = QString::fromUtf8(errSoFar + cli.readAllStandardError());
        CPPL_VERIFY2(agentsOfRun(runId).isEmpty(), qPrintable(u"agents left after 10 s:\n"_s + err));
        qInfo("every agent of the run gone %lld ms after the %s", static_cast<long long>(took), qPrintable(how));
        if (how == u"kill-agent"_s) {
            QVERIFY(cli.exitCode() != 0);
            CPPL_VERIFY2(err.contains(u"run failed: rank "_s) && err.contains(u"killed by signal 9"_s), qPrintable(err));
        }
        // Interrupted, not finished: no "[round N/N]" line (the last round's).
        CPPL_VERIFY2(!err.contains(QRegularExpression(u"\\[round (\\d+)/\\1\\]"_s)), qPrintable(u"the run ended before it was interrupted:\n"_s + err.right(1500)));
        if (how == u"stop"_s)
            CPPL_VERIFY2(cli.exitCode() == 130, qPrintable(err.right(1500)));
    }
};

QTEST_GUILESS_MAIN(TestLaunch)
#include "tst_launch.moc"
