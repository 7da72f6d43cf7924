// SPDX-License-Identifier: MIT
#include "cppl/cluster_profile.h"
#include "cppl/errors.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using namespace cppl;

namespace {

const char *kValid = R"({
  "format": "clusterppl-profile",
  "version": 1,
  "name": "two racks",
  "launcher": "ssh",
  "env": {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "INFO"},
  "hosts": [
    {"name": "node01", "address": "10.0.0.1", "ssh": {"user": "eval", "port": 2222, "password_auth": true}, "slots": 4,
     "agent": "/opt/clusterppl/bin/clusterppl-agent", "env": {"NCCL_DEBUG": "WARN"}},
    {"name": "node02", "slots": 4},
    {"name": "node03", "slots": 2, "devices": [1, 3]}
  ],
  "groups": [{"name": "rackA", "hosts": ["node01", "node02"]}, {"name": "rackB", "hosts": ["node03"]}],
  "evaluation": {"model": "/models/tiny", "tokens": "/data/wiki.u32", "protocol": "llama.cpp", "context": 512, "batch": 8},
  "thresholds": {"sync_every_tokens": 32768, "deviation_tolerance": 0.0, "comm_share_alert": 0.01,
                 "stall_seconds": 20, "collective_timeout_seconds": 120}
})";

QString errorsOf(const std::string &text)
{
    const auto r = parseProfile(text, "p.json");
    QStringList list;
    for (const auto &e : r.errors)
        list << QString::fromStdString(e);
    return list.join(QLatin1Char('\n'));
}

std::string withHosts(const std::string &hosts, const std::string &extra = {})
{
    return R"({"format": "clusterppl-profile", "version": 1, "hosts": )" + hosts + extra + "}";
}

/// A profile's "evaluation" as parsed and as saved (profileToJson).
struct ParsedEvaluation
{
    ClusterProfile profile;
    std::string json;
};

/// The "evaluation" object @p evaluation in a profile of @p hosts, parsed (it must be valid), saved
/// and read back the same: what the evaluation rows below check before their own field. Callers
/// return when QTest::currentTestFailed().
void parseEvaluation(const QString &evaluation, ParsedEvaluation &out, const std::string &hosts = R"([{"name": "a"}])")
{
    const std::string text = withHosts(hosts, ", \"evaluation\": " + evaluation.toStdString());
    const auto r = parseProfile(text);
    QVERIFY2(r.ok(), qPrintable(errorsOf(text)));
    out.profile = r.profile;
    out.json = profileToJson(r.profile);
    const auto again = parseProfile(out.json);
    QVERIFY2(again.ok(), qPrintable(errorsOf(out.json)));
    QVERIFY(again.profile == r.profile);
}

} // namespace

class TestClusterProfile : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void parsesValidProfile()
    {
        const auto r = parseProfile(kValid);
        QVERIFY2(r.ok(), qPrintable(errorsOf(kValid)));
        const ClusterProfile &p = r.profile;
        QCOMPARE(p.hosts.size(), std::size_t{3});
        QCOMPARE(p.hosts[0].ssh.port, 2222);
        QVERIFY(p.hosts[0].ssh.passwordAuth);
        QVERIFY(!p.hosts[1].ssh.passwordAuth);
        QCOMPARE(p.hosts[0].env.at("NCCL_DEBUG"), std::string("WARN"));
        QCOMPARE(p.env.at("NCCL_SOCKET_IFNAME"), std::string("ib0"));
        // The cluster's env for every host, the host's own winning for a name both set.
        const auto first = hostEnvironment(p, p.hosts[0]), second = hostEnvironment(p, p.hosts[1]);
        QCOMPARE(first, (std::map<std::string, std::string>{{"NCCL_DEBUG", "WARN"}, {"NCCL_SOCKET_IFNAME", "ib0"}}));
        QCOMPARE(second, (std::map<std::string, std::string>{{"NCCL_DEBUG", "INFO"}, {"NCCL_SOCKET_IFNAME", "ib0"}}));
        QCOMPARE(p.evaluation.protocol, std::string("llama.cpp"));
        QCOMPARE(p.thresholds.syncEveryTokens, std::int64_t{32768});
        QCOMPARE(p.thresholds.collectiveTimeoutSeconds, 120.0);
    }

    void roundTripsThroughJson()
    {
        const ClusterProfile p = parseProfile(kValid).profile;
        const auto again = parseProfile(profileToJson(p));
        QVERIFY2(again.ok(), qPrintable(errorsOf(profileToJson(p))));
        QVERIFY(again.profile == p);
    }

    void batchAuto_data()
    {
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<QString>("written");
        QTest::addRow("absent: auto") << "{}" << qint64(kAutoBatch) << "\"batch\": \"auto\"";
        QTest::addRow("\"auto\"") << R"({"batch": "auto"})" << qint64(kAutoBatch) << "\"batch\": \"auto\"";
        QTest::addRow("a number") << R"({"batch": 12})" << qint64(12) << "\"batch\": 12";
    }
    void batchAuto()
    {
        QFETCH(QString, evaluation);
        QFETCH(qint64, batch);
        QFETCH(QString, written);
        ParsedEvaluation p;
        parseEvaluation(evaluation, p);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(qint64(p.profile.evaluation.batch), batch);
        QVERIFY2(QString::fromStdString(p.json).contains(written), p.json.c_str());
    }

    void overlapSync_data()
    {
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<bool>("overlap");
        QTest::addColumn<bool>("written"); // "overlap_sync": false in the saved file (true is the default, left out)
        QTest::addRow("absent: on") << "{}" << true << false;
        QTest::addRow("true") << R"({"overlap_sync": true})" << true << false;
        QTest::addRow("false") << R"({"overlap_sync": false})" << false << true;
        QTest::addRow("false, tolerant run") << R"({"overlap_sync": false, "schedule": "dynamic", "on_rank_loss": "continue"})" << false << true;
    }
    void overlapSync()
    {
        QFETCH(QString, evaluation);
        QFETCH(bool, overlap);
        QFETCH(bool, written);
        ParsedEvaluation p;
        parseEvaluation(evaluation, p);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(p.profile.evaluation.overlapSync, overlap);
        QCOMPARE(QString::fromStdString(p.json).contains(QStringLiteral("\"overlap_sync\": false")), written);
    }

    void quantization_data()
    {
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<QString>("written"); // the saved file's quantization fields, in order; empty: none written
        QTest::addRow("absent: none") << "{}" << "";
        QTest::addRow("defaults said") << R"({"quantize": "none", "quant_group": 32, "quantize_head": false, "reference_dtype": "auto"})" << "";
        QTest::addRow("int4, group 64, head")
            << R"({"quantize": "int4", "quant_group": 64, "quantize_head": true})" << R"("quantize": "int4", "quant_group": 64, "quantize_head": true)";
        QTest::addRow("reference") << R"({"quantize": "int8", "reference_model": "/m/base", "reference_dtype": "bfloat16", "reference_quantize": "int4-asym"})"
                                   << R"("quantize": "int8", "reference_model": "/m/base", "reference_dtype": "bfloat16", "reference_quantize": "int4-asym")";
    }
    void quantization()
    {
        // Read, validated, written only where not the default (a float profile saves as before), read back the same.
        QFETCH(QString, evaluation);
        QFETCH(QString, written);
        ParsedEvaluation p;
        parseEvaluation(evaluation, p);
        if (QTest::currentTestFailed())
            return;
        const QJsonObject ev = QJsonDocument::fromJson(QByteArray::fromStdString(p.json)).object().value(QStringLiteral("evaluation")).toObject();
        QJsonObject quant;
        for (auto it = ev.begin(); it != ev.end(); ++it)
            if (it.key().startsWith(QStringLiteral("quant")) || it.key().startsWith(QStringLiteral("reference_")))
                quant.insert(it.key(), it.value());
        QCOMPARE(quant, QJsonDocument::fromJson(QStringLiteral("{%1}").arg(written).toUtf8()).object());
    }

    void loadTimeout_data()
    {
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<double>("seconds");
        QTest::addColumn<bool>("written"); // "load_timeout" in the saved file (1800, the default, left out)
        QTest::addRow("absent: 1800") << "{}" << 1800.0 << false;
        QTest::addRow("1800 said") << R"({"load_timeout": 1800})" << 1800.0 << false;
        QTest::addRow("an hour and a half") << R"({"load_timeout": 5400})" << 5400.0 << true;
    }
    void loadTimeout()
    {
        QFETCH(QString, evaluation);
        QFETCH(double, seconds);
        QFETCH(bool, written);
        ParsedEvaluation p;
        parseEvaluation(evaluation, p);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(p.profile.evaluation.loadTimeoutSeconds, seconds);
        QCOMPARE(QString::fromStdString(p.json).contains(QStringLiteral("\"load_timeout\"")), written);
        const QString errors = errorsOf(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"load_timeout": 0})"));
        QVERIFY2(errors.contains(QStringLiteral("evaluation.load_timeout")) && errors.contains(QStringLiteral("expected a number in [1, ")),
                 qPrintable(errors));
    }

    void tensorParallel_data()
    {
        QTest::addColumn<QString>("hosts");
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<int>("n");
        QTest::addColumn<bool>("written"); // "tensor_parallel" in the saved file (1 is the default, left out)
        QTest::addRow("absent: 1") << R"([{"name": "a", "slots": 3}])" << "{}" << 1 << false;
        QTest::addRow("1") << R"([{"name": "a", "slots": 3}])" << R"({"tensor_parallel": 1})" << 1 << false;
        QTest::addRow("2 on two hosts of 2") << R"([{"name": "a", "slots": 2}, {"name": "b", "slots": 2}])"
                                             << R"({"tensor_parallel": 2})" << 2 << true;
        QTest::addRow("4 on one host of 8") << R"([{"name": "a", "slots": 8}])" << R"({"tensor_parallel": 4})" << 4 << true;
    }
    void tensorParallel()
    {
        QFETCH(QString, hosts);
        QFETCH(QString, evaluation);
        QFETCH(int, n);
        QFETCH(bool, written);
        ParsedEvaluation p;
        parseEvaluation(evaluation, p, hosts.toStdString());
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(p.profile.evaluation.tensorParallel, n);
        QCOMPARE(QString::fromStdString(p.json).contains(QStringLiteral("\"tensor_parallel\": %1").arg(n)), written);
    }

    void tensorParallelRefusalsNameTheHost()
    {
        // A group is N consecutive ranks of one host: each host's slots a multiple of N, named when not.
        const std::string text = withHosts(R"([{"name": "node01", "slots": 4}, {"name": "node02", "slots": 3}])",
                                           R"(, "evaluation": {"tensor_parallel": 2})");
        const QString errors = errorsOf(text);
        QVERIFY2(errors.contains(QStringLiteral("evaluation.tensor_parallel: 2: host \"node02\" has 3 slots, not a multiple of it"))
                     && !errors.contains(QStringLiteral("node01")),
                 qPrintable(errors));
        // A profile built in code gets the same words from validateProfile.
        ClusterProfile p = parseProfile(withHosts(R"([{"name": "a", "slots": 2}])")).profile;
        p.evaluation.tensorParallel = 4;
        const auto list = validateProfile(p);
        QCOMPARE(list.size(), std::size_t{1});
        QVERIFY2(list[0].find("host \"a\" has 2 slots") != std::string::npos, list[0].c_str());
        p.evaluation.tensorParallel = 0;
        QVERIFY(!validateProfile(p).empty());
    }

    void dtypeUnknownIsNamed()
    {
        const std::string text = withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"dtype": "fp32"})");
        const QString errors = errorsOf(text);
        QVERIFY2(errors.contains(QStringLiteral("evaluation.dtype")) && errors.contains(QStringLiteral("unknown value \"fp32\""))
                     && errors.contains(QStringLiteral("auto, float32, bfloat16, float16")),
                 qPrintable(errors));
    }

    void evaluationDefaults_data()
    {
        QTest::addColumn<QString>("field");
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<QString>("value");
        // schedule absent: dynamic, the default; a profile (or a run's saved profile) that says
        // static keeps it. dtype absent: auto (the agents pick bfloat16 on a GPU, float32 on the
        // CPU); a chosen one is kept. Both are always written, so a saved profile says what ran.
        QTest::addRow("schedule absent: dynamic") << "schedule" << "{}" << "dynamic";
        QTest::addRow("schedule dynamic") << "schedule" << R"({"schedule": "dynamic"})" << "dynamic";
        QTest::addRow("schedule static") << "schedule" << R"({"schedule": "static"})" << "static";
        QTest::addRow("dtype absent: auto") << "dtype" << "{}" << "auto";
        QTest::addRow("dtype auto") << "dtype" << R"({"dtype": "auto"})" << "auto";
        QTest::addRow("dtype float32") << "dtype" << R"({"dtype": "float32"})" << "float32";
        QTest::addRow("dtype bfloat16") << "dtype" << R"({"dtype": "bfloat16"})" << "bfloat16";
    }
    void evaluationDefaults()
    {
        QFETCH(QString, field);
        QFETCH(QString, evaluation);
        QFETCH(QString, value);
        QCOMPARE(EvaluationSpec{}.schedule, std::string("dynamic"));
        QCOMPARE(EvaluationSpec{}.onRankLoss, std::string("continue")); // surviving a lost rank is the default (issue 16)
        QCOMPARE(EvaluationSpec{}.dtype, std::string("auto"));
        ParsedEvaluation p;
        parseEvaluation(evaluation, p);
        if (QTest::currentTestFailed())
            return;
        const EvaluationSpec &e = p.profile.evaluation;
        QCOMPARE(QString::fromStdString(field == QStringLiteral("schedule") ? e.schedule : e.dtype), value);
        QVERIFY2(QString::fromStdString(p.json).contains(QStringLiteral("\"%1\": \"%2\"").arg(field, value)), p.json.c_str());
    }

    void onRankLossDefaultsBySchedule_data()
    {
        QTest::addColumn<QString>("evaluation");
        QTest::addColumn<QString>("onRankLoss");
        // Absent (a profile written before the default changed, or by hand): the schedule's default,
        // continue with dynamic batches, fail with static shards (they cannot move to another rank).
        QTest::addRow("absent, dynamic by default: continue") << "{}" << "continue";
        QTest::addRow("absent, dynamic: continue") << R"({"schedule": "dynamic"})" << "continue";
        QTest::addRow("absent, static: fail") << R"({"schedule": "static"})" << "fail";
        QTest::addRow("fail, dynamic: fail (fail fast)") << R"({"schedule": "dynamic", "on_rank_loss": "fail"})" << "fail";
        QTest::addRow("continue") << R"({"on_rank_loss": "continue"})" << "continue";
    }
    void onRankLossDefaultsBySchedule()
    {
        QFETCH(QString, evaluation);
        QFETCH(QString, onRankLoss);
        ParsedEvaluation p;
        parseEvaluation(evaluation, p);
        if (QTest::currentTestFailed())
            return;
        QCOMPARE(QString::fromStdString(p.profile.evaluation.onRankLoss), onRankLoss);
        // Always written, so a saved profile says what ran whatever a later default says.
        QVERIFY2(QString::fromStdString(p.json).contains(QStringLiteral("\"on_rank_loss\": \"%1\"").arg(onRankLoss)), p.json.c_str());
    }

    void slurmProfileRoundTrips()
    {
        const std::string text = withHosts(R"([{"name": "login", "ssh": {"alias": "cluster"}, "workdir": "/scratch/me"}])",
                                           R"(, "launcher": "slurm", "groups": "size:2", "slurm": {"partition": "gpu", "account": "proj1",
              "qos": "normal", "time_limit": "01:30:00", "nodes": 2, "ntasks_per_node": 4, "gpus_per_node": 4, "constraint": "a100&ib",
              "sbatch_options": ["--exclusive", "--mem=0"], "agent": "/opt/cppl/bin/clusterppl-agent", "modules": ["cuda/12.2"],
              "env_script": "/etc/profile.d/site.sh", "job_dir": "jobs"})");
        const auto r = parseProfile(text);
        QVERIFY2(r.ok(), qPrintable(errorsOf(text)));
        const SlurmSpec &s = r.profile.slurm;
        QCOMPARE(s.nodes, 2);
        QCOMPARE(s.ntasksPerNode, 4);
        QCOMPARE(s.gpusPerNode, 4);
        QCOMPARE(s.sbatchOptions, (std::vector<std::string>{"--exclusive", "--mem=0"}));
        QCOMPARE(s.constraint, std::string("a100&ib"));
        QCOMPARE(s.jobDir, std::string("jobs"));
        const auto again = parseProfile(profileToJson(r.profile));
        QVERIFY2(again.ok(), qPrintable(errorsOf(profileToJson(r.profile))));
        QVERIFY(again.profile == r.profile);
    }

    void rankLayoutFollowsGroups()
    {
        const RankLayout layout = rankLayout(parseProfile(kValid).profile);
        QCOMPARE(layout.worldSize(), 10);
        QCOMPARE(layout.groups.size(), std::size_t{2});
        QCOMPARE(layout.groups[0].ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
        QCOMPARE(layout.groups[1].ranks, (std::vector<int>{8, 9}));
        QCOMPARE(layout.ranks[9].hostIndex, 2);
        QCOMPARE(layout.ranks[9].localRank, 1);
        QCOMPARE(layout.ranks[9].device, 3);
    }

    void groupingModes_data()
    {
        QTest::addColumn<QString>("groups");
        QTest::addColumn<QList<int>>("groupSizes");
        QTest::addRow("by-host") << "\"by-host\"" << QList<int>{3, 2, 3};
        QTest::addRow("by-label") << "\"by-label\"" << QList<int>{5, 3};
        QTest::addRow("size:3 (last group short)") << "\"size:3\"" << QList<int>{3, 3, 2};
        QTest::addRow("size:1") << "\"size:1\"" << QList<int>{1, 1, 1, 1, 1, 1, 1, 1};
    }
    void groupingModes()
    {
        QFETCH(QString, groups);
        QFETCH(QList<int>, groupSizes);
        const std::string text = withHosts(R"([{"name": "a", "slots": 3, "group": "r1"}, {"name": "b", "slots": 2, "group": "r1"},
                                               {"name": "c", "slots": 3, "group": "r2"}])",
                                           ", \"groups\": " + groups.toStdString());
        const auto r = parseProfile(text);
        QVERIFY2(r.ok(), qPrintable(errorsOf(text)));
        const RankLayout layout = rankLayout(r.profile);
        QList<int> sizes;
        for (const auto &g : layout.groups) {
            sizes << static_cast<int>(g.ranks.size());
            QVERIFY(std::is_sorted(g.ranks.begin(), g.ranks.end()));
        }
        QCOMPARE(sizes, groupSizes);
        for (const RankInfo &info : layout.ranks)
            QVERIFY(std::count(layout.groups[info.group].ranks.begin(), layout.groups[info.group].ranks.end(), info.rank) == 1);
        // Groups of consecutive ranks are named by their range, with an en dash as every rank range reads.
        if (groups == QStringLiteral("\"size:3\"")) {
            QCOMPARE(layout.groups[0].name, std::string("ranks 0\u20132"));
            QCOMPARE(layout.groups[2].name, std::string("ranks 6\u20137"));
        }
        if (groups == QStringLiteral("\"size:1\""))
            QCOMPARE(layout.groups[5].name, std::string("rank 5"));
    }

    void rankRanges()
    {
        QCOMPARE(rankRangeText(3, 3), std::string("3"));
        QCOMPARE(rankRangeText(0, 3), std::string("0\u20133"));
        QCOMPARE(rankListText({}), std::string());
        QCOMPARE(rankListText({5}), std::string("5"));
        QCOMPARE(rankListText({0, 1}), std::string("0\u20131"));
        QCOMPARE(rankListText({9, 8, 0, 1, 2, 3, 6, 3}), std::string("0\u20133, 6, 8\u20139")); // sorted, once each
    }

    void badProfiles_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("message");
        QTest::addRow("not JSON") << "{\"format\": \"clusterppl-profile\",\n  \"version\": 1,\n  \"hosts\": [}"
                                  << "p.json:3:13: not valid JSON";
        QTest::addRow("number beyond double") << R"({"format": "clusterppl-profile", "version": 1, "hosts": 1e999})"
                                              << "p.json: not valid JSON: [json.exception.out_of_range.406] number overflow";
        QTest::addRow("top level array") << "[]" << "(top level): expected an object, got an array";
        QTest::addRow("missing format") << R"({"version": 1, "hosts": [{"name": "a"}]})" << "format: missing (required)";
        QTest::addRow("foreign format") << R"({"format": "deepspeed", "version": 1, "hosts": [{"name": "a"}]})"
                                        << "is this a ClusterPPL profile?";
        QTest::addRow("newer version") << R"({"format": "clusterppl-profile", "version": 7, "hosts": [{"name": "a"}]})"
                                       << "version: profile version 7 is newer than this build understands (1)";
        QTest::addRow("unknown top-level field")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "hostz": 1)")) << "hostz: unknown field";
        QTest::addRow("unknown host field")
            << QString::fromStdString(withHosts(R"([{"name": "a", "slot": 4}])")) << "hosts[0].slot: unknown field (known fields here:";
        QTest::addRow("slots wrong type")
            << QString::fromStdString(withHosts(R"([{"name": "a", "slots": "eight"}])"))
            << "hosts[0].slots: expected an integer, got a string \"eight\"";
        QTest::addRow("password_auth not a boolean")
            << QString::fromStdString(withHosts(R"([{"name": "a", "ssh": {"password_auth": "yes"}}])"))
            << "hosts[0].ssh.password_auth: expected true or false, got a string \"yes\"";
        QTest::addRow("slots zero") << QString::fromStdString(withHosts(R"([{"name": "a", "slots": 0}])"))
                                    << "hosts[0].slots: expected an integer >= 1";
        QTest::addRow("duplicate host")
            << QString::fromStdString(withHosts(R"([{"name": "a"}, {"name": "b"}, {"name": "a"}])"))
            << "hosts[2].name: host \"a\" is listed twice (also hosts[0])";
        QTest::addRow("no hosts") << QString::fromStdString(withHosts("[]")) << "hosts: the profile lists no hosts";
        QTest::addRow("host without name") << QString::fromStdString(withHosts(R"([{"slots": 2}])")) << "hosts[0].name: missing (required)";
        QTest::addRow("bad port") << QString::fromStdString(withHosts(R"([{"name": "a", "ssh": {"port": 70000}}])"))
                                  << "hosts[0].ssh.port: expected an integer >= 1 and <= 65535, got 70000";
        QTest::addRow("devices mismatch") << QString::fromStdString(withHosts(R"([{"name": "a", "slots": 2, "devices": [0]}])"))
                                          << "hosts[0].devices: lists 1 devices but slots is 2";
        QTest::addRow("bad env name") << QString::fromStdString(withHosts(R"([{"name": "a", "env": {"1X": "y"}}])"))
                                      << "\"1X\" is not a valid environment variable name";
        QTest::addRow("bad cluster env name") << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "env": {"A-B": "y"})"))
                                              << "env: \"A-B\" is not a valid environment variable name";
        QTest::addRow("cluster env not an object") << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "env": ["x"])"))
                                                   << "env: expected an object of NAME: value strings, got an array";
        QTest::addRow("device visibility in a host's env")
            << QString::fromStdString(withHosts(R"([{"name": "a", "env": {"CUDA_VISIBLE_DEVICES": "0"}}])"))
            << "hosts[0].env.CUDA_VISIBLE_DEVICES: device visibility is not set through env";
        QTest::addRow("device visibility in the cluster's env")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "env": {"HIP_VISIBLE_DEVICES": "1"})"))
            << "env.HIP_VISIBLE_DEVICES: device visibility is not set through env";
        QTest::addRow("group host unknown")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "groups": [{"name": "g", "hosts": ["a", "zz"]}])"))
            << "groups[0].hosts: \"zz\" is not one of the profile's hosts";
        QTest::addRow("host in no group")
            << QString::fromStdString(withHosts(R"([{"name": "a"}, {"name": "b"}])", R"(, "groups": [{"name": "g", "hosts": ["a"]}])"))
            << "groups: host \"b\" is in no group";
        QTest::addRow("host in two groups")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])",
                                                R"(, "groups": [{"name": "g", "hosts": ["a"]}, {"name": "h", "hosts": ["a"]}])"))
            << "\"a\" is already in group \"g\"";
        QTest::addRow("bad group mode") << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "groups": "by-rack")"))
                                        << "groups: unknown value \"by-rack\"";
        QTest::addRow("bad group size") << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "groups": "size:0")"))
                                        << "groups: \"size:0\" needs a group size >= 1";
        QTest::addRow("bad launcher") << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "launcher": "pbs")"))
                                      << "launcher: unknown value \"pbs\" (expected one of: local, ssh, slurm)";
        const std::string login = R"([{"name": "login"}])";
        QTest::addRow("slurm: two hosts") << QString::fromStdString(withHosts(R"([{"name": "a"}, {"name": "b"}])", R"(, "launcher": "slurm")"))
                                          << "hosts: the slurm launcher needs exactly one host, the login node";
        QTest::addRow("slurm: object without the launcher") << QString::fromStdString(withHosts(login, R"(, "slurm": {"nodes": 2})"))
                                                            << "slurm: only used with \"launcher\": \"slurm\"";
        QTest::addRow("slurm: unknown field") << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"node": 2})"))
                                              << "slurm.node: unknown field (known fields here:";
        QTest::addRow("slurm: zero tasks") << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"ntasks_per_node": 0})"))
                                           << "slurm.ntasks_per_node: expected an integer >= 1";
        QTest::addRow("slurm: bad time") << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"time_limit": "1h"})"))
                                         << "slurm.time_limit: \"1h\" is not a Slurm time";
        QTest::addRow("slurm: shell in partition")
            << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"partition": "gpu;rm -rf ~"})"))
            << "slurm.partition: \"gpu;rm -rf ~\" contains ';'";
        QTest::addRow("slurm: short option") << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"sbatch_options": ["-N2"]})"))
                                             << "slurm.sbatch_options[0]: \"-N2\" must be one long option";
        QTest::addRow("slurm: managed option")
            << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"sbatch_options": ["--ntasks=9"]})"))
            << "slurm.sbatch_options[0]: --ntasks is set by ClusterPPL (use slurm.nodes and slurm.ntasks_per_node)";
        QTest::addRow("slurm: modules not strings")
            << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"modules": ["cuda", 12]})"))
            << "slurm.modules: element 1 must be a string, got an integer";
        QTest::addRow("slurm: labelled groups") << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "groups": "by-label")"))
                                                << "groups: with the slurm launcher use \"by-host\"";
        QTest::addRow("slurm: nccl without GPUs")
            << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"ntasks_per_node": 4, "gpus_per_node": 2},)"
                                                       R"( "evaluation": {"backend": "nccl"})"))
            << "slurm.gpus_per_node: 2 GPUs for 4 tasks per node; the nccl backend needs one GPU per task";
        QTest::addRow("bad protocol")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"protocol": "hf"})"))
            << "evaluation.protocol: unknown value \"hf\"";
        QTest::addRow("stride above context")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"context": 64, "stride": 65})"))
            << "evaluation.stride: 65 must be between 0 (= context) and the context 64";
        QTest::addRow("batch not auto")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"batch": "max"})"))
            << "evaluation.batch: expected an integer >= 1 and <= 65536 or \"auto\", got \"max\"";
        QTest::addRow("batch zero")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"batch": 0})"))
            << "evaluation.batch: expected an integer >= 1 and <= 65536, got 0 (or \"auto\"";
        QTest::addRow("overlap_sync as the agent's word")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"overlap_sync": "off"})"))
            << "evaluation.overlap_sync: expected true or false, got a string \"off\" (write true for the agents' --overlap-sync on, "
               "the default, or false for off)";
        QTest::addRow("quantize unknown")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"quantize": "int3"})"))
            << "evaluation.quantize: unknown value \"int3\"";
        QTest::addRow("quant_group not a multiple of 32")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"quantize": "int4", "quant_group": 48})"))
            << "evaluation.quant_group: 48 is not a multiple of 32 (the kernels quantize activations in blocks of 32";
        QTest::addRow("quantize_head alone")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"quantize_head": true})"))
            << "evaluation.quantize_head: quantizes the vocabulary head as well; set evaluation.quantize too";
        QTest::addRow("reference_quantize without a reference")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"reference_quantize": "int8"})"))
            << "evaluation: reference_dtype and reference_quantize describe the reference model; set evaluation.reference_model too";
        QTest::addRow("reference_dtype unknown")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"reference_model": "m", "reference_dtype": "int8"})"))
            << "evaluation.reference_dtype: unknown value \"int8\"";
        QTest::addRow("tensor_parallel zero")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"tensor_parallel": 0})"))
            << "evaluation.tensor_parallel: expected an integer >= 1 and <= 1024, got 0";
        QTest::addRow("tensor_parallel as a string")
            << QString::fromStdString(withHosts(R"([{"name": "a", "slots": 2}])", R"(, "evaluation": {"tensor_parallel": "2"})"))
            << "evaluation.tensor_parallel: expected an integer";
        QTest::addRow("slurm: tensor_parallel across nodes")
            << QString::fromStdString(withHosts(login, R"(, "launcher": "slurm", "slurm": {"nodes": 2, "ntasks_per_node": 3},)"
                                                       R"( "evaluation": {"tensor_parallel": 2})"))
            << "evaluation.tensor_parallel: 2: slurm.ntasks_per_node 3 is not a multiple of it";
        QTest::addRow("threshold out of range")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "thresholds": {"comm_share_alert": 2})"))
            << "thresholds.comm_share_alert: expected a number in [0, 1], got 2";
        QTest::addRow("threshold wrong type")
            << QString::fromStdString(withHosts(R"([{"name": "a"}])", R"(, "thresholds": {"stall_seconds": "10"})"))
            << "thresholds.stall_seconds: expected a number, got a string";
    }
    void badProfiles()
    {
        QFETCH(QString, text);
        QFETCH(QString, message);
        const auto r = parseProfile(text.toStdString(), "p.json");
        QVERIFY(!r.ok());
        QVERIFY2(errorsOf(text.toStdString()).contains(message), qPrintable(errorsOf(text.toStdString())));
    }

    void reportsEveryProblemAtOnce()
    {
        const std::string text = withHosts(R"([{"name": "a", "slots": 0, "colour": "red"}])", R"(, "launcher": "pigeon")");
        const auto r = parseProfile(text);
        QVERIFY(r.errors.size() >= 3);
    }

    void loadProfileNamesTheFile()
    {
        QTemporaryDir dir;
        const std::string missing = dir.filePath(QStringLiteral("nope.json")).toStdString();
        try {
            (void)loadProfile(missing);
            QFAIL("expected IoError");
        } catch (const IoError &e) {
            QVERIFY(std::string(e.what()).find(missing + ": cannot open the profile") != std::string::npos);
        }
        const std::string bad = dir.filePath(QStringLiteral("bad.json")).toStdString();
        std::ofstream(bad) << withHosts(R"([{"name": "a", "slots": -1}])");
        try {
            (void)loadProfile(bad);
            QFAIL("expected ConfigError");
        } catch (const ConfigError &e) {
            QVERIFY2(std::string(e.what()).find(bad + ": invalid profile:\n  hosts[0].slots") != std::string::npos, e.what());
        }
        std::ofstream(bad) << withHosts(R"([{"name": "a"}])", R"(, "evaluation": {"batch": "automatic"})");
        try {
            (void)loadProfile(bad);
            QFAIL("expected ConfigError");
        } catch (const ConfigError &e) {
            QVERIFY2(std::string(e.what()).find(bad + ": invalid profile:\n  evaluation.batch: expected an integer >= 1 and <= 65536 or \"auto\"")
                         != std::string::npos,
                     e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestClusterProfile)
#include "tst_cluster_profile.moc"
