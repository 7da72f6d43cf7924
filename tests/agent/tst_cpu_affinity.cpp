// SPDX-License-Identifier: MIT
// CPU pinning near memory (agent/lib/eval/cpu_affinity.h): a sysfs tree written by the test (two
// NUMA nodes of eight CPUs, four GPUs, two on each) and each local rank's CPU set: GPU ranks on
// their GPU's node, split with the ranks whose GPUs are there; CPU-only ranks over the nodes in
// order; a topology that cannot be read or used falls back to the plain split with a note.
#include "eval/cpu_affinity.h"

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <string>
#include <vector>

using namespace Qt::StringLiterals;
using cppl::agent::CpuPlacement;

namespace {

void writeFile(const QString &path, const QByteArray &text)
{
    QVERIFY(QDir().mkpath(QFileInfo(path).path()));
    QFile f(path);
    QVERIFY2(f.open(QIODevice::WriteOnly), qPrintable(path));
    f.write(text + '\n');
}

std::vector<int> range(int first, int last)
{
    std::vector<int> out;
    for (int c = first; c <= last; ++c)
        out.push_back(c);
    return out;
}

} // namespace

class TestCpuAffinity : public QObject
{
    Q_OBJECT

    QTemporaryDir m_root;

    /// sys/ under m_root: nodes 0 (CPUs 0-7) and 1 (8-15); GPUs 18, 19 on node 0, 3b, 3c on node 1,
    /// 5e with numa_node -1 (firmware that does not say).
    void writeTree(const QString &root, bool oneNode)
    {
        writeFile(root + u"/sys/devices/system/node/node0/cpulist"_s, oneNode ? "0-15" : "0-7");
        if (!oneNode)
            writeFile(root + u"/sys/devices/system/node/node1/cpulist"_s, "8-15");
        writeFile(root + u"/sys/devices/system/node/possible"_s, oneNode ? "0" : "0-1"); // not a node directory
        for (const auto &[bus, node] : {std::pair{"18", "0"}, {"19", "0"}, {"3b", "1"}, {"3c", "1"}, {"5e", "-1"}})
            writeFile(root + u"/sys/bus/pci/devices/0000:"_s + QLatin1String(bus) + u":00.0/numa_node"_s, oneNode && node[0] == '1' ? "0" : node);
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_root.isValid());
        writeTree(m_root.filePath(u"two"_s), false);
        writeTree(m_root.filePath(u"one"_s), true);
    }

    void cpuLists()
    {
        QCOMPARE(cppl::agent::parseCpuList("0-3,8,10-11").value(), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
        QCOMPARE(cppl::agent::parseCpuList("").value(), std::vector<int>{}); // a node without CPUs
        QVERIFY(!cppl::agent::parseCpuList("3-1"));
        QVERIFY(!cppl::agent::parseCpuList("0-"));
        QVERIFY(!cppl::agent::parseCpuList("a"));
        std::string why;
        const auto nodes = cppl::agent::readNumaNodes(m_root.filePath(u"two"_s).toStdString(), &why);
        QCOMPARE(nodes.size(), std::size_t(2));
        QCOMPARE(nodes.at(1), range(8, 15));
        QCOMPARE(cppl::agent::pciNumaNode(m_root.filePath(u"two"_s).toStdString(), "0000:3b:00.0").value(), 1);
        QVERIFY(!cppl::agent::pciNumaNode(m_root.filePath(u"two"_s).toStdString(), "0000:5e:00.0")); // -1
        QVERIFY(!cppl::agent::pciNumaNode(m_root.filePath(u"two"_s).toStdString(), "0000:99:00.0")); // no such device
    }

    void eachRanksCpus_data()
    {
        QTest::addColumn<QString>("tree");           // "two", "one" or "none" (no sysfs at all)
        QTest::addColumn<QString>("allowed");        // the process's CPUs
        QTest::addColumn<QStringList>("gpus");       // bus of each local rank's GPU; empty: CPU-only ranks
        QTest::addColumn<QStringList>("pinned");     // each local rank's CPUs
        QTest::addColumn<QString>("note");           // part of the note; empty: none
        const QString all = u"0-15"_s;
        QTest::addRow("4 GPUs in bus order") << u"two"_s << all << QStringList{u"18"_s, u"19"_s, u"3b"_s, u"3c"_s}
                                             << QStringList{u"0-3"_s, u"4-7"_s, u"8-11"_s, u"12-15"_s} << QString();
        QTest::addRow("4 GPUs, nodes interleaved") << u"two"_s << all << QStringList{u"18"_s, u"3b"_s, u"19"_s, u"3c"_s}
                                                   << QStringList{u"0-3"_s, u"8-11"_s, u"4-7"_s, u"12-15"_s} << QString();
        QTest::addRow("3 GPUs, one alone on node 1") << u"two"_s << all << QStringList{u"18"_s, u"19"_s, u"3b"_s}
                                                     << QStringList{u"0-3"_s, u"4-7"_s, u"8-15"_s} << QString();
        QTest::addRow("2 GPUs on node 1") << u"two"_s << all << QStringList{u"3c"_s, u"3b"_s} << QStringList{u"8-11"_s, u"12-15"_s} << QString();
        QTest::addRow("GPUs, CPUs 6-7 not allowed") << u"two"_s << u"0-5,8-15"_s << QStringList{u"18"_s, u"19"_s, u"3b"_s, u"3c"_s}
                                                    << QStringList{u"0-2"_s, u"3-5"_s, u"8-11"_s, u"12-15"_s} << QString();
        QTest::addRow("4 CPU ranks") << u"two"_s << all << QStringList{} << QStringList{u"0-3"_s, u"4-7"_s, u"8-11"_s, u"12-15"_s} << QString();
        QTest::addRow("3 CPU ranks") << u"two"_s << all << QStringList{} << QStringList{u"0-3"_s, u"4-7"_s, u"8-15"_s} << QString();
        QTest::addRow("2 CPU ranks") << u"two"_s << all << QStringList{} << QStringList{u"0-7"_s, u"8-15"_s} << QString();
        QTest::addRow("1 rank: not pinned") << u"two"_s << all << QStringList{} << QStringList{QString()} << QString();
        // The fallbacks: the plain split (CPUs / local ranks over the allowed CPUs in order).
        QTest::addRow("a GPU's node unknown") << u"two"_s << all << QStringList{u"18"_s, u"3b"_s, u"19"_s, u"5e"_s}
                                              << QStringList{u"0-3"_s, u"4-7"_s, u"8-11"_s, u"12-15"_s} << u"the GPU at PCI 0000:5e:00.0 is not known"_s;
        QTest::addRow("one GPU unknown") << u"two"_s << all << QStringList{u"18"_s, QString(), u"19"_s, u"3c"_s}
                                         << QStringList{u"0-3"_s, u"4-7"_s, u"8-11"_s, u"12-15"_s} << u"the GPUs of 3 of 4 local ranks known"_s;
        QTest::addRow("no sysfs") << u"none"_s << all << QStringList{u"3b"_s, u"18"_s} << QStringList{u"0-7"_s, u"8-15"_s}
                                  << u"NUMA topology not read"_s;
        QTest::addRow("one node: plain, no note") << u"one"_s << all << QStringList{u"3b"_s, u"18"_s} << QStringList{u"0-7"_s, u"8-15"_s} << QString();
    }
    void eachRanksCpus()
    {
        QFETCH(QString, tree);
        QFETCH(QString, allowed);
        QFETCH(QStringList, gpus);
        QFETCH(QStringList, pinned);
        QFETCH(QString, note);
        CpuPlacement placement;
        placement.sysfsRoot = m_root.filePath(tree).toStdString();
        for (const QString &bus : gpus)
            placement.gpuBusIds.push_back(bus.isEmpty() ? std::string() : (u"0000:"_s + bus + u":00.0"_s).toStdString());
        const auto cpus = cppl::agent::parseCpuList(allowed.toStdString()).value();
        const int ranks = static_cast<int>(pinned.size());
        for (int r = 0; r < ranks; ++r) {
            const auto plan = cppl::agent::planCpusOn(cpus, r, ranks, 0, placement);
            const QString got = QString::fromStdString(cppl::agent::cpuListText(plan.pinned));
            QVERIFY2(got == pinned[r], qPrintable(u"local rank %1: pinned to \"%2\", expected \"%3\" (%4)"_s.arg(r).arg(got, pinned[r],
                                                                                                              QString::fromStdString(plan.why))));
            if (!plan.pinned.empty())
                QCOMPARE(plan.threads, static_cast<int>(plan.pinned.size())); // one thread per CPU of its own
            const QString gotNote = QString::fromStdString(plan.note);
            QVERIFY2(note.isEmpty() ? gotNote.isEmpty() : gotNote.contains(note) && gotNote.endsWith(u": plain split"_s), qPrintable(gotNote));
        }
    }

    void numaShareIsSaidInTheThreadsLine()
    {
        CpuPlacement placement;
        placement.sysfsRoot = m_root.filePath(u"two"_s).toStdString();
        placement.gpuBusIds = {"0000:18:00.0", "0000:19:00.0", "0000:3b:00.0"};
        const auto plan = cppl::agent::planCpusOn(range(0, 15), 2, 3, 0, placement);
        QCOMPARE(QString::fromStdString(plan.why), u"NUMA node 1 (its GPU's): 8 allowed CPUs / 1 local rank"_s);
        const auto more = cppl::agent::planCpusOn(range(0, 15), 0, 3, 6, placement);
        QCOMPARE(QString::fromStdString(more.why), u"--threads; more than this rank's 4 CPUs (NUMA node 0 (its GPU's): 8 allowed CPUs / 2 local "
                                                     u"ranks): its threads take turns, which is slower than 4"_s);
    }
};

QTEST_GUILESS_MAIN(TestCpuAffinity)
#include "tst_cpu_affinity.moc"
