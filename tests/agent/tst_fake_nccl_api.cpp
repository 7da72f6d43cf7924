// SPDX-License-Identifier: MIT
// The fake NCCL and CUDA runtime of tests/fakes on their own, linked into this test: ranks are
// threads of one process (each with its own current device, so NCCL's duplicate-GPU check holds),
// meeting over the fakes' real TCP transport. What the agent tests rely on is checked here
// first, with NCCL's definitions: int64 sums that wrap as two's complement, a reduce that writes
// only its root's buffer, a broadcast, splits with NCCL_SPLIT_NOCOLOR and keys that reorder ranks,
// a shrink without the old rank 0, non-blocking init, the duplicate-GPU refusal, and an abort that
// ends a collective whose peer never came.
#ifndef Q_MOC_RUN
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

#include <QTest>

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <thread>
#include <vector>

namespace {

/// Runs @p body(rank) on @p n threads at once and waits for all.
void onRanks(int n, const std::function<void(int)> &body)
{
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r] {
            cudaSetDevice(r % 4);
            body(r);
        });
    for (auto &t : threads)
        t.join();
}

/// A world of @p n ranks (threads) from one unique id; comms[r] is rank r's handle.
std::vector<ncclComm_t> world(int n, std::vector<ncclResult_t> &results)
{
    ncclUniqueId id{};
    ncclGetUniqueId(&id);
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(n), nullptr);
    results.assign(static_cast<std::size_t>(n), ncclInternalError);
    onRanks(n, [&](int r) { results[static_cast<std::size_t>(r)] = ncclCommInitRank(&comms[static_cast<std::size_t>(r)], n, id, r); });
    return comms;
}

/// One collective on a stream of its own, through device memory, as the agent does it.
struct DeviceWords
{
    explicit DeviceWords(const std::vector<std::int64_t> &words) : host(words)
    {
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        cudaMalloc(&device, host.size() * 8);
        cudaMemcpyAsync(device, host.data(), host.size() * 8, cudaMemcpyHostToDevice, stream);
    }
    ~DeviceWords()
    {
        cudaFree(device);
        cudaStreamDestroy(stream);
    }
    std::vector<std::int64_t> back()
    {
        cudaMemcpyAsync(host.data(), device, host.size() * 8, cudaMemcpyDeviceToHost, stream);
        cudaStreamSynchronize(stream);
        return host;
    }
    std::vector<std::int64_t> host;
    void *device = nullptr;
    cudaStream_t stream = nullptr;
};

} // namespace

class TestFakeNcclApi : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        qputenv("CPPL_FAKE_CUDA_DEVICES", "4"); // read at the fakes' first call
        int n = 0;
        QCOMPARE(cudaGetDeviceCount(&n), cudaSuccess);
        QCOMPARE(n, 4);
        int version = 0;
        QCOMPARE(ncclGetVersion(&version), ncclSuccess);
        QCOMPARE(version, NCCL_VERSION_CODE);
    }

    /// All-reduce, reduce and broadcast of int64 words at 3 ranks, as NCCL defines them.
    void collectives()
    {
        std::vector<ncclResult_t> init;
        std::vector<ncclComm_t> comms = world(3, init);
        QCOMPARE(init, std::vector<ncclResult_t>(3, ncclSuccess));
        const std::int64_t big = std::numeric_limits<std::int64_t>::max();
        std::vector<std::vector<std::int64_t>> sum(3), reduced(3), broadcast(3);
        std::vector<ncclResult_t> rc(9, ncclInternalError);
        onRanks(3, [&](int r) {
            const auto at = static_cast<std::size_t>(r);
            DeviceWords a({big, -r - 1, r * 1000000007LL});
            rc[at] = ncclAllReduce(a.device, a.device, 3, ncclInt64, ncclSum, comms[at], a.stream);
            sum[at] = a.back();
            DeviceWords b({r + 1, 10 * (r + 1)});
            rc[3 + at] = ncclReduce(b.device, b.device, 2, ncclInt64, ncclSum, 1, comms[at], b.stream);
            reduced[at] = b.back();
            DeviceWords c({r, r, r, r});
            rc[6 + at] = ncclBroadcast(c.device, c.device, 4, ncclInt64, 2, comms[at], c.stream);
            broadcast[at] = c.back();
        });
        QCOMPARE(rc, std::vector<ncclResult_t>(9, ncclSuccess));
        const std::int64_t wrapped = static_cast<std::int64_t>(3 * static_cast<std::uint64_t>(big)); // two's complement, as a GPU adds
        for (int r = 0; r < 3; ++r) {
            QCOMPARE(sum[static_cast<std::size_t>(r)], (std::vector<std::int64_t>{wrapped, -6, 3000000021LL}));
            // Only the root's buffer receives the reduction; the others keep what they had.
            const std::vector<std::int64_t> own{r + 1, 10 * (r + 1)}, root{6, 60};
            QCOMPARE(reduced[static_cast<std::size_t>(r)], r == 1 ? root : own);
            QCOMPARE(broadcast[static_cast<std::size_t>(r)], (std::vector<std::int64_t>{2, 2, 2, 2}));
        }
        for (ncclComm_t c : comms) {
            QCOMPARE(ncclCommFinalize(c), ncclSuccess);
            QCOMPARE(ncclCommDestroy(c), ncclSuccess);
        }
    }

    /// Colors group ranks, keys order them, NCCL_SPLIT_NOCOLOR gives no communicator.
    void split()
    {
        std::vector<ncclResult_t> init;
        std::vector<ncclComm_t> comms = world(4, init);
        QCOMPARE(init, std::vector<ncclResult_t>(4, ncclSuccess));
        const int colors[4] = {7, 7, NCCL_SPLIT_NOCOLOR, 7};
        std::vector<ncclComm_t> child(4, nullptr);
        std::vector<int> rank(4, -9), count(4, -9);
        std::vector<std::vector<std::int64_t>> sum(4);
        onRanks(4, [&](int r) {
            const auto at = static_cast<std::size_t>(r);
            ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
            config.commName = "child";
            if (ncclCommSplit(comms[at], colors[r], 10 - r, &child[at], &config) != ncclSuccess || !child[at])
                return;
            ncclCommUserRank(child[at], &rank[at]);
            ncclCommCount(child[at], &count[at]);
            DeviceWords w({1LL << r});
            ncclAllReduce(w.device, w.device, 1, ncclInt64, ncclSum, child[at], w.stream);
            sum[at] = w.back();
        });
        QCOMPARE(child[2], nullptr);
        QCOMPARE(rank, (std::vector<int>{2, 1, -9, 0})); // keys 10, 9, 7: rank 3 first
        QCOMPARE(count, (std::vector<int>{3, 3, -9, 3}));
        QCOMPARE(sum[0], std::vector<std::int64_t>{1 + 2 + 8});
        for (std::size_t r = 0; r < 4; ++r) {
            if (child[r])
                QCOMPARE(ncclCommDestroy(child[r]), ncclSuccess);
            QCOMPARE(ncclCommDestroy(comms[r]), ncclSuccess);
        }
    }

    /// The survivors shrink without the old rank 0, which never takes part (it is "lost").
    void shrinkWithoutRankZero()
    {
        std::vector<ncclResult_t> init;
        std::vector<ncclComm_t> comms = world(3, init);
        QCOMPARE(init, std::vector<ncclResult_t>(3, ncclSuccess));
        std::vector<ncclComm_t> shrunk(3, nullptr);
        std::vector<ncclResult_t> rc(3, ncclInternalError);
        std::vector<int> rank(3, -9);
        std::vector<std::vector<std::int64_t>> sum(3);
        std::vector<std::thread> survivors;
        for (int r = 1; r < 3; ++r)
            survivors.emplace_back([&, r] {
                const auto at = static_cast<std::size_t>(r);
                cudaSetDevice(r);
                int exclude[1] = {0};
                rc[at] = ncclCommShrink(comms[at], exclude, 1, &shrunk[at], nullptr, NCCL_SHRINK_ABORT);
                if (rc[at] != ncclSuccess)
                    return;
                ncclCommUserRank(shrunk[at], &rank[at]);
                DeviceWords w({100 * r});
                ncclAllReduce(w.device, w.device, 1, ncclInt64, ncclSum, shrunk[at], w.stream);
                sum[at] = w.back();
            });
        for (auto &t : survivors)
            t.join();
        QCOMPARE(rc[1], ncclSuccess);
        QCOMPARE(rc[2], ncclSuccess);
        QCOMPARE(rank[1], 0);
        QCOMPARE(rank[2], 1);
        QCOMPARE(sum[1], std::vector<std::int64_t>{300});
        QCOMPARE(sum[2], std::vector<std::int64_t>{300});
        for (std::size_t r = 0; r < 3; ++r) {
            QCOMPARE(ncclCommAbort(comms[r]), ncclSuccess);
            if (shrunk[r])
                QCOMPARE(ncclCommDestroy(shrunk[r]), ncclSuccess);
        }
    }

    /// config.blocking = 0: init returns ncclInProgress and the communicator says so until every
    /// member met.
    void nonBlockingInit()
    {
        ncclUniqueId id{};
        QCOMPARE(ncclGetUniqueId(&id), ncclSuccess);
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t first = nullptr;
        QCOMPARE(ncclCommInitRankConfig(&first, 2, id, 0, &config), ncclInProgress);
        ncclResult_t state = ncclSuccess;
        QCOMPARE(ncclCommGetAsyncError(first, &state), ncclSuccess);
        QCOMPARE(state, ncclInProgress); // the other member has not come yet
        ncclComm_t second = nullptr;
        std::thread other([&] {
            cudaSetDevice(1);
            ncclCommInitRankConfig(&second, 2, id, 1, &config);
        });
        other.join();
        QTRY_VERIFY_WITH_TIMEOUT(ncclCommGetAsyncError(first, &state) == ncclSuccess && state == ncclSuccess, 10000);
        QTRY_VERIFY_WITH_TIMEOUT(ncclCommGetAsyncError(second, &state) == ncclSuccess && state == ncclSuccess, 10000);
        QCOMPARE(ncclCommDestroy(first), ncclSuccess);
        QCOMPARE(ncclCommDestroy(second), ncclSuccess);
    }

    /// Two members on one host and one GPU are refused, as NCCL refuses them.
    void duplicateGpuRefused()
    {
        ncclUniqueId id{};
        QCOMPARE(ncclGetUniqueId(&id), ncclSuccess);
        std::vector<ncclComm_t> comms(2, nullptr);
        std::vector<ncclResult_t> rc(2, ncclSuccess);
        std::vector<std::string> why(2);
        std::vector<std::thread> ranks;
        for (int r = 0; r < 2; ++r)
            ranks.emplace_back([&, r] {
                cudaSetDevice(3); // both
                rc[static_cast<std::size_t>(r)] = ncclCommInitRank(&comms[static_cast<std::size_t>(r)], 2, id, r);
                why[static_cast<std::size_t>(r)] = ncclGetLastError(nullptr);
            });
        for (auto &t : ranks)
            t.join();
        QCOMPARE(rc[0], ncclInvalidUsage);
        QCOMPARE(rc[1], ncclInvalidUsage);
        QVERIFY2(why[0].find("Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 0000:1b:00.0") == 0, why[0].c_str());
    }

    /// A collective whose peer never comes keeps its stream busy; ncclCommAbort ends it.
    void abortEndsACollectiveInFlight()
    {
        std::vector<ncclResult_t> init;
        std::vector<ncclComm_t> comms = world(2, init);
        QCOMPARE(init, std::vector<ncclResult_t>(2, ncclSuccess));
        // Both connect at a first collective, so that rank 1 can then stay away from the second.
        onRanks(2, [&](int r) {
            DeviceWords w({1});
            ncclAllReduce(w.device, w.device, 1, ncclInt64, ncclSum, comms[static_cast<std::size_t>(r)], w.stream);
            w.back();
        });
        DeviceWords w({5});
        QCOMPARE(ncclAllReduce(w.device, w.device, 1, ncclInt64, ncclSum, comms[0], w.stream), ncclSuccess);
        QTest::qWait(300);
        QCOMPARE(cudaStreamQuery(w.stream), cudaErrorNotReady);
        ncclResult_t async = ncclInternalError;
        QCOMPARE(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
        QCOMPARE(async, ncclSuccess); // waiting is no error
        QCOMPARE(ncclCommAbort(comms[0]), ncclSuccess);
        QTRY_COMPARE_WITH_TIMEOUT(cudaStreamQuery(w.stream), cudaSuccess, 5000);
        // Its peer sees the connection close: an asynchronous error, when it calls.
        DeviceWords late({6});
        QCOMPARE(ncclAllReduce(late.device, late.device, 1, ncclInt64, ncclSum, comms[1], late.stream), ncclSuccess);
        QTRY_VERIFY_WITH_TIMEOUT(ncclCommGetAsyncError(comms[1], &async) == ncclSuccess && async == ncclRemoteError, 5000);
        QCOMPARE(ncclCommAbort(comms[1]), ncclSuccess);
    }
};

QTEST_GUILESS_MAIN(TestFakeNcclApi)
#include "tst_fake_nccl_api.moc"
