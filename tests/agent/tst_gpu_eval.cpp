// SPDX-License-Identifier: MIT
// GPU evaluation: the CUDA forward pass must give the CPU's perplexity to float32 tolerance. Needs a
// CUDA build of LibTorch and a GPU; elsewhere it skips with the reason. Run on a GPU host with
// scripts/gpu-check.sh.
#include "reference_fixture.h"

#include "exit_codes.h"
#include "test_skip.h"

#include <ATen/Context.h>

#include <QTemporaryDir>
#include <QTest>

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
};

QTEST_GUILESS_MAIN(TestGpuEval)
#include "tst_gpu_eval.moc"
