// SPDX-License-Identifier: MIT
// GPTQ and AWQ checkpoints (agent/lib/quant/gptq_awq.h) as tests/agent/reference/
// make_quantized_checkpoint.py writes them from the formats' documented packing: both bit widths,
// both GPTQ checkpoint formats, act-order, symmetric and asymmetric, read back and compared with the
// script's float64 dequantized weights (exactly: every such weight is a float32), run through the
// int8 kernels, and malformed files and configs refused with the file, the tensor or the field named.
// Also the safetensors dtype table's integer dtypes (I8, U8, I32, I64), which at() refuses as weights.
#include "test_process.h"

#include "model/safetensors.h"
#include "quant/gptq_awq.h"
#include "quant/half.h"
#include "quant/qgemm.h"

#include "cppl/errors.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

using namespace cppl::agent;
using namespace cppl::agent::quant;
using namespace cppl::test;

namespace {

std::vector<double> readF64(const QString &path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly))
        return {};
    const QByteArray bytes = f.readAll();
    std::vector<double> v(static_cast<std::size_t>(bytes.size()) / 8);
    std::memcpy(v.data(), bytes.constData(), v.size() * 8);
    return v;
}

// Debian's /usr/bin/python3 with python3-torch and NumPy (scripts/install-deps.sh installs them).
QJsonObject makeCheckpoint(const QString &dir, const QStringList &args, QString *error = nullptr)
{
    const ProcessResult r = runProcess(QStringLiteral("/usr/bin/python3"),
                                       QStringList{QStringLiteral(CPPL_SOURCE_DIR "/tests/agent/reference/make_quantized_checkpoint.py"), QStringLiteral("--out"), dir} + args);
    if (r.exitCode != 0) {
        if (error)
            *error = r.describe();
        return {};
    }
    return QJsonDocument::fromJson(r.out.toUtf8()).object();
}

cpu::ParallelFor twoThreads()
{
    return [](std::int64_t n, const std::function<void(std::int64_t, std::int64_t)> &f) {
        std::thread t([&] { f(n / 2, n); });
        f(0, n / 2);
        t.join();
    };
}

// The read layer through qgemm against a float64 loop over the script's weights (in the layer's code
// order, as the kernels quantize the activations) and the same quantized activations.
void checkProduct(const QuantizedMatrix &w, const std::vector<double> &ref)
{
    const std::int64_t m = 5, n = w.n(), k = w.k();
    std::mt19937 rng(9);
    std::normal_distribution<float> d(0.0F, 1.0F);
    std::vector<float> a(static_cast<std::size_t>(m * k)), c(static_cast<std::size_t>(m * n));
    for (float &x : a)
        x = d(rng);
    qgemm(a.data(), k, m, w, c.data(), n, nullptr, false, twoThreads());
    for (std::int64_t i = 0; i < m; ++i) {
        std::vector<float> x(static_cast<std::size_t>(k));
        for (std::int64_t p = 0; p < k; ++p)
            x[static_cast<std::size_t>(p)] = a[static_cast<std::size_t>(i * k + (w.inputOrder().empty() ? p : w.inputOrder()[static_cast<std::size_t>(p)]))];
        std::vector<std::int8_t> codes(static_cast<std::size_t>(w.paddedK()));
        std::vector<float> scales(static_cast<std::size_t>(w.blocks()));
        std::vector<std::int32_t> sums(static_cast<std::size_t>(w.blocks()));
        quantizeActivationRow(x.data(), k, codes.data(), scales.data(), sums.data());
        for (std::int64_t j = 0; j < n; ++j) {
            double want = 0, mag = 0;
            for (std::int64_t p = 0; p < k; ++p) {
                const std::int64_t feature = w.inputOrder().empty() ? p : w.inputOrder()[static_cast<std::size_t>(p)];
                const double t = ref[static_cast<std::size_t>(j * k + feature)] * codes[static_cast<std::size_t>(p)] * scales[static_cast<std::size_t>(p / 32)];
                want += t;
                mag += std::fabs(t);
            }
            const float got = c[static_cast<std::size_t>(i * n + j)];
            QVERIFY2(std::fabs(got - want) <= 1e-5 * mag + 1e-20, qPrintable(QStringLiteral("C[%1][%2] = %3, float64 %4").arg(i).arg(j).arg(got).arg(want)));
        }
    }
}

template <typename F>
QString errorOf(F &&f)
{
    try {
        f();
    } catch (const cppl::Error &e) {
        return QString::fromStdString(e.what());
    }
    return QStringLiteral("(no error)");
}

// u64 LE header length, header, data (as tst_model_files writes them).
void writeSafetensors(const std::string &path, const std::string &header, const std::string &data)
{
    std::ofstream out(path, std::ios::binary);
    const std::uint64_t n = header.size();
    for (int b = 0; b < 8; ++b)
        out.put(static_cast<char>((n >> (8 * b)) & 0xFF));
    out << header << data;
}

} // namespace

class TestQuantCheckpoints : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void readsCheckpoints_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("expect"); // quantized (with zero points or symmetric, ordered) or dense
        const QString awqLayers = QStringLiteral("model.layers.0.self_attn.q_proj:96:128,model.layers.0.mlp.down_proj:40:192");
        auto args = [](const char *text) { return QString::fromLatin1(text).split(QLatin1Char(' ')); };
        QTest::addRow("GPTQ 4-bit, v1, zero points, group 64 (last one partial)") << args("--method gptq --bits 4") << QStringLiteral("zeros");
        QTest::addRow("GPTQ 4-bit, v1, sym") << args("--method gptq --bits 4 --sym") << QStringLiteral("symmetric");
        QTest::addRow("GPTQ 8-bit, v2, zero points") << args("--method gptq --bits 8 --format gptq_v2") << QStringLiteral("zeros");
        QTest::addRow("GPTQ 8-bit, v1, sym, bias") << args("--method gptq --bits 8 --sym --bias") << QStringLiteral("symmetric");
        QTest::addRow("GPTQ 4-bit, v2, sym") << args("--method gptq --bits 4 --sym --format gptq_v2") << QStringLiteral("symmetric");
        QTest::addRow("GPTQ 4-bit, act-order") << args("--method gptq --bits 4 --desc-act --seed 3") << QStringLiteral("ordered");
        QTest::addRow("GPTQ 8-bit, act-order, v2, bias") << args("--method gptq --bits 8 --desc-act --format gptq_v2 --bias") << QStringLiteral("ordered");
        QTest::addRow("GPTQ 4-bit, g_idx groups of uneven size") << args("--method gptq --bits 4 --desc-act --uneven-groups") << QStringLiteral("dense");
        QTest::addRow("GPTQ 4-bit, group 16") << args("--method gptq --bits 4 --group 16") << QStringLiteral("dense");
        QTest::addRow("GPTQ 8-bit, one group per row") << args("--method gptq --bits 8 --group -1") << QStringLiteral("zeros");
        QTest::addRow("AWQ, group 32") << (args("--method awq --group 32 --layers") << awqLayers) << QStringLiteral("zeros");
        QTest::addRow("AWQ, group 64, bias") << (args("--method awq --group 64 --bias --layers") << awqLayers) << QStringLiteral("zeros");
    }
    void readsCheckpoints()
    {
        QFETCH(QStringList, args);
        QFETCH(QString, expect);
        QTemporaryDir tmp;
        const QString dir = tmp.filePath(QStringLiteral("q"));
        QString error;
        const QJsonObject summary = makeCheckpoint(dir, args, &error);
        QVERIFY2(!summary.isEmpty(), qPrintable(error));
        const auto config = loadQuantizationConfig(dir.toStdString());
        QVERIFY(config.has_value());
        const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::openDirectory(dir.toStdString());
        for (const QJsonValue &l : summary[QStringLiteral("layers")].toArray()) {
            const QString name = l[QStringLiteral("name")].toString();
            const std::int64_t out = l[QStringLiteral("out")].toInteger(), in = l[QStringLiteral("in")].toInteger();
            const QuantizedLinear layer = readQuantizedLinear(*config, ckpt.tensors(), name.toStdString(), out, in);
            const std::vector<double> ref = readF64(dir + QStringLiteral("/reference/") + name + QStringLiteral(".f64"));
            QCOMPARE(static_cast<std::int64_t>(ref.size()), out * in);
            QCOMPARE(layer.quantized(), expect != QStringLiteral("dense"));
            std::vector<float> w(static_cast<std::size_t>(out * in));
            if (layer.quantized()) {
                QCOMPARE(layer.weight.format().perGroupZeros, expect == QStringLiteral("zeros") || expect == QStringLiteral("ordered"));
                QCOMPARE(layer.weight.inputOrder().empty(), expect != QStringLiteral("ordered"));
                for (std::int64_t j = 0; j < out; ++j)
                    layer.weight.dequantizeRow(j, w.data() + j * in);
            } else {
                QVERIFY2(!layer.denseReason.empty(), name.toUtf8().constData());
                w = layer.dense;
            }
            for (std::size_t i = 0; i < ref.size(); ++i)
                QVERIFY2(static_cast<double>(w[i]) == ref[i],
                         qPrintable(QStringLiteral("%1 [%2][%3] = %4, the script's float64 %5").arg(name).arg(static_cast<qint64>(i) / in).arg(static_cast<qint64>(i) % in).arg(w[i], 0, 'g', 17).arg(ref[i], 0, 'g', 17)));
            if (layer.quantized())
                checkProduct(layer.weight, ref);
            const std::vector<double> bias = readF64(dir + QStringLiteral("/reference/") + name + QStringLiteral(".bias.f64"));
            QCOMPARE(layer.bias.size(), bias.size());
            for (std::size_t j = 0; j < bias.size(); ++j)
                QCOMPARE(static_cast<double>(layer.bias[j]), bias[j]);
        }
    }

    void malformedTensors_data()
    {
        QTest::addColumn<QString>("damage");
        QTest::addColumn<QString>("method");
        QTest::addColumn<QString>("message");
        const QString q = QStringLiteral("tensor \"model.layers.0.self_attn.q_proj.");
        QTest::addRow("missing scales") << QStringLiteral("missing-scales") << QStringLiteral("gptq") << q + QStringLiteral("scales\" is missing (a GPTQ layer");
        QTest::addRow("qweight of the wrong shape") << QStringLiteral("qweight-shape") << QStringLiteral("gptq")
                                                    << q + QStringLiteral("qweight\" has shape [15, 96], expected [16, 96] for a GPTQ with 128 inputs, 96 outputs, 4 bits");
        QTest::addRow("qzeros packed too wide") << QStringLiteral("qzeros-packed") << QStringLiteral("gptq")
                                                << q + QStringLiteral("qzeros\" has shape [2, 13], expected [2, 12]");
        QTest::addRow("scales in float32") << QStringLiteral("scales-dtype") << QStringLiteral("gptq") << q + QStringLiteral("scales\" is F32; a GPTQ stores it as F16");
        QTest::addRow("qweight in int64") << QStringLiteral("qweight-dtype") << QStringLiteral("gptq") << q + QStringLiteral("qweight\" is I64; a GPTQ stores it as I32");
        QTest::addRow("g_idx out of range") << QStringLiteral("gidx-range") << QStringLiteral("gptq")
                                            << q + QStringLiteral("g_idx\" holds group 2 for input feature 0, outside 0..1");
        QTest::addRow("AWQ: missing scales") << QStringLiteral("missing-scales") << QStringLiteral("awq") << q + QStringLiteral("scales\" is missing (an AWQ layer");
        QTest::addRow("AWQ: qzeros packed too wide") << QStringLiteral("qzeros-packed") << QStringLiteral("awq")
                                                     << q + QStringLiteral("qzeros\" has shape [2, 13], expected [2, 12] for an AWQ with 128 inputs");
    }
    void malformedTensors()
    {
        QFETCH(QString, damage);
        QFETCH(QString, method);
        QFETCH(QString, message);
        QTemporaryDir tmp;
        const QString dir = tmp.filePath(QStringLiteral("q"));
        QString error;
        const QJsonObject summary = makeCheckpoint(dir, {QStringLiteral("--method"), method, QStringLiteral("--break"), damage, QStringLiteral("--layers"),
                                                         QStringLiteral("model.layers.0.self_attn.q_proj:96:128")}, &error);
        QVERIFY2(!summary.isEmpty(), qPrintable(error));
        const auto config = loadQuantizationConfig(dir.toStdString());
        const SafetensorsCheckpoint ckpt = SafetensorsCheckpoint::openDirectory(dir.toStdString());
        const QString what = errorOf([&] { (void)readQuantizedLinear(*config, ckpt.tensors(), "model.layers.0.self_attn.q_proj", 96, 128); });
        QVERIFY2(what.startsWith(dir + QStringLiteral("/model.safetensors: ")), qPrintable(what)); // names the file
        QVERIFY2(what.contains(message), qPrintable(what));
        // A layer that is not in the checkpoint at all.
        const QString missing = errorOf([&] { (void)readQuantizedLinear(*config, ckpt.tensors(), "model.layers.9.mlp.up_proj", 96, 128); });
        QVERIFY2(missing.contains(QStringLiteral("tensor \"model.layers.9.mlp.up_proj.qweight\" is missing")), qPrintable(missing));
        // Sizes that no packed layout of the format can hold.
        if (method == QStringLiteral("gptq") && damage == QStringLiteral("scales-dtype")) {
            const QString odd = errorOf([&] { (void)readQuantizedLinear(*config, ckpt.tensors(), "model.layers.0.self_attn.q_proj", 90, 128); });
            QVERIFY2(odd.contains(QStringLiteral("qweight\" cannot hold a 90 x 128 GPTQ layer: both sizes must be multiples of 8 at 4 bits")), qPrintable(odd));
        }
    }

    void configRefusals_data()
    {
        QTest::addColumn<QString>("json");
        QTest::addColumn<QString>("message");
        QTest::addRow("another method") << QStringLiteral(R"({"quantization_config": {"quant_method": "bitsandbytes"}})")
                                        << QStringLiteral("quantization_config.quant_method \"bitsandbytes\" is not supported (gptq, awq)");
        QTest::addRow("GPTQ 3-bit") << QStringLiteral(R"({"quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": 128}})")
                                    << QStringLiteral("quantization_config.bits is 3: GPTQ checkpoints of 4 or 8 bits are supported");
        QTest::addRow("GPTQ marlin format") << QStringLiteral(R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"}})")
                                            << QStringLiteral("quantization_config.checkpoint_format \"marlin\" is not supported");
        QTest::addRow("AWQ gemv") << QStringLiteral(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "version": "GEMV"}})")
                                  << QStringLiteral("quantization_config.version \"gemv\" is not supported (AWQ's \"gemm\" packing");
        QTest::addRow("AWQ 8-bit") << QStringLiteral(R"({"quantization_config": {"quant_method": "awq", "bits": 8}})")
                                   << QStringLiteral("quantization_config.bits is 8: AWQ checkpoints of 4 bits are supported");
        QTest::addRow("AWQ without zero points") << QStringLiteral(R"({"quantization_config": {"quant_method": "awq", "zero_point": false}})")
                                                 << QStringLiteral("quantization_config.zero_point is false");
        QTest::addRow("group size 0") << QStringLiteral(R"({"quantization_config": {"quant_method": "gptq", "group_size": 0}})")
                                      << QStringLiteral("quantization_config.group_size must be a positive integer or -1, got 0");
        QTest::addRow("bits as text") << QStringLiteral(R"({"quantization_config": {"quant_method": "gptq", "bits": "4"}})")
                                      << QStringLiteral("quantization_config.bits must be an integer, got \"4\"");
    }
    void configRefusals()
    {
        QFETCH(QString, json);
        QFETCH(QString, message);
        const QString what = errorOf([&] { (void)parseQuantizationConfig(json.toStdString(), "/m/config.json"); });
        QVERIFY2(what.startsWith(QStringLiteral("/m/config.json: ")) && what.contains(message), qPrintable(what));
    }

    void configsThatParse()
    {
        QVERIFY(!parseQuantizationConfig(R"({"model_type": "llama"})", "c").has_value()); // not quantized
        const auto awq = parseQuantizationConfig(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm",
            "zero_point": true, "modules_to_not_convert": ["lm_head"]}})", "c");
        QVERIFY(awq && awq->method == CheckpointQuantConfig::Method::Awq && awq->groupSize == 128 && awq->modulesNotConverted.size() == 1);
        const auto v2 = parseQuantizationConfig(R"({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1, "desc_act": true,
            "sym": false, "format": "gptq_v2"}})", "c");
        QVERIFY(v2 && v2->bits == 8 && v2->groupSize == -1 && v2->descAct && !v2->sym && v2->gptqV2);
        // AutoGPTQ's separate quantize_config.json, and a refusal through a written directory.
        QTemporaryDir tmp;
        std::ofstream(tmp.filePath(QStringLiteral("quantize_config.json")).toStdString()) << R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true})";
        const auto separate = loadQuantizationConfig(tmp.path().toStdString());
        QVERIFY(separate && separate->method == CheckpointQuantConfig::Method::Gptq && !separate->gptqV2);
        const QString dir = tmp.filePath(QStringLiteral("q"));
        QString error;
        QVERIFY2(!makeCheckpoint(dir, {QStringLiteral("--method"), QStringLiteral("gptq"), QStringLiteral("--config-extra"), QStringLiteral(R"({"quant_method": "hqq"})")}, &error).isEmpty(),
                 qPrintable(error));
        const QString what = errorOf([&] { (void)loadQuantizationConfig(dir.toStdString()); });
        QVERIFY2(what.startsWith(dir + QStringLiteral("/config.json: quantization_config.quant_method \"hqq\" is not supported")), qPrintable(what));
    }

    void integerTensorsAreNotWeights()
    {
        QTemporaryDir tmp;
        const std::string path = tmp.filePath(QStringLiteral("model.safetensors")).toStdString();
        writeSafetensors(path,
                         R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                         R"("c":{"dtype":"I32","shape":[2],"data_offsets":[8,16]},"d":{"dtype":"I64","shape":[1],"data_offsets":[16,24]},)"
                         R"("w":{"dtype":"F32","shape":[1],"data_offsets":[24,28]}})",
                         std::string(28, '\1'));
        const SafetensorsCheckpoint c = SafetensorsCheckpoint::openFile(path);
        QCOMPARE(static_cast<int>(c.tensors().at("a").dtype), static_cast<int>(StoredDtype::I8));
        QCOMPARE(static_cast<int>(c.tensors().at("d").dtype), static_cast<int>(StoredDtype::I64));
        QCOMPARE(c.tensors().at("c").bytes, std::size_t{8});
        QVERIFY(c.at("w").dtype == StoredDtype::F32);
        const QString what = errorOf([&] { (void)c.at("c"); });
        QVERIFY2(what == QString::fromStdString(path) + QStringLiteral(": tensor \"c\" is I32, not a float weight (F32, F16, BF16): integer tensors belong to quantized checkpoints"),
                 qPrintable(what));
        // A size that disagrees with the integer dtype is refused like any other.
        writeSafetensors(path, R"({"c":{"dtype":"I32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
        QVERIFY(errorOf([&] { (void)SafetensorsCheckpoint::openFile(path); }).contains(QStringLiteral("shape needs 12 bytes but data_offsets span 8")));
    }
};

QTEST_GUILESS_MAIN(TestQuantCheckpoints)
#include "tst_quant_checkpoints.moc"
