// SPDX-License-Identifier: MIT
// The parts of the GPU path that run without a GPU: which device a rank takes (and the refusals),
// two ranks on one GPU, the collective self-test's words and its real runs over Gloo, and which
// CUDA runtime / NCCL files the agent loads (a library already in the process first).
#include "distributed/comm_check.h"
#include "gpu/batch_sizing.h"
#include "gpu/device_choice.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/host.h"

#include "test_paths.h"
#include "test_skip.h"
#include "test_verify.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstdint>
#include <optional>

using cppl::agent::DevicePlacement;
using namespace Qt::StringLiterals;

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
    p.start(cppl::test::kAgent, args);
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
    /// Issue 43, point 2: a host's "devices" list (--devices) chooses each local rank's GPU.
    void hostDevices_data()
    {
        QTest::addColumn<QString>("list");
        QTest::addColumn<int>("localRank");
        QTest::addColumn<int>("visible");
        QTest::addColumn<std::optional<int>>("requested");
        QTest::addColumn<int>("expected"); // -1: refused
        QTest::addColumn<QString>("messagePart");
        const std::optional<int> none;
        QTest::addRow("4,5,6,7: local rank 2 on GPU 6") << "4,5,6,7" << 2 << 8 << none << 6 << QString();
        QTest::addRow("2,3: local rank 0 on GPU 2") << "2,3" << 0 << 4 << none << 2 << QString();
        QTest::addRow("a device this process does not see") << "4,5" << 1 << 4 << none << -1
                                                             << QStringLiteral("--devices gives it GPU 5 but 4 GPUs visible");
        QTest::addRow("more local ranks than listed") << "0,1" << 2 << 4 << none << -1 << QStringLiteral("--devices lists 2 GPUs for 3 local ranks");
        QTest::addRow("with --device cuda:1") << "0,1" << 0 << 4 << std::optional<int>(1) << -1 << QStringLiteral("--devices both choose the GPU");
        QTest::addRow("listed twice") << "1,1" << 0 << 4 << none << -1 << QStringLiteral("device 1 is listed twice");
        QTest::addRow("not a list") << "1,,2" << 0 << 4 << none << -1 << QStringLiteral("expected device indices separated by commas");
    }
    void hostDevices()
    {
        QFETCH(QString, list);
        QFETCH(int, localRank);
        QFETCH(int, visible);
        QFETCH(std::optional<int>, requested);
        QFETCH(int, expected);
        QFETCH(QString, messagePart);
        try {
            cppl::agent::DevicePlacement p;
            p.hostDevices = cppl::agent::parseDeviceList(list.toStdString());
            p.localRank = localRank;
            p.localWorldSize = std::max(localRank + 1, 2);
            p.visibleDevices = visible;
            p.requested = requested;
            p.nccl = true;
            p.host = "node1";
            const int got = cppl::agent::chooseCudaDevice(p);
            CPPL_VERIFY2(messagePart.isEmpty(), qPrintable(QStringLiteral("expected a refusal, got %1").arg(got)));
            QCOMPARE(got, expected);
            QCOMPARE(cppl::agent::ranksPerCudaDevice(p), 1);
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(!messagePart.isEmpty() && QString::fromUtf8(e.what()).contains(messagePart), e.what());
        }
    }
    void deviceText_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<bool>("cudaAvailable");
        QTest::addColumn<bool>("cuda");
        QTest::addColumn<int>("index"); // -1: none, the rank's own (cuda:LOCAL_RANK)
        QTest::addColumn<QString>("messagePart");
        QTest::addRow("auto with a GPU: no index (not cuda:0 for every rank)") << "auto" << true << true << -1 << QString();
        QTest::addRow("auto without") << "auto" << false << false << -1 << QString();
        QTest::addRow("cuda") << "cuda" << true << true << -1 << QString();
        QTest::addRow("cuda:3") << "cuda:3" << true << true << 3 << QString();
        QTest::addRow("cpu with a GPU") << "cpu" << true << false << -1 << QString();
        QTest::addRow("cuda without") << "cuda:0" << false << false << -1 << QStringLiteral("built without CUDA, or no GPU is visible");
        QTest::addRow("cuda:x") << "cuda:x" << true << false << -1 << QStringLiteral("must be a number from 0");
        QTest::addRow("cuda:-1") << "cuda:-1" << true << false << -1 << QStringLiteral("must be a number from 0");
        QTest::addRow("cuda:") << "cuda:" << true << false << -1 << QStringLiteral("must be a number from 0");
        QTest::addRow("gpu") << "gpu" << true << false << -1 << QStringLiteral("is not one of cpu, cuda, cuda:N, auto");
        QTest::addRow("cudaa") << "cudaa" << true << false << -1 << QStringLiteral("is not one of");
    }
    void deviceText()
    {
        QFETCH(QString, text);
        QFETCH(bool, cudaAvailable);
        QFETCH(bool, cuda);
        QFETCH(int, index);
        QFETCH(QString, messagePart);
        if (!messagePart.isEmpty()) {
            try {
                (void)cppl::agent::parseDeviceText(text.toStdString(), cudaAvailable);
                QFAIL("expected a refusal");
            } catch (const cppl::ConfigError &e) {
                CPPL_VERIFY2(QString::fromUtf8(e.what()).contains(messagePart), e.what());
            }
            return;
        }
        const cppl::agent::DeviceRequest r = cppl::agent::parseDeviceText(text.toStdString(), cudaAvailable);
        QCOMPARE(r.cuda, cuda);
        QCOMPARE(r.index.value_or(-1), index);
        if (!cuda)
            return;
        // What the rank then takes: on a host of 4 GPUs with 4 NCCL ranks, auto and cuda give rank 2
        // its own GPU; cuda:N for all of them is refused.
        DevicePlacement p;
        p.localRank = 2;
        p.localWorldSize = 4;
        p.visibleDevices = 4;
        p.requested = r.index;
        p.nccl = true;
        p.host = "gpu-node-7";
        if (r.index) {
            QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)cppl::agent::chooseCudaDevice(p));
        } else {
            QCOMPARE(cppl::agent::chooseCudaDevice(p), 2);
        }
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
            CPPL_VERIFY2(m.contains(messagePart), qPrintable(m));
            CPPL_VERIFY2(m.contains(QStringLiteral("host gpu-node-7, local rank %1").arg(localRank)), qPrintable(m)); // where
        }
    }

    /// CLUSTERPPL_NCCL_SHARE_GPU=1 (a test mode): NCCL ranks share GPUs round robin as Gloo's do,
    /// each one NCCL's host of its own; without it the refusal names the switch.
    void shareGpuSwitch()
    {
        DevicePlacement p;
        p.localWorldSize = 4;
        p.visibleDevices = 1;
        p.nccl = true;
        p.host = "gpu-node-7";
        try {
            (void)cppl::agent::chooseCudaDevice(p);
            QFAIL("expected a refusal");
        } catch (const cppl::ConfigError &e) {
            CPPL_VERIFY2(QString::fromUtf8(e.what()).contains(QStringLiteral("CLUSTERPPL_NCCL_SHARE_GPU=1")), e.what());
        }
        p.shareGpu = true;
        for (int r = 0; r < 4; ++r) {
            p.localRank = r;
            QCOMPARE(cppl::agent::chooseCudaDevice(p), 0);
            QCOMPARE(cppl::agent::ranksPerCudaDevice(p), 4);
        }
        p.visibleDevices = 2; // 4 ranks on 2 GPUs: 0,1,0,1, two on each
        p.localRank = 3;
        QCOMPARE(cppl::agent::chooseCudaDevice(p), 1);
        QCOMPARE(cppl::agent::ranksPerCudaDevice(p), 2);
        p.requested = 1; // cuda:1 for every rank: allowed in the test mode
        QCOMPARE(cppl::agent::chooseCudaDevice(p), 1);
        p.shareGpu = false;
        QVERIFY_THROWS_EXCEPTION(cppl::ConfigError, (void)cppl::agent::chooseCudaDevice(p));

        // The environment: NCCL_HOSTID per rank and the socket transport, only where unset.
        qunsetenv("NCCL_HOSTID");
        qunsetenv("NCCL_NET");
        qunsetenv("CLUSTERPPL_NCCL_SHARE_GPU");
        QVERIFY(cppl::agent::prepareNcclGpuSharing(2).empty());
        QCOMPARE(QString::fromStdString(cppl::agent::ncclHostId()), QString::fromStdString(cppl::localHostName()));
        qputenv("CLUSTERPPL_NCCL_SHARE_GPU", "1");
        const std::string said = cppl::agent::prepareNcclGpuSharing(2);
        const QString id = QString::fromStdString(cppl::localHostName()) + QStringLiteral("-rank2");
        CPPL_VERIFY2(QString::fromStdString(said).contains(QStringLiteral("NCCL_HOSTID=") + id), said.c_str());
        QCOMPARE(qEnvironmentVariable("NCCL_HOSTID"), id);
        QCOMPARE(qEnvironmentVariable("NCCL_NET"), QStringLiteral("Socket"));
        QCOMPARE(QString::fromStdString(cppl::agent::ncclHostId()), id);
        QVERIFY(cppl::agent::prepareNcclGpuSharing(2).empty()); // said once: both are set now
        qputenv("NCCL_HOSTID", "mine");
        qunsetenv("NCCL_NET");
        const std::string second = cppl::agent::prepareNcclGpuSharing(3);
        QVERIFY(!QString::fromStdString(second).contains(QStringLiteral("NCCL_HOSTID")) && QString::fromStdString(second).contains(QStringLiteral("NCCL_NET=Socket")));
        QCOMPARE(qEnvironmentVariable("NCCL_HOSTID"), QStringLiteral("mine")); // the user's own is kept
        qunsetenv("NCCL_HOSTID");
        qunsetenv("NCCL_NET");
        qunsetenv("CLUSTERPPL_NCCL_SHARE_GPU");
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

    void ranksPerDevice_data()
    {
        QTest::addColumn<int>("localRank");
        QTest::addColumn<int>("localWorldSize");
        QTest::addColumn<int>("visible");
        QTest::addColumn<std::optional<std::string>>("cvd");
        QTest::addColumn<std::optional<int>>("requested");
        QTest::addColumn<bool>("nccl");
        QTest::addColumn<int>("expected");
        const std::optional<std::string> unset;
        const std::optional<int> none;
        QTest::addRow("one rank, one GPU") << 0 << 1 << 1 << unset << none << false << 1;
        QTest::addRow("nccl, 8 ranks on 8 GPUs") << 5 << 8 << 8 << unset << none << true << 1;
        QTest::addRow("gloo, 4 ranks on 1 GPU") << 2 << 4 << 1 << unset << none << false << 4;
        QTest::addRow("gloo, 5 ranks on 2 GPUs, rank on cuda:0") << 2 << 5 << 2 << unset << none << false << 3;
        QTest::addRow("gloo, 5 ranks on 2 GPUs, rank on cuda:1") << 3 << 5 << 2 << unset << none << false << 2;
        QTest::addRow("every rank its own GPU (Slurm binding)") << 3 << 4 << 1 << std::optional<std::string>("3") << none << true << 1;
        QTest::addRow("gloo, all ranks on cuda:1") << 0 << 3 << 2 << unset << std::optional<int>(1) << false << 3;
    }
    void ranksPerDevice()
    {
        QFETCH(int, localRank);
        QFETCH(int, localWorldSize);
        QFETCH(int, visible);
        QFETCH(std::optional<std::string>, cvd);
        QFETCH(std::optional<int>, requested);
        QFETCH(bool, nccl);
        QFETCH(int, expected);
        DevicePlacement p;
        p.localRank = localRank;
        p.localWorldSize = localWorldSize;
        p.visibleDevices = visible;
        p.cudaVisibleDevices = cvd;
        p.requested = requested;
        p.nccl = nccl;
        p.host = "gpu-node-7";
        QCOMPARE(cppl::agent::ranksPerCudaDevice(p), expected);
    }

    /// The default GPU batch from made-up GPUs and real models' shapes (config.json figures).
    void defaultBatch_data()
    {
        QTest::addColumn<double>("freeGiB");
        QTest::addColumn<qint64>("weightBytes");
        QTest::addColumn<int>("elementBytes");
        QTest::addColumn<QString>("model");
        QTest::addColumn<qint64>("width");
        QTest::addColumn<qint64>("windows");
        QTest::addColumn<int>("ranks");
        QTest::addColumn<int>("ranksPerDevice");
        QTest::addColumn<bool>("fused");
        QTest::addColumn<qint64>("batch");
        QTest::addColumn<QString>("limitedBy");
        QTest::addColumn<qint64>("memoryBatch");
        QTest::addRow("H200, Llama-2-7B bf16 at 4096: tokens per pass")
            << 140.0 << qint64(13'476'839'424) << 2 << u"llama-7b"_s << qint64(4096) << qint64(10000) << 1 << 1 << true << qint64(32)
            << u"tokens per pass"_s << qint64(128);
        QTest::addRow("24 GiB, Llama-3-8B bf16 at 8192: memory")
            << 23.0 << qint64(16'060'522'496) << 2 << u"llama3-8b"_s << qint64(8192) << qint64(10000) << 1 << 1 << true << qint64(2)
            << u"memory"_s << qint64(2);
        QTest::addRow("80 GiB, Llama-3-8B float32 at 2048, no fused attention")
            << 79.0 << qint64(32'121'044'992) << 4 << u"llama3-8b"_s << qint64(2048) << qint64(10000) << 1 << 1 << false << qint64(32)
            << u"memory"_s << qint64(32);
        QTest::addRow("H200, GPT-2 at 1024, 40 windows over 4 ranks")
            << 140.0 << qint64(497'759'232) << 2 << u"gpt2"_s << qint64(1024) << qint64(40) << 4 << 1 << true << qint64(10)
            << u"windows per rank"_s << qint64(1024);
        QTest::addRow("H200 shared by 4 gloo ranks, Llama-2-7B")
            << 140.0 << qint64(13'476'839'424) << 2 << u"llama-7b"_s << qint64(4096) << qint64(10000) << 4 << 4 << true << qint64(32)
            << u"memory"_s << qint64(32);
        QTest::addRow("the weights fill the GPU: one window")
            << 14.0 << qint64(13'476'839'424) << 2 << u"llama-7b"_s << qint64(4096) << qint64(10000) << 1 << 1 << true << qint64(1)
            << u"one window"_s << qint64(0);
    }
    void defaultBatch()
    {
        QFETCH(double, freeGiB);
        QFETCH(qint64, weightBytes);
        QFETCH(int, elementBytes);
        QFETCH(QString, model);
        QFETCH(qint64, width);
        QFETCH(qint64, windows);
        QFETCH(int, ranks);
        QFETCH(int, ranksPerDevice);
        QFETCH(bool, fused);
        QFETCH(qint64, batch);
        QFETCH(QString, limitedBy);
        QFETCH(qint64, memoryBatch);
        cppl::agent::BatchSizingInput in;
        in.freeBytes = static_cast<std::int64_t>(freeGiB * double(1 << 30));
        in.totalBytes = in.freeBytes + (std::int64_t{1} << 30);
        in.weightBytes = weightBytes;
        in.elementBytes = elementBytes;
        // hidden, intermediate, layers, heads, kv heads, head dim, vocabulary (their config.json)
        if (model == u"llama-7b"_s)
            in.shape = {4096, 11008, 32, 32, 32, 128, 32000};
        else if (model == u"llama3-8b"_s)
            in.shape = {4096, 14336, 32, 32, 8, 128, 128256};
        else
            in.shape = {768, 3072, 12, 12, 12, 0, 50257};
        in.width = width;
        in.scoredPerWindow = width;
        in.windows = windows;
        in.ranks = ranks;
        in.ranksPerDevice = ranksPerDevice;
        in.fusedAttention = fused;
        const cppl::agent::BatchChoice c = cppl::agent::chooseBatch(in);
        QCOMPARE(c.batch, batch);
        QCOMPARE(QString::fromStdString(c.limitedBy), limitedBy);
        QCOMPARE(c.memoryBatch, memoryBatch);
        QVERIFY(c.perWindowBytes > 0);
        QVERIFY(c.memoryBatch * c.perWindowBytes <= c.budgetBytes); // what memory allows fits the budget
        QVERIFY(c.memoryBatch == 0 || cppl::agent::floorPowerOfTwo(c.memoryBatch) == c.memoryBatch);
        QVERIFY(c.batch * width <= cppl::agent::kMaxTokensPerPass || c.batch == 1);
        const QString reason = QString::fromStdString(c.reason);
        CPPL_VERIFY2(reason.startsWith(u"batch %1 from free GPU memory: "_s.arg(batch)) && reason.contains(u"--batch N"_s), qPrintable(reason));
        if (limitedBy == u"tokens per pass"_s) // the line docs/models.md quotes
            QCOMPARE(reason, u"batch 32 from free GPU memory: 140.00 GiB free of 141.00 GiB, weights 12.55 GiB, ~0.50 GiB per window of "
                             "4096 tokens -> 128 windows fit; at most 131072 tokens per pass (--batch N sets it)"_s);
        if (limitedBy == u"one window"_s)
            CPPL_VERIFY2(reason.contains(u"not even one window fits"_s), qPrintable(reason));
        if (ranksPerDevice > 1)
            CPPL_VERIFY2(reason.contains(u"shared by %1 ranks"_s.arg(ranksPerDevice)), qPrintable(reason));
    }

    /// More free memory never gives a smaller batch; a shorter context never a smaller one either;
    /// float32 needs more per window than bfloat16; an unknown shape has no estimate.
    void defaultBatchMonotone()
    {
        cppl::agent::BatchSizingInput in;
        in.weightBytes = std::int64_t{2} << 30;
        in.shape = {2048, 5632, 22, 32, 4, 64, 32000}; // TinyLlama-1.1B
        in.width = 2048;
        in.scoredPerWindow = 2048;
        in.windows = 1 << 20;
        std::int64_t last = 0;
        for (std::int64_t gib = 1; gib <= 200; ++gib) {
            in.freeBytes = in.totalBytes = gib << 30;
            const std::int64_t b = cppl::agent::chooseBatch(in).batch;
            CPPL_VERIFY2(b >= last, qPrintable(u"%1 GiB: batch %2 after %3"_s.arg(gib).arg(b).arg(last)));
            last = b;
        }
        QCOMPARE(last, cppl::agent::kMaxTokensPerPass / 2048);
        in.freeBytes = std::int64_t{20} << 30;
        const std::int64_t at2048 = cppl::agent::chooseBatch(in).batch;
        in.width = in.scoredPerWindow = 512;
        QVERIFY(cppl::agent::chooseBatch(in).batch >= at2048);
        const std::int64_t bf16 = cppl::agent::windowFootprintBytes(in);
        in.elementBytes = 4;
        QVERIFY(cppl::agent::windowFootprintBytes(in) > bf16);
        in.shape = {};
        QCOMPARE(cppl::agent::windowFootprintBytes(in), std::int64_t{0});
    }

    /// Ranks agree on the smallest memory batch; the bounds are applied to it again.
    void agreedBatchBounds()
    {
        cppl::agent::BatchSizingInput in;
        in.freeBytes = in.totalBytes = std::int64_t{80} << 30;
        in.shape = {4096, 11008, 32, 32, 32, 128, 32000};
        in.width = in.scoredPerWindow = 512;
        in.windows = 1000;
        in.ranks = 2;
        cppl::agent::BatchChoice c = cppl::agent::chooseBatch(in);
        QCOMPARE(c.limitedBy, std::string("tokens per pass")); // 256 windows of 512
        QCOMPARE(c.batch, std::int64_t{256});
        c.memoryBatch = 64; // another rank's GPU is fuller
        cppl::agent::applyBatchBounds(in, c);
        QCOMPARE(c.batch, std::int64_t{64});
        QCOMPARE(c.limitedBy, std::string("memory"));
        QCOMPARE(cppl::agent::floorPowerOfTwo(1), std::int64_t{1});
        QCOMPARE(cppl::agent::floorPowerOfTwo(1000), std::int64_t{512});
        QCOMPARE(cppl::agent::floorPowerOfTwo(0), std::int64_t{0});
    }

    /// Issue 43, point 5: NCCL's buffers come at the first collective, after free memory was read;
    /// each communicator a rank moves data through is reserved: the sums' one-channel communicators
    /// kNcclSumCommunicatorBytes each, tensor parallelism's kNcclCommunicatorBytes.
    void ncclBuffersReserved()
    {
        cppl::agent::BatchSizingInput in;
        in.freeBytes = in.totalBytes = std::int64_t{8} << 30;
        in.weightBytes = std::int64_t{2} << 30;
        in.shape = {2048, 5632, 22, 32, 4, 64, 32000};
        in.width = in.scoredPerWindow = 2048;
        in.windows = 1 << 20;
        const cppl::agent::BatchChoice gloo = cppl::agent::chooseBatch(in);
        in.ncclCommunicators = 2;
        const cppl::agent::BatchChoice nccl = cppl::agent::chooseBatch(in);
        const double reserved = static_cast<double>(2 * cppl::agent::kNcclSumCommunicatorBytes) * cppl::agent::kBatchMemoryShare;
        QVERIFY(std::abs(static_cast<double>(gloo.budgetBytes - nccl.budgetBytes) - reserved) <= 1.0); // each rounded down
        QVERIFY(nccl.memoryBatch <= gloo.memoryBatch);
        // Tensor parallelism's group keeps NCCL's channel count, and its larger reserve.
        in.ncclWideCommunicators = 1;
        const cppl::agent::BatchChoice tp = cppl::agent::chooseBatch(in);
        const double wide = static_cast<double>(cppl::agent::kNcclCommunicatorBytes) * cppl::agent::kBatchMemoryShare;
        QVERIFY(std::abs(static_cast<double>(nccl.budgetBytes - tp.budgetBytes) - wide) <= 1.0);
        QVERIFY(cppl::agent::kNcclSumCommunicatorBytes < cppl::agent::kNcclCommunicatorBytes);
    }

    /// The default batch's path through the agent, on the CPU with made-up free memory: the batch
    /// and its reason in the result, two ranks agreeing on the smaller GPU's batch, and the same
    /// bits as one rank with that batch. Without the made-up figures a CPU run keeps batch 8.
    void defaultBatchThroughTheAgent()
    {
        const QString dir = QStringLiteral(CPPL_SOURCE_DIR);
        QTemporaryDir tmp;
        const QStringList eval{u"--model"_s, dir + u"/resources/models/shakespeare-byte-llama"_s, u"--text"_s,
                               dir + u"/resources/data/tinyshakespeare-heldout.txt"_s, u"--tokenizer"_s, u"bytes"_s, u"--protocol"_s,
                               u"llama.cpp"_s, u"--context"_s, u"256"_s, u"--max-windows"_s, u"48"_s, u"--device"_s, u"cpu"_s, u"--threads"_s, u"1"_s};
        auto run = [&](const QString &name, const QString &freeBytes, bool twoRanks) {
            QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
            if (!freeBytes.isEmpty())
                env.insert(u"CLUSTERPPL_TEST_GPU_FREE_BYTES"_s, freeBytes);
            const QString json = tmp.filePath(name + u".json"_s);
            QStringList args = twoRanks ? QStringList{u"run"_s, u"--standalone"_s, u"--nproc-per-node"_s, u"2"_s, u"--"_s, u"eval"_s}
                                        : QStringList{u"eval"_s};
            args << eval << u"--json"_s << json;
            if (twoRanks)
                args << u"--backend"_s << u"gloo"_s << u"--timeout"_s << u"60"_s;
            const Run r = agent(args, env);
            QFile f(json);
            if (r.exitCode != 0 || !f.open(QIODevice::ReadOnly))
                return std::make_pair(r, QJsonObject());
            return std::make_pair(r, QJsonDocument::fromJson(f.readAll()).object());
        };
        const auto [plainRun, plain] = run(u"plain"_s, {}, false);
        CPPL_VERIFY2(!plain.isEmpty(), qPrintable(describe(plainRun)));
        QCOMPARE(plain.value(u"batch"_s).toInt(), 8);
        QCOMPARE(plain.value(u"batch_from"_s).toObject().value(u"source"_s).toString(), u"default"_s);

        const QString roomy = QString::number(qint64(64) << 30), tight = QString::number((qint64(1) << 30) + (qint64(110) << 20));
        const auto [bigRun, big] = run(u"big"_s, roomy, false);
        CPPL_VERIFY2(!big.isEmpty(), qPrintable(describe(bigRun)));
        const QJsonObject bigFrom = big.value(u"batch_from"_s).toObject();
        QCOMPARE(bigFrom.value(u"source"_s).toString(), u"free memory"_s);
        QCOMPARE(bigFrom.value(u"limited_by"_s).toString(), u"windows per rank"_s); // 48 windows, one rank
        QCOMPARE(big.value(u"batch"_s).toInt(), 48);
        CPPL_VERIFY2(bigRun.err.contains(u"batch 48 from free GPU memory"_s), qPrintable(describe(bigRun)));

        const auto [smallRun, small] = run(u"small"_s, tight, false);
        CPPL_VERIFY2(!small.isEmpty(), qPrintable(describe(smallRun)));
        const QJsonObject smallFrom = small.value(u"batch_from"_s).toObject();
        QCOMPARE(smallFrom.value(u"limited_by"_s).toString(), u"memory"_s);
        const int batch = small.value(u"batch"_s).toInt();
        CPPL_VERIFY2(batch >= 2 && batch < 24 && (batch & (batch - 1)) == 0, qPrintable(QString::number(batch)));
        QVERIFY(smallFrom.value(u"per_window_bytes"_s).toDouble() * batch <= smallFrom.value(u"budget_bytes"_s).toDouble());

        // Rank 0 has room, rank 1 does not: both take rank 1's batch, and the bits are the one-rank run's.
        const auto [pairRun, pair] = run(u"pair"_s, roomy + u","_s + tight, true);
        CPPL_VERIFY2(!pair.isEmpty(), qPrintable(describe(pairRun)));
        QCOMPARE(pair.value(u"batch"_s).toInt(), batch);
        CPPL_VERIFY2(pair.value(u"batch_from"_s).toObject().value(u"reason"_s).toString().contains(u"smallest of every rank"_s),
                 qPrintable(QJsonDocument(pair).toJson()));
        QCOMPARE(pair.value(u"nll_sum_exact"_s).toString(), small.value(u"nll_sum_exact"_s).toString());
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
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(describe(r)));
        CPPL_VERIFY2(r.out.contains(QStringLiteral("world size %1").arg(ranks)), qPrintable(describe(r)));
        QCOMPARE(r.out.count(QStringLiteral(": exact,")), 3);
        CPPL_VERIFY2(r.out.contains(QStringLiteral("every word exact on every rank")), qPrintable(describe(r)));
    }

    void commCheckBadWords()
    {
        const Run r = agent({QStringLiteral("comm-check"), QStringLiteral("--words"), QStringLiteral("1,x")});
        QCOMPARE(r.exitCode, 2);
        CPPL_VERIFY2(r.err.contains(QStringLiteral("--words expects a comma-separated list")), qPrintable(describe(r)));
    }

    /// The CUDA runtime and NCCL the agent loads: one already in the process comes first
    /// (RTLD_NOLOAD), as a CUDA build of LibTorch has loaded its own; the paths and versions are reported.
    void libraryLoadOrder()
    {
        if (!CLUSTERPPL_HAVE_NCCL)
            CPPL_SKIP_NO_GPU("this build has no NCCL support (no CUDA toolkit at configure time), so it loads no GPU library");
        const Run plain = agent({QStringLiteral("preflight"), QStringLiteral("--json")});
        CPPL_VERIFY2(plain.exitCode == 0, qPrintable(describe(plain)));
        const QJsonObject libs = QJsonDocument::fromJson(plain.out.toUtf8()).object().value(QStringLiteral("gpu_libraries")).toObject();
        const QString cudart = libs.value(QStringLiteral("cudart_path")).toString();
        CPPL_VERIFY2(cudart.contains(QStringLiteral("libcudart.so")), qPrintable(plain.out));
        CPPL_VERIFY2(libs.value(QStringLiteral("cudart_how")).toString() != QStringLiteral("already loaded (LibTorch's)"), qPrintable(plain.out));
        QVERIFY(libs.value(QStringLiteral("cuda_runtime_version")).toInt() >= 11000);
        CPPL_VERIFY2(libs.value(QStringLiteral("nccl_version")).toInt() >= 21800, qPrintable(plain.out)); // ncclCommSplit: 2.18
        QVERIFY(libs.value(QStringLiteral("nccl_path")).toString().contains(QStringLiteral("libnccl.so")));
        // ncclCommShrink (a lost rank's survivors, issue 16) is resolved exactly where the library has it.
        QCOMPARE(libs.value(QStringLiteral("nccl_shrink")).toBool(), libs.value(QStringLiteral("nccl_version")).toInt() >= 22700);

        // The same file, loaded before the agent's code runs (as LibTorch's own would be).
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("LD_PRELOAD"), cudart);
        const Run preloaded = agent({QStringLiteral("preflight"), QStringLiteral("--json")}, env);
        CPPL_VERIFY2(preloaded.exitCode == 0, qPrintable(describe(preloaded)));
        const QJsonObject again = QJsonDocument::fromJson(preloaded.out.toUtf8()).object().value(QStringLiteral("gpu_libraries")).toObject();
        QCOMPARE(again.value(QStringLiteral("cudart_how")).toString(), QStringLiteral("already loaded (LibTorch's)"));
        QCOMPARE(again.value(QStringLiteral("cudart_path")).toString(), cudart);

        const Run text = agent({QStringLiteral("preflight")});
        CPPL_VERIFY2(text.out.contains(QStringLiteral("CUDA runtime ")) && text.out.contains(QStringLiteral("NCCL 2.")), qPrintable(describe(text)));
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
            CPPL_VERIFY2(r.exitCode == 0 && r.out.contains(QStringLiteral("every word exact on every rank")), qPrintable(describe(r)));
            return;
        }
        QVERIFY(!why.isEmpty());
        CPPL_VERIFY2(r.exitCode != 0, qPrintable(describe(r)));
        CPPL_VERIFY2(r.err.contains(QStringLiteral("the nccl backend is unavailable")) && r.err.contains(why) && r.err.contains(QStringLiteral("--backend gloo")),
                 qPrintable(describe(r)));
    }

    /// Whether this agent can combine ranks over Gloo is in pre-flight's report, so that a plan
    /// that needs it is refused before a launch (pip's torch wheels carry no Gloo headers), and a
    /// run of several Gloo ranks without it fails at once on every rank, as a configuration error:
    /// found only when the communicators were made, it was one rank's failure, and under
    /// --on-rank-loss continue the others went on without it (seen with a CLUSTERPPL_WITH_GLOO=OFF
    /// build). CLUSTERPPL_TEST_NO_GLOO=1 stands in for such a build; this one has Gloo.
    void glooAvailability_data()
    {
        QTest::addColumn<bool>("without");
        QTest::newRow("this build") << false;
        QTest::newRow("without Gloo") << true;
    }
    void glooAvailability()
    {
        QFETCH(bool, without);
        QVERIFY(CLUSTERPPL_HAVE_GLOO);
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        if (without)
            env.insert(QStringLiteral("CLUSTERPPL_TEST_NO_GLOO"), QStringLiteral("1"));
        const Run pre = agent({QStringLiteral("preflight"), QStringLiteral("--json"), QStringLiteral("--backend"), QStringLiteral("gloo"),
                               QStringLiteral("--slots"), QStringLiteral("2")},
                              env);
        const QJsonObject gloo = QJsonDocument::fromJson(pre.out.toUtf8()).object().value(QStringLiteral("gloo")).toObject();
        QCOMPARE(gloo.value(QStringLiteral("available")).toBool(), !without);
        const QString why = gloo.value(QStringLiteral("reason")).toString();
        const Run text = agent({QStringLiteral("preflight")}, env);
        const QString first = text.out.section(QLatin1Char('\n'), 0, 0);
        const Run run = agent({QStringLiteral("run"), QStringLiteral("--standalone"), QStringLiteral("--nproc-per-node"), QStringLiteral("2"), QStringLiteral("--"),
                               QStringLiteral("eval"), QStringLiteral("--model"), cppl::test::kModel, QStringLiteral("--text"), cppl::test::kText,
                               QStringLiteral("--tokenizer"), QStringLiteral("bytes"), QStringLiteral("--max-windows"), QStringLiteral("8"),
                               QStringLiteral("--quiet")},
                              env);
        if (!without) {
            QVERIFY(why.isEmpty());
            CPPL_VERIFY2(pre.exitCode == 0, qPrintable(describe(pre)));
            CPPL_VERIFY2(!first.contains(QStringLiteral("gloo")), qPrintable(first));
            CPPL_VERIFY2(run.exitCode == 0, qPrintable(describe(run)));
            return;
        }
        CPPL_VERIFY2(why.contains(QStringLiteral("--gloo-include")), qPrintable(why));
        CPPL_VERIFY2(pre.exitCode != 0 && pre.out.contains(QStringLiteral("backend gloo with 2 slots on ")), qPrintable(describe(pre)));
        CPPL_VERIFY2(first.endsWith(QStringLiteral(", gloo unavailable (built without Gloo's headers)")), qPrintable(first));
        // Both ranks refuse before the rendezvous, with the configuration error's exit status; no
        // rank is "lost" and nothing is evaluated.
        CPPL_VERIFY2(run.exitCode == 2, qPrintable(describe(run)));
        for (const char *rank : {"[rank 1] clusterppl-agent: rank 1: backend gloo with 2 ranks: ", "clusterppl-agent: rank 0: backend gloo with 2 ranks: "})
            CPPL_VERIFY2(run.err.contains(QLatin1String(rank) + why), qPrintable(describe(run)));
        CPPL_VERIFY2(!run.out.contains(QStringLiteral("Final estimate")) && !run.err.contains(QStringLiteral("recovered")), qPrintable(describe(run)));
    }
};

QTEST_GUILESS_MAIN(TestGpuSupport)
#include "tst_gpu_support.moc"
