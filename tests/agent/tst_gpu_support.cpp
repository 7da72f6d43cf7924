// SPDX-License-Identifier: MIT
// The parts of the GPU path that run without a GPU: which device a rank takes (and the refusals),
// two ranks on one GPU, the collective self-test's words and its real runs over Gloo, and which
// CUDA runtime / NCCL files the agent loads (a library already in the process first).
#include "distributed/comm_check.h"
#include "gpu/device_choice.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#include "test_skip.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>

#include <cmath>
#include <cstdint>
#include <optional>

using cppl::agent::DevicePlacement;

namespace {

struct Run
{
    int exitCode = -1;
    QString out, err;
};

Run agent(const QStringList &args, const QProcessEnvironment &env = QProcessEnvironment::systemEnvironment())
{
    QProcess p;
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(CPPL_AGENT_EXE), args);
    if (!p.waitForFinished(300000)) {
        p.kill();
        p.waitForFinished();
        return {-1, {}, QStringLiteral("timed out")};
    }
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

QString describe(const Run &r)
{
    return QStringLiteral("exit %1\nstdout: %2\nstderr: %3").arg(r.exitCode).arg(r.out, r.err);
}

} // namespace

Q_DECLARE_METATYPE(std::optional<int>)
Q_DECLARE_METATYPE(std::optional<std::string>)

class TestGpuSupport : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void chooseDevice_data()
    {
        QTest::addColumn<int>("localRank");
        QTest::addColumn<int>("localWorldSize");
        QTest::addColumn<int>("visible");
        QTest::addColumn<std::optional<std::string>>("cvd");
        QTest::addColumn<std::optional<int>>("requested");
        QTest::addColumn<bool>("nccl");
        QTest::addColumn<int>("expected"); // -1: refused
        QTest::addColumn<QString>("messagePart");
        const std::optional<std::string> unset;
        const std::optional<int> none;
        QTest::addRow("single process, one GPU") << 0 << 1 << 1 << unset << none << false << 0 << QString();
        QTest::addRow("rank 3 of 4 on 8 GPUs, nccl") << 3 << 4 << 8 << unset << none << true << 3 << QString();
        QTest::addRow("rank 7 of 8 on 8 GPUs, nccl") << 7 << 8 << 8 << unset << none << true << 7 << QString();
        QTest::addRow("each rank sees its own GPU (Slurm binding)") << 3 << 4 << 1 << std::optional<std::string>("3") << none << true << 0 << QString();
        QTest::addRow("CUDA_VISIBLE_DEVICES=2,3, rank 1 of 2") << 1 << 2 << 2 << std::optional<std::string>("2,3") << none << true << 1 << QString();
        QTest::addRow("4 nccl ranks, 2 GPUs: refused") << 1 << 4 << 2 << std::optional<std::string>("0,1") << none << true << -1
                                                      << QStringLiteral("backend nccl with 4 ranks on this host but 2 GPUs visible (CUDA_VISIBLE_DEVICES=0,1)");
        QTest::addRow("2 nccl ranks share the only GPU: refused") << 0 << 2 << 1 << unset << none << true << -1
                                                                 << QStringLiteral("1 GPU visible (CUDA_VISIBLE_DEVICES unset); NCCL needs a GPU of its own");
        QTest::addRow("4 gloo ranks, 2 GPUs: shared round robin") << 3 << 4 << 2 << unset << none << false << 1 << QString();
        QTest::addRow("no GPU visible") << 0 << 1 << 0 << std::optional<std::string>("") << none << false << -1
                                        << QStringLiteral("no GPU is visible to this process (CUDA_VISIBLE_DEVICES=\"\")");
        QTest::addRow("cuda:1 explicitly") << 0 << 1 << 2 << unset << std::optional<int>(1) << false << 1 << QString();
        QTest::addRow("cuda:2 with 2 GPUs: refused") << 0 << 1 << 2 << unset << std::optional<int>(2) << false << -1
                                                     << QStringLiteral("--device cuda:2 but 2 GPUs visible (CUDA_VISIBLE_DEVICES unset); use cuda:0 to cuda:1");
        QTest::addRow("cuda:0 for every nccl rank of 2 on 2 GPUs: refused") << 1 << 2 << 2 << unset << std::optional<int>(0) << true << -1
                                                                           << QStringLiteral("puts all 2 ranks of this host on one GPU");
        QTest::addRow("cuda:0 for a rank that sees one GPU, nccl") << 1 << 2 << 1 << std::optional<std::string>("5") << std::optional<int>(0) << true
                                                                  << 0 << QString();
    }
    void chooseDevice()
    {
        QFETCH(int, localRank);
        QFETCH(int, localWorldSize);
        QFETCH(int, visible);
        QFETCH(std::optional<std::string>, cvd);
        QFETCH(std::optional<int>, requested);
        QFETCH(bool, nccl);
        QFETCH(int, expected);
        QFETCH(QString, messagePart);
        DevicePlacement p;
        p.localRank = localRank;
        p.localWorldSize = localWorldSize;
        p.visibleDevices = visible;
        p.cudaVisibleDevices = cvd;
        p.requested = requested;
        p.nccl = nccl;
        p.host = "gpu-node-7";
        if (expected >= 0) {
            QCOMPARE(cppl::agent::chooseCudaDevice(p), expected);
            return;
        }
        try {
            (void)cppl::agent::chooseCudaDevice(p);
            QFAIL("expected a refusal");
        } catch (const cppl::ConfigError &e) {
            const QString m = QString::fromUtf8(e.what());
            QVERIFY2(m.contains(messagePart), qPrintable(m));
            QVERIFY2(m.contains(QStringLiteral("host gpu-node-7, local rank %1").arg(localRank)), qPrintable(m)); // where
        }
    }

    void sharedGpu()
    {
        using cppl::agent::RankGpu;
        QVERIFY(!cppl::agent::findSharedGpu({{"a", "0000:01:00.0"}, {"a", "0000:02:00.0"}, {"b", "0000:01:00.0"}}));
        const auto shared = cppl::agent::findSharedGpu({{"a", "0000:01:00.0"}, {"b", "0000:01:00.0"}, {"a", "0000:02:00.0"}, {"b", "0000:01:00.0"}});
        QVERIFY(shared);
        QCOMPARE(shared->first, 1);
        QCOMPARE(shared->second, 3);
    }

    /// The words are large (a float path would lose bits), signed both ways, distinct in their low
    /// bits, and every partial sum over ranks fits in int64; the expected sum is the plain one.
    void commCheckWords()
    {
        for (const int world : {1, 2, 3, 8, 256}) { // above 2^53 up to 256 ranks: beyond float64
            for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, std::int64_t{65535}, std::int64_t{1048576}}) {
                long double partial = 0;
                for (int r = 0; r < world; ++r) {
                    const std::int64_t w = cppl::agent::dist::commCheckWord(r, world, i);
                    QVERIFY(std::fabs(static_cast<double>(w)) > 0x1p53);
                    QCOMPARE(w < 0, (r + i) % 2 == 1);
                    partial += static_cast<long double>(w);
                    QVERIFY(std::fabs(static_cast<double>(partial)) <= 0x1p62);
                }
                QCOMPARE(static_cast<long double>(cppl::agent::dist::commCheckExpected(world, i)), partial);
            }
            QVERIFY(cppl::agent::dist::commCheckWord(0, world, 0) != cppl::agent::dist::commCheckWord(0, world, 2)); // low bits differ
        }
    }

    /// The self-test as the GPU check runs it, over Gloo: real processes, real sums.
    void commCheckGloo_data()
    {
        QTest::addColumn<int>("ranks");
        QTest::addColumn<QString>("topology");
        QTest::addRow("1 rank") << 1 << QStringLiteral("hierarchical");
        QTest::addRow("2 ranks, hierarchical") << 2 << QStringLiteral("hierarchical");
        QTest::addRow("3 ranks in 2 groups") << 3 << QStringLiteral("hierarchical");
        QTest::addRow("3 ranks, flat") << 3 << QStringLiteral("flat");
    }
    void commCheckGloo()
    {
        QFETCH(int, ranks);
        QFETCH(QString, topology);
        QStringList args{QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QString::number(ranks)};
        if (ranks == 3 && topology == QStringLiteral("hierarchical"))
            args << QStringLiteral("--groups") << QStringLiteral("0-1;2");
        args << QStringLiteral("--") << QStringLiteral("comm-check") << QStringLiteral("--backend") << QStringLiteral("gloo") << QStringLiteral("--topology")
             << topology << QStringLiteral("--words") << QStringLiteral("1,7,100003") << QStringLiteral("--timeout") << QStringLiteral("60");
        const Run r = agent(args);
        QVERIFY2(r.exitCode == 0, qPrintable(describe(r)));
        QVERIFY2(r.out.contains(QStringLiteral("world size %1").arg(ranks)), qPrintable(describe(r)));
        QCOMPARE(r.out.count(QStringLiteral(": exact,")), 3);
        QVERIFY2(r.out.contains(QStringLiteral("every word exact on every rank")), qPrintable(describe(r)));
    }

    void commCheckBadWords()
    {
        const Run r = agent({QStringLiteral("comm-check"), QStringLiteral("--words"), QStringLiteral("1,x")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(QStringLiteral("--words expects a comma-separated list")), qPrintable(describe(r)));
    }

    /// The CUDA runtime and NCCL the agent loads: one already in the process comes first
    /// (RTLD_NOLOAD), as a CUDA build of LibTorch has loaded its own; the paths and versions are reported.
    void libraryLoadOrder()
    {
        if (!CLUSTERPPL_HAVE_NCCL)
            CPPL_SKIP_NO_GPU("this build has no NCCL support (no CUDA toolkit at configure time), so it loads no GPU library");
        const Run plain = agent({QStringLiteral("preflight"), QStringLiteral("--json")});
        QVERIFY2(plain.exitCode == 0, qPrintable(describe(plain)));
        const QJsonObject libs = QJsonDocument::fromJson(plain.out.toUtf8()).object().value(QStringLiteral("gpu_libraries")).toObject();
        const QString cudart = libs.value(QStringLiteral("cudart_path")).toString();
        QVERIFY2(cudart.contains(QStringLiteral("libcudart.so")), qPrintable(plain.out));
        QVERIFY2(libs.value(QStringLiteral("cudart_how")).toString() != QStringLiteral("already loaded (LibTorch's)"), qPrintable(plain.out));
        QVERIFY(libs.value(QStringLiteral("cuda_runtime_version")).toInt() >= 11000);
        QVERIFY2(libs.value(QStringLiteral("nccl_version")).toInt() >= 21800, qPrintable(plain.out)); // ncclCommSplit: 2.18
        QVERIFY(libs.value(QStringLiteral("nccl_path")).toString().contains(QStringLiteral("libnccl.so")));

        // The same file, loaded before the agent's code runs (as LibTorch's own would be).
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LD_PRELOAD"), cudart);
        const Run preloaded = agent({QStringLiteral("preflight"), QStringLiteral("--json")}, env);
        QVERIFY2(preloaded.exitCode == 0, qPrintable(describe(preloaded)));
        const QJsonObject again = QJsonDocument::fromJson(preloaded.out.toUtf8()).object().value(QStringLiteral("gpu_libraries")).toObject();
        QCOMPARE(again.value(QStringLiteral("cudart_how")).toString(), QStringLiteral("already loaded (LibTorch's)"));
        QCOMPARE(again.value(QStringLiteral("cudart_path")).toString(), cudart);

        const Run text = agent({QStringLiteral("preflight")});
        QVERIFY2(text.out.contains(QStringLiteral("CUDA runtime ")) && text.out.contains(QStringLiteral("NCCL 2.")), qPrintable(describe(text)));
    }

    /// Without a usable GPU the nccl backend says why, from the runtime, and what to use instead;
    /// where NCCL is usable, the one-rank self-test over it is exact.
    void ncclSelfTestOrReason()
    {
        const Run pre = agent({QStringLiteral("preflight"), QStringLiteral("--json")});
        const QJsonObject j = QJsonDocument::fromJson(pre.out.toUtf8()).object();
        const bool usable = j.value(QStringLiteral("nccl")).toObject().value(QStringLiteral("available")).toBool();
        const QString why = j.value(QStringLiteral("nccl")).toObject().value(QStringLiteral("reason")).toString();
        const Run r = agent({QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QStringLiteral("1"), QStringLiteral("--"),
                             QStringLiteral("comm-check"), QStringLiteral("--backend"), QStringLiteral("nccl"), QStringLiteral("--timeout"), QStringLiteral("60")});
        if (usable) {
            QVERIFY2(r.exitCode == 0 && r.out.contains(QStringLiteral("every word exact on every rank")), qPrintable(describe(r)));
            return;
        }
        QVERIFY(!why.isEmpty());
        QVERIFY2(r.exitCode != 0, qPrintable(describe(r)));
        QVERIFY2(r.err.contains(QStringLiteral("the nccl backend is unavailable")) && r.err.contains(why) && r.err.contains(QStringLiteral("--backend gloo")),
                 qPrintable(describe(r)));
    }
};

QTEST_GUILESS_MAIN(TestGpuSupport)
#include "tst_gpu_support.moc"
