// SPDX-License-Identifier: MIT
// Memory figures for telemetry: the process RSS read for real from /proc/self/statm (checked
// against /proc/self/status and against memory this test touches), the CUDA -> NVML device naming,
// and NVML loaded at run time — absent here or not, a missing library is a reason, never an error.
// With a GPU and its driver (label gpu, tst_gpu_stats_gpu: this file with CPPL_GPU_TEST=1) the
// NVML figures are checked against nvidia-smi. Against the fake CUDA runtime and NVML (tests/fakes;
// tst_gpu_stats_fake: CPPL_GPU_TEST=2, CPPL_FAKE_GPU_TEST=1), whose CUDA order is not NVML's, each CUDA device's
// NVML figures are its own (looked up by PCI bus id, not by index).
#include "telemetry/gpu_stats.h"
#include "telemetry/publisher.h"
#include "test_process.h"
#include "test_skip.h"

#if CPPL_GPU_TEST && !defined(Q_MOC_RUN)
#include "distributed/communicator.h"
#endif

#include <QFile>
#include <QTest>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

using namespace Qt::StringLiterals;
using namespace cppl::agent::telemetry;

namespace {

/// VmRSS of /proc/self/status in bytes, the kernel's own view of the same figure.
[[maybe_unused]] std::int64_t statusRss() // unused in the GPU build of this file (CPPL_GPU_TEST)
{
    QFile f(u"/proc/self/status"_s);
    if (!f.open(QIODevice::ReadOnly))
        return -1;
    for (const QByteArray &line : f.readAll().split('\n'))
        if (line.startsWith("VmRSS:"))
            return line.mid(6).trimmed().split(' ').front().toLongLong() * 1024;
    return -1;
}

} // namespace

class TestGpuStats : public QObject
{
    Q_OBJECT

private Q_SLOTS:
#if !CPPL_GPU_TEST // tst_gpu_stats (unit): everything but the GPU itself
    void rssIsTheProcessResidentSet()
    {
        const std::int64_t before = currentRssBytes();
        QVERIFY(before > 0);
        // The kernel's two views agree (within what a few pages of this test itself may move).
        QVERIFY2(std::llabs(before - statusRss()) < 4 << 20, qPrintable(u"statm %1, status %2"_s.arg(before).arg(statusRss())));
        // 64 MiB touched page by page become resident.
        constexpr std::size_t kBytes = std::size_t(64) << 20;
        auto block = std::make_unique<char[]>(kBytes);
        std::memset(block.get(), 0x5a, kBytes);
        const std::int64_t after = currentRssBytes();
        QVERIFY2(after - before >= std::int64_t(56) << 20, qPrintable(u"RSS grew by %1 bytes"_s.arg(after - before)));
        QVERIFY(block[kBytes - 1] == 0x5a);
    }

    void nvmlDeviceNaming_data()
    {
        QTest::addColumn<int>("cuda");
        QTest::addColumn<QByteArray>("visible"); // "-" : unset
        QTest::addColumn<int>("index");          // -1: none
        QTest::addColumn<QString>("uuid");
        QTest::addRow("unset, device 0") << 0 << QByteArray("-") << 0 << QString();
        QTest::addRow("unset, device 3") << 3 << QByteArray("-") << 3 << QString();
        QTest::addRow("empty, device 1") << 1 << QByteArray("") << 1 << QString();
        QTest::addRow("renumbered") << 1 << QByteArray("2,0") << 0 << QString();
        QTest::addRow("spaces") << 0 << QByteArray(" 5 , 6") << 5 << QString();
        QTest::addRow("by UUID") << 0 << QByteArray("GPU-8f2c1e3a-0000-4000-8000-000000000001,1") << -1 << u"GPU-8f2c1e3a-0000-4000-8000-000000000001"_s;
        QTest::addRow("MIG slice") << 0 << QByteArray("MIG-1a2b") << -1 << u"MIG-1a2b"_s;
        QTest::addRow("beyond the list") << 2 << QByteArray("0,1") << -1 << QString();
        QTest::addRow("not a device") << 0 << QByteArray("x") << -1 << QString();
        QTest::addRow("no device (-1)") << -1 << QByteArray("-") << -1 << QString();
    }
    void nvmlDeviceNaming()
    {
        QFETCH(int, cuda);
        QFETCH(QByteArray, visible);
        QFETCH(int, index);
        QFETCH(QString, uuid);
        const auto d = nvmlDeviceFor(cuda, visible == "-" ? nullptr : visible.constData());
        if (index < 0 && uuid.isEmpty()) {
            QVERIFY(!d);
            return;
        }
        QVERIFY(d);
        QCOMPARE(d->uuid, uuid.toStdString());
        if (index >= 0)
            QCOMPARE(d->index.value(), unsigned(index));
        else
            QVERIFY(!d->index);
    }

    void absentLibraryIsAReasonNotAnError()
    {
        std::string why;
        auto none = openNvml(NvmlDevice{0u, {}, {}}, &why, "libnvidia-ml-not-installed.so.1");
        QVERIFY(!none);
        QVERIFY2(why.find("libnvidia-ml-not-installed.so.1") != std::string::npos, why.c_str());
        // A library that loads but is not NVML (the C maths library): refused with the reason.
        why.clear();
        auto notNvml = openNvml(NvmlDevice{0u, {}, {}}, &why, "libm.so.6");
        QVERIFY(!notNvml);
        QVERIFY2(why.find("lacks the NVML functions") != std::string::npos, why.c_str());
    }

#elif defined(CPPL_FAKE_GPU_TEST) // tst_gpu_stats_fake (unit): the fake runtime counts CUDA devices 1,0
    void nvmlReadsTheCudaDeviceByBusId()
    {
        const char *order = std::getenv("CPPL_FAKE_CUDA_ORDER");
        QVERIFY2(order && std::string(order) == "1,0", "run through ctest: the fakes' LD_LIBRARY_PATH and script are the test's ENVIRONMENT");
        const auto devices = cppl::agent::dist::cudaDevices();
        QCOMPARE(devices.size(), std::size_t(2));
        for (int cuda = 0; cuda < 2; ++cuda) {
            const std::string bus = cppl::agent::dist::cudaPciBusId(cuda);
            QCOMPARE(devices[static_cast<std::size_t>(cuda)].pciBusId, bus);
            QCOMPARE(QString::fromStdString(bus), cuda == 0 ? u"0000:19:00.0"_s : u"0000:18:00.0"_s); // CUDA's order, reversed
            std::int64_t freeBytes = 0, totalBytes = 0;
            QVERIFY(cppl::agent::dist::cudaMemoryInfo(cuda, freeBytes, totalBytes));
            std::string why;
            auto gpu = openNvmlForCudaDevice(cuda, bus, &why);
            QVERIFY2(gpu, why.c_str());
            const auto s = gpu->sample();
            QVERIFY(s);
            QCOMPARE(s->totalBytes, totalBytes); // this device's memory, not the one at NVML index `cuda`
            // The fixture is one where the index would be wrong: NVML's device `cuda` is the other one.
            auto byIndex = openNvmlForCudaDevice(cuda, {}, &why);
            QVERIFY2(byIndex, why.c_str());
            QVERIFY(byIndex->sample().value().totalBytes != totalBytes);
        }
        // A bus NVML does not have is a reason, never an error.
        std::string why;
        QVERIFY(!openNvmlForCudaDevice(0, "0000:7f:00.0", &why));
        QVERIFY2(why.find("NVML has no device at PCI 0000:7f:00.0") != std::string::npos, why.c_str());
    }

#else // tst_gpu_stats_gpu (label gpu): skips with the reason where there is no GPU
    void gpuFiguresMatchNvidiaSmi()
    {
        // The real NVML path, where this machine has it (the gpu label runs this on GPU hosts).
        std::string why;
        const std::string bus = cppl::agent::dist::cudaPciBusId(0); // empty without a CUDA runtime: the CUDA_VISIBLE_DEVICES name
        auto gpu = openNvmlForCudaDevice(0, bus, &why);
        if (!gpu)
            CPPL_SKIP_NO_GPU("NVML cannot read CUDA device 0 here (no NVIDIA driver or GPU); checked: libnvidia-ml.so.1 absent or no device");
        const auto s = gpu->sample();
        QVERIFY(s);
        QVERIFY(s->totalBytes > 0 && s->usedBytes >= 0 && s->usedBytes <= s->totalBytes);
        if (s->utilizationPercent)
            QVERIFY(*s->utilizationPercent >= 0 && *s->utilizationPercent <= 100);
        const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
        const auto device = nvmlDeviceFor(0, visible);
        QVERIFY(device);
        // nvidia-smi -i takes a PCI bus id as well as an index or a UUID.
        const QString id = !bus.empty()            ? QString::fromStdString(bus)
                           : device->uuid.empty() ? QString::number(device->index.value_or(0))
                                                  : QString::fromStdString(device->uuid);
        const auto smi = cppl::test::runProcess(u"nvidia-smi"_s, {u"--query-gpu=memory.total"_s, u"--format=csv,noheader,nounits"_s,
                                                                 u"-i"_s, id},
                                                30000);
        if (smi.exitCode != 0)
            QFAIL(qPrintable(u"NVML answers but nvidia-smi does not: "_s + smi.describe()));
        const double mib = smi.out.trimmed().toDouble();
        QVERIFY2(std::abs(double(s->totalBytes) / (1 << 20) - mib) <= 1.0,
                 qPrintable(u"NVML total %1 bytes, nvidia-smi %2 MiB"_s.arg(s->totalBytes).arg(mib)));
    }
#endif
};

QTEST_GUILESS_MAIN(TestGpuStats)
#include "tst_gpu_stats.moc"
