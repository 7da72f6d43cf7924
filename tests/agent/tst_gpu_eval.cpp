// SPDX-License-Identifier: MIT
// GPU evaluation: the CUDA forward pass must give the CPU's perplexity to float32 tolerance. Needs a
// CUDA build of LibTorch and a GPU; elsewhere it skips with the reason. Run on a GPU host with
// scripts/gpu-check.sh.
#include "reference_fixture.h"

#include "exit_codes.h"
#include "test_paths.h"
#include "test_skip.h"
#include "test_verify.h"

#include <ATen/Context.h>

#include <QDir>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>

#include <signal.h>

using namespace cppl::test;

class TestGpuEval : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // One row per family built on the LibTorch path (docs/models.md's table): mistral's sliding window
    // (6 of the context's 64 keys) goes to the fused attention as a mask.
    void cudaMatchesCpu_data()
    {
        QTest::addColumn<QStringList>("flags");
        QTest::addRow("llama, grouped-query") << QStringList{QStringLiteral("--arch"), QStringLiteral("llama"), QStringLiteral("--gqa")};
        QTest::addRow("qwen3") << QStringList{QStringLiteral("--arch"), QStringLiteral("qwen3")};
        QTest::addRow("mistral, window 6") << QStringList{QStringLiteral("--arch"), QStringLiteral("mistral")};
        QTest::addRow("gemma2, soft-capping, window 4") << QStringList{QStringLiteral("--arch"), QStringLiteral("gemma2")};
        QTest::addRow("gemma3, window 4, two rotary bases") << QStringList{QStringLiteral("--arch"), QStringLiteral("gemma3")};
        QTest::addRow("phi3, longrope, partial rotary") << QStringList{QStringLiteral("--arch"), QStringLiteral("phi3"), QStringLiteral("--rope-scaling"),
                                                                       QStringLiteral("longrope"), QStringLiteral("--partial-rotary"), QStringLiteral("0.5")};
        QTest::addRow("mixtral, tied router rows") << QStringList{QStringLiteral("--arch"), QStringLiteral("mixtral")};
        QTest::addRow("qwen2_moe, shared expert") << QStringList{QStringLiteral("--arch"), QStringLiteral("qwen2_moe")};
    }
    void cudaMatchesCpu()
    {
        QFETCH(QStringList, flags);
        if (!at::hasCUDA())
            CPPL_SKIP_NO_GPU("no CUDA device visible to this LibTorch (none here, or a CPU-only LibTorch); label gpu, run "
                             "scripts/gpu-check.sh on a GPU host");
        QTemporaryDir dir;
        const QString model = dir.filePath(QStringLiteral("m"));
        ProcessResult r = runReference(QStringLiteral("make_checkpoint.py"), flags + QStringList{QStringLiteral("--out"), model});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
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
            CPPL_VERIFY2(r.exitCode == cppl::agent::kExitOk, qPrintable(r.describe()));
            ppl[i++] = readJson(out).value(QStringLiteral("ppl")).toDouble();
        }
        CPPL_VERIFY2(std::fabs(ppl[0] - ppl[1]) <= 1e-4 * ppl[0], qPrintable(QStringLiteral("cpu %1 vs cuda %2").arg(ppl[0]).arg(ppl[1])));
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
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        QCOMPARE(readJson(out).value(QStringLiteral("dtype")).toString(), QStringLiteral("bfloat16"));
        QCOMPARE(readJson(out).value(QStringLiteral("tf32")).toBool(), false);
        // The warm-up batch ran before the clock, and the result says how long it took.
        QVERIFY(readJson(out).value(QStringLiteral("warmup_seconds")).toDouble() > 0);
    }

    /// The weights' two ways to the GPU (--weight-upload): pinned buffers with copies on a stream of
    /// their own (the default) and Tensor::to, the same bits, in bfloat16 (converted on the host from
    /// the float32 checkpoint) and float32; the result says which way they came.
    void pinnedUploadEqualsPageable()
    {
        if (!at::hasCUDA())
            CPPL_SKIP_NO_GPU("no CUDA device visible to this LibTorch; label gpu, run scripts/gpu-check.sh on a GPU host");
        QTemporaryDir dir;
        for (const char *dtype : {"bfloat16", "float32"}) {
            QString exact[2];
            int i = 0;
            for (const char *upload : {"pinned", "pageable"}) {
                const QString out = dir.filePath(QStringLiteral("%1-%2.json").arg(QLatin1String(dtype), QLatin1String(upload)));
                const ProcessResult r = runAgent({QStringLiteral("eval"), QStringLiteral("--model"), embeddedModel(), QStringLiteral("--text"), heldOut(),
                                                  QStringLiteral("--tokenizer"), QStringLiteral("bytes"), QStringLiteral("--max-windows"), QStringLiteral("16"),
                                                  QStringLiteral("--device"), QStringLiteral("cuda"), QStringLiteral("--dtype"), QLatin1String(dtype),
                                                  QStringLiteral("--weight-upload"), QLatin1String(upload), QStringLiteral("--quiet"), QStringLiteral("--json"), out});
                CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
                const QJsonObject up = readJson(out).value(QStringLiteral("model")).toObject().value(QStringLiteral("weight_upload")).toObject();
                QCOMPARE(up.value(QStringLiteral("method")).toString(), QLatin1String(upload));
                if (QLatin1String(upload) == QLatin1String("pinned"))
                    QVERIFY(up.value(QStringLiteral("chunks")).toInteger() > 0);
                exact[i++] = readJson(out).value(QStringLiteral("nll_sum_exact")).toString();
            }
            QCOMPARE(exact[0], exact[1]);
        }
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
            CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
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
        CPPL_VERIFY2(r.exitCode != 0, qPrintable(r.describe()));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("NCCL needs a GPU of its own")), qPrintable(r.describe()));
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
            CPPL_VERIFY2(r.exitCode == 0 && r.out.contains(QStringLiteral("every word exact on every rank")), qPrintable(r.describe()));
        }
    }

    /// --on-rank-loss continue over NCCL (issue 16): 2 or 3 ranks, one GPU each; the last rank,
    /// slowed so that the run lasts, is killed with SIGKILL once rank 0 reports 20% of the tokens.
    /// The survivors rebuild their communicators (ncclCommShrink, or a new one) and finish with the
    /// one-rank run's exact sum, the lost rank on record.
    void ncclSurvivesKilledRank()
    {
        const int gpus = usableNcclGpus();
        if (gpus < 2)
            CPPL_SKIP_NO_GPU("fewer than two GPUs NCCL can use (one per rank; a lost rank needs a survivor besides rank 0); label gpu, "
                             "run scripts/gpu-check.sh on a host with two");
        const int n = std::min(gpus, 3), victim = n - 1;
        QTemporaryDir dir;
        const QStringList common{QStringLiteral("--model"), embeddedModel(), QStringLiteral("--text"), heldOut(), QStringLiteral("--tokenizer"),
                                 QStringLiteral("bytes"), QStringLiteral("--max-windows"), QStringLiteral("128"), QStringLiteral("--batch"),
                                 QStringLiteral("4"), QStringLiteral("--device"), QStringLiteral("cuda")};
        const QString oneJson = dir.filePath(QStringLiteral("one.json"));
        const ProcessResult one = runAgent(QStringList{QStringLiteral("eval")} + common + QStringList{QStringLiteral("--quiet"), QStringLiteral("--json"), oneJson});
        CPPL_VERIFY2(one.exitCode == 0, qPrintable(one.describe()));
        const QString json = dir.filePath(QStringLiteral("lost.json"));
        qputenv("CLUSTERPPL_TEST_SLOW_RANK", QByteArray::number(victim) + ":300");
        QProcess launcher;
        launcher.start(cppl::test::kAgent,
                       QStringList{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(n), QStringLiteral("--")}
                           + common
                           + QStringList{QStringLiteral("--backend"), QStringLiteral("nccl"), QStringLiteral("--schedule"), QStringLiteral("dynamic"),
                                         QStringLiteral("--on-rank-loss"), QStringLiteral("continue"), QStringLiteral("--sync-every-tokens"), QStringLiteral("1000"),
                                         QStringLiteral("--timeout"), QStringLiteral("60"), QStringLiteral("--json"), json});
        qunsetenv("CLUSTERPPL_TEST_SLOW_RANK");
        QVERIFY(launcher.waitForStarted());
        // Wait for the event: rank 0's round line with 20% of the tokens scored.
        QByteArray err;
        launcher.setReadChannel(QProcess::StandardError);
        const QRegularExpression progress(QStringLiteral("\\] ppl [0-9.]+  ([0-9]+)/([0-9]+) tokens"));
        auto reached = [&] {
            for (auto it = progress.globalMatch(QString::fromUtf8(err)); it.hasNext();) {
                const auto m = it.next();
                if (m.captured(1).toDouble() >= 0.2 * std::max(1.0, m.captured(2).toDouble()))
                    return true;
            }
            return false;
        };
        QElapsedTimer wait;
        wait.start();
        while (!reached() && wait.elapsed() < 240000 && launcher.state() == QProcess::Running)
            if (launcher.waitForReadyRead(1000))
                err += launcher.readAllStandardError();
        CPPL_VERIFY2(reached(), qPrintable(QString::fromUtf8(err + launcher.readAllStandardError())));
        const qint64 pid = rankPid(launcher.processId(), victim);
        CPPL_VERIFY2(pid > 0, "the victim rank's process was not found among the launcher's children");
        QCOMPARE(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
        const bool finished = launcher.waitForFinished(300000);
        if (!finished) {
            launcher.kill();
            launcher.waitForFinished();
        }
        err += launcher.readAllStandardError();
        CPPL_VERIFY2(finished && launcher.exitStatus() == QProcess::NormalExit && launcher.exitCode() == 0, qPrintable(QString::fromUtf8(err)));
        CPPL_VERIFY2(err.contains("nccl regrouping (epoch 1, " + QByteArray::number(n - 1) + " ranks): "), err.constData());
        const QJsonObject j = readJson(json);
        QCOMPARE(j.value(QStringLiteral("backend")).toString(), QStringLiteral("nccl"));
        QCOMPARE(j.value(QStringLiteral("nll_sum_exact")).toString(), readJson(oneJson).value(QStringLiteral("nll_sum_exact")).toString());
        QCOMPARE(j.value(QStringLiteral("tokens_scored")).toInteger(), readJson(oneJson).value(QStringLiteral("tokens_scored")).toInteger());
        const QJsonArray lost = j.value(QStringLiteral("lost_ranks")).toArray();
        QCOMPARE(lost.size(), 1);
        QCOMPARE(lost[0].toObject().value(QStringLiteral("rank")).toInt(), victim);
    }

    /// --tensor-parallel 2 over NCCL on cuda (two ranks sharing the GPU where there is one:
    /// CLUSTERPPL_NCCL_SHARE_GPU=1): the group's reductions bit-exact (comm-check), and float32 (TF32
    /// off) within 1e-6 relative PPL of one rank on cuda.
    void tensorParallelOverNccl()
    {
        const int gpus = usableNcclGpus();
        if (gpus == 0)
            CPPL_SKIP_NO_GPU("NCCL is not usable here (preflight says why); label gpu, run scripts/gpu-check.sh on a GPU host");
        if (gpus < 2)
            qputenv("CLUSTERPPL_NCCL_SHARE_GPU", "1");
        const QStringList launch{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QStringLiteral("2"),
                                 QStringLiteral("--")};
        ProcessResult r = runAgent(launch + QStringList{QStringLiteral("comm-check"), QStringLiteral("--backend"), QStringLiteral("nccl"),
                                                        QStringLiteral("--tensor-parallel"), QStringLiteral("2"), QStringLiteral("--timeout"), QStringLiteral("60")});
        CPPL_VERIFY2(r.exitCode == 0 && r.out.contains(QStringLiteral("every tensor-parallel reduction exact on every rank")), qPrintable(r.describe()));
        QTemporaryDir dir;
        const QStringList common{QStringLiteral("--model"), embeddedModel(), QStringLiteral("--text"), heldOut(), QStringLiteral("--tokenizer"),
                                 QStringLiteral("bytes"), QStringLiteral("--max-windows"), QStringLiteral("64"), QStringLiteral("--device"),
                                 QStringLiteral("cuda"), QStringLiteral("--dtype"), QStringLiteral("float32"), QStringLiteral("--tf32"),
                                 QStringLiteral("off"), QStringLiteral("--quiet"), QStringLiteral("--json")};
        const QString one = dir.filePath(QStringLiteral("one.json")), tp = dir.filePath(QStringLiteral("tp.json"));
        r = runAgent(QStringList{QStringLiteral("eval")} + common + QStringList{one});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        r = runAgent(launch + common + QStringList{tp, QStringLiteral("--backend"), QStringLiteral("nccl"), QStringLiteral("--tensor-parallel"),
                                                   QStringLiteral("2"), QStringLiteral("--timeout"), QStringLiteral("120")});
        qunsetenv("CLUSTERPPL_NCCL_SHARE_GPU");
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        const double a = readJson(one).value(QStringLiteral("ppl")).toDouble(), b = readJson(tp).value(QStringLiteral("ppl")).toDouble();
        qInfo("tensor-parallel 2 over NCCL, float32: relative PPL deviation %.3g from one rank", std::abs(a - b) / a);
        QVERIFY2(std::abs(a - b) <= 1e-6 * a, qPrintable(QStringLiteral("ppl %1 vs one rank's %2").arg(b, 0, 'g', 12).arg(a, 0, 'g', 12)));
    }

private:
    static QString embeddedModel() { return cppl::test::kModel; }
    static QString heldOut() { return cppl::test::kText; }
    /// The process of rank @p rank among @p launcher's children (its RANK= in /proc/PID/environ), 0 when none.
    static qint64 rankPid(qint64 launcher, int rank)
    {
        const QByteArray want = "RANK=" + QByteArray::number(rank);
        for (const qint64 pid : childrenOf(launcher))
            if (readFile(QStringLiteral("/proc/%1/environ").arg(pid)).split('\0').contains(want))
                return pid;
        return 0;
    }
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
