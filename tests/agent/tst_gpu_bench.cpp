// SPDX-License-Identifier: MIT
// scripts/gpu-bench.sh without a GPU (CPPL_GPU_BENCH_CPU_ONLY=1), with the agent this build made:
// the tiny shape's checkpoint (bfloat16 shards with an index), the agent and the eager loop at two
// contexts on the CPU, the table with one row per context and every column filled, exit 0; and an
// agent that cannot run makes its rows fail with a non-zero exit.
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

Run gpuBench(const QString &outDir, const QString &agent)
{
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("CPPL_GPU_BENCH_CPU_ONLY"), QStringLiteral("1"));
    env.insert(QStringLiteral("CPPL_GPU_BENCH_AGENT"), agent);
    env.insert(QStringLiteral("CPPL_GPU_BENCH_OUT"), outDir + QStringLiteral("/out"));
    env.insert(QStringLiteral("CPPL_GPU_BENCH_MODELS"), outDir + QStringLiteral("/models"));
    env.insert(QStringLiteral("PYTHON"), QStringLiteral("/usr/bin/python3")); // Debian's python3-torch (install-deps.sh)
    QProcess p;
    p.setProcessEnvironment(env);
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral("bash"), {QStringLiteral(CPPL_SOURCE_DIR "/scripts/gpu-bench.sh")});
    if (!p.waitForFinished(600000)) {
        p.kill();
        p.waitForFinished();
        return {-1, QStringLiteral("timed out")};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAll())};
}

/// The summary table's line for the tiny shape at @p context, or empty.
QString rowOf(const QString &out, int context)
{
    const QString table = out.mid(out.indexOf(QStringLiteral("== gpu-bench summary")));
    const QRegularExpression start(QStringLiteral("^tiny\\s+%1\\s").arg(context));
    for (const QString &line : table.split(QLatin1Char('\n')))
        if (start.match(line).hasMatch())
            return line;
    return {};
}

} // namespace

class TestGpuBench : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void cpuSelfTestPasses()
    {
        QTemporaryDir dir;
        const Run r = gpuBench(dir.path(), cppl::test::kAgent);
        QVERIFY2(r.exitCode == 0, qPrintable(r.out));
        // The checkpoint as the real ones are stored: shards and their index.
        QVERIFY2(QFile::exists(dir.filePath(QStringLiteral("models/tiny/model.safetensors.index.json"))), qPrintable(r.out));
        QVERIFY(QFile::exists(dir.filePath(QStringLiteral("models/tiny/model-00001-of-00003.safetensors"))));
        // shape, context, plan/run batch, agent tok/s (MFU), eager tok/s (MFU, batch), ratio, peak a / e, load GB/s, TTFT
        const QRegularExpression row(QStringLiteral(
            "^tiny\\s+(\\d+)\\s+-/4\\s+([\\d,]+) \\(\\s*[\\d.]+%\\)\\s+([\\d,]+) \\(\\s*[\\d.]+%,\\s+4\\)\\s+([\\d.]+)\\s+[\\d.]+ /\\s+[\\d.]+\\s+([\\d.]+)\\s+([\\d.]+)$"));
        for (int context : {64, 128}) {
            const QString line = rowOf(r.out, context);
            const QRegularExpressionMatch m = row.match(line);
            QVERIFY2(m.hasMatch(), qPrintable(QStringLiteral("row for context %1: \"%2\"\n%3").arg(context).arg(line, r.out)));
            QVERIFY(m.captured(2).remove(QLatin1Char(',')).toDouble() > 0 && m.captured(3).remove(QLatin1Char(',')).toDouble() > 0);
            QVERIFY(m.captured(4).toDouble() > 0 && m.captured(5).toDouble() > 0 && m.captured(6).toDouble() > 0);
        }
        // The weights' upload, pinned against pageable (on the CPU both read the mapping): GB/s of
        // each run, the same bits.
        const QRegularExpression load(QStringLiteral("^load tiny\\s+pinned ([\\d.e+-]+) / ([\\d.e+-]+) GB/s \\(host: host [\\d.]+ s, wait [\\d.]+ s\\), "
                                                     "pageable ([\\d.e+-]+) / ([\\d.e+-]+) GB/s; same bits$"),
                                      QRegularExpression::MultilineOption);
        const QRegularExpressionMatch m = load.match(r.out);
        QVERIFY2(m.hasMatch(), qPrintable(r.out));
        for (int i = 1; i <= 4; ++i)
            QVERIFY2(m.captured(i).toDouble() > 0, qPrintable(m.captured(0)));
        // Each context's profile (the CPU's operators here): their largest shares of the pass.
        for (int context : {64, 128})
            QVERIFY2(QRegularExpression(QStringLiteral("^profile tiny\\s+%1\\s+2 batches, top: aten::\\S+ \\d+%").arg(context),
                                        QRegularExpression::MultilineOption)
                         .match(r.out)
                         .hasMatch(),
                     qPrintable(r.out));
        QVERIFY(!r.out.contains(QStringLiteral(" FAIL ")));
    }

    void failingAgentFailsItsRows()
    {
        QTemporaryDir dir;
        const Run r = gpuBench(dir.path(), QStringLiteral("/bin/false"));
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(rowOf(r.out, 64).contains(QStringLiteral(" FAIL  agent: ")), qPrintable(r.out));
    }
};

QTEST_GUILESS_MAIN(TestGpuBench)
#include "tst_gpu_bench.moc"
