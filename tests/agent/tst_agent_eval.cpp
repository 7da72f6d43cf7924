// SPDX-License-Identifier: MIT
// The agent's eval against independent references: logits of the native models against a Python
// transcription of transformers' eager code; perplexities of every protocol against float64 Python
// loops; TorchScript against the directory it was traced from; the result JSON; every bad input.
#include "reference_fixture.h"

#include "eval/language_model.h"
#include "exit_codes.h"
#include "test_exact.h"
#include "test_skip.h"
#include "test_verify.h"

#include "cppl/agent_lines.h"

#include <ATen/ATen.h>

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QFileInfo>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>
#include <random>

#include <sched.h>

using namespace cppl::agent;
using namespace cppl::test;

namespace {

QString makeCheckpoint(const QTemporaryDir &dir, const QString &name, const QStringList &flags)
{
    const QString out = dir.filePath(name);
    const ProcessResult r = runReference(QStringLiteral("make_checkpoint.py"), QStringList{QStringLiteral("--out"), out} + flags);
    if (r.exitCode != 0)
        qFatal("make_checkpoint.py failed: %s", qPrintable(r.describe()));
    return out;
}


} // namespace

class TestAgentEval : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;
    QString m_llama;
    QString m_tokens;

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        const ProcessResult probe = runProcess(QStringLiteral("/usr/bin/python3"), {QStringLiteral("-c"), QStringLiteral("import torch")});
        CPPL_VERIFY2(probe.exitCode == 0, "these tests need Debian's PyTorch: run scripts/install-deps.sh (python3-torch)");
        m_llama = makeCheckpoint(m_dir, QStringLiteral("llama"), {QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa"),
                                                                  QStringLiteral("--max-positions"), QStringLiteral("64")});
        m_tokens = cppl::test::writeRandomTokens(m_dir.filePath(QStringLiteral("tokens.u32")), 700, 97, 1);
    }

    void nativeLogitsMatchTransformers_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("llama") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama")};
        QTest::addRow("llama, grouped-query attention") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa")};
        QTest::addRow("llama, tied head") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--tied")};
        QTest::addRow("llama, llama3 rope scaling, theta 500000")
            << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--rope-scaling"), QStringLiteral("llama3"),
                           QStringLiteral("--rope-theta"), QStringLiteral("500000")};
        QTest::addRow("llama, attention bias") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--attention-bias")};
        QTest::addRow("llama, sharded checkpoint") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--sharded")};
        QTest::addRow("llama, BF16 weights") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--dtype"), QStringLiteral("BF16")};
        QTest::addRow("llama, F16 weights") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--dtype"), QStringLiteral("F16")};
        QTest::addRow("qwen2 (q/k/v biases)") << QStringList{QStringLiteral("--arch"), QStringLiteral("qwen2"), QStringLiteral("--gqa")};
        QTest::addRow("gpt2") << QStringList{QStringLiteral("--arch"), QStringLiteral("gpt2")};
        QTest::addRow("gpt2, transformer. prefix, mask buffers")
            << QStringList{QStringLiteral("--arch"), QStringLiteral("gpt2"), QStringLiteral("--gpt2-prefix"), QStringLiteral("--gpt2-mask-buffers")};
    }
    void nativeLogitsMatchTransformers()
    {
        QFETCH(QStringList, flags);
        QTemporaryDir dir;
        const QString model = makeCheckpoint(dir, QStringLiteral("m"), flags);
        const std::vector<std::vector<std::int64_t>> rows{{5, 17, 3, 96, 0, 42, 42, 7, 1, 88, 23, 64}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
        QStringList rowText;
        for (const auto &row : rows) {
            QStringList ids;
            for (auto id : row)
                ids << QString::number(id);
            rowText << ids.join(QLatin1Char(','));
        }
        const QString out = dir.filePath(QStringLiteral("logits.f32"));
        const ProcessResult r = runReference(QStringLiteral("reference_logits.py"),
                                             {QStringLiteral("--model"), model, QStringLiteral("--ids"), rowText.join(QLatin1Char(';')),
                                              QStringLiteral("--out"), out});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QFile f(out);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray raw = f.readAll();

        at::Tensor ids = at::empty({2, 12}, at::TensorOptions().dtype(at::kLong));
        for (int b = 0; b < 2; ++b)
            for (int t = 0; t < 12; ++t)
                ids[b][t] = rows[static_cast<std::size_t>(b)][static_cast<std::size_t>(t)];
        // Every GEMM back end: the agent's own kernels, the BLAS through at::linear, oneDNN with packed weights.
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
            CPPL_VERIFY2(diff <= 1e-4, qPrintable(QStringLiteral("%1: max |ours - transformers| = %2")
                                                  .arg(QString::fromStdString(lm->info().gemm)).arg(diff)));
            // logitsAt selects exactly those rows.
            const at::Tensor pos = at::tensor(std::vector<std::int64_t>{0, 13, 23}, at::TensorOptions().dtype(at::kLong));
            const at::Tensor some = lm->logitsAt(ids, pos);
            QVERIFY((some - ours.reshape({24, -1}).index_select(0, pos)).abs().max().item<double>() <= 1e-5);
        }
    }

    void perplexityMatchesFloat64Reference_data()
    {
        QTest::addColumn<QStringList>("agentArgs");
        QTest::addColumn<QStringList>("refArgs");
        const QString p = QStringLiteral("--protocol");
        QTest::addRow("hf-sliding, stride = context") << QStringList{p, QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64")}
                                                      << QStringList{p, QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64")};
        QTest::addRow("hf-sliding, stride 24")
            << QStringList{p, QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--stride"), QStringLiteral("24")}
            << QStringList{p, QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--stride"), QStringLiteral("24")};
        QTest::addRow("llama.cpp") << QStringList{p, QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("64")}
                                   << QStringList{p, QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("64")};
        QTest::addRow("llama.cpp, BOS first")
            << QStringList{p, QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("48"), QStringLiteral("--bos-first"), QStringLiteral("--bos-id"), QStringLiteral("1")}
            << QStringList{p, QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("48"), QStringLiteral("--bos-id"), QStringLiteral("1")};
        QTest::addRow("lm-eval-rolling") << QStringList{p, QStringLiteral("lm-eval-rolling"), QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--prefix-id"), QStringLiteral("0")}
                                         << QStringList{p, QStringLiteral("lm-eval-rolling"), QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--bos-id"), QStringLiteral("0")};
        QTest::addRow("max windows") << QStringList{p, QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("32"), QStringLiteral("--max-windows"), QStringLiteral("5")}
                                     << QStringList{p, QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("32"), QStringLiteral("--max-windows"), QStringLiteral("5")};
    }
    void perplexityMatchesFloat64Reference()
    {
        QFETCH(QStringList, agentArgs);
        QFETCH(QStringList, refArgs);
        QTemporaryDir dir;
        const QString ours = dir.filePath(QStringLiteral("agent.json"));
        const QString theirs = dir.filePath(QStringLiteral("ref.json"));
        ProcessResult r = runAgent(QStringList{QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                               QStringLiteral("--batch"), QStringLiteral("3"), QStringLiteral("--json"), ours, QStringLiteral("--quiet")}
                                   + agentArgs);
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QVERIFY(r.out.contains(QStringLiteral("Final estimate: PPL = ")));
        r = runReference(QStringLiteral("reference_ppl.py"),
                         QStringList{QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens, QStringLiteral("--json"), theirs} + refArgs);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QJsonObject a = readJson(ours);
        const QJsonObject b = readJson(theirs);
        QCOMPARE(a.value(QStringLiteral("tokens_scored")).toInteger(), b.value(QStringLiteral("tokens_scored")).toInteger());
        const double pa = a.value(QStringLiteral("ppl")).toDouble();
        const double pb = b.value(QStringLiteral("ppl")).toDouble();
        CPPL_VERIFY2(std::fabs(pa - pb) <= 1e-6 * pb, qPrintable(QStringLiteral("agent %1 vs reference %2").arg(pa, 0, 'g', 17).arg(pb, 0, 'g', 17)));
    }

    void torchScriptGivesTheSamePerplexity()
    {
        const QString pt = m_dir.filePath(QStringLiteral("llama.pt"));
        ProcessResult r = runReference(QStringLiteral("trace_torchscript.py"),
                                       {QStringLiteral("--model"), m_llama, QStringLiteral("--out"), pt, QStringLiteral("--batch"), QStringLiteral("4"),
                                        QStringLiteral("--length"), QStringLiteral("64")});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QStringList common{QStringLiteral("eval"), QStringLiteral("--tokens"), m_tokens, QStringLiteral("--context"), QStringLiteral("64"),
                                 QStringLiteral("--batch"), QStringLiteral("4"), QStringLiteral("--quiet")};
        const QString a = m_dir.filePath(QStringLiteral("dir.json"));
        const QString b = m_dir.filePath(QStringLiteral("pt.json"));
        r = runAgent(common + QStringList{QStringLiteral("--model"), m_llama, QStringLiteral("--json"), a});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        r = runAgent(common + QStringList{QStringLiteral("--model"), pt, QStringLiteral("--json"), b});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const double pa = readJson(a).value(QStringLiteral("ppl")).toDouble();
        const double pb = readJson(b).value(QStringLiteral("ppl")).toDouble();
        CPPL_VERIFY2(std::fabs(pa - pb) <= 1e-6 * pa, qPrintable(QStringLiteral("%1 vs %2").arg(pa).arg(pb)));
        QCOMPARE(readJson(b).value(QStringLiteral("model")).toObject().value(QStringLiteral("format")).toString(), QStringLiteral("torchscript"));
    }

    void shardsMergeBitIdentical_data()
    {
        QTest::addColumn<QString>("protocol");
        QTest::addColumn<int>("shards");
        QTest::addRow("hf-sliding, 3 shards") << "hf-sliding" << 3;
        QTest::addRow("llama.cpp, 2 shards") << "llama.cpp" << 2;
        QTest::addRow("lm-eval-rolling, 5 shards") << "lm-eval-rolling" << 5;
        QTest::addRow("more shards than batches") << "llama.cpp" << 9;
    }
    void shardsMergeBitIdentical()
    {
        // Same per-rank settings (batch, threads) as the one-rank run: the merged exact sum has the same bits.
        QFETCH(QString, protocol);
        QFETCH(int, shards);
        QTemporaryDir dir;
        const QStringList common{QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                 QStringLiteral("--protocol"), protocol, QStringLiteral("--context"), QStringLiteral("32"),
                                 QStringLiteral("--prefix-id"), QStringLiteral("0"), QStringLiteral("--batch"), QStringLiteral("3"),
                                 QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--quiet")};
        const QString one = dir.filePath(QStringLiteral("one.json"));
        ProcessResult r = runAgent(common + QStringList{QStringLiteral("--json"), one});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QStringList parts;
        for (int s = 0; s < shards; ++s) {
            parts << dir.filePath(QStringLiteral("part%1.json").arg(s));
            r = runAgent(common + QStringList{QStringLiteral("--shard"), QStringLiteral("%1/%2").arg(s).arg(shards), QStringLiteral("--json"), parts.last()});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        }
        const QString merged = dir.filePath(QStringLiteral("merged.json"));
        r = runAgent(QStringList{QStringLiteral("merge")} + parts + QStringList{QStringLiteral("--json"), merged});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const QJsonObject a = readJson(one);
        const QJsonObject b = readJson(merged);
        QCOMPARE(b.value(QStringLiteral("nll_sum_exact")).toString(), a.value(QStringLiteral("nll_sum_exact")).toString());
        QCOMPARE(b.value(QStringLiteral("nll_sq_sum_exact")).toString(), a.value(QStringLiteral("nll_sq_sum_exact")).toString());
        QCOMPARE(b.value(QStringLiteral("tokens_scored")).toInteger(), a.value(QStringLiteral("tokens_scored")).toInteger());
        CPPL_COMPARE_BITS(b.value(QStringLiteral("ppl")).toDouble(), a.value(QStringLiteral("ppl")).toDouble());
        QCOMPARE(b.value(QStringLiteral("world_size")).toInt(), shards);
        // A missing or repeated shard is refused, never silently merged.
        r = runAgent(QStringList{QStringLiteral("merge")} + parts.mid(1));
        QCOMPARE(r.exitCode, int(kExitBadArguments));
        CPPL_VERIFY2(r.err == QStringLiteral("clusterppl-agent: shard 0/%1 is missing: every shard's result file is needed\n").arg(shards),
                 qPrintable(r.describe()));
        r = runAgent(QStringList{QStringLiteral("merge"), parts.first(), parts.first()});
        QCOMPARE(r.exitCode, int(kExitBadArguments));
        CPPL_VERIFY2(r.err == QStringLiteral("clusterppl-agent: %1: shard 0 is given twice\n").arg(parts.first()), qPrintable(r.describe()));
    }

    void exactSumDoesNotDependOnThreads()
    {
        // The property dynamic scheduling builds on: a batch's exact NLL sum has the same bits at 1, 2
        // and 3 threads (GEMMs split over rows/columns, never over k; no thread-split library reduction).
        // Context 256 and batch 3, so that every kernel really splits (LibTorch's cos split at T >= 124).
        QTemporaryDir dir;
        const QString model = makeCheckpoint(dir, QStringLiteral("m"), {QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa"),
                                                                        QStringLiteral("--hidden"), QStringLiteral("64"), QStringLiteral("--intermediate"),
                                                                        QStringLiteral("96"), QStringLiteral("--max-positions"), QStringLiteral("256")});
        QString first, firstSq;
        for (const char *threads : {"1", "2", "3"}) {
            const QString json = dir.filePath(QStringLiteral("t%1.json").arg(QLatin1String(threads)));
            const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), m_tokens,
                                              QStringLiteral("--context"), QStringLiteral("256"), QStringLiteral("--stride"), QStringLiteral("128"),
                                              QStringLiteral("--batch"), QStringLiteral("3"), QStringLiteral("--threads"), QLatin1String(threads),
                                              QStringLiteral("--json"), json, QStringLiteral("--quiet")});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            const QJsonObject j = readJson(json);
            QVERIFY(j.value(QStringLiteral("gemm")).toString().startsWith(QStringLiteral("native-")));
            QCOMPARE(j.value(QStringLiteral("threads")).toInt(), QString::fromLatin1(threads).toInt());
            if (first.isEmpty()) {
                first = j.value(QStringLiteral("nll_sum_exact")).toString();
                firstSq = j.value(QStringLiteral("nll_sq_sum_exact")).toString();
                continue;
            }
            QCOMPARE(j.value(QStringLiteral("nll_sum_exact")).toString(), first);
            QCOMPARE(j.value(QStringLiteral("nll_sq_sum_exact")).toString(), firstSq);
        }
    }

    void threadsDefaultToTheRanksShareOfCpus()
    {
        // Ranks sharing a host share its cores: no --threads -> allowed CPUs / local ranks, and with
        // several local ranks each is pinned to its own slice (recorded in the result and the log).
        cpu_set_t set;
        CPU_ZERO(&set);
        QCOMPARE(sched_getaffinity(0, sizeof set, &set), 0);
        const int allowed = CPU_COUNT(&set);
        QTemporaryDir dir;
        const QString json = dir.filePath(QStringLiteral("r.json"));
        const QStringList common{QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                 QStringLiteral("--context"), QStringLiteral("32"), QStringLiteral("--max-windows"), QStringLiteral("2"),
                                 QStringLiteral("--json"), json};
        ProcessResult r = runAgent(common);
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QJsonObject j = readJson(json);
        QCOMPARE(j.value(QStringLiteral("threads")).toInt(), allowed);
        QCOMPARE(j.value(QStringLiteral("cpus")).toObject().value(QStringLiteral("allowed")).toInt(), allowed);
        QCOMPARE(j.value(QStringLiteral("cpus")).toObject().value(QStringLiteral("pinned")).toString(), QString());
        if (allowed < 2)
            CPPL_SKIP_MISSING("one allowed CPU: two local ranks cannot each get their own (CI machines have 2)");
        r = runAgent(common + QStringList{QStringLiteral("--local-rank"), QStringLiteral("1"), QStringLiteral("--local-world-size"), QStringLiteral("2")});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        j = readJson(json);
        QCOMPARE(j.value(QStringLiteral("threads")).toInt(), allowed / 2);
        QCOMPARE(j.value(QStringLiteral("cpus")).toObject().value(QStringLiteral("local_ranks")).toInt(), 2);
        QVERIFY(!j.value(QStringLiteral("cpus")).toObject().value(QStringLiteral("pinned")).toString().isEmpty());
        CPPL_VERIFY2(r.err.contains(QStringLiteral("pinned to CPUs ")), qPrintable(r.err));
        // --threads wins over the default, and more threads than CPUs is said to be slower.
        r = runAgent(common + QStringList{QStringLiteral("--threads"), QString::number(allowed + 1)});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        j = readJson(json);
        QCOMPARE(j.value(QStringLiteral("threads")).toInt(), allowed + 1);
        QCOMPARE(j.value(QStringLiteral("cpus")).toObject().value(QStringLiteral("threads_from")).toString(),
                 QStringLiteral("--threads; more than this rank's %1 CPU%2 (%1 allowed / 1 local rank): its threads take turns, which is slower than %1")
                     .arg(allowed)
                     .arg(allowed > 1 ? QStringLiteral("s") : QString()));
        r = runAgent(common + QStringList{QStringLiteral("--threads"), QString::number(allowed)});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QCOMPARE(readJson(json).value(QStringLiteral("cpus")).toObject().value(QStringLiteral("threads_from")).toString(), QStringLiteral("--threads"));
    }

    void halfPrecisionDtypes()
    {
        // A bfloat16 forward pass with float32 log-softmax: close to float32, never NaN. float16 has no
        // CPU matrix multiply in LibTorch, so on the CPU it is refused up front with the reason.
        double reference = 0;
        for (const char *dtype : {"float32", "bfloat16"}) {
            const QString out = m_dir.filePath(QStringLiteral("dtype-%1.json").arg(QLatin1String(dtype)));
            const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                              QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--dtype"), QLatin1String(dtype),
                                              QStringLiteral("--quiet"), QStringLiteral("--json"), out});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            const QJsonObject j = readJson(out);
            QCOMPARE(j.value(QStringLiteral("dtype")).toString(), QLatin1String(dtype));
            const double ppl = j.value(QStringLiteral("ppl")).toDouble();
            if (reference == 0)
                reference = ppl;
            CPPL_VERIFY2(std::isfinite(ppl) && std::fabs(ppl - reference) <= 0.05 * reference,
                     qPrintable(QStringLiteral("%1: %2 vs float32 %3").arg(QLatin1String(dtype)).arg(ppl).arg(reference)));
        }
        const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                          QStringLiteral("--dtype"), QStringLiteral("float16"), QStringLiteral("--device"), QStringLiteral("cpu")});
        QCOMPARE(r.exitCode, int(kExitBadArguments));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("--dtype float16 needs a GPU")), qPrintable(r.describe()));
    }

    void libTorchHeadInChunks()
    {
        // LibTorch's path (--gemm blas) projects the scored rows onto the vocabulary a chunk at a
        // time (2^22 logits: 104 rows of this 40,000-word vocabulary, so a batch of 3 windows of 64
        // is a short chunk after whole ones). float32 is the float64 reference's perplexity within
        // 1e-6, bfloat16 within 5%; a run with a reference model (the model against itself) keeps
        // the bits of the run without one, and compares identical logits: KL 0, the same top token;
        // two ranks give the one-rank bits (at one thread each: LibTorch's CPU kernels, unlike the
        // agent's, may sum in another order with more threads).
        QTemporaryDir dir;
        const QString model = makeCheckpoint(dir, QStringLiteral("wide-vocab"), {QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa"),
                                                                                 QStringLiteral("--vocab"), QStringLiteral("40000"), QStringLiteral("--max-positions"),
                                                                                 QStringLiteral("64")});
        const QString tokens = cppl::test::writeRandomTokens(dir.filePath(QStringLiteral("tokens.u32")), 400, 40000, 3);
        const QStringList common{QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), tokens, QStringLiteral("--context"),
                                 QStringLiteral("64"), QStringLiteral("--protocol"), QStringLiteral("hf-sliding"), QStringLiteral("--batch"), QStringLiteral("3"),
                                 QStringLiteral("--gemm"), QStringLiteral("blas"), QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--quiet")};
        const auto eval = [&](const QString &name, const QStringList &more) {
            const QString out = dir.filePath(name + QStringLiteral(".json"));
            const ProcessResult r = runAgent(common + more + QStringList{QStringLiteral("--json"), out});
            if (r.exitCode != kExitOk)
                qWarning("%s", qPrintable(r.describe()));
            return r.exitCode == kExitOk ? readJson(out) : QJsonObject();
        };
        const QString ref = dir.filePath(QStringLiteral("ref.json"));
        const ProcessResult r = runReference(QStringLiteral("reference_ppl.py"), {QStringLiteral("--model"), model, QStringLiteral("--tokens"), tokens,
                                                                                 QStringLiteral("--json"), ref, QStringLiteral("--protocol"), QStringLiteral("hf-sliding"),
                                                                                 QStringLiteral("--context"), QStringLiteral("64")});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const double reference = readJson(ref).value(QStringLiteral("ppl")).toDouble();
        for (const char *dtype : {"float32", "bfloat16"}) {
            const QStringList d{QStringLiteral("--dtype"), QLatin1String(dtype)};
            const QJsonObject chunked = eval(QLatin1String(dtype), d);
            const QJsonObject whole = eval(QLatin1String(dtype) + QStringLiteral("-ref"), d + QStringList{QStringLiteral("--reference-model"), model, QStringLiteral("--reference-dtype"),
                                                                                                      QLatin1String(dtype)});
            QVERIFY(!chunked.isEmpty() && !whole.isEmpty());
            QVERIFY(chunked.value(QStringLiteral("gemm")).toString().startsWith(QStringLiteral("blas")));
            QCOMPARE(chunked.value(QStringLiteral("nll_sum_exact")).toString(), whole.value(QStringLiteral("nll_sum_exact")).toString());
            // Two ranks (run --standalone, Gloo): the one-rank bits.
            const QString two = dir.filePath(QLatin1String(dtype) + QStringLiteral("-2ranks.json"));
            const ProcessResult r2 = runAgent(QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"),
                                                          QStringLiteral("2"), QStringLiteral("--")}
                                              + common.mid(1) + d + QStringList{QStringLiteral("--json"), two, QStringLiteral("--timeout"), QStringLiteral("60")});
            CPPL_VERIFY2(r2.exitCode == kExitOk, qPrintable(r2.describe()));
            QCOMPARE(readJson(two).value(QStringLiteral("nll_sum_exact")).toString(), chunked.value(QStringLiteral("nll_sum_exact")).toString());
            QCOMPARE(readJson(two).value(QStringLiteral("world_size")).toInt(), 2);
            const QJsonObject cmp = whole.value(QStringLiteral("reference")).toObject();
            QCOMPARE(cmp.value(QStringLiteral("kld_max")).toDouble(-1), 0.0);
            QCOMPARE(cmp.value(QStringLiteral("same_top")).toDouble(), 1.0);
            const double ppl = chunked.value(QStringLiteral("ppl")).toDouble();
            const double bound = QLatin1String(dtype) == QLatin1String("float32") ? 1e-6 : 0.05; // perplexityMatchesFloat64Reference's, halfPrecisionDtypes'
            CPPL_VERIFY2(std::fabs(ppl - reference) <= bound * reference,
                         qPrintable(QStringLiteral("%1: %2 vs float64 %3").arg(QLatin1String(dtype)).arg(ppl, 0, 'g', 17).arg(reference, 0, 'g', 17)));
        }
    }

    void stagedUploadGivesTheSameBits()
    {
        // The staged upload a GPU's weights take (--weight-upload pinned, docs/speed.md "Loading"), run
        // on the CPU through CLUSTERPPL_TEST_STAGED_UPLOAD: LibTorch's path reads every weight in chunks
        // of 4 KiB through two buffers whose copies a thread makes late. The perplexity keeps the
        // bits of the run that reads the weights in place, in float32 and converted to bfloat16, and
        // the result says how the weights came (model.weight_upload).
        for (const char *dtype : {"float32", "bfloat16"}) {
            const QStringList common{QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                     QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--gemm"), QStringLiteral("blas"),
                                     QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--dtype"), QLatin1String(dtype), QStringLiteral("--quiet")};
            const QString inPlace = m_dir.filePath(QStringLiteral("in-place-%1.json").arg(QLatin1String(dtype)));
            const QString staged = m_dir.filePath(QStringLiteral("staged-%1.json").arg(QLatin1String(dtype)));
            ProcessResult r = runAgent(common + QStringList{QStringLiteral("--json"), inPlace});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            qputenv("CLUSTERPPL_TEST_STAGED_UPLOAD", "4096");
            r = runAgent(common + QStringList{QStringLiteral("--json"), staged});
            qunsetenv("CLUSTERPPL_TEST_STAGED_UPLOAD");
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            const QJsonObject a = readJson(inPlace), b = readJson(staged);
            QCOMPARE(b.value(QStringLiteral("nll_sum_exact")).toString(), a.value(QStringLiteral("nll_sum_exact")).toString());
            const QJsonObject host = a.value(QStringLiteral("model")).toObject().value(QStringLiteral("weight_upload")).toObject();
            QCOMPARE(host.value(QStringLiteral("method")).toString(), QStringLiteral("host"));
            const QJsonObject model = b.value(QStringLiteral("model")).toObject();
            const QJsonObject up = model.value(QStringLiteral("weight_upload")).toObject();
            CPPL_VERIFY2(up.value(QStringLiteral("method")).toString().contains(QStringLiteral("test queue")), qPrintable(QJsonDocument(up).toJson()));
            QCOMPARE(up.value(QStringLiteral("buffers")).toInt(), 2);
            QCOMPARE(up.value(QStringLiteral("chunk_bytes")).toInteger(), qint64(4096));
            QCOMPARE(up.value(QStringLiteral("bytes")).toInteger(), model.value(QStringLiteral("weight_bytes")).toInteger());
            QVERIFY2(up.value(QStringLiteral("chunks")).toInteger() >= up.value(QStringLiteral("bytes")).toInteger() / 4096, qPrintable(QJsonDocument(up).toJson()));
        }
    }

    void profileSaysWhereTheTimeGoes()
    {
        // --profile: two batches before the clock under LibTorch's profiler, summed by operator.
        // On LibTorch's path the products are ATen operators, so they are named with their calls;
        // the pass does not touch the result (the same exact sum as a run without it). Debian's
        // LibTorch has no Kineto: no Chrome trace, and the summary says why.
        const QStringList common{QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                 QStringLiteral("--context"), QStringLiteral("64"), QStringLiteral("--gemm"), QStringLiteral("blas"),
                                 QStringLiteral("--threads"), QStringLiteral("1"), QStringLiteral("--batch"), QStringLiteral("4"), QStringLiteral("--quiet")};
        const QString plain = m_dir.filePath(QStringLiteral("unprofiled.json")), profiled = m_dir.filePath(QStringLiteral("profiled.json"));
        const QString summary = m_dir.filePath(QStringLiteral("profile.json"));
        ProcessResult r = runAgent(common + QStringList{QStringLiteral("--json"), plain});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        r = runAgent(common + QStringList{QStringLiteral("--json"), profiled, QStringLiteral("--profile"), summary, QStringLiteral("--profile-batches"),
                                          QStringLiteral("2")});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QCOMPARE(readJson(profiled).value(QStringLiteral("nll_sum_exact")).toString(), readJson(plain).value(QStringLiteral("nll_sum_exact")).toString());
        CPPL_VERIFY2(r.err.contains(QStringLiteral("profile: 2 batches, ")), qPrintable(r.describe())); // said even with --quiet: asked for
        const QJsonObject p = readJson(summary);
        QCOMPARE(p.value(QStringLiteral("batches")).toInt(), 2);
        QCOMPARE(p.value(QStringLiteral("batch")).toInt(), 4);
        const QString first8 = m_dir.filePath(QStringLiteral("first8.json")); // the pass's windows: the first 2 batches of 4
        r = runAgent(common + QStringList{QStringLiteral("--json"), first8, QStringLiteral("--max-windows"), QStringLiteral("8")});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QCOMPARE(p.value(QStringLiteral("tokens")).toInteger(), readJson(first8).value(QStringLiteral("tokens_scored")).toInteger());
        QVERIFY(p.value(QStringLiteral("wall_seconds")).toDouble() > 0);
        const QJsonArray ops = p.value(QStringLiteral("ops")).toArray();
        QVERIFY(!ops.isEmpty());
        bool product = false;
        double previous = 1e300;
        for (const QJsonValue &v : ops) {
            const QJsonObject op = v.toObject();
            QVERIFY(op.value(QStringLiteral("calls")).toInteger() > 0);
            const double total = op.value(QStringLiteral("total_us")).toDouble();
            QVERIFY2(total <= previous, "sorted by total time, largest first");
            previous = total;
            const QString name = op.value(QStringLiteral("name")).toString();
            product = product || name == QStringLiteral("aten::mm") || name == QStringLiteral("aten::addmm") || name == QStringLiteral("aten::linear");
        }
        CPPL_VERIFY2(product, qPrintable(QJsonDocument(ops).toJson()));
        if (p.value(QStringLiteral("chrome_trace")).isString())
            QVERIFY(QFile::exists(p.value(QStringLiteral("chrome_trace")).toString()));
        else
            CPPL_VERIFY2(p.value(QStringLiteral("note")).toString().contains(QStringLiteral("no Chrome trace")), qPrintable(QJsonDocument(p).toJson()));

        // Two ranks: "{rank}" in the path gives each its file; without it rank 0 alone writes.
        for (const auto &[path, writers] : {std::pair{m_dir.filePath(QStringLiteral("prof-{rank}.json")), 2}, std::pair{m_dir.filePath(QStringLiteral("prof-one.json")), 1}}) {
            const QString two = m_dir.filePath(QStringLiteral("profiled-2.json"));
            r = runAgent(QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QStringLiteral("2"),
                                     QStringLiteral("--")}
                         + common.mid(1) + QStringList{QStringLiteral("--json"), two, QStringLiteral("--profile"), path, QStringLiteral("--timeout"), QStringLiteral("60")});
            CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
            QCOMPARE(readJson(two).value(QStringLiteral("nll_sum_exact")).toString(), readJson(plain).value(QStringLiteral("nll_sum_exact")).toString());
            CPPL_VERIFY2(r.err.count(QStringLiteral("profile: 3 batches, ")) == writers, qPrintable(r.describe())); // each writer says so
        }
        QCOMPARE(readJson(m_dir.filePath(QStringLiteral("prof-0.json"))).value(QStringLiteral("batches")).toInt(), 3);
        QCOMPARE(readJson(m_dir.filePath(QStringLiteral("prof-1.json"))).value(QStringLiteral("batches")).toInt(), 3);
        QCOMPARE(readJson(m_dir.filePath(QStringLiteral("prof-one.json"))).value(QStringLiteral("batches")).toInt(), 3);
    }

    void textWithRealTokenizer()
    {
        // WikiText-2 test through the GPT-2 tokenizer into a random GPT-2-shaped model.
        const QString shared = QStringLiteral(CPPL_SOURCE_DIR "/../shared/data");
        if (!QFile::exists(shared + QStringLiteral("/wikitext-2-raw/wiki.test.raw")))
            CPPL_SKIP_MISSING("../shared/data is not beside the checkout (CI and developer machines have it)");
        const QString text = shared + QStringLiteral("/wikitext-2-raw/wiki.test.raw");
        const QString tokenizer = shared + QStringLiteral("/tokenizers/gpt2/tokenizer.json");
        QTemporaryDir dir;
        const QString model = makeCheckpoint(dir, QStringLiteral("gpt2"), {QStringLiteral("--arch"), QStringLiteral("gpt2"), QStringLiteral("--vocab"),
                                                                          QStringLiteral("50257"), QStringLiteral("--hidden"), QStringLiteral("16"),
                                                                          QStringLiteral("--heads"), QStringLiteral("2"), QStringLiteral("--layers"),
                                                                          QStringLiteral("1"), QStringLiteral("--max-positions"), QStringLiteral("128")});
        // 1. Plain stream, hf-sliding: the same as the reference on the ids `tokenize` writes.
        const QString ids = dir.filePath(QStringLiteral("wiki.u32"));
        ProcessResult r = runAgent({QStringLiteral("tokenize"), QStringLiteral("--tokenizer"), tokenizer, QStringLiteral("--text"), text,
                                    QStringLiteral("--out"), ids, QStringLiteral("--bos"), QStringLiteral("never")});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const QString ours = dir.filePath(QStringLiteral("ours.json"));
        const QStringList window{QStringLiteral("--protocol"), QStringLiteral("hf-sliding"), QStringLiteral("--context"), QStringLiteral("128"),
                                 QStringLiteral("--max-windows"), QStringLiteral("60")};
        r = runAgent(QStringList{QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--text"), text, QStringLiteral("--tokenizer"),
                                 tokenizer, QStringLiteral("--bos"), QStringLiteral("never"), QStringLiteral("--quiet"), QStringLiteral("--json"), ours}
                     + window);
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const ProcessResult agentRun = r; // r is the reference's run below
        const QString theirs = dir.filePath(QStringLiteral("ref.json"));
        r = runReference(QStringLiteral("reference_ppl.py"),
                         QStringList{QStringLiteral("--model"), model, QStringLiteral("--tokens"), ids, QStringLiteral("--json"), theirs} + window);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QJsonObject a = readJson(ours);
        const QJsonObject b = readJson(theirs);
        QCOMPARE(a.value(QStringLiteral("tokens_scored")).toInteger(), b.value(QStringLiteral("tokens_scored")).toInteger());
        // A random model over 50257 ids has PPL ~2e6 (mean NLL ~14.6 nats); float32 log-softmax then
        // differs from the float64 reference by ~2e-6 relative in PPL, hence 1e-5 here (1e-6 above).
        QVERIFY(std::fabs(a.value(QStringLiteral("ppl")).toDouble() - b.value(QStringLiteral("ppl")).toDouble()) <= 1e-5 * b.value(QStringLiteral("ppl")).toDouble());
        QCOMPARE(a.value(QStringLiteral("bytes")).toInteger(), qint64(1296370));
        QCOMPARE(a.value(QStringLiteral("words")).toInteger(), qint64(241213)); // len(re.split(r"\s+", text)) in Python
        const QJsonObject data = a.value(QStringLiteral("data")).toObject();
        QCOMPARE(data.value(QStringLiteral("bos")).toObject().value(QStringLiteral("mode")).toString(), QStringLiteral("never"));
        QCOMPARE(data.value(QStringLiteral("bos")).toObject().value(QStringLiteral("added")).toBool(), false);
        // The agent's stderr (--quiet: notes and warnings only) reports nothing truncated or dropped.
        CPPL_VERIFY2(!agentRun.err.contains(QStringLiteral("truncat")) && !agentRun.err.contains(QStringLiteral("dropped")), qPrintable(agentRun.describe()));
        // 2. WikiText articles, lm-eval-rolling: every id of every article scored exactly once, on
        // the first three articles (the file's 62 are counted in tst_text_dataset; all its 287k ids
        // through a 50257-word head took 10 CPU minutes and proved nothing more). The cut is before
        // the fourth top-level heading, a line matching ^ = [^=].* = $.
        QFile whole(text);
        QVERIFY(whole.open(QIODevice::ReadOnly));
        const QByteArray all = whole.readAll();
        const QRegularExpression heading(QStringLiteral("^ = [^=].* = $"), QRegularExpression::MultilineOption);
        const QString allText = QString::fromUtf8(all);
        QRegularExpressionMatchIterator it = heading.globalMatch(allText);
        qsizetype cut = -1;
        for (int n = 0; it.hasNext(); ++n) {
            const QRegularExpressionMatch m = it.next();
            if (n == 3) {
                cut = allText.left(m.capturedStart()).toUtf8().size();
                break;
            }
        }
        QVERIFY(cut > 0);
        const QString articles = dir.filePath(QStringLiteral("three-articles.raw"));
        QFile part(articles);
        QVERIFY(part.open(QIODevice::WriteOnly) && part.write(all.left(cut)) == cut);
        part.close();
        r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--text"), articles, QStringLiteral("--tokenizer"), tokenizer,
                      QStringLiteral("--dataset"), QStringLiteral("wikitext"), QStringLiteral("--protocol"), QStringLiteral("lm-eval-rolling"),
                      QStringLiteral("--context"), QStringLiteral("128"), QStringLiteral("--batch"), QStringLiteral("16"), QStringLiteral("--quiet"),
                      QStringLiteral("--json"), ours});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        a = readJson(ours);
        QCOMPARE(a.value(QStringLiteral("data")).toObject().value(QStringLiteral("documents")).toInt(), 3);
        QCOMPARE(a.value(QStringLiteral("bytes")).toInteger(), qint64(cut - 2)); // all but the file's leading " \n"
        QCOMPARE(a.value(QStringLiteral("tokens_scored")).toInteger(), a.value(QStringLiteral("tokens_total")).toInteger());
        QVERIFY(std::isfinite(a.value(QStringLiteral("word_perplexity")).toDouble()));
    }

    void resultJsonContract()
    {
        const QString out = m_dir.filePath(QStringLiteral("contract.json"));
        const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                          QStringLiteral("--context"), QStringLiteral("32"), QStringLiteral("--json"), out});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        QVERIFY(r.err.contains(QStringLiteral("BLAS: ")));      // which BLAS and how many threads
        QVERIFY(r.err.contains(QStringLiteral(" tok/s ")));     // progress with rate
        QVERIFY(r.err.contains(QStringLiteral("ETA ")));
        QVERIFY(r.out.trimmed().split(QLatin1Char('\n')).last().startsWith(QStringLiteral("Final estimate: PPL = ")));
        const QJsonObject j = readJson(out);
        for (const char *key : {"ppl", "ppl_stderr", "nll_sum", "nll_sum_exact", "tokens_scored", "tokens_total", "windows", "protocol", "context",
                                "stride", "batch", "dtype", "device", "threads", "blas", "seconds", "tokens_per_second", "model", "data",
                                "world_size", "version"})
            CPPL_VERIFY2(j.contains(QLatin1String(key)), key);
        QCOMPARE(j.value(QStringLiteral("tokens_total")).toInteger(), qint64(700));
        QCOMPARE(j.value(QStringLiteral("world_size")).toInt(), 1);
        // A GPU warms up before the clock (docs/models.md); the CPU has nothing to warm.
        QCOMPARE(j.value(QStringLiteral("warmup_seconds")).toDouble(-1), 0.0);
        QVERIFY(!r.err.contains(QStringLiteral("warm-up")));
        QVERIFY(j.value(QStringLiteral("nll_sum_exact")).toString().startsWith(QStringLiteral("xs1:")));
        const QJsonObject model = j.value(QStringLiteral("model")).toObject();
        QCOMPARE(model.value(QStringLiteral("arch")).toString(), QStringLiteral("llama"));
        QVERIFY(model.value(QStringLiteral("params")).toInteger() > 0);
        // The digests are the files' sha256 (libcrypto's or libsodium's, against Qt's own).
        const auto sha256Of = [](const QString &path) {
            QFile f(path);
            return f.open(QIODevice::ReadOnly) ? QString::fromLatin1(QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256).toHex())
                                               : QString();
        };
        const QJsonObject modelDigests = model.value(QStringLiteral("sha256")).toObject();
        QVERIFY(!modelDigests.isEmpty());
        for (auto it = modelDigests.begin(); it != modelDigests.end(); ++it)
            QCOMPARE(it.value().toString(), sha256Of(QDir(m_llama).filePath(QFileInfo(it.key()).fileName())));
        QCOMPARE(j.value(QStringLiteral("data")).toObject().value(QStringLiteral("sha256")).toString(), sha256Of(m_tokens));
    }

    void loadSpeedAndPeakMemory()
    {
        // The load's figures (issue 44): GB/s of the weight files, the time to the first batch's
        // scores, and the peak resident memory while loading, which for a checkpoint of 263 MB
        // (a tied bfloat16 embedding of Llama 3's 128,256 words) on LibTorch's path stays well under
        // its size: the weights are read from the mapping, not copied.
        QTemporaryDir dir;
        const QString model = makeCheckpoint(dir, QStringLiteral("big-vocab"), {QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--tied"),
                                                                                QStringLiteral("--vocab"), QStringLiteral("128256"), QStringLiteral("--hidden"),
                                                                                QStringLiteral("1024"), QStringLiteral("--heads"), QStringLiteral("8"),
                                                                                QStringLiteral("--layers"), QStringLiteral("1"), QStringLiteral("--dtype"),
                                                                                QStringLiteral("BF16"), QStringLiteral("--max-positions"), QStringLiteral("64")});
        const QString tokens = cppl::test::writeRandomTokens(dir.filePath(QStringLiteral("tokens.u32")), 200, 128256, 5);
        const QString out = dir.filePath(QStringLiteral("load.json"));
        const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), tokens, QStringLiteral("--context"),
                                          QStringLiteral("32"), QStringLiteral("--max-windows"), QStringLiteral("2"), QStringLiteral("--gemm"), QStringLiteral("blas"),
                                          QStringLiteral("--dtype"), QStringLiteral("bfloat16"), QStringLiteral("--quiet"), QStringLiteral("--json"), out});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const QJsonObject j = readJson(out);
        const QJsonObject m = j.value(QStringLiteral("model")).toObject();
        const qint64 files = m.value(QStringLiteral("weight_file_bytes")).toInteger();
        QVERIFY2(files > 250'000'000 && files < 300'000'000, qPrintable(QString::number(files)));
        const double load = j.value(QStringLiteral("load_seconds")).toDouble();
        const double gbps = j.value(QStringLiteral("load_gb_per_second")).toDouble();
        QVERIFY2(load > 0 && std::fabs(gbps - static_cast<double>(files) / load / 1e9) <= 1e-6 * gbps, qPrintable(QStringLiteral("%1 GB/s").arg(gbps)));
        const double first = j.value(QStringLiteral("first_token_seconds")).toDouble();
        QVERIFY2(first >= load && first < load + 60, qPrintable(QStringLiteral("first token %1 s, load %2 s").arg(first).arg(load)));
        const qint64 peak = m.value(QStringLiteral("rss_load_peak_bytes")).toInteger();
        QVERIFY2(peak >= m.value(QStringLiteral("rss_load_bytes")).toInteger() && peak < files / 4,
                 qPrintable(QStringLiteral("peak %1 bytes while loading %2").arg(peak).arg(files)));
    }

    void resultLine()
    {
        // --result-line: the result JSON once more, as the agent protocol's result line (docs/agent-lines.md)
        // after the final estimate; it decodes to the object --json wrote.
        const QString out = m_dir.filePath(QStringLiteral("result-line.json"));
        const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), m_llama, QStringLiteral("--tokens"), m_tokens,
                                          QStringLiteral("--context"), QStringLiteral("32"), QStringLiteral("--quiet"), QStringLiteral("--json"), out,
                                          QStringLiteral("--result-line")});
        CPPL_VERIFY2(r.exitCode == kExitOk, qPrintable(r.describe()));
        const QStringList lines = r.out.trimmed().split(QLatin1Char('\n'));
        QCOMPARE(lines.size(), 2);
        QVERIFY(lines[0].startsWith(QStringLiteral("Final estimate: PPL = ")));
        const cppl::lines::Decoded d = cppl::lines::decode(lines[1].toStdString());
        CPPL_VERIFY2(d.ok(), d.reason().c_str());
        QVERIFY(d.kind == cppl::lines::Kind::Result);
        QCOMPARE(d.version, cppl::lines::kVersion);
        const QJsonObject line = QJsonDocument::fromJson(QByteArray::fromStdString(std::get<cppl::lines::Result>(d.event).json)).object();
        QVERIFY(!line.contains(QStringLiteral("v"))); // the line's version, not the result's
        QCOMPARE(line, readJson(out));
        QVERIFY(line.value(QStringLiteral("nll_sum_exact")).toString().startsWith(QStringLiteral("xs1:")));
    }

    void badInputs_data()
    {
        QTest::addColumn<QString>("setup");
        QTest::addColumn<QStringList>("extra");
        QTest::addColumn<int>("exitCode");
        QTest::addColumn<QString>("message");
        QTest::addRow("missing model directory") << "missing" << QStringList{} << int(kExitBadModel) << "the model does not exist";
        QTest::addRow("config without model_type") << "no-model-type" << QStringList{} << int(kExitBadModel) << "no \"model_type\"";
        QTest::addRow("unsupported model_type") << "bert" << QStringList{} << int(kExitBadModel) << "(supported: llama, mistral, qwen2, qwen3, gemma2, gemma3_text, phi3, gpt2";
        QTest::addRow("missing tensor") << "drop-tensor" << QStringList{} << int(kExitBadModel)
                                        << "missing tensor \"model.layers.2.input_layernorm.weight\"";
        QTest::addRow("wrong shape") << "wrong-shape" << QStringList{} << int(kExitBadModel)
                                     << "tensor \"model.embed_tokens.weight\" has shape [97, 32], expected [97, 16] from config.json";
        QTest::addRow("truncated safetensors") << "truncate" << QStringList{} << int(kExitBadModel) << "lie outside the";
        QTest::addRow("header length beyond file") << "huge-header" << QStringList{} << int(kExitBadModel) << "is larger than the file";
        QTest::addRow("not TorchScript") << "fake-pt" << QStringList{} << int(kExitBadModel) << "not a TorchScript module";
        QTest::addRow("empty token file") << "empty-tokens" << QStringList{} << int(kExitBadData) << "the token file is empty";
        QTest::addRow("odd-length u16") << "odd-u16" << QStringList{} << int(kExitBadData) << "odd length for 16-bit tokens";
        QTest::addRow("id beyond vocabulary") << "big-id" << QStringList{} << int(kExitBadData) << "token 3 has id 500, outside the model's vocabulary of 97";
        QTest::addRow("context above max positions") << "ok" << QStringList{QStringLiteral("--context"), QStringLiteral("128")} << int(kExitBadArguments)
                                                     << "exceeds the model's max_position_embeddings 64";
        QTest::addRow("long context allowed") << "ok" << QStringList{QStringLiteral("--context"), QStringLiteral("128"), QStringLiteral("--allow-long-context")}
                                              << int(kExitOk) << "";
        QTest::addRow("bad dtype") << "ok" << QStringList{QStringLiteral("--dtype"), QStringLiteral("int8")} << int(kExitBadArguments) << "--dtype \"int8\"";
        QTest::addRow("cuda without CUDA") << "ok" << QStringList{QStringLiteral("--device"), QStringLiteral("cuda:0")} << int(kExitBadArguments)
                                           << "built without CUDA, or no GPU is visible";
    }
    void badInputs()
    {
        QFETCH(QString, setup);
        QFETCH(QStringList, extra);
        QFETCH(int, exitCode);
        QFETCH(QString, message);
        QTemporaryDir dir;
        QString model = dir.filePath(QStringLiteral("model"));
        QString tokens = m_tokens;
        auto copyModel = [&] {
            QDir().mkpath(model);
            for (const QString &f : QDir(m_llama).entryList(QDir::Files))
                QFile::copy(m_llama + QLatin1Char('/') + f, model + QLatin1Char('/') + f);
        };
        auto rewrite = [&](const QString &file, const QByteArray &text) {
            QFile f(model + QLatin1Char('/') + file);
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(text);
        };
        if (setup == QStringLiteral("ok")) {
            model = m_llama;
        } else if (setup == QStringLiteral("no-model-type")) {
            copyModel();
            rewrite(QStringLiteral("config.json"), R"({"vocab_size": 97})");
        } else if (setup == QStringLiteral("bert")) {
            copyModel();
            rewrite(QStringLiteral("config.json"), R"({"model_type": "bert"})");
        } else if (setup == QStringLiteral("drop-tensor") || setup == QStringLiteral("wrong-shape")) {
            // A config that promises more layers (a missing tensor) or a narrower model (a wrong shape)
            // than the weights hold.
            copyModel();
            QFile f(model + QStringLiteral("/config.json"));
            QVERIFY(f.open(QIODevice::ReadOnly));
            QJsonObject c = QJsonDocument::fromJson(f.readAll()).object();
            f.close();
            if (setup == QStringLiteral("drop-tensor")) {
                c[QStringLiteral("num_hidden_layers")] = 3;
            } else {
                c[QStringLiteral("hidden_size")] = 16;
                c[QStringLiteral("head_dim")] = 8;
            }
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(QJsonDocument(c).toJson());
        } else if (setup == QStringLiteral("truncate")) {
            copyModel();
            QFile f(model + QStringLiteral("/model.safetensors"));
            QVERIFY(f.resize(f.size() - 100));
        } else if (setup == QStringLiteral("huge-header")) {
            copyModel();
            QFile f(model + QStringLiteral("/model.safetensors"));
            QVERIFY(f.open(QIODevice::ReadWrite));
            f.write(QByteArray("\xff\xff\xff\x00\x00\x00\x00\x00", 8));
        } else if (setup == QStringLiteral("fake-pt")) {
            model = dir.filePath(QStringLiteral("model.pt"));
            QFile f(model);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("this is not a zip archive");
        } else if (setup == QStringLiteral("empty-tokens") || setup == QStringLiteral("odd-u16") || setup == QStringLiteral("big-id")) {
            model = m_llama;
            tokens = dir.filePath(setup == QStringLiteral("odd-u16") ? QStringLiteral("t.u16") : QStringLiteral("t.u32"));
            QFile f(tokens);
            QVERIFY(f.open(QIODevice::WriteOnly));
            if (setup == QStringLiteral("odd-u16"))
                f.write("abc");
            if (setup == QStringLiteral("big-id")) {
                const std::uint32_t ids[] = {1, 2, 3, 500, 4};
                f.write(reinterpret_cast<const char *>(ids), sizeof ids);
            }
        }
        const ProcessResult r = runAgent(QStringList{QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), tokens,
                                                     QStringLiteral("--context"), QStringLiteral("32"), QStringLiteral("--quiet")}
                                         + extra);
        CPPL_VERIFY2(r.exitCode == exitCode, qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.contains(message), qPrintable(r.describe()));
    }
};

QTEST_GUILESS_MAIN(TestAgentEval)
#include "tst_agent_eval.moc"
