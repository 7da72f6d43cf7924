// SPDX-License-Identifier: MIT
// The watchdog mesh's link set (watchdog_mesh.h): the k lowest ranks (the candidates) to every
// rank, the others to the candidates and their ring neighbours: O(world * k) links, at most k + 2
// per rank that is not a candidate, the full mesh while k >= world - 1; and the open files a rank needs
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
        const int c = std::min(k, world);
        const int others = world - c; // the ranks on the ring
        std::int64_t links = 0;       // each link counted from both ends
        for (int r = 0; r < world; ++r) {
            const std::vector<int> peers = meshPeers(r, world, k);
            links += static_cast<std::int64_t>(peers.size());
            for (int q : peers) { // symmetric, never itself, ascending
                QVERIFY(q != r);
                QVERIFY(meshLinked(q, r, k, world));
            }
            QVERIFY(std::is_sorted(peers.begin(), peers.end()));
            if (r < k) { // a candidate watches every other rank
                QCOMPARE(static_cast<int>(peers.size()), world - 1);
                continue;
            }
            // The others link to the k candidates and to their ring neighbours, nothing else.
            for (int i = 0; i < k; ++i)
                QCOMPARE(peers[static_cast<std::size_t>(i)], i);
            const int next = r + 1 < world ? r + 1 : k, prev = r > k ? r - 1 : world - 1;
            std::vector<int> ring;
            for (int q : {prev, next})
                if (q != r && std::find(ring.begin(), ring.end(), q) == ring.end())
                    ring.push_back(q);
            std::sort(ring.begin(), ring.end());
            QCOMPARE(std::vector<int>(peers.begin() + k, peers.end()), ring);
            QCOMPARE(static_cast<int>(peers.size()), k + std::min(others - 1, 2)); // k + 2 at most: bounded whatever the world
        }
        QCOMPARE(links % 2, std::int64_t(0));
        // Among the candidates, each other rank to them, and the ring (others links; 1 for two, 0 for one).
        const std::int64_t ringLinks = others >= 3 ? others : others == 2 ? 1 : 0;
        const std::int64_t expected = std::int64_t(c) * (c - 1) / 2 + std::int64_t(c) * others + ringLinks;
        QCOMPARE(links / 2, expected);
        if (k >= world - 1) // the full mesh
            QCOMPARE(links / 2, std::int64_t(world) * (world - 1) / 2);
        QVERIFY(links / 2 <= std::int64_t(world) * (k + 1)); // O(world * k), never O(world^2)
    }
    void defaultBound()
    {
        // 1024 ranks (the dashboard's design size): 4 candidates; each rank that is not one holds
        // 6 links (the candidates and its two ring neighbours), and the run 5,106 in all
        // (4,086 to and among the candidates, 1,020 on the ring), not 523,776.
        QCOMPARE(kMeshCandidates, 4);
        QCOMPARE(meshPeers(1000, 1024, kMeshCandidates), (std::vector<int>{0, 1, 2, 3, 999, 1001}));
        QCOMPARE(meshPeers(4, 1024, kMeshCandidates), (std::vector<int>{0, 1, 2, 3, 5, 1023})); // the ring closes
        QCOMPARE(meshPeers(1023, 1024, kMeshCandidates), (std::vector<int>{0, 1, 2, 3, 4, 1022}));
        QCOMPARE(meshPeers(2, 1024, kMeshCandidates).size(), std::size_t(1023));
        std::int64_t links = 0;
        for (int r = 0; r < 1024; ++r)
            links += static_cast<std::int64_t>(meshPeers(r, 1024, kMeshCandidates).size());
        QCOMPARE(links / 2, std::int64_t(5106));
        QVERIFY(meshLinked(4, 5, kMeshCandidates, 1024));
        QVERIFY(!meshLinked(4, 6, kMeshCandidates, 1024));
        QVERIFY(!meshLinked(3, 3, kMeshCandidates, 1024));
        QVERIFY(!meshLinked(5, 1024, kMeshCandidates, 1024)); // outside the world
        // With 5 ranks, 4 candidates and one other: no ring link.
        QCOMPARE(meshPeers(4, 5, kMeshCandidates), (std::vector<int>{0, 1, 2, 3}));
        // What the ring adds to a rank that is not a candidate: 2 descriptors (fd_limit.h counts them).
        QCOMPARE(filesNeeded(1000, 1024, false, static_cast<int>(meshPeers(1000, 1024, kMeshCandidates).size())),
                 filesNeeded(1000, 1024, false, kMeshCandidates) + 2);
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
