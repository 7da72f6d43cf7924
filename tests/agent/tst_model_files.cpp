// SPDX-License-Identifier: MIT
// Hugging Face model files: config.json and safetensors headers, each malformed input named precisely.
#include "model/model_config.h"
#include "model/safetensors.h"

#include "cppl/errors.h"

#include <QTemporaryDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <fstream>
#include <functional>

using namespace cppl;
using namespace cppl::agent;

namespace {

// Writes a safetensors file: u64 LE header length, header text, then `data`.
void writeSafetensors(const std::string &path, const std::string &header, const std::string &data, std::int64_t claimedLength = -1)
{
    std::ofstream f(path, std::ios::binary);
    const std::uint64_t n = claimedLength >= 0 ? static_cast<std::uint64_t>(claimedLength) : header.size();
    for (int b = 0; b < 8; ++b)
        f.put(static_cast<char>((n >> (8 * b)) & 0xff));
    f << header << data;
}

std::string expectIoError(const std::function<void()> &f)
{
    try {
        f();
    } catch (const IoError &e) {
        return e.what();
    }
    return "(no IoError)";
}

} // namespace

class TestModelFiles : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void readsValidFile()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("model.safetensors")).toStdString();
        writeSafetensors(path, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"__metadata__":{"format":"pt"}})",
                         std::string(12, '\x01'));
        const auto c = SafetensorsCheckpoint::openDirectory(dir.path().toStdString());
        QCOMPARE(c.tensors().size(), std::size_t{2});
        QCOMPARE(c.at("b").shape, (std::vector<std::int64_t>{1, 2}));
        QVERIFY(c.at("b").dtype == StoredDtype::BF16);
        QCOMPARE(c.at("b").data - c.at("a").data, 8);
        QVERIFY(expectIoError([&] { (void)c.at("zz"); }).find("missing tensor \"zz\"") != std::string::npos);
    }

    void badSafetensors_data()
    {
        QTest::addColumn<QByteArray>("header");
        QTest::addColumn<QByteArray>("data");
        QTest::addColumn<qint64>("claimed");
        QTest::addColumn<QString>("message");
        QTest::addRow("header longer than file") << QByteArray(R"({})") << QByteArray() << qint64(1000)
                                                 << "header length 1000 is larger than the file";
        QTest::addRow("not JSON") << QByteArray("{nope") << QByteArray() << qint64(-1) << "header is not valid JSON";
        QTest::addRow("unsupported dtype") << QByteArray(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})") << QByteArray(8, 'x')
                                           << qint64(-1) << "tensor \"a\": unsupported dtype F64 (supported: F32, F16, BF16, I8, U8, I32, I64)";
        QTest::addRow("offsets out of range") << QByteArray(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})")
                                              << QByteArray(8, 'x') << qint64(-1) << "data_offsets [0, 16) lie outside the 8 data bytes";
        QTest::addRow("shape disagrees with bytes") << QByteArray(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})")
                                                    << QByteArray(8, 'x') << qint64(-1) << "shape needs 12 bytes but data_offsets span 8";
        QTest::addRow("overlapping tensors")
            << QByteArray(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})")
            << QByteArray(12, 'x') << qint64(-1) << "tensors \"a\" and \"b\" overlap";
        QTest::addRow("missing fields") << QByteArray(R"({"a":{"dtype":"F32"}})") << QByteArray() << qint64(-1)
                                        << "needs dtype, shape and data_offsets";
    }
    void badSafetensors()
    {
        QFETCH(QByteArray, header);
        QFETCH(QByteArray, data);
        QFETCH(qint64, claimed);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("model.safetensors")).toStdString();
        writeSafetensors(path, header.toStdString(), data.toStdString(), claimed);
        const std::string what = expectIoError([&] { (void)SafetensorsCheckpoint::openDirectory(dir.path().toStdString()); });
        QVERIFY2(what.starts_with(path), what.c_str()); // names the file
        QVERIFY2(QString::fromStdString(what).contains(message), what.c_str());
    }

    void truncatedFile()
    {
        QTemporaryDir dir;
        const std::string path = dir.filePath(QStringLiteral("model.safetensors")).toStdString();
        std::ofstream(path, std::ios::binary) << "abc";
        QVERIFY(expectIoError([&] { (void)SafetensorsCheckpoint::openFile(path); }).find("truncated safetensors file (3 bytes") != std::string::npos);
    }

    void shardedIndexProblems()
    {
        QTemporaryDir dir;
        const std::string d = dir.path().toStdString();
        writeSafetensors(d + "/part1.safetensors", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
        std::ofstream(d + "/model.safetensors.index.json") << R"({"weight_map": {"a": "part1.safetensors", "b": "part2.safetensors"}})";
        QVERIFY(expectIoError([&] { (void)SafetensorsCheckpoint::openDirectory(d); }).find("lists shard \"part2.safetensors\", which is missing") != std::string::npos);
        std::ofstream(d + "/model.safetensors.index.json") << R"({"weight_map": {"a": "part1.safetensors", "c": "part1.safetensors"}})";
        QVERIFY(expectIoError([&] { (void)SafetensorsCheckpoint::openDirectory(d); }).find("tensor \"c\" is mapped to part1.safetensors but that file does not contain it") != std::string::npos);
        QTemporaryDir empty;
        QVERIFY(expectIoError([&] { (void)SafetensorsCheckpoint::openDirectory(empty.path().toStdString()); }).find("no model.safetensors") != std::string::npos);
    }

    void badConfigs_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("message");
        QTest::addRow("no model_type") << R"({"hidden_size": 4})" << "no \"model_type\"";
        QTest::addRow("unsupported model_type") << R"({"model_type": "bert"})"
                                                << "model_type \"bert\" is not supported (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, gpt2";
        QTest::addRow("missing size") << R"({"model_type": "llama", "vocab_size": 10})" << "\"hidden_size\" is missing";
        QTest::addRow("bad size") << R"({"model_type": "gpt2", "vocab_size": 10, "n_embd": -4})" << "\"n_embd\" must be a positive integer, got -4";
        QTest::addRow("heads not multiple of kv")
            << R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 12, "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2, "intermediate_size": 8})"
            << "num_attention_heads 3 is not a multiple of num_key_value_heads 2";
        QTest::addRow("rope scaling") << R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "rope_scaling": {"rope_type": "yarn"}})"
                                      << "rope_scaling type \"yarn\" is not supported";
        QTest::addRow("sliding window (qwen2)") << R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "sliding_window": 4096, "use_sliding_window": true})"
                                                << "sliding-window attention (use_sliding_window true, sliding_window 4096) is not supported for qwen2";
        QTest::addRow("sliding window not an integer (mistral)") << R"({"model_type": "mistral", "vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8, "sliding_window": 0})"
                                                                 << "\"sliding_window\" must be a positive integer, got 0";
        QTest::addRow("activation") << R"({"model_type": "gpt2", "vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 8, "activation_function": "relu"})"
                                    << "activation_function \"relu\" is not supported";
    }
    void badConfigs()
    {
        QFETCH(QString, json);
        QFETCH(QString, message);
        try {
            (void)parseModelConfig(json.toStdString(), "cfg/config.json");
            QFAIL("expected an error");
        } catch (const Error &e) {
            QVERIFY2(QString::fromUtf8(e.what()).startsWith(QStringLiteral("cfg/config.json: ")), e.what());
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    void parsesLlamaDetails()
    {
        const auto c = parseModelConfig(
            R"({"model_type": "llama", "vocab_size": 128, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
                "intermediate_size": 96, "rope_theta": 500000.0, "tie_word_embeddings": true, "attention_bias": true, "max_position_embeddings": 2048,
                "rope_scaling": {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})",
            "c");
        QCOMPARE(c.headDim, std::int64_t{8});
        QCOMPARE(c.kvHeads, std::int64_t{2});
        QVERIFY(c.tied && c.qkvBias && c.oBias && c.ropeLlama3);
        QCOMPARE(c.ropeFactor, 32.0);
        QCOMPARE(c.ropeTheta, 500000.0);
        QVERIFY(parseModelConfig(R"({"model_type": "qwen2", "vocab_size": 8, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8})", "c").qkvBias);
    }
};

QTEST_APPLESS_MAIN(TestModelFiles)
#include "tst_model_files.moc"
