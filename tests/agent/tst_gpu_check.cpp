// SPDX-License-Identifier: MIT
// scripts/gpu-check.sh without a GPU (CPPL_GPU_CHECK_CPU_ONLY=1), with the agent this build made:
// its CPU rows, Gloo self-tests and the default batch (made-up free memory) run for real, its
// table has every row, it exits 0; where this build has the fake CUDA runtime and NCCL
// (tests/fakes), the "1-GPU nccl" rows (issue 43's several NCCL ranks on one GPU) and the
// tensor-parallel NCCL rows run on them, so that their logic has run before a GPU is lent; and
// with a broken model its failing rows carry the agent's own error line (not the launcher's
// banner) and it exits non-zero.
#include "test_paths.h"

#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

namespace {

struct Run
{
    int exitCode = -1;
    QString out;
};

/// The fakes' directory, empty where this build has none (no nccl.h or CUDA headers).
#ifdef CPPL_FAKES_LIB
const QString kFakes = QStringLiteral(CPPL_FAKES_LIB);
#else
const QString kFakes;
#endif

Run gpuCheck(const QString &outDir, const QString &model = {}, const QString &fakes = {})
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("CPPL_GPU_CHECK_CPU_ONLY"), QStringLiteral("1"));
    if (!fakes.isEmpty())
        env.insert(QStringLiteral("CPPL_GPU_CHECK_FAKES"), fakes);
    env.insert(QStringLiteral("CPPL_GPU_CHECK_AGENT"), cppl::test::kAgent);
    env.insert(QStringLiteral("CPPL_GPU_CHECK_OUT"), outDir);
    env.insert(QStringLiteral("PYTHON"), QStringLiteral("/usr/bin/python3")); // Debian's python3-torch (install-deps.sh)
    if (!model.isEmpty())
        env.insert(QStringLiteral("CPPL_GPU_CHECK_MODEL"), model);
    QProcess p;
    p.setProcessEnvironment(env);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral("bash"), {QStringLiteral(CPPL_SOURCE_DIR "/scripts/gpu-check.sh")});
    if (!p.waitForFinished(900000)) {
        p.kill();
        p.waitForFinished();
        return {-1, QStringLiteral("timed out")};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAll())};
}

/// The table row for @p check: "result detail", or empty when the row is missing.
QString rowOf(const QString &out, const QString &check)
{
    const QString table = out.mid(out.indexOf(QStringLiteral("== gpu-check summary")));
    for (const QString &line : table.split(QLatin1Char('\n')))
        if (line.startsWith(check + QLatin1Char(' ')))
            return line.mid(30).trimmed();
    return {};
}

} // namespace

class TestGpuCheck : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void cpuSelfTestPasses()
    {
        QTemporaryDir dir;
        const Run r = gpuCheck(dir.path(), {}, kFakes);
        QVERIFY2(r.exitCode == 0, qPrintable(r.out));
        // Every line of the table is one row: a check's name, then ok, skip or FAIL in its column
        // (a detail that spans lines would break the table a GPU session reads).
        const QStringList table = r.out.mid(r.out.indexOf(QStringLiteral("== gpu-check summary"))).split(QLatin1Char('\n'), Qt::SkipEmptyParts);
        QVERIFY2(table.size() > 2, qPrintable(r.out));
        static const QRegularExpression rowShape(QStringLiteral("^\\S.{29} (ok   |skip |FAIL ) "));
        for (const QString &line : table.mid(2))
            QVERIFY2(rowShape.match(line).hasMatch(), qPrintable(QStringLiteral("not a row: \"%1\"\n%2").arg(line, r.out)));
        QVERIFY2(rowOf(r.out, QStringLiteral("eval cpu")).startsWith(QStringLiteral("ok    ppl ")), qPrintable(r.out));
        QVERIFY2(rowOf(r.out, QStringLiteral("gloo, 1 rank = eval cpu")).contains(QStringLiteral("nll_sum_exact identical")), qPrintable(r.out));
        QVERIFY2(rowOf(r.out, QStringLiteral("comm-check gloo, 2 ranks")) == QStringLiteral("ok    3 sizes exact"), qPrintable(r.out));
        QVERIFY2(rowOf(r.out, QStringLiteral("preflight")).startsWith(QStringLiteral("ok")), qPrintable(r.out));
        const QString autoBatch = rowOf(r.out, QStringLiteral("default batch, made-up GPU"));
        QVERIFY2(autoBatch.startsWith(QStringLiteral("ok    batch ")) && autoBatch.contains(QStringLiteral("from free memory (limited by memory)")),
                 qPrintable(r.out));
        // The lost-rank row's logic (the kill placed at 20% of the tokens, the checks) over Gloo.
        const QString lost = rowOf(r.out, QStringLiteral("lost rank gloo, 3 ranks (cpu)"));
        QVERIFY2(lost.startsWith(QStringLiteral("ok    3 ranks, rank 2 killed at ")) && lost.endsWith(QStringLiteral("nll_sum_exact identical, lost_ranks [2]")),
                 qPrintable(r.out));
        // Tensor parallelism over Gloo on the CPU: within 1e-6 of one rank.
        const QString tp = rowOf(r.out, QStringLiteral("tensor-parallel 2 (cpu, gloo)"));
        QVERIFY2(tp.startsWith(QStringLiteral("ok    ppl ")) && tp.contains(QStringLiteral("(limit 1e-6); weights per rank ")), qPrintable(r.out));
        for (const char *gpuRow : {"eval cuda fp32", "eval cuda bf16", "weights pinned = pageable", "eval cuda gqa", "default batch cuda", "gloo = nccl on cuda",
                                   "gloo 2 ranks on cuda = 1 rank", "nccl ranks > GPUs refused", "comm-check nccl", "lost rank nccl", "speed bf16 vs eager"})
            QVERIFY2(rowOf(r.out, QLatin1String(gpuRow)).startsWith(QStringLiteral("skip")), gpuRow);
        // Several NCCL ranks on one GPU (the test mode) and tensor parallelism over NCCL: on the
        // fakes, every row passes with what it checks on a GPU (exact sums, one rank's bits, the
        // regrouping, the stopped rank caught); without them every row is present and skipped.
        if (kFakes.isEmpty()) {
            for (const char *shareRow : {"1-GPU nccl comm-check 2 flat", "1-GPU nccl comm-check 2 hier", "1-GPU nccl comm-check 4 flat",
                                         "1-GPU nccl comm-check 4 hier", "1-GPU nccl comm memory", "1-GPU nccl eval 2 flat", "1-GPU nccl eval 4 hier",
                                         "1-GPU nccl lost rank of 3", "1-GPU nccl stopped rank", "tensor-parallel 2 cuda fp32",
                                         "tensor-parallel 2 cuda bf16", "tensor-parallel 2x2 cuda = 2x1"})
                QVERIFY2(rowOf(r.out, QLatin1String(shareRow)).startsWith(QStringLiteral("skip")), shareRow);
        } else {
            for (const QString &n : {QStringLiteral("2 flat"), QStringLiteral("2 hier"), QStringLiteral("4 flat"), QStringLiteral("4 hier")})
                QVERIFY2(rowOf(r.out, QStringLiteral("1-GPU nccl comm-check ") + n).startsWith(QStringLiteral("ok    ") + n.left(1) + QStringLiteral(" ranks on fake GPU 0, 4 sizes exact")),
                         qPrintable(r.out));
            QVERIFY2(rowOf(r.out, QStringLiteral("1-GPU nccl comm memory")).startsWith(QStringLiteral("ok    rank 0 ")), qPrintable(r.out));
            QVERIFY2(rowOf(r.out, QStringLiteral("1-GPU nccl eval 2 flat")).endsWith(QStringLiteral("nll_sum_exact = 1 rank, = gloo 2 ranks")), qPrintable(r.out));
            QVERIFY2(rowOf(r.out, QStringLiteral("1-GPU nccl eval 4 hier")).endsWith(QStringLiteral("nll_sum_exact = 1 rank, = gloo 2 ranks")), qPrintable(r.out));
            const QString lostNccl = rowOf(r.out, QStringLiteral("1-GPU nccl lost rank of 3"));
            QVERIFY2(lostNccl.startsWith(QStringLiteral("ok    3 ranks, rank 2 killed at ")) && lostNccl.contains(QStringLiteral("nll_sum_exact identical, lost_ranks [2]; "))
                         && lostNccl.endsWith(QStringLiteral("ncclCommShrink of the world communicator without 1 rank")),
                     qPrintable(r.out));
            // Tensor parallelism over NCCL (the rows a GPU runs on cuda): the one-rank float32 run
            // within 1e-6, bfloat16's within 2%, two groups of two with one group's bits.
            const QString where = QStringLiteral("2 ranks on fake GPU 0, model on the CPU: ppl ");
            QVERIFY2(rowOf(r.out, QStringLiteral("tensor-parallel 2 cuda fp32")).startsWith(QStringLiteral("ok    ") + where), qPrintable(r.out));
            QVERIFY2(rowOf(r.out, QStringLiteral("tensor-parallel 2 cuda bf16")).startsWith(QStringLiteral("ok    ") + where), qPrintable(r.out));
            QCOMPARE(rowOf(r.out, QStringLiteral("tensor-parallel 2x2 cuda = 2x1")),
                     QStringLiteral("ok    4 ranks on fake GPU 0, model on the CPU: nll_sum_exact identical"));
            static const QRegularExpression stopped(QStringLiteral("^ok    exit [1-9]\\d* \\d+ s after SIGSTOP of rank 2 of 3 \\(--timeout 5\\): (rank 2 .*stopped responding|did not finish within 5 s)"));
            QVERIFY2(stopped.match(rowOf(r.out, QStringLiteral("1-GPU nccl stopped rank"))).hasMatch(), qPrintable(r.out));
        }
        QVERIFY(!r.out.contains(QStringLiteral(" FAIL ")));
    }

    /// A fakes directory without the fake libraries: refused before any row runs, naming it.
    void fakesDirectoryChecked()
    {
        QTemporaryDir dir;
        const Run r = gpuCheck(dir.path(), {}, dir.path());
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(rowOf(r.out, QStringLiteral("fakes")).startsWith(QStringLiteral("FAIL  CPPL_GPU_CHECK_FAKES=") + dir.path() + QStringLiteral(": no libnccl.so.2")),
                 qPrintable(r.out));
        QVERIFY2(rowOf(r.out, QStringLiteral("eval cpu")).isEmpty(), qPrintable(r.out));
    }

    void failingRowsShowTheAgentsErrorLine()
    {
        QTemporaryDir dir;
        const QString missing = dir.filePath(QStringLiteral("no-such-model"));
        const Run r = gpuCheck(dir.path(), missing);
        QCOMPARE(r.exitCode, 1);
        const QString cpu = rowOf(r.out, QStringLiteral("eval cpu"));
        QVERIFY2(cpu.startsWith(QStringLiteral("FAIL  clusterppl-agent: ")) && cpu.contains(missing + QStringLiteral(": the model does not exist")),
                 qPrintable(r.out));
        const QString gloo = rowOf(r.out, QStringLiteral("gloo, 1 rank = eval cpu"));
        QVERIFY2(gloo.startsWith(QStringLiteral("FAIL  clusterppl-agent: rank 0: ")) && !gloo.contains(QStringLiteral("local ranks, store")),
                 qPrintable(r.out));
        // The rows that do not depend on the model still pass: one failure does not hide the rest.
        QVERIFY2(rowOf(r.out, QStringLiteral("comm-check gloo, 2 ranks")).startsWith(QStringLiteral("ok")), qPrintable(r.out));
    }
};

QTEST_GUILESS_MAIN(TestGpuCheck)
#include "test_paths.h"
#include "tst_gpu_check.moc"
