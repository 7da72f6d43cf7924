// SPDX-License-Identifier: MIT
// The Slurm launcher's pure half: the generated batch script word by word, the driver's command
// line, and the decoding of what the driver and srun say back. No cluster needed.
#include "launch/launch_plan.h"
#include "launch/slurm_job.h"

#include "cppl/agent_lines.h"
#include "cppl/cluster_profile.h"
#include "cppl/errors.h"

#include <QTest>

#include <algorithm>

using namespace cppl;
using namespace cppl::core;
using namespace Qt::StringLiterals;

namespace {

ClusterProfile slurmProfile()
{
    const auto r = parseProfile(R"({"format": "clusterppl-profile", "version": 1, "name": "gpu cluster", "launcher": "slurm",
      "hosts": [{"name": "login", "ssh": {"alias": "cluster"}, "workdir": "/scratch/me", "env": {"OMP_NUM_THREADS": "2", "NCCL_DEBUG": "WARN"}}],
      "groups": "by-host",
      "slurm": {"partition": "gpu", "account": "proj1", "qos": "high", "time_limit": "01:30:00", "nodes": 2, "ntasks_per_node": 4,
                "gpus_per_node": 4, "constraint": "a100&ib", "sbatch_options": ["--exclusive", "--mem=0"],
                "agent": "/opt/cppl/bin/clusterppl-agent", "modules": ["cuda/12.2"], "env_script": "/etc/site env.sh"},
      "evaluation": {"model": "/models/quoted", "text": "/data/wiki.txt", "backend": "nccl"}})");
    if (!r.ok())
        qFatal("%s", r.errors.front().c_str());
    ClusterProfile p = r.profile;
    p.evaluation.model = "/models/it" + std::string(1, '\x27') + "s"; // a quote to escape
    return p;
}

/// The job script of @p profile's run from its srun line on: what every agent's command line says.
QString srunLineOf(const ClusterProfile &profile)
{
    LaunchOptions lo;
    lo.runId = "r";
    lo.masterAddr = std::string(kSlurmMasterPlaceholder);
    const LaunchPlan plan = buildLaunchPlan(slurmRankProfile(profile), lo);
    SlurmJobInputs in;
    in.runId = "r";
    in.evalArgv = plan.ranks.front().argv;
    const QString s = QString::fromStdString(buildSlurmJob(profile, in).batchScript);
    const qsizetype srun = s.indexOf(QStringLiteral("--distribution=block"));
    return srun > 0 ? s.mid(srun) : QString();
}

} // namespace

class TestSlurmScript : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void rankProfileIsBlockLayout()
    {
        const ClusterProfile p = slurmRankProfile(slurmProfile());
        QCOMPARE(p.hosts.size(), std::size_t{2});
        QCOMPARE(p.hosts[1].slots, 4);
        QCOMPARE(p.hosts[0].agent, std::string("/opt/cppl/bin/clusterppl-agent"));
        LaunchOptions lo;
        lo.runId = "r1";
        lo.masterAddr = std::string(kSlurmMasterPlaceholder);
        const LaunchPlan plan = buildLaunchPlan(p, lo);
        QCOMPARE(plan.ranks.size(), std::size_t{8});
        QCOMPARE(plan.groups, std::string("0,1,2,3;4,5,6,7")); // by-host = by allocated node
    }

    void batchScript()
    {
        const ClusterProfile profile = slurmProfile();
        LaunchOptions lo;
        lo.runId = "20261130-190000-abcd";
        lo.masterAddr = std::string(kSlurmMasterPlaceholder);
        lo.masterPort = 29511;
        const LaunchPlan plan = buildLaunchPlan(slurmRankProfile(profile), lo);
        SlurmJobInputs in;
        in.runId = lo.runId;
        in.evalArgv = plan.ranks.front().argv;
        in.env = plan.ranks.front().env;
        in.preflightArgv = {"/opt/cppl/bin/clusterppl-agent", "preflight", "--json", "--master-addr", std::string(kSlurmMasterPlaceholder)};
        in.masterPort = 29511;
        const SlurmJob job = buildSlurmJob(profile, in);
        const QString s = QString::fromStdString(job.batchScript);
        QCOMPARE(job.dir, std::string(".clusterppl/jobs/20261130-190000-abcd"));
        QCOMPARE(job.worldSize, 8);
        QVERIFY(s.startsWith(QStringLiteral("#!/bin/sh\n#SBATCH --job-name=cppl-20261130-190000-abcd\n#SBATCH --nodes=2\n#SBATCH --ntasks=8\n")));
        for (const char *line : {"#SBATCH --partition=gpu\n", "#SBATCH --account=proj1\n", "#SBATCH --qos=high\n", "#SBATCH --time=01:30:00\n",
                                 "#SBATCH --gpus-per-node=4\n", "#SBATCH --constraint=a100&ib\n", "#SBATCH --exclusive\n", "#SBATCH --mem=0\n",
                                 "#SBATCH --output=job.out\n", "#SBATCH --error=job.err\n",
                                 ". '/etc/site env.sh' || {", "module load 'cuda/12.2' || {", "export OMP_NUM_THREADS='2'\n",
                                 "export NCCL_DEBUG='WARN'\n", "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE\n", "export MASTER_PORT=29511\n",
                                 "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --output=preflight.%t.out --error=preflight.%t.err "
                                 "'/opt/cppl/bin/clusterppl-agent' 'preflight' '--json' '--master-addr' \"$MASTER_ADDR\"\n",
                                 "[ \"$(cat gate)\" = go ] ||",
                                 "srun -l --kill-on-bad-exit=0 --nodes=2 --ntasks=8 --ntasks-per-node=4 --distribution=block",
                                 "'--model' '/models/it'\\''s'", "'--groups' '0,1,2,3;4,5,6,7'", "'--json' 'result.json'"})
            QVERIFY2(s.contains(QString::fromLatin1(line)), line);
        // The agents read their identity from Slurm; nothing here may hold it or stdin semantics
        // that srun does not give (stdin is not the launcher's).
        QVERIFY(!s.contains(QStringLiteral("--exit-on-stdin-eof")));
        QVERIFY(!s.contains(QStringLiteral("--result-line"))); // srun -l would cut the long line
        QVERIFY(!s.contains(QStringLiteral("RANK=")));
        QVERIFY(!s.contains(QString::fromLatin1(kSlurmMasterPlaceholder.data(), static_cast<qsizetype>(kSlurmMasterPlaceholder.size()))));
        // The gate comes before the agents, pre-flight before the gate.
        QVERIFY(s.indexOf(QStringLiteral("preflight.done")) < s.indexOf(QStringLiteral("cat gate")));
        QVERIFY(s.indexOf(QStringLiteral("cat gate")) < s.indexOf(QStringLiteral("--distribution=block")));
    }

    /// Issue 43, point 3: without slurm.gpus_per_node the job asks for one GPU per task unless the
    /// evaluation runs on the CPU without NCCL, and the script says why.
    void gpuRequestFollowsTheSlots_data()
    {
        QTest::addColumn<QString>("device");
        QTest::addColumn<QString>("backend");
        QTest::addColumn<int>("gpusPerNode"); // the profile's; 0: not set
        QTest::addColumn<QString>("directive"); // empty: none
        QTest::addColumn<QString>("comment");
        QTest::addRow("set: as set") << u"auto"_s << u"nccl"_s << 8 << u"#SBATCH --gpus-per-node=8\n"_s << u"# GPUs: 8 GPUs per node (slurm.gpus_per_node).\n"_s;
        QTest::addRow("unset, device auto: one per task") << u"auto"_s << u"auto"_s << 0 << u"#SBATCH --gpus-per-node=4\n"_s
                                                          << u"# GPUs: 4 GPUs per node, one per task: slurm.gpus_per_node is not set"_s;
        QTest::addRow("unset, the model on the CPU, nccl: one per task") << u"cpu"_s << u"nccl"_s << 0 << u"#SBATCH --gpus-per-node=4\n"_s
                                                                         << u"(device cpu, backend nccl)"_s;
        QTest::addRow("unset, cpu and gloo: none") << u"cpu"_s << u"gloo"_s << 0 << QString() << u"# GPUs: none asked for (device cpu, backend gloo).\n"_s;
    }
    void gpuRequestFollowsTheSlots()
    {
        QFETCH(QString, device);
        QFETCH(QString, backend);
        QFETCH(int, gpusPerNode);
        QFETCH(QString, directive);
        QFETCH(QString, comment);
        ClusterProfile profile = slurmProfile();
        profile.slurm.gpusPerNode = gpusPerNode;
        profile.evaluation.device = device.toStdString();
        profile.evaluation.backend = backend.toStdString();
        SlurmJobInputs in;
        in.runId = "r";
        in.evalArgv = {"agent", "eval"};
        const QString s = QString::fromStdString(buildSlurmJob(profile, in).batchScript);
        QVERIFY2(directive.isEmpty() ? !s.contains(u"--gpus-per-node"_s) : s.contains(directive), qPrintable(s));
        QVERIFY2(s.contains(comment), qPrintable(s));
    }

    void tolerantRunServesTheStoreInTheBatchStep()
    {
        // on_rank_loss continue: the plan has a store process and every rank the variable that
        // tells rank 0 not to serve one; the batch script runs the store on the first node (the
        // batch step), its stdin a FIFO the script holds, before the agents and until they ended.
        ClusterProfile profile = slurmProfile();
        profile.evaluation.schedule = "dynamic";
        profile.evaluation.onRankLoss = "continue";
        LaunchOptions lo;
        lo.runId = "r";
        lo.masterAddr = std::string(kSlurmMasterPlaceholder);
        lo.masterPort = 29511;
        const LaunchPlan plan = buildLaunchPlan(slurmRankProfile(profile), lo);
        QVERIFY(plan.store.has_value());
        QCOMPARE(plan.store->argv, (std::vector<std::string>{"/opt/cppl/bin/clusterppl-agent", "store", "--port", "29511", "--bind", "0.0.0.0"}));
        for (const auto &r : plan.ranks)
            QVERIFY(std::find(r.env.begin(), r.env.end(), std::pair<std::string, std::string>("TORCHELASTIC_USE_AGENT_STORE", "True")) != r.env.end());
        SlurmJobInputs in;
        in.runId = "r";
        in.evalArgv = plan.ranks.front().argv;
        in.env = plan.ranks.front().env;
        in.storeArgv = plan.store->argv;
        in.masterPort = 29511;
        const QString s = QString::fromStdString(buildSlurmJob(profile, in).batchScript);
        for (const char *line : {"export TORCHELASTIC_USE_AGENT_STORE='True'\n", "mkfifo store.in ||",
                                 "( '/opt/cppl/bin/clusterppl-agent' 'store' '--port' '29511' '--bind' '0.0.0.0' < store.in > store.out 2> store.err; "
                                 "echo \"@store-exit $? $(tail -n 1 store.err)\" ) &\n",
                                 "exec 4> store.in\n", "echo \"@store-closing\"\nexec 4>&-\nwait $store_pid\n"})
            QVERIFY2(s.contains(QString::fromLatin1(line)), line);
        // It waits for the store's line of the agent protocol (docs/agent-lines.md), by its tag.
        const std::string wait = "until grep -q '^" + std::string(cppl::lines::tagOf(cppl::lines::Kind::StoreReady)) + " ' store.out";
        QVERIFY2(s.contains(QString::fromStdString(wait)), wait.c_str());
        QVERIFY(cppl::lines::peekKind(cppl::lines::encode(cppl::lines::StoreReady{29511, "0.0.0.0"})) == cppl::lines::Kind::StoreReady);
        QVERIFY(s.indexOf(QStringLiteral("exec 4> store.in")) < s.indexOf(QStringLiteral("--distribution=block")));
        QVERIFY(s.indexOf(QStringLiteral("--distribution=block")) < s.indexOf(QStringLiteral("@store-closing")));
        // A fail-fast run has neither.
        profile.evaluation.onRankLoss = "fail";
        QVERIFY(!buildLaunchPlan(slurmRankProfile(profile), lo).store.has_value());
    }

    void overlapSyncInTheSrunLine_data()
    {
        QTest::addColumn<bool>("overlap");
        QTest::addColumn<QString>("words");
        QTest::addRow("overlap_sync true (the default)") << true << QStringLiteral("'--overlap-sync' 'on'");
        QTest::addRow("overlap_sync false") << false << QStringLiteral("'--overlap-sync' 'off'");
    }
    void overlapSyncInTheSrunLine()
    {
        // The profile's evaluation.overlap_sync reaches the agents' srun line, as the local and SSH
        // launchers' command lines (the same launch plan) carry it.
        QFETCH(bool, overlap);
        QFETCH(QString, words);
        ClusterProfile profile = slurmProfile();
        profile.evaluation.overlapSync = overlap;
        const QString srun = srunLineOf(profile);
        QVERIFY2(srun.contains(words), qPrintable(srun));
    }

    void loadTimeoutInTheSrunLine_data()
    {
        QTest::addColumn<double>("seconds");
        QTest::addColumn<QString>("words");
        QTest::addRow("absent: 1800") << -1.0 << QStringLiteral("'--load-timeout' '1800'");
        QTest::addRow("evaluation.load_timeout 5400") << 5400.0 << QStringLiteral("'--load-timeout' '5400'");
    }
    void loadTimeoutInTheSrunLine()
    {
        // The load phase's bound reaches every agent's command line (the launch plan all launchers
        // use): a node that reads its weights from NFS is bounded by it, not by --timeout.
        QFETCH(double, seconds);
        QFETCH(QString, words);
        ClusterProfile profile = slurmProfile();
        if (seconds > 0)
            profile.evaluation.loadTimeoutSeconds = seconds;
        const QString srun = srunLineOf(profile);
        QVERIFY2(srun.contains(words), qPrintable(srun));
    }

    void noPreflightNoGate()
    {
        SlurmJobInputs in;
        in.runId = "r";
        in.evalArgv = {"agent", "eval"};
        const SlurmJob job = buildSlurmJob(slurmProfile(), in);
        QVERIFY(!QString::fromStdString(job.batchScript).contains(QStringLiteral("gate")));
    }

    void refusesUnsafeValues()
    {
        ClusterProfile p = slurmProfile();
        p.slurm.sbatchOptions = {"--comment=two words"};
        SlurmJobInputs in;
        in.runId = "r";
        in.evalArgv = {"agent", "eval"};
        QVERIFY_THROWS_EXCEPTION(ConfigError, (void)buildSlurmJob(p, in));
        p = slurmProfile();
        in.evalArgv = {"agent", "eval", "--model", "a\nb"};
        QVERIFY_THROWS_EXCEPTION(ConfigError, (void)buildSlurmJob(p, in));
    }

    void driverCommandHoldsNoNewlineAndNoKeys()
    {
        SlurmJobInputs in;
        in.runId = "r";
        in.evalArgv = {"agent", "eval", "--telemetry", std::string(kSlurmRelayPlaceholder), std::string(kKeysStdinFlag)};
        const ClusterProfile p = slurmProfile();
        const SlurmJob job = buildSlurmJob(p, in);
        const RankCommand c = slurmDriverCommand(p, job, true);
        const std::string cmd = remoteCommand(c); // throws on a control character
        QVERIFY(cmd.starts_with("cd '/scratch/me' && exec env 'CPPL_DIR=.clusterppl/jobs/r'"));
        QVERIFY(readsKeyLine(c)); // the SSH launcher sends the key line on stdin, never in argv
        QVERIFY(QString::fromStdString(job.batchScript).contains(QStringLiteral("< agent.keys")));
        const QString script = QString::fromStdString(job.batchScript);
        QVERIFY(script.contains(QStringLiteral("'--telemetry' \"$CPPL_RELAY\" '--telemetry-keys-stdin'")));
        // Without a relay (the login node refused the tunnel) the agents still run, without telemetry.
        QVERIFY(script.contains(QStringLiteral("else\n  echo \"@note no telemetry relay")));
        QCOMPARE(script.count(QStringLiteral("--distribution=block")), 2);
    }

    void driverLines_data()
    {
        QTest::addColumn<QString>("line");
        QTest::addColumn<int>("kind");
        QTest::addColumn<int>("rank");
        QTest::addColumn<QString>("text");
        using K = SlurmEvent::Kind;
        QTest::addRow("job") << "@cppl job 42" << int(K::Submitted) << -1 << "42";
        QTest::addRow("sbatch refused") << "@cppl submit-failed sbatch: error: invalid partition" << int(K::SubmitFailed) << -1
                                        << "sbatch: error: invalid partition";
        // An agent's line travels inside the driver's framing unchanged (its decoding: agentLineThroughTheDriver).
        const QString ledger = QString::fromStdString(cppl::lines::encode(cppl::lines::Ledger{3, 1, {{0, 2}}, 0}));
        QTest::addRow("rank stdout") << u"@o 3: "_s + ledger << int(K::RankStdout) << 3 << ledger;
        QTest::addRow("padded label") << "@e  12: warning" << int(K::RankStderr) << 12 << "warning";
        QTest::addRow("task exit") << "@e 2: @exit 137" << int(K::RankExit) << 2 << "";
        QTest::addRow("nodes") << "@o @nodes n1,n2" << int(K::Nodes) << -1 << "n1,n2";
        QTest::addRow("eval step") << "@o @step eval" << int(K::EvalStarted) << -1 << "";
        QTest::addRow("job line") << "@o @fail pre-flight refused the launch" << int(K::JobLine) << -1 << "@fail pre-flight refused the launch";
        QTest::addRow("store exit") << "@o @store-exit 143 clusterppl-agent store: Terminated, stopping" << int(K::JobLine) << -1
                                    << "@store-exit 143 clusterppl-agent store: Terminated, stopping";
        QTest::addRow("srun's own") << "@e srun: error: n1: task 2: Killed" << int(K::JobLine) << -1 << "srun: error: n1: task 2: Killed";
        QTest::addRow("pre-flight") << "@cppl pf 1: {\"ok\":true}" << int(K::PreflightLine) << 1 << "{\"ok\":true}";
        QTest::addRow("result") << "@cppl result {\"ppl\": 4.5}" << int(K::Result) << -1 << "{\"ppl\": 4.5}";
        QTest::addRow("other") << "bash: warning" << int(K::Other) << -1 << "bash: warning";
    }
    void driverLines()
    {
        QFETCH(QString, line);
        QFETCH(int, kind);
        QFETCH(int, rank);
        QFETCH(QString, text);
        const SlurmEvent e = parseDriverLine(line.toStdString());
        QCOMPARE(int(e.kind), kind);
        QCOMPARE(e.rank, rank);
        if (e.kind != SlurmEvent::Kind::RankExit)
            QCOMPARE(QString::fromStdString(e.text), text);
        else
            QCOMPARE(e.exitCode, 137);
    }

    /// srun -l cuts a labelled line into pieces of its buffer's size, each labelled and ended: a
    /// checkpoint line of 3 KiB comes back whole, at any buffer size, with another rank's lines
    /// between its pieces; what is no cut line passes at once.
    void cutProtocolLinesJoined_data()
    {
        QTest::addColumn<int>("cut");
        QTest::addRow("1 KiB (Slurm's)") << 1024;
        QTest::addRow("4 KiB") << 4096;
        QTest::addRow("600 bytes") << 600;
    }
    void cutProtocolLinesJoined()
    {
        QFETCH(int, cut);
        cppl::lines::Checkpoint c;
        c.round = 3;
        c.schedule = "dynamic";
        c.worldSize = 4;
        c.syncEvery = 300;
        c.batchCount = 40;
        c.fingerprint = {"aa", "bb", "plan"};
        c.more.emplace_back("test_padding", '"' + std::string(3000, 'x') + '"');
        const std::string line = cppl::lines::encode(c);
        const auto n = static_cast<std::size_t>(cut);
        SrunLineJoiner j;
        std::vector<std::string> got;
        const auto take = [&got](std::vector<std::string> lines) { got.insert(got.end(), lines.begin(), lines.end()); };
        take(j.add(2, "[rank 2] loading"));
        for (std::size_t at = 0; at < line.size(); at += n) {
            take(j.add(2, std::string_view(line).substr(at, n)));
            take(j.add(1, "a line of rank 1")); // interleaved: another task's piece
        }
        take(j.add(2, "Final estimate: PPL = 4.6"));
        QVERIFY(j.waiting().empty());
        const auto ofRank2 = std::count_if(got.begin(), got.end(), [](const std::string &l) { return !l.starts_with("a line of rank 1"); });
        QCOMPARE(ofRank2, 3);
        QVERIFY(std::find(got.begin(), got.end(), line) != got.end());
        const cppl::lines::Decoded d = cppl::lines::decode(line);
        QVERIFY(d.ok());
        // Short lines, whole lines of ours and other output are never held.
        QCOMPARE(j.add(0, cppl::lines::encode(c)).size(), std::size_t(1));
        QCOMPARE(j.add(0, "CLUSTERPPL_LEDGER {\"rank\":0").size(), std::size_t(1)); // cut, but shorter than any cut piece
    }

    /// What cannot be joined comes out as it came: a held piece whose next line of ours began, one
    /// still held when the job ended, and a piece the rest of which never completes the JSON.
    void uncompletedPiecesNotLost()
    {
        const std::string piece = "CLUSTERPPL_CHECKPOINT {\"round\":1,\"words\":[\"" + std::string(800, '1');
        SrunLineJoiner j;
        QVERIFY(j.add(0, piece).empty());
        QCOMPARE(j.waiting(), std::vector<int>{0});
        const auto next = j.add(0, "CLUSTERPPL_LEDGER {\"rank\":0,\"round\":2,\"batches\":\"1\",\"v\":1}");
        QCOMPARE(next.size(), std::size_t(2));
        QCOMPARE(next[0], piece);
        QVERIFY(j.add(3, piece).empty());
        QCOMPARE(j.flush(3).value_or(std::string()), piece);
        QVERIFY(!j.flush(3).has_value());
        QVERIFY(j.add(5, piece).empty());
        const auto last = j.add(5, "2\", \"3"); // shorter than the first piece: the last one, still not whole
        QCOMPARE(last.size(), std::size_t(1));
        QCOMPARE(last[0], piece + "2\", \"3");
    }

    void agentLineThroughTheDriver()
    {
        // srun -l labels rank 3's stdout; the driver prefixes "@o ": what comes out is the agent's line, which decodes.
        const SlurmEvent e = parseDriverLine("@o 3: " + cppl::lines::encode(cppl::lines::Ledger{3, 1, {{0, 2}, {5, 6}}, 0}));
        QCOMPARE(int(e.kind), int(SlurmEvent::Kind::RankStdout));
        const cppl::lines::Decoded d = cppl::lines::decode(e.text);
        QVERIFY2(d.ok(), d.reason().c_str());
        const auto &l = std::get<cppl::lines::Ledger>(d.event);
        QCOMPARE(l.rank, 3);
        QVERIFY(l.batches == (cppl::lines::BatchRanges{{0, 2}, {5, 6}}));
        // The driver's result comes from the result file, which the launcher relays as the rank's result line.
        const SlurmEvent r = parseDriverLine("@cppl result {  \"ppl\": 4.5,  \"tokens_scored\": 3}");
        QCOMPARE(int(r.kind), int(SlurmEvent::Kind::Result));
        const cppl::lines::Decoded relayed = cppl::lines::decode(cppl::lines::encode(cppl::lines::Result{r.text}));
        QVERIFY2(relayed.ok(), relayed.reason().c_str());
        QCOMPARE(std::get<cppl::lines::Result>(relayed.event).json, std::string(R"({"ppl":4.5,"tokens_scored":3})"));
    }

    void stateLine()
    {
        const SlurmEvent e = parseDriverLine("@cppl state PENDING|PartitionTimeLimit|(null)|0:0");
        QCOMPARE(int(e.kind), int(SlurmEvent::Kind::State));
        QCOMPARE(e.state, std::string("PENDING"));
        QCOMPARE(e.reason, std::string("PartitionTimeLimit"));
        QVERIFY(e.nodes.empty());
        QCOMPARE(e.text, std::string("0:0"));
        QVERIFY(!isFinalSlurmState(e.state));
        QVERIFY(isFinalSlurmState("CANCELLED"));
        QVERIFY(isFinalSlurmState("NODE_FAIL"));
    }
};

QTEST_APPLESS_MAIN(TestSlurmScript)
#include "tst_slurm_script.moc"
