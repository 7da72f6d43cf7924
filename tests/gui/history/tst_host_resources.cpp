// SPDX-License-Identifier: MIT
// What each host of a run had (CPU cores, GPUs), as the history records it from pre-flight and
// the result, and the runs whose ranks outnumbered them: judged per machine (a local run's hosts
// are one machine, an SSH run's are told apart by address), for CPU and GPU runs; and the schema's
// version 3, which back-fills the hosts of runs a version 2 history kept.
#include "history/history_sql.h"
#include "history/host_resources.h"
#include "history/run_history.h"

#include "test_runs.h"

#include <QJsonArray>
#include <QSqlDatabase>
#include <QTemporaryDir>
#include <QTest>
#include <QTimeZone>

using namespace Qt::StringLiterals;
using namespace cppl::core::history;

namespace {

QJsonObject host(const QString &name, const QString &address, int slots)
{
    return {{u"name"_s, name}, {u"address"_s, address}, {u"slots"_s, slots}};
}

QJsonObject preflightOf(const QString &name, int cpus, int gpus)
{
    QJsonArray devices;
    for (int g = 0; g < gpus; ++g)
        devices.append(QJsonObject{{u"name"_s, u"NVIDIA H100"_s}, {u"memory_bytes"_s, 85899345920.0}});
    return {{u"host"_s, name},
            {u"ran"_s, true},
            {u"problems"_s, QJsonArray{}},
            {u"report"_s, QJsonObject{{u"cpus"_s, QJsonObject{{u"allowed"_s, cpus}, {u"threads_per_rank"_s, 1}}},
                                      {u"cuda"_s, QJsonObject{{u"libtorch_has_cuda"_s, gpus > 0}, {u"devices"_s, devices}}}}}};
}

} // namespace

class TestHostResources : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void recordedFromPreflightAndResult()
    {
        RunRecord r;
        r.hosts = {host(u"a"_s, u"10.0.0.1"_s, 4), host(u"b"_s, u"10.0.0.2"_s, 4)};
        r.preflight = {preflightOf(u"b"_s, 16, 2)};
        QJsonObject result = cppl::test::agentResult(8, 3.5, 0.1, u"xs1:01"_s, 1000, 100.0, u"/m"_s, u"/d"_s);
        result.insert(u"cpus"_s, QJsonObject{{u"allowed"_s, 32}, {u"local_ranks"_s, 4}});
        r.resultJson = QJsonDocument(result).toJson(QJsonDocument::Compact);
        recordHostResources(r);
        // b: what its pre-flight found; a (rank 0's, no pre-flight): its CPUs from the result.
        QCOMPARE(r.hosts[1].toObject()[u"cpus"_s].toInt(), 16);
        QCOMPARE(r.hosts[1].toObject()[u"gpus"_s].toInt(), 2);
        QCOMPARE(r.hosts[0].toObject()[u"cpus"_s].toInt(), 32);
        QVERIFY(!r.hosts[0].toObject().contains(u"gpus"_s));
        // Pre-flight wins over the result, and a second pass changes nothing.
        r.preflight.append(preflightOf(u"a"_s, 8, 0));
        r.hosts[0] = host(u"a"_s, u"10.0.0.1"_s, 4);
        recordHostResources(r);
        recordHostResources(r);
        QCOMPARE(r.hosts[0].toObject()[u"cpus"_s].toInt(), 8);
        QCOMPARE(r.hosts[0].toObject()[u"gpus"_s].toInt(), 0);
    }

    void sharedHostsJudged_data()
    {
        QTest::addColumn<QString>("launcher");
        QTest::addColumn<QString>("device");
        QTest::addColumn<QJsonArray>("hosts");
        QTest::addColumn<QStringList>("shared");
        auto with = [](QJsonObject h, int cpus, int gpus) {
            if (cpus >= 0)
                h.insert(u"cpus"_s, cpus);
            if (gpus >= 0)
                h.insert(u"gpus"_s, gpus);
            return h;
        };
        QTest::addRow("4 CPU ranks on 2 cores") << u"local"_s << u"cpu"_s << QJsonArray{with(host(u"localhost"_s, u"127.0.0.1"_s, 4), 2, 0)}
                                                << QStringList{u"4 ranks share the 2 CPU cores of localhost"_s};
        QTest::addRow("2 CPU ranks on 2 cores") << u"local"_s << u"cpu"_s << QJsonArray{with(host(u"localhost"_s, u"127.0.0.1"_s, 2), 2, 0)}
                                                << QStringList{};
        QTest::addRow("local hosts are one machine") << u"local"_s << u"cpu"_s
                                                     << QJsonArray{with(host(u"a"_s, u"127.0.0.1"_s, 2), 2, -1), host(u"b"_s, u"127.0.0.2"_s, 1)}
                                                     << QStringList{u"3 ranks share the 2 CPU cores of a"_s};
        QTest::addRow("ssh hosts at one address") << u"ssh"_s << u"cpu"_s
                                                  << QJsonArray{with(host(u"a"_s, u"10.0.0.1"_s, 2), 2, 0), with(host(u"a2"_s, u"10.0.0.1"_s, 2), 2, 0),
                                                                with(host(u"b"_s, u"10.0.0.2"_s, 2), 2, 0)}
                                                  << QStringList{u"4 ranks share the 2 CPU cores of a"_s};
        QTest::addRow("a GPU per rank") << u"ssh"_s << u"cuda"_s
                                        << QJsonArray{with(host(u"n0"_s, u"10.0.0.1"_s, 4), 2, 4), with(host(u"n1"_s, u"10.0.0.2"_s, 4), 2, 4)}
                                        << QStringList{};
        QTest::addRow("8 GPU ranks on 4 GPUs") << u"ssh"_s << u"cuda"_s << QJsonArray{with(host(u"n0"_s, u"10.0.0.1"_s, 8), 64, 4)}
                                               << QStringList{u"8 ranks share the 4 GPUs of n0"_s};
        QTest::addRow("auto: GPUs found") << u"ssh"_s << u"auto"_s << QJsonArray{with(host(u"n0"_s, u"10.0.0.1"_s, 2), 1, 2)} << QStringList{};
        QTest::addRow("auto: no GPU") << u"ssh"_s << u"auto"_s << QJsonArray{with(host(u"n0"_s, u"10.0.0.1"_s, 2), 1, 0)}
                                      << QStringList{u"2 ranks share the 1 CPU core of n0"_s};
        QTest::addRow("not known") << u"local"_s << u"cpu"_s << QJsonArray{host(u"localhost"_s, u"127.0.0.1"_s, 64)} << QStringList{};
        QTest::addRow("slurm: the login node") << u"slurm"_s << u"cpu"_s << QJsonArray{with(host(u"login"_s, u"10.0.0.1"_s, 1), 1, 0)}
                                               << QStringList{};
    }
    void sharedHostsJudged()
    {
        QFETCH(QString, launcher);
        QFETCH(QString, device);
        QFETCH(QJsonArray, hosts);
        QFETCH(QStringList, shared);
        RunRecord r;
        r.launcher = launcher;
        r.hosts = hosts;
        r.settings.insert(u"device"_s, device);
        QStringList got;
        for (const SharedHost &h : sharedHosts(r))
            got << h.text();
        QCOMPARE(got, shared);
        // What ran decides, not what was asked: a result on the CPU.
        if (device == u"cuda"_s && shared.isEmpty()) {
            r.resultJson = R"({"device": "cpu"})";
            QVERIFY(!ranOnGpus(r));
        }
    }

    void version2HistoriesAreBackFilled()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(u"runs.sqlite"_s);
        QJsonObject result = cppl::test::agentResult(4, 3.5, 0.1, u"xs1:01"_s, 1000, 100.0, u"/m"_s, u"/d"_s);
        result.insert(u"cpus"_s, QJsonObject{{u"allowed"_s, 2}});
        RunRecord rec = cppl::test::finishedRun(u"v2-run"_s, QJsonDocument(result).toJson(QJsonDocument::Compact),
                                                QDateTime(QDate(2026, 11, 30), QTime(9, 0), QTimeZone::utc()), 10);
        rec.launcher = u"local"_s;
        rec.hosts = {host(u"localhost"_s, u"127.0.0.1"_s, 4)}; // a v2 history kept no cores
        {
            QSqlDatabase db = sql::openConnection(path, u"v2"_s);
            sql::createSchema(db, 2);
            sql::insertRun(db, rec, true);
        }
        sql::closeConnection(u"v2"_s);
        RunHistory s(path);
        QCOMPARE(s.versionFound(), 2);
        const auto back = s.get(u"v2-run"_s);
        QVERIFY(back);
        QCOMPARE(back->hosts[0].toObject()[u"cpus"_s].toInt(), 2); // rank 0's, from the result
        QCOMPARE(sharedHosts(*back).size(), std::size_t(1));
        QCOMPARE(sharedHosts(*back).front().text(), u"4 ranks share the 2 CPU cores of localhost"_s);
    }
};

QTEST_GUILESS_MAIN(TestHostResources)
#include "tst_host_resources.moc"
