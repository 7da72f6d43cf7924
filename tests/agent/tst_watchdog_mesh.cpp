// SPDX-License-Identifier: MIT
// The watchdog mesh's link set (watchdog_mesh.h): bounded to the k lowest ranks (the candidates),
// O(world * k) links, the full mesh while k >= world - 1; and the open files a rank needs
// (fd_limit.h). The mesh's real runs: tst_distributed (survivesLossesWithTheHub, meshIsBounded).
#ifndef Q_MOC_RUN // moc cannot parse <chrono>, which watchdog_mesh.h includes; the test class needs none of it
#include "distributed/watchdog_mesh.h"
#endif
#include "fd_limit.h"

#include <QTest>

#include <algorithm>
#include <cstdint>
#include <vector>

using namespace cppl::agent;
using namespace cppl::agent::dist;

class TestWatchdogMesh : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void linkSet_data()
    {
        QTest::addColumn<int>("world");
        QTest::addColumn<int>("k");
        for (int world : {3, 5, 64, 1024})
            for (int k : {1, 2, kMeshCandidates, 5, 1024})
                QTest::addRow("world %d, k %d", world, k) << world << k;
    }
    void linkSet()
    {
        QFETCH(int, world);
        QFETCH(int, k);
        std::int64_t links = 0; // each link counted from both ends
        for (int r = 0; r < world; ++r) {
            const std::vector<int> peers = meshPeers(r, world, k);
            links += static_cast<std::int64_t>(peers.size());
            for (int q : peers) { // symmetric, never itself, ascending
                QVERIFY(q != r);
                QVERIFY(meshLinked(q, r, k));
            }
            QVERIFY(std::is_sorted(peers.begin(), peers.end()));
            if (r < k) { // a candidate watches every other rank
                QCOMPARE(static_cast<int>(peers.size()), world - 1);
            } else { // the others link to the k candidates, nothing else
                QCOMPARE(static_cast<int>(peers.size()), k);
                for (int i = 0; i < k; ++i)
                    QCOMPARE(peers[static_cast<std::size_t>(i)], i);
            }
        }
        QCOMPARE(links % 2, std::int64_t(0));
        const std::int64_t c = std::min(k, world);
        const std::int64_t expected = c * (c - 1) / 2 + c * (world - c); // among the candidates, then each other rank to them
        QCOMPARE(links / 2, expected);
        if (k >= world - 1) // the full mesh
            QCOMPARE(links / 2, std::int64_t(world) * (world - 1) / 2);
        QVERIFY(links / 2 <= std::int64_t(world) * k);
    }
    void defaultBound()
    {
        // 1024 ranks (the dashboard's design size): 4 candidates, each rank that is not one holds
        // 4 links, and the run 4090 in all, not 523,776.
        QCOMPARE(kMeshCandidates, 4);
        QCOMPARE(meshPeers(1000, 1024, kMeshCandidates), (std::vector<int>{0, 1, 2, 3}));
        QCOMPARE(meshPeers(2, 1024, kMeshCandidates).size(), std::size_t(1023));
        QVERIFY(!meshLinked(4, 5, kMeshCandidates));
        QVERIFY(!meshLinked(3, 3, kMeshCandidates));
    }
    void filesNeededGrowsWithTheWorld()
    {
        // The hub serving the store: its star, Gloo's pairs, the store's clients and its mesh links.
        QCOMPARE(filesNeeded(0, 1024, true, 1023), std::uint64_t(64 + 1023 + 1023 + 1023 + 1024));
        QCOMPARE(filesNeeded(7, 1024, false, 4), std::uint64_t(64 + 1023 + 1 + 4));
        QCOMPARE(filesNeeded(0, 1, true, 0), std::uint64_t(64 + 0 + 0 + 0 + 1));
    }
};

QTEST_GUILESS_MAIN(TestWatchdogMesh)
#include "tst_watchdog_mesh.moc"
