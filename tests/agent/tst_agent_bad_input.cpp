// SPDX-License-Identifier: MIT
// Bad input never crashes the agent: each row runs the real clusterppl-agent on a crafted file or
// flag and checks the documented exit code and the message that names the field, flag or file.
// Rows marked "crash" aborted (uncaught exception, exit 134) or hit undefined behaviour before.
#include "exit_codes.h"

#include "cppl/exact_sum.h"

#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QByteArrayList>
#include <QDir>
#include <QTemporaryDir>
#include <QTest>

#include <fstream>

using namespace cppl::agent;

namespace {

using Run = cppl::test::ProcessResult;

Run runAgent(const QStringList &args)
{
    return cppl::test::runProcess(cppl::test::kAgent, args, 120000);
}

QByteArray zeroSum()
{
    return QByteArray::fromStdString(cppl::ExactSum().toString());
}

// A result JSON as `eval --shard R/N --json` writes it, with `shard` (and more) replaceable.
QByteArray result(const QByteArray &shard, const QByteArray &tokens = "10", const QByteArray &nll = QByteArray())
{
    const QByteArray sum = nll.isEmpty() ? "\"" + zeroSum() + "\"" : nll;
    return "{\"ppl\": 1.0, \"nll_sum_exact\": " + sum + ", \"nll_sq_sum_exact\": \"" + zeroSum() + "\", \"tokens_scored\": " + tokens
           + ", \"windows\": 1, \"protocol\": \"hf-sliding\", \"context\": 8, \"model\": {\"sha256\": {}}, \"data\": {\"sha256\": \"x\"}"
           + (shard.isEmpty() ? QByteArray() : ", \"shard\": " + shard) + "}";
}

// A .npy v1 file with the given header dict and payload.
QByteArray npy(const QByteArray &dict, const QByteArray &payload)
{
    QByteArray header = dict;
    while ((10 + header.size() + 1) % 64 != 0)
        header += ' ';
    header += '\n';
    QByteArray s("\x93NUMPY\x01\x00", 8);
    s += static_cast<char>(header.size() & 0xff);
    s += static_cast<char>(header.size() >> 8);
    return s + header + payload;
}

QByteArray safetensors(const QByteArray &header, const QByteArray &data)
{
    QByteArray s;
    for (int b = 0; b < 8; ++b)
        s += static_cast<char>((static_cast<quint64>(header.size()) >> (8 * b)) & 0xff);
    return s + header + data;
}

const QByteArray kLlamaConfig = R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "num_hidden_layers": 1,
                                    "num_attention_heads": 1, "intermediate_size": 4})";
const QByteArray kTokens("\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00", 16);

QStringList evalOn(const QString &modelDir)
{
    return {QStringLiteral("eval"), QStringLiteral("--model"), modelDir, QStringLiteral("--tokens"), QStringLiteral("{dir}/t.u32"),
            QStringLiteral("--context"), QStringLiteral("4"), QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--quiet")};
}

} // namespace

class TestAgentBadInput : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void badInputExitsWithMessage_data()
    {
        QTest::addColumn<QStringList>("args");      // "{dir}" is the row's temporary directory
        QTest::addColumn<QStringList>("names");     // files written there first
        QTest::addColumn<QByteArrayList>("contents");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");

        const QStringList merge{QStringLiteral("merge"), QStringLiteral("{dir}/r.json")};
        const QStringList r{QStringLiteral("r.json")};
        // merge: the result JSON's fields (crash: nlohmann type_error / assign(size_t(-1)) before).
        QTest::addRow("merge: shard {} (crash)") << merge << r << QByteArrayList{result("{}")} << int(kExitBadData)
                                                 << "{dir}/r.json: shard: missing \"count\"";
        QTest::addRow("merge: negative count (crash)")
            << merge << r << QByteArrayList{result(R"({"rank": 0, "count": -1})")} << int(kExitBadData)
            << "{dir}/r.json: shard: \"count\" must be an integer between 0 and 1048576, got -1";
        QTest::addRow("merge: count 0") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 0})")} << int(kExitBadData)
                                        << "{dir}/r.json: shard: \"count\" must be at least 1, got 0";
        QTest::addRow("merge: huge count") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 18446744073709551615})")}
                                           << int(kExitBadData) << "\"count\" must be an integer between 0 and 1048576, got 18446744073709551615";
        QTest::addRow("merge: rank beyond count") << merge << r << QByteArrayList{result(R"({"rank": 3, "count": 2})")} << int(kExitBadData)
                                                  << "{dir}/r.json: shard: \"rank\" 3 is not below \"count\" 2";
        QTest::addRow("merge: shard a string (crash)") << merge << r << QByteArrayList{result("\"0/2\"")} << int(kExitBadData)
                                                       << "{dir}/r.json: \"shard\" must be an object {\"rank\": R, \"count\": N}, got \"0/2\"";
        QTest::addRow("merge: no shard") << merge << r << QByteArrayList{result(QByteArray())} << int(kExitBadData)
                                         << "{dir}/r.json: missing \"shard\"";
        QTest::addRow("merge: tokens a string (crash)") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 1})", "\"ten\"")}
                                                        << int(kExitBadData) << "\"tokens_scored\" must be an integer between 0 and";
        QTest::addRow("merge: negative tokens") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 1})", "-5")}
                                                << int(kExitBadData) << "\"tokens_scored\" must be an integer between 0 and 1099511627776, got -5";
        QTest::addRow("merge: exact sum a number (crash)") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 1})", "10", "3.5")}
                                                           << int(kExitBadData) << "\"nll_sum_exact\" must be a string (an exact sum), got number";
        QTest::addRow("merge: exact sum garbage") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 1})", "10", "\"xs1:zz\"")}
                                                  << int(kExitBadData) << "\"nll_sum_exact\" is not a valid exact sum (\"xs1:zz\")";
        QTest::addRow("merge: an array (crash)") << merge << r << QByteArrayList{"[1, 2]"} << int(kExitBadData)
                                                 << "{dir}/r.json: expected a JSON object (a clusterppl-agent eval --json result), found array";
        QTest::addRow("merge: not JSON") << merge << r << QByteArrayList{"{\"shard\":"} << int(kExitBadData) << "{dir}/r.json: not valid JSON";
        QTest::addRow("merge: shards of two runs")
            << QStringList{QStringLiteral("merge"), QStringLiteral("{dir}/r.json"), QStringLiteral("{dir}/s.json")}
            << QStringList{QStringLiteral("r.json"), QStringLiteral("s.json")}
            << QByteArrayList{result(R"({"rank": 0, "count": 2})"), result(R"({"rank": 1, "count": 2})").replace("hf-sliding", "llama.cpp")}
            << int(kExitBadArguments)
            << "{dir}/s.json: \"protocol\" is \"llama.cpp\" but \"hf-sliding\" in {dir}/r.json; these shards are not one run";
        QTest::addRow("merge: ok") << merge << r << QByteArrayList{result(R"({"rank": 0, "count": 1})")} << int(kExitOk)
                                   << "merged 1 shards: 10 tokens, 1 windows";

        // .npy headers (crash: std::stoull threw std::out_of_range on a 20-digit dimension).
        const QStringList plan{QStringLiteral("plan"), QStringLiteral("--tokens"), QStringLiteral("{dir}/t.npy")};
        const QStringList t{QStringLiteral("t.npy")};
        QTest::addRow("npy: 20-digit dimension (crash)")
            << plan << t << QByteArrayList{npy("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")}
            << int(kExitBadData) << "{dir}/t.npy: .npy 'shape' has a dimension beyond 2^64";
        QTest::addRow("npy: element count overflows")
            << plan << t << QByteArrayList{npy("{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "")}
            << int(kExitBadData) << "{dir}/t.npy: .npy 'shape' promises more than 2^64 elements";
        QTest::addRow("npy: shape times size overflows")
            << plan << t << QByteArrayList{npy("{'descr': '<i8', 'fortran_order': False, 'shape': (4611686018427387904,), }", "")}
            << int(kExitBadData) << "the header promises 4611686018427387904 x i8 but 0 bytes follow";
        QTest::addRow("npy: shape not closed") << plan << t << QByteArrayList{npy("{'descr': '<i4', 'shape': (1, 2", "")}
                                               << int(kExitBadData) << "bad .npy header: 'shape' has no closing ')'";
        QTest::addRow("npy: shape not numbers") << plan << t << QByteArrayList{npy("{'descr': '<i4', 'shape': (a,), }", "")}
                                                << int(kExitBadData) << "'shape' must be a tuple of non-negative integers";
        QTest::addRow("npy: negative dimension") << plan << t << QByteArrayList{npy("{'descr': '<i4', 'shape': (-1,), }", "")}
                                                 << int(kExitBadData) << "'shape' must be a tuple of non-negative integers";
        QTest::addRow("npy: descr unquoted") << plan << t << QByteArrayList{npy("{'descr': i4, 'shape': (1,), }", "abcd")}
                                             << int(kExitBadData) << "bad .npy header: 'descr' must be a quoted string";

        // config.json and safetensors (crash: nlohmann type_error from value() / an overflowing shape).
        const QStringList model{QStringLiteral("m/config.json"), QStringLiteral("m/model.safetensors"), QStringLiteral("t.u32")};
        const QByteArray oneTensor = safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", QByteArray(4, '\0'));
        QTest::addRow("config: hidden_act a number")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{QByteArray(kLlamaConfig).replace("}", ", \"hidden_act\": 5}"), oneTensor, kTokens} << int(kExitBadModel)
            << "{dir}/m/config.json: \"hidden_act\" must be a string, got 5";
        QTest::addRow("config: rope_scaling a list")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{QByteArray(kLlamaConfig).replace("}", ", \"rope_scaling\": [1]}"), oneTensor, kTokens} << int(kExitBadModel)
            << "{dir}/m/config.json: rope_scaling must be an object or null, got [1]";
        QTest::addRow("config: rope_type a number")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{QByteArray(kLlamaConfig).replace("}", ", \"rope_scaling\": {\"rope_type\": 3}}"), oneTensor, kTokens}
            << int(kExitBadModel) << "{dir}/m/config.json: rope_scaling: \"rope_type\" must be a string, got 3";
        QTest::addRow("config: bos_token_id beyond 32 bits")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{QByteArray(kLlamaConfig).replace("}", ", \"bos_token_id\": 99999999999}"), oneTensor, kTokens}
            << int(kExitBadModel) << "\"bos_token_id\" must be between 0 and 2^32-1, got 99999999999";
        QTest::addRow("safetensors: element count overflows")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{kLlamaConfig,
                              safetensors(R"({"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 0]}})", ""),
                              kTokens}
            << int(kExitBadModel) << "tensor \"a\": shape [4611686018427387904,4] has more than 2^63 elements";
        QTest::addRow("safetensors: shape wraps to the data size")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{kLlamaConfig,
                              safetensors(R"({"a": {"dtype": "F32", "shape": [4611686018427387905], "data_offsets": [0, 4]}})",
                                          QByteArray(4, '\0')),
                              kTokens}
            << int(kExitBadModel) << "tensor \"a\": shape [4611686018427387905] of F32 needs more than 2^64 bytes";
        QTest::addRow("safetensors: shape an object")
            << evalOn(QStringLiteral("{dir}/m")) << model
            << QByteArrayList{kLlamaConfig, safetensors(R"({"a": {"dtype": "F32", "shape": {"x": 1}, "data_offsets": [0, 4]}})", QByteArray(4, '\0')),
                              kTokens}
            << int(kExitBadModel) << "tensor \"a\": shape must be a list of non-negative integers, got {\"x\":1}";

        // eval --shard (accepted "1/2x" and the like before: std::stoi stops at the first non-digit).
        const QStringList shardArgs{QStringLiteral("eval"), QStringLiteral("--model"), QStringLiteral("{dir}"), QStringLiteral("--tokens"),
                                    QStringLiteral("{dir}/t.u32"), QStringLiteral("--shard")};
        QTest::addRow("eval --shard trailing text") << (QStringList(shardArgs) << QStringLiteral("1/2x")) << QStringList() << QByteArrayList()
                                                    << int(kExitBadArguments) << "--shard expects RANK/COUNT, e.g. 2/8, got \"1/2x\"";
        QTest::addRow("eval --shard beyond int") << (QStringList(shardArgs) << QStringLiteral("0/99999999999")) << QStringList()
                                                 << QByteArrayList() << int(kExitBadArguments)
                                                 << "--shard expects RANK/COUNT, e.g. 2/8, got \"0/99999999999\"";

        // Numeric flags and --run-id (it names directories): the message names the flag and the value.
        const QStringList ev{QStringLiteral("eval"), QStringLiteral("--model"), QStringLiteral("{dir}"), QStringLiteral("--tokens"),
                             QStringLiteral("{dir}/t.u32")};
        const auto flag = [&](const char *name, const QStringList &base, const QStringList &extra, const QString &message) {
            QTest::addRow("%s", name) << (base + extra) << QStringList() << QByteArrayList() << int(kExitBadArguments) << message;
        };
        flag("eval --master-port 0", ev, {QStringLiteral("--master-port"), QStringLiteral("0")}, "--master-port must be between 1 and 65535, got 0");
        flag("eval --master-port 65536", ev, {QStringLiteral("--master-port"), QStringLiteral("65536")},
             "--master-port must be between 1 and 65535, got 65536");
        flag("eval --master-port text", ev, {QStringLiteral("--master-port"), QStringLiteral("29500x")},
             "--master-port expects an integer, got \"29500x\"");
        flag("eval --world-size 0", ev, {QStringLiteral("--world-size"), QStringLiteral("0")}, "--world-size must be between 1 and 1073741824, got 0");
        flag("eval --rank -1", ev, {QStringLiteral("--rank"), QStringLiteral("-1")}, "--rank must be between 0 and 1073741823, got -1");
        // comm-check reads who the rank is through the same Args::rankOverrides() as eval.
        flag("comm-check --master-port 0", {QStringLiteral("comm-check")}, {QStringLiteral("--master-port"), QStringLiteral("0")},
             "--master-port must be between 1 and 65535, got 0");
        flag("comm-check --local-world-size 0", {QStringLiteral("comm-check")}, {QStringLiteral("--local-world-size"), QStringLiteral("0")},
             "--local-world-size must be between 1 and 1073741824, got 0");
        flag("eval --timeout 0", ev, {QStringLiteral("--timeout"), QStringLiteral("0")}, "--timeout must be between 1 and 604800, got 0");
        flag("eval --threads 0", ev, {QStringLiteral("--threads"), QStringLiteral("0")}, "--threads must be between 1 and 1024, got 0");
        flag("eval --weight-upload fast", ev, {QStringLiteral("--weight-upload"), QStringLiteral("fast")},
             "--weight-upload \"fast\" is not one of auto, pinned (a GPU's weights staged through pinned buffers, the default), pageable");
        flag("eval --profile-batches alone", ev, {QStringLiteral("--profile-batches"), QStringLiteral("2")},
             "--profile-batches N sets how many batches --profile PATH profiles: give --profile PATH too");
        flag("eval --profile into a missing directory", ev, {QStringLiteral("--profile"), QStringLiteral("/nonexistent-dir/p.json")},
             "--profile /nonexistent-dir/p.json: the directory /nonexistent-dir does not exist");
        flag("eval --profile-batches 0", ev, {QStringLiteral("--profile"), QStringLiteral("p.json"), QStringLiteral("--profile-batches"), QStringLiteral("0")},
             "--profile-batches must be between 1 and 1000, got 0");
        flag("eval --batch -1", ev, {QStringLiteral("--batch"), QStringLiteral("-1")}, "--batch must be between 1 and 65536, got -1");
        flag("eval --context beyond int64", ev, {QStringLiteral("--context"), QStringLiteral("99999999999999999999")},
             "--context expects an integer, got \"99999999999999999999\"");
        flag("eval --run-id with a slash", ev, {QStringLiteral("--run-id"), QStringLiteral("../x")},
             "--run-id \"../x\" has the character '/' at 2; only A-Z a-z 0-9 . _ - are allowed (the run id names directories)");
        flag("eval --run-id leading dot", ev, {QStringLiteral("--run-id"), QStringLiteral(".hidden")},
             "--run-id \".hidden\" must not start with a dot (the run id names directories)");
        flag("eval --run-id empty", ev, {QStringLiteral("--run-id"), QString()},
             "--run-id \"\" must be 1 to 128 characters long (it has 0) (the run id names directories)");
        flag("eval --run-id too long", ev, {QStringLiteral("--run-id"), QString(129, QLatin1Char('r'))},
             "must be 1 to 128 characters long (it has 129)");
        const QStringList run{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QStringLiteral("2")};
        const QStringList tail{QStringLiteral("--"), QStringLiteral("--model"), QStringLiteral("x"), QStringLiteral("--tokens"), QStringLiteral("y")};
        flag("run --master-port 0", run, QStringList{QStringLiteral("--master-port"), QStringLiteral("0")} + tail,
             "--master-port must be between 1 and 65535, got 0");
        flag("run --master-port 70000", run, QStringList{QStringLiteral("--master-port"), QStringLiteral("70000")} + tail,
             "--master-port must be between 1 and 65535, got 70000");
        flag("run --nproc-per-node 0", {QStringLiteral("run"), QStringLiteral("--standalone")},
             QStringList{QStringLiteral("--nproc-per-node"), QStringLiteral("0")} + tail, "--nproc-per-node must be between 1 and 1024, got 0");
        flag("preflight --master-port 0", {QStringLiteral("preflight")},
             {QStringLiteral("--master-addr"), QStringLiteral("127.0.0.1"), QStringLiteral("--master-port"), QStringLiteral("0")},
             "--master-port must be between 1 and 65535, got 0");
        flag("preflight --model without a value", {QStringLiteral("preflight")}, {QStringLiteral("--model")}, "--model needs a value (a path to check)");
        flag("plan --batch 0", {QStringLiteral("plan"), QStringLiteral("--tokens"), QStringLiteral("{dir}/t.u32")},
             {QStringLiteral("--batch"), QStringLiteral("0")}, "--batch must be between 1 and 65536, got 0");
    }

    void badInputExitsWithMessage()
    {
        QFETCH(QStringList, args);
        QFETCH(QStringList, names);
        QFETCH(QByteArrayList, contents);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        for (int i = 0; i < names.size(); ++i) {
            const QString path = dir.filePath(names[i]);
            QVERIFY(QDir().mkpath(QFileInfo(path).path()));
            std::ofstream(path.toStdString(), std::ios::binary) << contents[i].toStdString();
        }
        for (QString &a : args)
            a.replace(QStringLiteral("{dir}"), dir.path());
        message.replace(QStringLiteral("{dir}"), dir.path());
        const Run run = runAgent(args);
        CPPL_VERIFY2(run.exitCode == exitCode, qPrintable(run.describe()));
        if (exitCode == kExitOk) // the message is what stdout says
            CPPL_VERIFY2(run.out.contains(message) && run.err.isEmpty(), qPrintable(run.describe()));
        else // one line on stderr, with the agent's prefix, naming the file/field/flag
            CPPL_VERIFY2(run.err.startsWith(QStringLiteral("clusterppl-agent: ")) && run.err.contains(message), qPrintable(run.describe()));
    }

    // `clusterppl-agent CMD --help` prints that command's usage on stdout and exits 0.
    void commandHelp_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("firstLine"); // after "Usage:"
        QTest::addColumn<QString>("flag");      // one of the command's own options
        QTest::addColumn<QString>("notShown");  // another command's usage line
        QTest::addRow("eval --help") << QStringList{QStringLiteral("eval"), QStringLiteral("--help")}
                                     << "  clusterppl-agent eval --model PATH" << "--sync-every-tokens T|end" << "clusterppl-agent plan";
        QTest::addRow("eval -h after flags") << QStringList{QStringLiteral("eval"), QStringLiteral("--model"), QStringLiteral("m"), QStringLiteral("-h")}
                                             << "  clusterppl-agent eval --model PATH" << "--run-id ID" << "clusterppl-agent merge";
        QTest::addRow("run --help") << QStringList{QStringLiteral("run"), QStringLiteral("--help")}
                                    << "  clusterppl-agent run --standalone --nproc-per-node N" << "--master-port P" << "clusterppl-agent eval";
        QTest::addRow("run --standalone --help") << QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--help")}
                                                 << "  clusterppl-agent run --standalone --nproc-per-node N" << "--nproc-per-node N"
                                                 << "clusterppl-agent eval";
        QTest::addRow("merge --help") << QStringList{QStringLiteral("merge"), QStringLiteral("--help")}
                                      << "  clusterppl-agent merge RESULT.json... [--json OUT]" << "bit-identical" << "clusterppl-agent plan";
        QTest::addRow("plan --help") << QStringList{QStringLiteral("plan"), QStringLiteral("--help")}
                                     << "  clusterppl-agent plan (--tokens FILE | --text FILE --tokenizer bytes | --model DIR)" << "--ranks R"
                                     << "clusterppl-agent eval";
        QTest::addRow("tokenize --help") << QStringList{QStringLiteral("tokenize"), QStringLiteral("--help")}
                                         << "  clusterppl-agent tokenize --tokenizer PATH --text FILE --out FILE.u32" << "--bos always|never"
                                         << "clusterppl-agent eval";
        QTest::addRow("preflight --help") << QStringList{QStringLiteral("preflight"), QStringLiteral("--help")}
                                          << "  clusterppl-agent preflight [--json]" << "--slots N" << "clusterppl-agent eval";
    }
    void commandHelp()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, firstLine);
        QFETCH(QString, flag);
        QFETCH(QString, notShown);
        const Run r = runAgent(args);
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.isEmpty(), qPrintable(r.describe()));
        CPPL_VERIFY2(r.out.startsWith(QStringLiteral("Usage:\n") + firstLine), qPrintable(r.describe()));
        CPPL_VERIFY2(r.out.contains(flag) && !r.out.contains(notShown), qPrintable(r.describe()));
        CPPL_VERIFY2(r.out.endsWith(QStringLiteral("Exit codes: docs/exit-codes.md.\n")), qPrintable(r.describe()));
    }
};

QTEST_GUILESS_MAIN(TestAgentBadInput)
#include "tst_agent_bad_input.moc"
