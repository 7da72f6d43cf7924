// SPDX-License-Identifier: MIT
// GPU evaluation: the CUDA forward pass must give the CPU's perplexity to float32 tolerance. Needs a
// CUDA build of LibTorch and a GPU; elsewhere it skips with the reason. Run on a GPU host with
// scripts/gpu-check.sh.
#include "reference_fixture.h"

#include "exit_codes.h"
#include "test_skip.h"

#include <ATen/Context.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>

using namespace cppl::test;

class TestGpuEval : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void cudaMatchesCpu()
    {
        if (!at::hasCUDA())
            CPPL_SKIP_NO_GPU("no CUDA device visible to this LibTorch (none here, or a CPU-only LibTorch); label gpu, run "
                             "scripts/gpu-check.sh on a GPU host");
        QTemporaryDir dir;
        const QString model = dir.filePath(QStringLiteral("m"));
        ProcessResult r = runReference(QStringLiteral("make_checkpoint.py"),
                                       {QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa"), QStringLiteral("--out"), model});
        QVERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const QString tokens = dir.filePath(QStringLiteral("t.u32"));
        {
            QFile f(tokens);
            QVERIFY(f.open(QIODevice::WriteOnly));
            for (std::uint32_t i = 0; i < 5000; ++i) {
                const std::uint32_t id = (i * 2654435761U) % 97U; // deterministic ids below the vocabulary
                f.write(reinterpret_cast<const char *>(&id), sizeof id);
            }
        }
        double ppl[2] = {0, 0};
        int i = 0;
        for (const char *device : {"cpu", "cuda:0"}) {
            const QString out = dir.filePath(QStringLiteral("r%1.json").arg(i));
            r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), model, QStringLiteral("--tokens"), tokens, QStringLiteral("--quiet"),
                          QStringLiteral("--device"), QLatin1String(device), QStringLiteral("--context"), QStringLiteral("64"),
                          QStringLiteral("--max-windows"), QStringLiteral("64"), QStringLiteral("--json"), out});
            QVERIFY2(r.exitCode == cppl::agent::kExitOk, qPrintable(r.describe()));
            ppl[i++] = readJson(out).value(QStringLiteral("ppl")).toDouble();
        }
        QVERIFY2(std::fabs(ppl[0] - ppl[1]) <= 1e-4 * ppl[0], qPrintable(QStringLiteral("cpu %1 vs cuda %2").arg(ppl[0]).arg(ppl[1])));
    }

    /// On a GPU the default dtype is bfloat16, and the result says so (and that TF32 is moot).
    void bfloat16IsTheGpuDefault()
    {
        if (!at::hasCUDA())
            CPPL_SKIP_NO_GPU("no CUDA device visible to this LibTorch; label gpu, run scripts/gpu-check.sh on a GPU host");
        QTemporaryDir dir;
        const QString out = dir.filePath(QStringLiteral("r.json"));
        const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), embeddedModel(), QStringLiteral("--text"), heldOut(),
                                          QStringLiteral("--tokenizer"), QStringLiteral("bytes"), QStringLiteral("--max-windows"), QStringLiteral("16"),
                                          QStringLiteral("--device"), QStringLiteral("cuda"), QStringLiteral("--quiet"), QStringLiteral("--json"), out});
        QVERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QCOMPARE(readJson(out).value(QStringLiteral("dtype")).toString(), QStringLiteral("bfloat16"));
        QCOMPARE(readJson(out).value(QStringLiteral("tf32")).toBool(), false);
    }

    /// The same ranks on cuda give the same exact sum through Gloo and through NCCL, at world size
    /// min(GPUs, 2): the NCCL reduction itself, not only its staging.
    void ncclSumEqualsGloo()
    {
        const int gpus = usableNcclGpus();
        if (gpus == 0)
            CPPL_SKIP_NO_GPU("NCCL is not usable here (preflight says why); label gpu, run scripts/gpu-check.sh on a GPU host");
        QTemporaryDir dir;
        QString exact[2];
        int i = 0;
        for (const char *backend : {"gloo", "nccl"}) {
            const QString out = dir.filePath(QLatin1String(backend) + QStringLiteral(".json"));
            const ProcessResult r = runAgent({QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"),
                                              QString::number(std::min(gpus, 2)), QStringLiteral("--"), QStringLiteral("--model"), embeddedModel(),
                                              QStringLiteral("--text"), heldOut(), QStringLiteral("--tokenizer"), QStringLiteral("bytes"),
                                              QStringLiteral("--max-windows"), QStringLiteral("64"), QStringLiteral("--device"), QStringLiteral("cuda"),
                                              QStringLiteral("--backend"), QLatin1String(backend), QStringLiteral("--sync-every-tokens"), QStringLiteral("2000"),
                                              QStringLiteral("--quiet"), QStringLiteral("--json"), out});
            QVERIFY2(r.exitCode == 0, qPrintable(r.describe()));
            QCOMPARE(readJson(out).value(QStringLiteral("backend")).toString(), QLatin1String(backend));
            exact[i++] = readJson(out).value(QStringLiteral("nll_sum_exact")).toString();
        }
        QVERIFY(!exact[0].isEmpty());
        QCOMPARE(exact[1], exact[0]);
    }

    /// More NCCL ranks on a host than visible GPUs are refused before NCCL starts, saying why.
    void moreNcclRanksThanGpusRefused()
    {
        const int gpus = usableNcclGpus();
        if (gpus == 0)
            CPPL_SKIP_NO_GPU("NCCL is not usable here (preflight says why); label gpu, run scripts/gpu-check.sh on a GPU host");
        const ProcessResult r = runAgent({QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(gpus + 1),
                                          QStringLiteral("--"), QStringLiteral("comm-check"), QStringLiteral("--backend"), QStringLiteral("nccl"),
                                          QStringLiteral("--timeout"), QStringLiteral("60")});
        QVERIFY2(r.exitCode != 0, qPrintable(r.describe()));
        QVERIFY2(r.err.contains(QStringLiteral("NCCL needs a GPU of its own")), qPrintable(r.describe()));
    }

    /// The collective self-test over NCCL with every GPU a rank, flat and in groups of one.
    void ncclSelfTestExact()
    {
        const int gpus = usableNcclGpus();
        if (gpus == 0)
            CPPL_SKIP_NO_GPU("NCCL is not usable here (preflight says why); label gpu, run scripts/gpu-check.sh on a GPU host");
        for (const char *topology : {"flat", "hierarchical"}) {
            const ProcessResult r = runAgent({QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(gpus),
                                              QStringLiteral("--groups"), QStringLiteral("size:1"), QStringLiteral("--"), QStringLiteral("comm-check"),
                                              QStringLiteral("--backend"), QStringLiteral("nccl"), QStringLiteral("--topology"), QLatin1String(topology)});
            QVERIFY2(r.exitCode == 0 && r.out.contains(QStringLiteral("every word exact on every rank")), qPrintable(r.describe()));
        }
    }

private:
    static QString embeddedModel() { return QStringLiteral(CPPL_SOURCE_DIR "/resources/models/shakespeare-byte-llama"); }
    static QString heldOut() { return QStringLiteral(CPPL_SOURCE_DIR "/resources/data/tinyshakespeare-heldout.txt"); }
    /// GPUs the agent can drive with NCCL (its preflight), 0 when NCCL is unusable.
    static int usableNcclGpus()
    {
        const ProcessResult r = runAgent({QStringLiteral("preflight"), QStringLiteral("--json")});
        const QJsonObject j = QJsonDocument::fromJson(r.out.toUtf8()).object();
        if (!j.value(QStringLiteral("nccl")).toObject().value(QStringLiteral("available")).toBool())
            return 0;
        return static_cast<int>(j.value(QStringLiteral("cuda")).toObject().value(QStringLiteral("devices")).toArray().size());
    }
};

QTEST_GUILESS_MAIN(TestGpuEval)
#include "tst_gpu_eval.moc"
