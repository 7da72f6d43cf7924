// SPDX-License-Identifier: MIT
// The families of issue 42 the agent evaluates natively (qwen3, mistral's window, gemma2, gemma3_text, phi3, mixtral, qwen2_moe so far), end to end against their
// float64 references (tests/agent/reference/families_reference.py, written from the published
// architectures): logits on every GEMM back end, the perplexity of each protocol through
// `clusterppl-agent eval`, the same bits at every rank count, tensor parallelism (the mixtures of
// experts' split too), --quantize and bfloat16 on the experts, and the config fields not built refused
// by name. The next family is a row in each table here.
#include "reference_fixture.h"

#include "eval/language_model.h"
#include "eval/moe.h"
#include "eval/weight_source.h"
#include "exit_codes.h"
#include "test_exact.h"
#include "test_verify.h"

#include <ATen/ATen.h>

#include <QFile>
#include <QDir>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>

#include <QMap>

#include <cmath>
#include <fstream>
#include <random>
#include <tuple>
#include <vector>

using namespace cppl::agent;
using namespace cppl::test;

namespace {

QString makeCheckpoint(const QString &out, const QStringList &flags)
{
    const ProcessResult r = runReference(QStringLiteral("make_checkpoint.py"), QStringList{QStringLiteral("--out"), out} + flags);
    if (r.exitCode != 0)
        qFatal("make_checkpoint.py failed: %s", qPrintable(r.describe()));
    return out;
}


QStringList args(std::initializer_list<const char *> list)
{
    QStringList out;
    for (const char *a : list)
        out << QString::fromLatin1(a);
    return out;
}

// Every variant a family's checkpoints come in; make_checkpoint.py's defaults exercise each feature
// (qwen3: q/k norm weights far from 1, head_dim 16 where hidden / heads is 8, grouped-query attention).
void familyVariants()
{
    QTest::addColumn<QStringList>("flags");
    QTest::addRow("qwen3") << args({"--arch", "qwen3"});
    QTest::addRow("qwen3, BF16, sharded, tied") << args({"--arch", "qwen3", "--dtype", "BF16", "--sharded", "--tied"});
    QTest::addRow("qwen3, attention bias, 4 KV heads, head_dim 8") << args({"--arch", "qwen3", "--attention-bias", "--kv-heads", "4", "--head-dim", "8"});
    // mistral: window 6 of the 12 positions; 1 (each query itself only); 12 (the whole row, as none).
    QTest::addRow("mistral, window 6") << args({"--arch", "mistral"});
    QTest::addRow("mistral, window 1, BF16, tied") << args({"--arch", "mistral", "--sliding-window", "1", "--dtype", "BF16", "--tied"});
    QTest::addRow("mistral, window 12, 4 KV heads, sharded") << args({"--arch", "mistral", "--sliding-window", "12", "--kv-heads", "4", "--sharded"});
    // gemma2: 3 layers (sliding, global, sliding) with window 4, scores and logits past their caps,
    // query_pre_attn_scalar 24 where head_dim is 16, head_dim 16 where hidden / heads is 8.
    QTest::addRow("gemma2") << args({"--arch", "gemma2"});
    QTest::addRow("gemma2, BF16 (scale 5.65625), sharded") << args({"--arch", "gemma2", "--dtype", "BF16", "--sharded"});
    QTest::addRow("gemma2, no soft-caps, attention bias, window 9") << args({"--arch", "gemma2", "--attn-softcap", "none", "--final-softcap", "none",
                                                                               "--attention-bias", "--sliding-window", "9"});
    // gemma3: 4 layers (sliding, sliding, global, sliding) with window 4, (1 + w) q/k norms, the sliding
    // layers rotating with base 1e4, the global one with 1e6 and linear scaling x 1/8; one K/V head.
    QTest::addRow("gemma3") << args({"--arch", "gemma3"});
    QTest::addRow("gemma3, BF16, sharded, soft-caps, no rope scaling") << args({"--arch", "gemma3", "--dtype", "BF16", "--sharded", "--rope-scaling", "none",
                                                                                "--attn-softcap", "1.5", "--final-softcap", "3.0"});
    QTest::addRow("gemma3, pattern 2, 2 KV heads, attention bias") << args({"--arch", "gemma3", "--sliding-window-pattern", "2", "--kv-heads", "2",
                                                                            "--attention-bias"});
    // phi3: fused qkv_proj and gate_up_proj, sliding_window 63 (max positions - 1, as Phi-3-mini-4k).
    QTest::addRow("phi3") << args({"--arch", "phi3"});
    QTest::addRow("phi3, longrope (long factors), partial rotary 0.5, window 5")
        << args({"--arch", "phi3", "--rope-scaling", "longrope", "--partial-rotary", "0.5", "--sliding-window", "5"});
    QTest::addRow("phi3, su (short factors at 12 <= 16), BF16, tied, 2 KV heads")
        << args({"--arch", "phi3", "--rope-scaling", "su", "--dtype", "BF16", "--tied", "--kv-heads", "2"});
    QTest::addRow("phi3, su (long factors at 12 > 8), sharded") << args({"--arch", "phi3", "--rope-scaling", "su", "--rope-original-max", "8", "--sharded"});
    // mixtral / qwen2_moe: 4 experts, top-2, layer 0's experts 1 and 2 tied (the index decides), and
    // top-1 and top-3 of 6, a window, BF16; qwen2_moe's dense layers among sparse ones.
    QTest::addRow("mixtral") << args({"--arch", "mixtral"});
    QTest::addRow("mixtral, top-1 of 6, window 6, BF16, sharded") << args({"--arch", "mixtral", "--experts", "6", "--top-k", "1", "--sliding-window", "6",
                                                                          "--dtype", "BF16", "--sharded"});
    QTest::addRow("qwen2_moe") << args({"--arch", "qwen2_moe"});
    QTest::addRow("qwen2_moe, norm_topk_prob, top-3 of 5, tied") << args({"--arch", "qwen2_moe", "--norm-topk-prob", "--experts", "5", "--top-k", "3", "--tied"});
    QTest::addRow("qwen2_moe, 4 layers, decoder_sparse_step 2, mlp_only_layers 3")
        << args({"--arch", "qwen2_moe", "--layers", "4", "--decoder-sparse-step", "2", "--mlp-only-layers", "3"});
}

// The mixture-of-experts variants of the checks below.
QStringList moeVariants() { return {QStringLiteral("mixtral"), QStringLiteral("qwen2_moe")}; }

// `eval` on `world` processes of one host, groups of `n` splitting the model (tst_tensor_parallel's way).
ProcessResult evalOn(int world, int n, const QStringList &evalArgs)
{
    QStringList tp;
    if (n > 1)
        tp << QStringLiteral("--tensor-parallel") << QString::number(n);
    const QStringList eval = QStringList{QStringLiteral("eval")} + evalArgs + tp;
    if (world == 1)
        return runAgent(eval);
    return runAgent(QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(world),
                                QStringLiteral("--")}
                    + eval + QStringList{QStringLiteral("--timeout"), QStringLiteral("60")});
}

// make_checkpoint.py's model with config.json's `field` set to `value` (the tensors stay as written).
void editConfig(const QString &model, const QString &field, const QJsonValue &value)
{
    QFile f(model + QStringLiteral("/config.json"));
    if (!f.open(QIODevice::ReadOnly))
        qFatal("cannot read %s", qPrintable(f.fileName()));
    QJsonObject c = QJsonDocument::fromJson(f.readAll()).object();
    f.close();
    c[field] = value;
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        qFatal("cannot write %s", qPrintable(f.fileName()));
    f.write(QJsonDocument(c).toJson());
}

double relativeTo(double a, double b) { return std::fabs(a - b) / b; }

} // namespace

class TestFamilyEval : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QString m_tokens;
    QMap<QString, QString> m_checkpoints; // flags -> the checkpoint made for them, which no row changes
    QMap<QString, QJsonObject> m_references; // model + protocol -> the float64 reference's result

    /// make_checkpoint.py's model for @p flags, made once per run (each is a Python process with
    /// PyTorch's import: most of this test's time); the rows that only read it share it. A row
    /// that edits its config takes an editableCheckpoint().
    QString sharedCheckpoint(const QStringList &flags)
    {
        const QString key = flags.join(QLatin1Char(' '));
        if (const auto it = m_checkpoints.constFind(key); it != m_checkpoints.cend())
            return *it;
        const QString model = makeCheckpoint(m_dir.filePath(QStringLiteral("model-%1").arg(m_checkpoints.size())), flags);
        m_checkpoints.insert(key, model);
        return model;
    }

    /// The shared checkpoint for @p flags in @p dir with a config.json of its own, which the row may
    /// edit: the weight files are links to the shared ones (the refusals never get past the config).
    QString editableCheckpoint(const QStringList &flags, const QString &dir)
    {
        const QString shared = sharedCheckpoint(flags);
        if (!QDir().mkpath(dir))
            qFatal("cannot make %s", qPrintable(dir));
        for (const QFileInfo &file : QDir(shared).entryInfoList(QDir::Files)) {
            const QString to = dir + QLatin1Char('/') + file.fileName();
            const bool ok = file.fileName() == QLatin1String("config.json") ? QFile::copy(file.absoluteFilePath(), to)
                                                                            : QFile::link(file.absoluteFilePath(), to);
            if (!ok)
                qFatal("cannot copy or link %s to %s", qPrintable(file.absoluteFilePath()), qPrintable(to));
        }
        QFile(dir + QStringLiteral("/config.json")).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
        return dir;
    }

    /// reference_ppl.py's result (ppl, tokens_scored) for @p model under @p protocol, computed once
    /// per run; empty when it failed (its output is printed).
    QJsonObject referenceResult(const QString &model, const QStringList &protocol)
    {
        const QString key = model + QLatin1Char('|') + protocol.join(QLatin1Char(' '));
        if (const auto it = m_references.constFind(key); it != m_references.cend())
            return *it;
        const QString json = m_dir.filePath(QStringLiteral("ref-%1.json").arg(m_references.size()));
        const ProcessResult r = runReference(QStringLiteral("reference_ppl.py"),
                                             QStringList{QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens, QStringLiteral("--json"), json}
                                                 + protocol);
        if (r.exitCode != 0) {
            qWarning().noquote() << r.describe();
            return {};
        }
        const QJsonObject result = readJson(json);
        m_references.insert(key, result);
        return result;
    }

    QString evalJson(const QString &model, const QStringList &extra, const QString &name)
    {
        const QString json = m_dir.filePath(name);
        const ProcessResult r = runAgent(QStringList{QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens,
                                                     QStringLiteral("--batch"), QStringLiteral("3"), QStringLiteral("--json"), json, QStringLiteral("--quiet")}
                                         + extra);
        if (r.exitCode != kExitOk)
            qWarning().noquote() << r.describe();
        return r.exitCode == kExitOk ? json : QString();
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const ProcessResult probe = runProcess(QStringLiteral("/usr/bin/python3"), {QStringLiteral("-c"), QStringLiteral("import torch")});
        CPPL_VERIFY2(probe.exitCode == 0, "these tests need Debian's PyTorch: run scripts/install-deps.sh (python3-torch)");
        m_tokens = cppl::test::writeRandomTokens(m_dir.filePath(QStringLiteral("tokens.u32")), 600, 97, 7);
    }

    void logitsMatchFloat64Reference_data() { familyVariants(); }
    void logitsMatchFloat64Reference()
    {
        QFETCH(QStringList, flags);
        QTemporaryDir dir;
        const QString model = sharedCheckpoint(flags);
        const QString out = dir.filePath(QStringLiteral("logits.f32"));
        const ProcessResult r = runReference(QStringLiteral("reference_logits.py"),
                                             {QStringLiteral("--model"), model, QStringLiteral("--ids"),
                                              QStringLiteral("5,17,3,96,0,42,42,7,1,88,23,64;1,2,3,4,5,6,7,8,9,10,11,12"), QStringLiteral("--out"), out});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray raw = f.readAll();
        const at::Tensor ids = at::tensor(std::vector<std::int64_t>{5, 17, 3, 96, 0, 42, 42, 7, 1, 88, 23, 64, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12},
                                          at::TensorOptions().dtype(at::kLong))
                                   .view({2, 12});
        for (GemmBackend gemm : {GemmBackend::Native, GemmBackend::Blas, GemmBackend::OneDnn}) {
            if (gemm == GemmBackend::OneDnn && !at::hasMKLDNN())
                continue; // this LibTorch has no oneDNN; the BLAS row above still ran
            LoadOptions options;
            options.gemm = gemm;
            const auto lm = loadNativeModel(model.toStdString(), options);
            const at::Tensor ours = lm->logits(ids).contiguous();
            QCOMPARE(static_cast<qsizetype>(ours.numel() * 4), raw.size());
            const at::Tensor ref = at::from_blob(const_cast<char *>(raw.data()), ours.sizes(), at::TensorOptions().dtype(at::kFloat));
            const double diff = (ours - ref).abs().max().item<double>();
            CPPL_VERIFY2(diff <= 1e-4, qPrintable(QStringLiteral("%1: max |ours - float64 reference| = %2")
                                                  .arg(QString::fromStdString(lm->info().gemm)).arg(diff)));
        }
    }

    // The agent's float32 perplexity within 1e-5 relative of the float64 reference's (issue 42's bar),
    // for the hf-sliding and llama.cpp protocols.
    void perplexityMatchesFloat64Reference_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QStringList>("protocol");
        // mistral's window 6 and 37: far shorter than the context, and past one 8-key tile and short of
        // the kernel's 64-query block.
        const QStringList variants[] = {args({"--arch", "qwen3"}), args({"--arch", "qwen3", "--dtype", "BF16", "--tied"}), args({"--arch", "mistral"}),
                                        args({"--arch", "mistral", "--sliding-window", "37", "--dtype", "BF16"}), args({"--arch", "gemma2"}),
                                        args({"--arch", "gemma2", "--dtype", "BF16", "--sliding-window", "37"}), args({"--arch", "gemma3"}),
                                        args({"--arch", "gemma3", "--dtype", "BF16", "--sliding-window", "37", "--final-softcap", "3.0"}),
                                        args({"--arch", "phi3"}), args({"--arch", "phi3", "--rope-scaling", "longrope", "--partial-rotary", "0.5", "--dtype", "BF16"}),
                                        args({"--arch", "mixtral"}),
                                        args({"--arch", "mixtral", "--experts", "6", "--top-k", "3", "--sliding-window", "37", "--dtype", "BF16"}),
                                        args({"--arch", "qwen2_moe"}),
                                        args({"--arch", "qwen2_moe", "--norm-topk-prob", "--layers", "3", "--mlp-only-layers", "1", "--dtype", "BF16"})};
        for (const QStringList &flags : variants) {
            const QString tag = flags.join(QLatin1Char(' '));
            QTest::addRow("%s, hf-sliding stride 24", qPrintable(tag)) << flags << args({"--protocol", "hf-sliding", "--context", "64", "--stride", "24"});
            QTest::addRow("%s, llama.cpp", qPrintable(tag)) << flags << args({"--protocol", "llama.cpp", "--context", "64"});
        }
    }
    void perplexityMatchesFloat64Reference()
    {
        QFETCH(QStringList, flags);
        QFETCH(QStringList, protocol);
        const QString model = sharedCheckpoint(flags);
        const QString ours = evalJson(model, protocol, QStringLiteral("agent.json"));
        QVERIFY(!ours.isEmpty());
        const QJsonObject b = referenceResult(model, protocol);
        QVERIFY(!b.isEmpty());
        const QJsonObject a = readJson(ours);
        QCOMPARE(a.value(QStringLiteral("tokens_scored")).toInteger(), b.value(QStringLiteral("tokens_scored")).toInteger());
        const QString modelType = flags[1] == QStringLiteral("gemma3") ? QStringLiteral("gemma3_text") : flags[1]; // make_checkpoint's name for it
        QCOMPARE(a.value(QStringLiteral("model")).toObject().value(QStringLiteral("arch")).toString(), modelType);
        const double pa = a.value(QStringLiteral("ppl")).toDouble();
        const double pb = b.value(QStringLiteral("ppl")).toDouble();
        qInfo("agent %.17g, float64 reference %.17g: %.3g relative", pa, pb, std::fabs(pa - pb) / pb);
        CPPL_VERIFY2(std::fabs(pa - pb) <= 1e-5 * pb, qPrintable(QStringLiteral("agent %1 vs reference %2").arg(pa, 0, 'g', 17).arg(pb, 0, 'g', 17)));
    }

    // One rank against 3 ranks (static shards) and 2 (batches claimed dynamically): the same exact sums.
    void rankCountsGiveTheSameBits_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("qwen3") << args({"--arch", "qwen3"});
        QTest::addRow("mistral") << args({"--arch", "mistral"});
        QTest::addRow("gemma2") << args({"--arch", "gemma2"});
        QTest::addRow("gemma3") << args({"--arch", "gemma3"});
        QTest::addRow("phi3") << args({"--arch", "phi3", "--rope-scaling", "longrope"});
        for (const QString &arch : moeVariants())
            QTest::addRow("%s", qPrintable(arch)) << QStringList{QStringLiteral("--arch"), arch};
    }
    void rankCountsGiveTheSameBits()
    {
        QFETCH(QStringList, flags);
        const QString model = sharedCheckpoint(flags);
        const QStringList eval{QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens,
                               QStringLiteral("--protocol"), QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("32"),
                               QStringLiteral("--stride"), QStringLiteral("16"), QStringLiteral("--batch"), QStringLiteral("2"),
                               QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--quiet")};
        const QString oneJson = m_dir.filePath(QStringLiteral("one.json"));
        ProcessResult r = runAgent(eval + QStringList{QStringLiteral("--json"), oneJson});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const QJsonObject one = readJson(oneJson);
        for (const auto &[world, schedule] : {std::pair{3, "static"}, std::pair{2, "dynamic"}}) {
            const QString json = m_dir.filePath(QStringLiteral("world-%1.json").arg(world));
            r = runAgent(QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(world),
                                     QStringLiteral("--")}
                         + eval + QStringList{QStringLiteral("--schedule"), QString::fromLatin1(schedule), QStringLiteral("--json"), json});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            const QJsonObject j = readJson(json);
            QCOMPARE(j.value(QStringLiteral("world_size")).toInt(), world);
            QCOMPARE(j.value(QStringLiteral("tokens_scored")).toInteger(), one.value(QStringLiteral("tokens_scored")).toInteger());
            QCOMPARE(j.value(QStringLiteral("nll_sum_exact")).toString(), one.value(QStringLiteral("nll_sum_exact")).toString());
            QCOMPARE(j.value(QStringLiteral("nll_sq_sum_exact")).toString(), one.value(QStringLiteral("nll_sq_sum_exact")).toString());
            CPPL_COMPARE_BITS(j.value(QStringLiteral("ppl")).toDouble(), one.value(QStringLiteral("ppl")).toDouble());
        }
    }

    // Tensor parallelism (2 ranks splitting the model) against one rank: the row-parallel sums are
    // added in another order (docs/models.md, "Tensor parallelism"), so within 1e-6, not the same bits.
    void tensorParallelMatchesOneRank_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("mistral") << args({"--arch", "mistral"});
        QTest::addRow("gemma2 (post-norms after the group's sum)") << args({"--arch", "gemma2"});
        QTest::addRow("gemma3 (2 K/V heads split)") << args({"--arch", "gemma3", "--kv-heads", "2"});
        QTest::addRow("gemma3 (one K/V head replicated)") << args({"--arch", "gemma3"});
        QTest::addRow("phi3 (the fused weights' row slices)") << args({"--arch", "phi3", "--kv-heads", "2", "--rope-scaling", "longrope"});
    }
    void tensorParallelMatchesOneRank()
    {
        QFETCH(QStringList, flags);
        const QString model = sharedCheckpoint(flags);
        const QStringList eval{QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens,
                               QStringLiteral("--protocol"), QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64"),
                               QStringLiteral("--stride"), QStringLiteral("32"), QStringLiteral("--batch"), QStringLiteral("3"),
                               QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--quiet")};
        const QString oneJson = m_dir.filePath(QStringLiteral("tp1.json")), twoJson = m_dir.filePath(QStringLiteral("tp2.json"));
        ProcessResult r = runAgent(eval + QStringList{QStringLiteral("--json"), oneJson});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        r = runAgent(QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QStringLiteral("2"), QStringLiteral("--")}
                     + eval + QStringList{QStringLiteral("--tensor-parallel"), QStringLiteral("2"), QStringLiteral("--json"), twoJson});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const QJsonObject one = readJson(oneJson), two = readJson(twoJson);
        QCOMPARE(two.value(QStringLiteral("tokens_scored")).toInteger(), one.value(QStringLiteral("tokens_scored")).toInteger());
        const double p1 = one.value(QStringLiteral("ppl")).toDouble(), p2 = two.value(QStringLiteral("ppl")).toDouble();
        qInfo("one rank %.17g, tensor-parallel 2 %.17g: %.3g relative", p1, p2, std::fabs(p1 - p2) / p1);
        CPPL_VERIFY2(std::fabs(p1 - p2) <= 1e-6 * p1, qPrintable(QStringLiteral("%1 vs %2").arg(p1, 0, 'g', 17).arg(p2, 0, 'g', 17)));
    }

    // Batch 1 on one thread against batch 4 on two: each expert multiplies other groups of tokens, the
    // same bits (a token's row never depends on the rows beside it, nor its experts' sums on their order).
    void expertsGiveTheSameBitsAtEveryBatch_data()
    {
        QTest::addColumn<QStringList>("flags");
        for (const QString &arch : moeVariants())
            QTest::addRow("%s", qPrintable(arch)) << QStringList{QStringLiteral("--arch"), arch};
        QTest::addRow("mixtral, top-3 of 6") << args({"--arch", "mixtral", "--experts", "6", "--top-k", "3"});
    }
    void expertsGiveTheSameBitsAtEveryBatch()
    {
        QFETCH(QStringList, flags);
        const QString model = sharedCheckpoint(flags);
        QString exact;
        for (const auto &[batch, threads] : {std::pair{"1", "1"}, std::pair{"4", "2"}, std::pair{"3", "2"}}) {
            const QString json = m_dir.filePath(QStringLiteral("batch-%1.json").arg(QString::fromLatin1(batch)));
            const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens,
                                              QStringLiteral("--protocol"), QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64"),
                                              QStringLiteral("--stride"), QStringLiteral("24"), QStringLiteral("--batch"), QString::fromLatin1(batch),
                                              QStringLiteral("--threads"), QString::fromLatin1(threads), QStringLiteral("--json"), json, QStringLiteral("--quiet")});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            const QString sum = readJson(json).value(QStringLiteral("nll_sum_exact")).toString();
            QVERIFY(!sum.isEmpty());
            if (exact.isEmpty())
                exact = sum;
            QCOMPARE(sum, exact);
        }
    }

    // Layer 0's experts 1 and 2 share a router row (make_checkpoint.py), so their logits are equal on
    // every token: expert 2 is never chosen without expert 1, the index decides on some tokens, and
    // when both are chosen their weights are the same bits. (The logits of whole models with such ties
    // are checked against the float64 reference above.)
    void routerTiesGoToTheLowerExpert_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("mixtral, top-2 of 4") << args({"--arch", "mixtral"});
        QTest::addRow("qwen2_moe, top-1 of 3") << args({"--arch", "qwen2_moe", "--experts", "3", "--top-k", "1"});
        QTest::addRow("qwen2_moe, top-3 of 6, norm_topk_prob") << args({"--arch", "qwen2_moe", "--experts", "6", "--top-k", "3", "--norm-topk-prob"});
    }
    void routerTiesGoToTheLowerExpert()
    {
        QFETCH(QStringList, flags);
        const std::string model = sharedCheckpoint(flags).toStdString();
        const ModelConfig c = loadModelConfig(model);
        WeightSource w(SafetensorsCheckpoint::openDirectory(model), LoadOptions{});
        const MoeMlp moe(w, c, "model.layers.0.", linearPlanFor(LoadOptions{}, std::nullopt));
        const std::int64_t rows = 2000;
        const at::Tensor h = at::randn({rows, c.hidden}, at::TensorOptions().dtype(at::kFloat)).contiguous();
        const MoeRouting r = moe.route(h.data_ptr<float>(), rows);
        int decided = 0, both = 0;
        for (std::int64_t t = 0; t < rows; ++t) {
            int slot1 = -1, slot2 = -1;
            float sum = 0;
            for (std::int64_t k = 0; k < c.moe.topK; ++k) {
                const auto i = static_cast<std::size_t>(t * c.moe.topK + k);
                slot1 = r.expert[i] == 1 ? static_cast<int>(k) : slot1;
                slot2 = r.expert[i] == 2 ? static_cast<int>(k) : slot2;
                sum += r.weight[i];
            }
            CPPL_VERIFY2(slot2 < 0 || slot1 >= 0, qPrintable(QStringLiteral("token %1: expert 2 chosen without expert 1, its equal").arg(t)));
            decided += slot1 >= 0 && slot2 < 0 ? 1 : 0;
            if (slot1 >= 0 && slot2 >= 0) {
                ++both;
                QCOMPARE(slot2, slot1 + 1); // adjacent: nothing ranks between equal logits
                QCOMPARE(r.weight[static_cast<std::size_t>(t * c.moe.topK + slot2)], r.weight[static_cast<std::size_t>(t * c.moe.topK + slot1)]);
            }
            if (c.moe.normTopK)
                QVERIFY(std::fabs(sum - 1.0F) <= 1e-6F);
        }
        qInfo("%d of %lld tokens had the tie decided by the index, %d chose both", decided, static_cast<long long>(rows), both);
        QVERIFY(decided > 0);
    }

    // Mixtures of experts under --tensor-parallel 2 (moe.h: every expert split as a dense MLP, the
    // router replicated, one group sum per block): within 1e-6 relative PPL of one rank on the same
    // path, N = 2 x 2 the same bits as N = 2 x 1, each rank holding about half the weights.
    // Quantized: the agent's integer kernels quantize the activations too, so they are held to 2e-4,
    // and bfloat16 to 1e-2, as tst_tensor_parallel's dense rows are (docs/models.md, "Tensor parallelism").
    void expertsSplitAcrossTheGroup_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<double>("limit");
        // Experts 64 wide for --quantize: each rank's 32 of w2's inputs on --quant-group 32 boundaries.
        const QStringList blas = args({"--gemm", "blas"}), wideMixtral = args({"--hidden", "64", "--intermediate", "64"}),
                          wideQwen = args({"--hidden", "64", "--moe-intermediate", "64", "--shared-intermediate", "64"});
        QTest::addRow("mixtral, agent's kernels") << args({"--arch", "mixtral"}) << QStringList{} << 1e-6;
        QTest::addRow("qwen2_moe, a dense layer among sparse ones, agent's kernels")
            << args({"--arch", "qwen2_moe", "--layers", "3", "--mlp-only-layers", "1"}) << QStringList{} << 1e-6;
        QTest::addRow("mixtral, top-3 of 6, LibTorch's path") << args({"--arch", "mixtral", "--experts", "6", "--top-k", "3"}) << blas << 1e-6;
        QTest::addRow("qwen2_moe, norm_topk_prob, LibTorch's path") << args({"--arch", "qwen2_moe", "--norm-topk-prob"}) << blas << 1e-6;
        // bfloat16: each member's partial rounded to bfloat16 before the group's float32 sum (as tst_tensor_parallel's dense rows).
        QTest::addRow("qwen2_moe, bfloat16, LibTorch's path") << args({"--arch", "qwen2_moe"}) << args({"--gemm", "blas", "--dtype", "bfloat16"}) << 1e-2;
        QTest::addRow("mixtral, int8, LibTorch's path") << args({"--arch", "mixtral"}) + wideMixtral << args({"--quantize", "int8", "--gemm", "blas"}) << 1e-6;
        QTest::addRow("qwen2_moe, int8, agent's kernels") << args({"--arch", "qwen2_moe"}) + wideQwen << args({"--quantize", "int8"}) << 2e-4;
    }
    void expertsSplitAcrossTheGroup()
    {
        QFETCH(QStringList, flags);
        QFETCH(QStringList, extra);
        QFETCH(double, limit);
        QTemporaryDir dir;
        const QString model = sharedCheckpoint(flags);
        const QStringList common = QStringList{QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens, QStringLiteral("--protocol"),
                                               QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--stride"),
                                               QStringLiteral("32"), QStringLiteral("--batch"), QStringLiteral("3"), QStringLiteral("--threads"),
                                               QStringLiteral("1"), QStringLiteral("--quiet")}
                                   + extra;
        QMap<QString, QJsonObject> results;
        for (const auto &[name, world, n] : {std::tuple{QStringLiteral("one"), 1, 1}, {QStringLiteral("tp2"), 2, 2}, {QStringLiteral("tp2x2"), 4, 2}}) {
            const QString json = dir.filePath(name + QStringLiteral(".json"));
            const ProcessResult r = evalOn(world, n, common + QStringList{QStringLiteral("--json"), json});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(name + QLatin1Char(' ') + r.describe()));
            results[name] = readJson(json);
        }
        const QJsonObject one = results[QStringLiteral("one")], tp2 = results[QStringLiteral("tp2")], tp2x2 = results[QStringLiteral("tp2x2")];
        QCOMPARE(tp2.value(QStringLiteral("model")).toObject().value(QStringLiteral("arch")).toString(), flags[1]);
        QCOMPARE(tp2.value(QStringLiteral("tensor_parallel")).toObject().value(QStringLiteral("size")).toInt(), 2);
        QCOMPARE(tp2x2.value(QStringLiteral("tensor_parallel")).toObject().value(QStringLiteral("data_parallel_width")).toInt(), 2);
        QCOMPARE(tp2.value(QStringLiteral("gemm")).toString().startsWith(QStringLiteral("blas")), extra.contains(QStringLiteral("blas")));
        QCOMPARE(tp2x2.value(QStringLiteral("nll_sum_exact")).toString(), tp2.value(QStringLiteral("nll_sum_exact")).toString());
        QCOMPARE(tp2x2.value(QStringLiteral("nll_sq_sum_exact")).toString(), tp2.value(QStringLiteral("nll_sq_sum_exact")).toString());
        QCOMPARE(tp2.value(QStringLiteral("tokens_scored")).toInteger(), one.value(QStringLiteral("tokens_scored")).toInteger());
        const double p1 = one.value(QStringLiteral("ppl")).toDouble(), p2 = tp2.value(QStringLiteral("ppl")).toDouble();
        qInfo("%s: PPL %.17g at N = 1, %.17g at N = 2: relative deviation %.3g", QTest::currentDataTag(), p1, p2, relativeTo(p2, p1));
        CPPL_VERIFY2(relativeTo(p2, p1) <= limit, qPrintable(QStringLiteral("N = 2 PPL %1 vs N = 1 %2").arg(p2, 0, 'g', 17).arg(p1, 0, 'g', 17)));
        // Each rank reads its slices of every expert: about half of these untied models' weights.
        const double perRank = tp2.value(QStringLiteral("tensor_parallel")).toObject().value(QStringLiteral("weights_bytes_per_rank")).toDouble();
        const double whole = static_cast<double>(QFileInfo(model + QStringLiteral("/model.safetensors")).size()); // float32: the weights and a header
        qInfo("%s: weights per rank at N = 2: %.0f bytes of %.0f (%.3f)", QTest::currentDataTag(), perRank, whole, perRank / whole);
        QVERIFY(perRank > 0);
        CPPL_VERIFY2(perRank <= 0.6 * whole, qPrintable(QStringLiteral("%1 bytes per rank of %2").arg(perRank).arg(whole)));
    }

    // An expert width the group cannot split is refused by name and numbers before any weight loads
    // (config.json is edited to a width the tensors contradict: a load would fail on their shapes);
    // a row-parallel slice off --quant-group boundaries is refused as for a dense layer.
    void expertSplitsRefused_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("field");
        QTest::addColumn<int>("value");
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<QString>("message");
        QTest::addRow("mixtral intermediate_size 25")
            << args({"--arch", "mixtral"}) << "intermediate_size" << 25 << QStringList{}
            << "--tensor-parallel 2: mixtral's experts' intermediate size 25 (intermediate_size in config.json) does not divide by it";
        QTest::addRow("qwen2_moe moe_intermediate_size 15")
            << args({"--arch", "qwen2_moe"}) << "moe_intermediate_size" << 15 << QStringList{}
            << "--tensor-parallel 2: qwen2_moe's experts' intermediate size 15 (moe_intermediate_size in config.json) does not divide by it";
        QTest::addRow("qwen2_moe shared_expert_intermediate_size 41")
            << args({"--arch", "qwen2_moe"}) << "shared_expert_intermediate_size" << 41 << QStringList{}
            << "qwen2_moe's shared expert's intermediate size 41 (shared_expert_intermediate_size in config.json) does not divide by it";
        QTest::addRow("mixtral --quantize int8, experts of 24 in slices of 12")
            << args({"--arch", "mixtral", "--hidden", "64"}) << QString() << 0 << args({"--quantize", "int8"})
            << "\"model.layers.0.block_sparse_moe.experts.0.w2\" is split along its 24 inputs into slices of 12, which do not fall on --quant-group 32 boundaries";
    }
    void expertSplitsRefused()
    {
        QFETCH(QStringList, flags);
        QFETCH(QString, field);
        QFETCH(int, value);
        QFETCH(QStringList, extra);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString model = editableCheckpoint(flags, dir.filePath(QStringLiteral("m")));
        if (!field.isEmpty())
            editConfig(model, field, value);
        const ProcessResult r = evalOn(2, 2, QStringList{QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens, QStringLiteral("--quiet")} + extra);
        QVERIFY(r.exitCode != kExitOk);
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.describe()));
    }

    // --quantize int8 / int4 and --dtype bfloat16 on mixtures of experts, against the float64
    // reference with tst_agent_quant's bounds: LibTorch's path multiplies by the dequantized weights,
    // the same bits as the float checkpoint holding them (quantize_checkpoint.py) and within 1e-5 of
    // its float64 perplexity; bfloat16 (LibTorch's path) within 1e-2 of the float model's. The
    // agent's integer kernels also quantize the activations in blocks of 32: on these hidden-32
    // random checkpoints that moves the perplexity by 0.2-0.9% (a dense mistral of the same shape:
    // 2.9e-3 at int8; a token near a routing tie may change experts too), so they are held to the 2e-2
    // tst_agent_quant allows the agent's kernels on quantized checkpoints. 1 and 2 ranks: the same bits.
    void expertsQuantizedAndBfloat16_data()
    {
        QTest::addColumn<QString>("arch");
        QTest::addColumn<QString>("scheme"); // none: --dtype bfloat16
        for (const char *arch : {"mixtral", "qwen2_moe"})
            for (const char *scheme : {"int8", "int4", "none"})
                QTest::addRow("%s, %s", arch, scheme) << QString::fromLatin1(arch) << QString::fromLatin1(scheme);
    }
    void expertsQuantizedAndBfloat16()
    {
        QFETCH(QString, arch);
        QFETCH(QString, scheme);
        QTemporaryDir dir;
        const QString model = sharedCheckpoint({QStringLiteral("--arch"), arch});
        const QStringList protocol = args({"--protocol", "hf-sliding", "--context", "64", "--stride", "24"});
        const QStringList common = QStringList{QStringLiteral("--tokens"), m_tokens, QStringLiteral("--batch"), QStringLiteral("3"),
                                               QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--quiet")}
                                   + protocol;
        const auto run = [&](const QString &name, int world, const QString &m, const QStringList &flags) {
            const QString json = dir.filePath(name + QStringLiteral(".json"));
            const ProcessResult r = evalOn(world, 1, QStringList{QStringLiteral("--model"), m, QStringLiteral("--json"), json} + common + flags);
            if (r.exitCode != kExitOk)
                qWarning().noquote() << name << r.describe();
            return r.exitCode == kExitOk ? readJson(json) : QJsonObject();
        };
        const bool bf16 = scheme == QLatin1String("none");
        QString reference = model;
        if (!bf16) {
            reference = dir.filePath(QStringLiteral("dequantized"));
            const ProcessResult q = runReference(QStringLiteral("quantize_checkpoint.py"),
                                                 {QStringLiteral("--model"), model, QStringLiteral("--scheme"), scheme, QStringLiteral("--out"), reference});
            CPPL_VERIFY2(q.exitCode == 0, qPrintable(q.describe()));
        }
        const QJsonObject ref = referenceResult(reference, protocol);
        QVERIFY(!ref.isEmpty());
        const double pr = ref.value(QStringLiteral("ppl")).toDouble();
        const QStringList blasFlags = (bf16 ? args({"--dtype", "bfloat16"}) : QStringList{QStringLiteral("--quantize"), scheme}) + args({"--gemm", "blas"});
        // (gemm, bound, flags): LibTorch's path, then (quantized) the agent's integer kernels.
        std::vector<std::tuple<QString, double, QStringList>> paths{{QStringLiteral("blas"), bf16 ? 1e-2 : 1e-5, blasFlags}};
        if (!bf16)
            paths.emplace_back(QStringLiteral("native"), 2e-2, QStringList{QStringLiteral("--quantize"), scheme});
        QJsonObject blasOne;
        for (const auto &[gemm, bound, flags] : paths) {
            const QJsonObject one = run(gemm + QStringLiteral("-1"), 1, model, flags), two = run(gemm + QStringLiteral("-2"), 2, model, flags);
            QVERIFY(!one.isEmpty() && !two.isEmpty());
            if (gemm == QLatin1String("blas"))
                blasOne = one;
            if (!bf16)
                QCOMPARE(one.value(QStringLiteral("quantization")).toObject().value(QStringLiteral("method")).toString(),
                         scheme == QLatin1String("int4") ? QStringLiteral("int4-sym") : scheme);
            QCOMPARE(two.value(QStringLiteral("nll_sum_exact")).toString(), one.value(QStringLiteral("nll_sum_exact")).toString());
            QCOMPARE(two.value(QStringLiteral("nll_sq_sum_exact")).toString(), one.value(QStringLiteral("nll_sq_sum_exact")).toString());
            const double p = one.value(QStringLiteral("ppl")).toDouble();
            qInfo("%s, %s: PPL %.17g, float64 reference %.17g: %.3g relative", QTest::currentDataTag(), qPrintable(gemm), p, pr, relativeTo(p, pr));
            CPPL_VERIFY2(relativeTo(p, pr) < bound, qPrintable(QStringLiteral("%1 %2 vs float64 %3").arg(gemm).arg(p, 0, 'g', 17).arg(pr, 0, 'g', 17)));
        }
        if (bf16)
            return;
        // The agent quantizes exactly the experts (and the attention), not the routers: LibTorch's path
        // gives the bits of the float checkpoint holding the dequantized weights.
        const QJsonObject dense = run(QStringLiteral("dense"), 1, reference, args({"--gemm", "blas"}));
        QVERIFY(!dense.isEmpty());
        QCOMPARE(blasOne.value(QStringLiteral("nll_sum_exact")).toString(), dense.value(QStringLiteral("nll_sum_exact")).toString());
    }

    // A config field whose feature is not built is refused with the field named, before any weight is read.
    void unbuiltFeaturesRefused_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addColumn<QString>("field");
        QTest::addColumn<QJsonValue>("value");
        QTest::addColumn<QString>("message");
        QTest::addRow("qwen3 use_sliding_window") << args({"--arch", "qwen3"}) << "use_sliding_window" << QJsonValue(true)
                                                  << "use_sliding_window true is not supported for qwen3";
        QTest::addRow("qwen3 rope_scaling yarn")
            << args({"--arch", "qwen3"}) << "rope_scaling"
            << QJsonValue(QJsonObject{{QStringLiteral("rope_type"), QStringLiteral("yarn")}, {QStringLiteral("factor"), 4.0}})
            << "\"rope_type\":\"yarn\"} is not supported for qwen3 (supported: null)";
        QTest::addRow("gemma2 rope_scaling linear")
            << args({"--arch", "gemma2"}) << "rope_scaling"
            << QJsonValue(QJsonObject{{QStringLiteral("rope_type"), QStringLiteral("linear")}, {QStringLiteral("factor"), 8.0}})
            << "rope_scaling {\"factor\":8,\"rope_type\":\"linear\"} is not supported for gemma2 (supported: null)";
        QTest::addRow("gemma2 use_bidirectional_attention") << args({"--arch", "gemma2"}) << "use_bidirectional_attention" << QJsonValue(true)
                                                            << "use_bidirectional_attention true is not supported for gemma2";
        QTest::addRow("gemma2 hidden_activation gelu") << args({"--arch", "gemma2"}) << "hidden_activation" << QJsonValue(QStringLiteral("gelu"))
                                                       << "hidden_activation \"gelu\" is not supported (only gelu_pytorch_tanh)";
        QTest::addRow("gemma2 layer_types of another length")
            << args({"--arch", "gemma2"}) << "layer_types" << QJsonValue(QJsonArray{QStringLiteral("sliding_attention"), QStringLiteral("full_attention")})
            << "\"layer_types\" must list 3 layers";
        QTest::addRow("gemma3 rope_scaling yarn")
            << args({"--arch", "gemma3"}) << "rope_scaling"
            << QJsonValue(QJsonObject{{QStringLiteral("rope_type"), QStringLiteral("yarn")}, {QStringLiteral("factor"), 8.0}})
            << "rope_scaling type \"yarn\" is not supported for gemma3_text (supported: null, linear)";
        QTest::addRow("gemma3 vision_config") << args({"--arch", "gemma3"}) << "vision_config" << QJsonValue(QJsonObject{{QStringLiteral("model_type"), QStringLiteral("siglip_vision_model")}})
                                              << "vision_config is present: a vision tower (model_type \"gemma3_text\", e.g. Gemma3ForConditionalGeneration) is not supported";
        QTest::addRow("gemma3 use_bidirectional_attention") << args({"--arch", "gemma3"}) << "use_bidirectional_attention" << QJsonValue(true)
                                                            << "use_bidirectional_attention true is not supported for gemma3_text";
        QTest::addRow("phi3 rope_scaling yarn")
            << args({"--arch", "phi3"}) << "rope_scaling"
            << QJsonValue(QJsonObject{{QStringLiteral("type"), QStringLiteral("yarn")}, {QStringLiteral("factor"), 4.0}})
            << "rope_scaling type \"yarn\" is not supported for phi3 (supported: null, longrope, su)";
        QTest::addRow("phi3 longrope short_factor of another length")
            << args({"--arch", "phi3"}) << "rope_scaling"
            << QJsonValue(QJsonObject{{QStringLiteral("type"), QStringLiteral("longrope")}, {QStringLiteral("short_factor"), QJsonArray{1.0}},
                                      {QStringLiteral("long_factor"), QJsonArray{1.0, 2.0, 3.0, 4.0}}})
            << "rope_scaling.short_factor must list 4 positive numbers (one per rotary pair)";
        QTest::addRow("phi3 partial_rotary_factor 0.1") << args({"--arch", "phi3"}) << "partial_rotary_factor" << QJsonValue(0.1)
                                                        << "partial_rotary_factor 0.1 is not supported for phi3";
        QTest::addRow("phi3 attention_bias") << args({"--arch", "phi3"}) << "attention_bias" << QJsonValue(true)
                                             << "attention_bias true is not supported for phi3";
        QTest::addRow("mixtral num_experts_per_tok 5 of 4") << args({"--arch", "mixtral"}) << "num_experts_per_tok" << QJsonValue(5)
                                                            << "num_experts_per_tok 5 is not supported for mixtral (supported: 1 .. 4, the num_local_experts)";
        QTest::addRow("qwen2_moe use_sliding_window") << args({"--arch", "qwen2_moe"}) << "use_sliding_window" << QJsonValue(true)
                                                      << "use_sliding_window true is not supported for qwen2_moe";
        QTest::addRow("qwen2_moe mlp_only_layers past the layers") << args({"--arch", "qwen2_moe"}) << "mlp_only_layers" << QJsonValue(QJsonArray{0, 7})
                                                                   << "mlp_only_layers entry 7 is not a layer index (0 .. 1)";
        QTest::addRow("qwen2_moe decoder_sparse_step 0") << args({"--arch", "qwen2_moe"}) << "decoder_sparse_step" << QJsonValue(0)
                                                         << "\"decoder_sparse_step\" must be a positive integer, got 0";
        QTest::addRow("qwen2_moe without shared_expert_intermediate_size") << args({"--arch", "qwen2_moe"}) << "shared_expert_intermediate_size"
                                                                           << QJsonValue(QJsonValue::Null) << "\"shared_expert_intermediate_size\" is missing";
    }
    void unbuiltFeaturesRefused()
    {
        QFETCH(QStringList, flags);
        QFETCH(QString, field);
        QFETCH(QJsonValue, value);
        QFETCH(QString, message);
        QTemporaryDir dir;
        const QString model = editableCheckpoint(flags, dir.filePath(QStringLiteral("m")));
        editConfig(model, field, value);
        const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens, QStringLiteral("--quiet")});
        QCOMPARE(r.exitCode, int(kExitBadModel));
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.err));
    }
};

QTEST_GUILESS_MAIN(TestFamilyEval)
#include "tst_family_eval.moc"
