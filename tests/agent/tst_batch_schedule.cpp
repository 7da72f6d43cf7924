// SPDX-License-Identifier: MIT
// The dynamic schedule's claims (batch_schedule.h) with real parts: 4 rank processes (this test's
// own executable, started again with --rank), a real TCPStore served here, the real rendezvous,
// watchdog and Gloo on 127.0.0.1. What is checked: rank r's first batch is queue position r, given
// without a claim; every batch is evaluated exactly once and the summed words are one rank's; round
// 0 goes on while a rank has not started (the late-starter check that travels with the claims sent
// ahead); and a rank lost before its first batch, or after committing it, is accounted for: its
// committed batches (its first batch first) count, the rest is redone. The agent's end-to-end runs:
// tst_distributed.
#ifndef Q_MOC_RUN // moc cannot parse <chrono> and friends in the agent's headers; the test class needs none of it
#include "fault_hooks.h"
#include "distributed/batch_schedule.h"
#include "distributed/distributed_run.h"
#include "distributed/c10d.h"

#include "cppl/statistics.h"
#endif

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace cppl;
using namespace cppl::agent::dist;

namespace {

constexpr int kWorld = 4;
constexpr std::int64_t kBatches = 60;
constexpr int kLost = 2; // the rank the loss scenarios lose

std::int64_t tokensOf(std::int64_t b)
{
    return 100 + (b * 37) % 50; // uneven, so that a lost rank's committed part matches one prefix only
}

/// The words a batch adds (NllStats' layout where recover() reads tokens and windows; elsewhere a
/// count and two checksums of the batch indices, so that a batch counted twice or never shows).
std::vector<std::int64_t> wordsOf(std::int64_t b)
{
    std::vector<std::int64_t> w(static_cast<std::size_t>(NllStats::kReduceWords), 0);
    w[0] = 1;
    w[1] = b + 1;
    w[2] = (b + 1) * (b + 1);
    w[2 * static_cast<std::size_t>(ExactSum::kReduceWords)] = tokensOf(b);
    w[2 * static_cast<std::size_t>(ExactSum::kReduceWords) + 1] = 2;
    return w;
}

std::vector<std::int64_t> oneRankWords(const std::vector<std::int64_t> &order)
{
    std::vector<std::int64_t> sum(static_cast<std::size_t>(NllStats::kReduceWords), 0);
    for (std::int64_t b : order) {
        const auto w = wordsOf(b);
        for (std::size_t i = 0; i < sum.size(); ++i)
            sum[i] += w[i];
    }
    return sum;
}

/// The batches a run evaluates: all in order, or (a resumed run) a subset in another order.
std::vector<std::int64_t> orderFor(const std::string &scenario)
{
    std::vector<std::int64_t> order;
    if (scenario == "resumed") {
        for (std::int64_t b = kBatches - 1; b >= 0; b -= 2) // the odd batches, backwards: the ledger had the even ones
            order.push_back(b);
    } else {
        for (std::int64_t b = 0; b < kBatches; ++b)
            order.push_back(b);
    }
    return order;
}

/// Thrown by the rank that fails on purpose (scenario "failing"); it exits 4.
struct FailingOnPurpose
{
};

/// One rank: the schedule's loop as the agent runs it without overlap (sync() per round); writes
/// what it saw to @p out. Scenarios: plain, resumed, late (rank 3 starts once ranks 0-2 have each
/// evaluated 2 batches), lost-before (rank 2 exits before its first batch), lost-after (rank 2
/// exits after round 0 is committed and one more batch evaluated), failing (as lost-after, then
/// rank 1 fails on its own once it regrouped, and rank 3 exits while rank 1 is leaving).
int child(const std::string &scenario, int rank, int port, const std::string &out)
{
    if (scenario == "failing" && rank == 3)
        std::thread([port] { // exits 1.5 s after rank 1 says it fails: rank 1 is leaving then, its watchdog held
            const std::unique_ptr<RendezvousStore> own = openTcpStore("127.0.0.1", port, false, std::chrono::seconds(60));
            while (!own->check({"test/failing"}))
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            std::_Exit(3);
        }).detach();
    DistributedOptions o;
    o.identity.rank = rank;
    o.identity.worldSize = kWorld;
    o.identity.masterAddr = "127.0.0.1";
    o.identity.masterPort = port;
    o.groups = "size:2";
    o.topology = Topology::Flat;
    o.backend = "gloo";
    o.timeout = std::chrono::seconds(60);
    o.storeServedElsewhere = true;
    o.tolerateRankLoss = scenario.starts_with("lost") || scenario == "failing";
    DistributedRun run(o, libtorchC10d());
    const std::vector<std::int64_t> order = orderFor(scenario);
    std::vector<std::int64_t> tokens, windows;
    for (std::int64_t b = 0; b < kBatches; ++b) {
        tokens.push_back(tokensOf(b));
        windows.push_back(2);
    }
    // A threshold of 20 mean batches: round 0 may go on for up to that many while a rank is late.
    DynamicSchedule schedule(run, tokens, 20 * 125, "test/sched/" + scenario,
                             scenario == "resumed" ? std::optional(order) : std::nullopt, windows);
    std::ofstream f(out);
    if (scenario == "lost-before" && rank == kLost)
        std::_Exit(3); // before its first batch: it never evaluated or claimed anything
    if (scenario == "late" && rank == 3)
        for (int r = 0; r < 3; ++r)
            if (!run.store().get("test/late/" + std::to_string(r), std::chrono::seconds(60)))
                throw std::runtime_error("rank " + std::to_string(r) + " never evaluated 2 batches");
    std::vector<std::int64_t> mine(static_cast<std::size_t>(NllStats::kReduceWords), 0); // this rank's totals
    std::vector<std::int64_t> words;                                                    // the run's, after each round
    std::string perRound;
    bool first = true;
    for (bool done = false; !done;) {
        schedule.beginRound();
        while (const auto b = schedule.next()) {
            if (first) {
                f << "first " << *b << ' ' << schedule.claims() << '\n'; // claims accepted before it
                first = false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2)); // "compute"
            const auto w = wordsOf(*b);
            for (std::size_t i = 0; i < mine.size(); ++i)
                mine[i] += w[i];
            schedule.evaluated(*b, static_cast<double>(tokensOf(*b)) / 50000.0);
            if (scenario == "late" && rank < 3 && schedule.rounds() == 0 && schedule.roundBatches() == 2)
                run.store().set("test/late/" + std::to_string(rank), "1");
            if ((scenario == "lost-after" || scenario == "failing") && rank == kLost && schedule.rounds() == 1 && schedule.roundBatches() == 1)
                std::_Exit(3); // round 0 committed, one batch of round 1 not
        }
        perRound += ' ' + std::to_string(schedule.roundBatches());
        words = mine;
        done = schedule.sync(words);
        if (scenario == "failing" && rank == 1 && !schedule.lostRanks().empty()) {
            // Rank 1 fails on its own after the regrouping (its watchdog holds a loss): it leaves
            // with its watchdog still running, held while rank 3 exits, so that the verdict on
            // rank 3 reaches it as its DistributedRun goes.
            ::setenv("CLUSTERPPL_TEST_HOLD_WATCHDOG_STOP", "1:5000", 1);
            cppl::agent::reloadFaultHooks();
            run.store().set("test/failing", "1");
            throw FailingOnPurpose{};
        }
    }
    f << "rounds" << perRound << '\n';
    f << "done " << formatBatchRuns(schedule.done()) << '\n';
    f << "words";
    for (std::int64_t w : words)
        f << ' ' << w;
    f << '\n';
    std::vector<BatchRun> committed; // every lost rank's
    for (const auto &l : schedule.lostRanks()) {
        f << "lost " << l.rank << ' ' << formatBatchRuns(l.committed) << '\n';
        committed.insert(committed.end(), l.committed.begin(), l.committed.end());
    }
    std::sort(committed.begin(), committed.end(), [](const BatchRun &a, const BatchRun &b) { return a.first < b.first; });
    f << "committed " << formatBatchRuns(committed) << '\n';
    f << "redone " << formatBatchRuns(schedule.redone()) << '\n';
    f.close();
    run.finish();
    return 0;
}

/// A rank's output file: its lines by their first word.
std::map<std::string, std::string> readOutput(const QString &path)
{
    std::map<std::string, std::string> m;
    std::ifstream f(path.toStdString());
    for (std::string line; std::getline(f, line);) {
        const auto sp = line.find(' ');
        m[line.substr(0, sp)] = sp == std::string::npos ? std::string() : line.substr(sp + 1);
    }
    return m;
}

std::vector<std::int64_t> batchesOf(const std::string &runs)
{
    std::vector<std::int64_t> out;
    if (const auto parsed = parseBatchRuns(runs))
        for (const BatchRun &r : *parsed)
            for (std::int64_t b = r.first; b < r.end; ++b)
                out.push_back(b);
    return out;
}

} // namespace

class TestBatchSchedule : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;

    /// Runs the 4 ranks of @p scenario against a store served here; returns each rank's output
    /// (empty for a rank that exited on purpose) after checking the exit codes.
    std::vector<std::map<std::string, std::string>> runRanks(const std::string &scenario)
    {
        std::vector<std::map<std::string, std::string>> outputs(kWorld);
        std::unique_ptr<RendezvousStore> store = openTcpStore("127.0.0.1", 0, true, std::chrono::seconds(30));
        std::vector<std::unique_ptr<QProcess>> ranks;
        for (int r = 0; r < kWorld; ++r) {
            auto p = std::make_unique<QProcess>();
            p->setProcessChannelMode(QProcess::ForwardedErrorChannel);
            p->start(QCoreApplication::applicationFilePath(),
                     {QStringLiteral("--rank"), QString::fromStdString(scenario), QString::number(r), QString::number(store->port()),
                      m_dir.filePath(QStringLiteral("%1.%2.txt").arg(QString::fromStdString(scenario)).arg(r))});
            if (!p->waitForStarted(30000))
                qFatal("rank %d of %s did not start", r, scenario.c_str());
            ranks.push_back(std::move(p));
        }
        for (int r = 0; r < kWorld; ++r) {
            QProcess &p = *ranks[static_cast<std::size_t>(r)];
            if (!p.waitForFinished(180000)) {
                p.kill();
                p.waitForFinished(5000);
                qFatal("rank %d of %s did not finish within 180 s", r, scenario.c_str());
            }
            const bool lostOnPurpose = (scenario.starts_with("lost") || scenario == "failing") && r == kLost;
            if (lostOnPurpose || (scenario == "failing" && r == 3)) {
                if (p.exitCode() != 3)
                    qFatal("the lost rank of %s exited %d, not 3", scenario.c_str(), p.exitCode());
                continue;
            }
            if (scenario == "failing" && r == 1) { // failed on purpose, and must leave as it failed
                if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 4)
                    qFatal("rank 1 of failing %s %d, not exited with 4", p.exitStatus() == QProcess::NormalExit ? "exited" : "was killed by signal",
                           p.exitCode());
                continue;
            }
            if (p.exitStatus() != QProcess::NormalExit || p.exitCode() != 0)
                qFatal("rank %d of %s exited %d", r, scenario.c_str(), p.exitCode());
            auto &o = outputs[static_cast<std::size_t>(r)] = readOutput(m_dir.filePath(QStringLiteral("%1.%2.txt").arg(QString::fromStdString(scenario)).arg(r)));
            qInfo("%s, rank %d: first %s; batches per round %s; evaluated %s; redone %s", scenario.c_str(), r, o["first"].c_str(), o["rounds"].c_str(),
                  o["done"].c_str(), o["redone"].c_str());
        }
        return outputs;
    }

    /// Every batch of @p order evaluated exactly once by the ranks that finished (plus @p committedByLost),
    /// and every rank's summed words are one rank's.
    static void checkExactlyOnce(const std::vector<std::map<std::string, std::string>> &outputs, const std::vector<std::int64_t> &order,
                                 const std::vector<std::int64_t> &committedByLost = {})
    {
        std::vector<std::int64_t> all = committedByLost;
        std::string expected;
        for (std::int64_t w : oneRankWords(order))
            expected += (expected.empty() ? "" : " ") + std::to_string(w);
        for (const auto &o : outputs) {
            if (o.empty())
                continue;
            const auto mine = batchesOf(o.at("done"));
            all.insert(all.end(), mine.begin(), mine.end());
            QCOMPARE(QString::fromStdString(o.at("words")), QString::fromStdString(expected));
        }
        std::sort(all.begin(), all.end());
        std::vector<std::int64_t> want = order;
        std::sort(want.begin(), want.end());
        QCOMPARE(all, want);
    }

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    void firstBatchIsTheRanksOwn_data()
    {
        QTest::addColumn<QString>("scenario");
        QTest::newRow("all batches") << QStringLiteral("plain");
        QTest::newRow("resumed: a subset in another order") << QStringLiteral("resumed");
    }
    void firstBatchIsTheRanksOwn()
    {
        QFETCH(QString, scenario);
        const auto outputs = runRanks(scenario.toStdString());
        const std::vector<std::int64_t> order = orderFor(scenario.toStdString());
        for (int r = 0; r < kWorld; ++r) {
            const auto &o = outputs[static_cast<std::size_t>(r)];
            // Queue position r, and no claim taken before it (the claims start at position 4).
            QCOMPARE(QString::fromStdString(o.at("first")),
                     QStringLiteral("%1 0").arg(order[static_cast<std::size_t>(r)]));
            QCOMPARE(batchesOf(o.at("done")).front(), order[static_cast<std::size_t>(r)]);
            QCOMPARE(QString::fromStdString(o.at("redone")), QString());
        }
        checkExactlyOnce(outputs, order);
    }

    void roundZeroWaitsForALateStarter()
    {
        // Rank 3 starts once ranks 0-2 have each evaluated 2 batches of round 0. They said they
        // started with the claims they sent ahead during their first batch, so rank 3's own claim
        // sent ahead comes back with all 4: it ends round 0 after its one batch. Ranks 0-2 cannot
        // have heard of rank 3 before their third batch: each goes on in round 0 past 2 batches.
        const auto outputs = runRanks("late");
        for (int r = 0; r < kWorld; ++r) {
            const std::string rounds = outputs[static_cast<std::size_t>(r)].at("rounds");
            const int round0 = std::stoi(rounds);
            if (r == 3)
                QCOMPARE(round0, 1);
            else
                QVERIFY2(round0 >= 3, qPrintable(QStringLiteral("rank %1's rounds: %2").arg(r).arg(QString::fromStdString(rounds))));
        }
        checkExactlyOnce(outputs, orderFor("late"));
    }

    void lostRankBeforeItsFirstBatch()
    {
        // Rank 2 exits before it evaluates its first batch (given to it, never claimed): nobody
        // holds batch 2, so it is the lost rank's, not committed, and redone first.
        const auto outputs = runRanks("lost-before");
        for (int r = 0; r < kWorld; ++r) {
            if (r == kLost)
                continue;
            const auto &o = outputs[static_cast<std::size_t>(r)];
            QCOMPARE(QString::fromStdString(o.at("lost")), QStringLiteral("%1 ").arg(kLost)); // nothing of it committed
            QCOMPARE(batchesOf(o.at("redone")).front(), std::int64_t(kLost));
        }
        checkExactlyOnce(outputs, orderFor("lost-before"));
    }

    void lostRankAfterCommittingItsFirstBatch()
    {
        // Rank 2 exits after round 0 is committed (its first batch, batch 2, and whatever else it
        // took in round 0) and one batch of round 1: the survivors find its committed part among
        // the batches nobody holds, its first batch first, and redo the rest.
        const auto outputs = runRanks("lost-after");
        std::vector<std::int64_t> committed;
        for (int r = 0; r < kWorld; ++r) {
            if (r == kLost)
                continue;
            const auto &o = outputs[static_cast<std::size_t>(r)];
            const std::string lost = o.at("lost");
            QVERIFY2(lost.starts_with(std::to_string(kLost) + ' '), lost.c_str());
            const auto mine = batchesOf(lost.substr(lost.find(' ') + 1));
            QVERIFY2(!mine.empty() && mine.front() == kLost, lost.c_str());
            QVERIFY(!batchesOf(o.at("redone")).empty()); // its batch of round 1 at least
            if (committed.empty())
                committed = mine;
            QCOMPARE(mine, committed); // every survivor settles the same
        }
        checkExactlyOnce(outputs, orderFor("lost-after"), committed);
    }

    void failingRankHearsALoss()
    {
        // A tolerant run's rank that fails on its own leaves with its watchdog's thread running,
        // and a verdict on another rank may reach it then: that thread records the loss in its
        // DistributedRun. It was joined only after the members that hold the losses were
        // destroyed (glibc: "free(): double free detected", SIGABRT, as its vector of one loss
        // grew). Rank 2 is lost after round 0, rank 1 fails after the regrouping (its watchdog
        // held as it leaves), rank 3 exits then: rank 1 must leave as it failed (exit 4), rank 0
        // finishes alone with every batch counted once.
        const auto outputs = runRanks("failing");
        const auto &o = outputs[0];
        QVERIFY2(o.at("lost").starts_with("1 ") || o.at("lost").starts_with("3 "), o.at("lost").c_str());
        checkExactlyOnce(outputs, orderFor("failing"), batchesOf(o.at("committed")));
    }
};

int main(int argc, char **argv)
{
    if (argc == 6 && std::string(argv[1]) == "--rank") {
        try {
            return child(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
        } catch (const FailingOnPurpose &) {
            return 4;
        } catch (const std::exception &e) {
            std::fprintf(stderr, "rank %s: %s\n", argv[3], e.what());
            return 1;
        }
    }
    QCoreApplication app(argc, argv);
    TestBatchSchedule t;
    return QTest::qExec(&t, argc, argv);
}

#include "tst_batch_schedule.moc"
