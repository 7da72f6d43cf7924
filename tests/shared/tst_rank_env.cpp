// SPDX-License-Identifier: MIT
// Rank identity from torchrun, Slurm and Open MPI environments; --groups specifications.
#include "cppl/errors.h"
#include "cppl/rank_env.h"

#include <QTest>

#include <map>

using namespace cppl;
using Vars = std::map<std::string, std::string>;
Q_DECLARE_METATYPE(Vars)

namespace {

EnvLookup lookup(const Vars &vars)
{
    return [vars](const std::string &name) -> std::optional<std::string> {
        auto it = vars.find(name);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

} // namespace

class TestRankEnv : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void identities_data()
    {
        QTest::addColumn<Vars>("vars");
        QTest::addColumn<QString>("expected"); // source rank/world local/localWorld addr:port
        QTest::addRow("nothing: one rank") << Vars{} << "default 0/1 0/1 127.0.0.1:29500";
        QTest::addRow("torchrun") << Vars{{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"},
                                          {"MASTER_ADDR", "node01"}, {"MASTER_PORT", "29400"}}
                                  << "torchrun 5/8 1/4 node01:29400";
        QTest::addRow("slurm, master from the node list")
            << Vars{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}, {"SLURM_NTASKS_PER_NODE", "8(x2)"},
                    {"SLURM_NODELIST", "gpu[07-08,12],login1"}}
            << "slurm 3/16 3/8 gpu07:29500";
        QTest::addRow("slurm, MASTER_ADDR wins") << Vars{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "a[1-2]"}, {"MASTER_ADDR", "10.1.1.1"}}
                                                  << "slurm 0/2 0/1 10.1.1.1:29500";
        QTest::addRow("open mpi") << Vars{{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}
                                  << "openmpi 2/4 0/2 127.0.0.1:29500";
        QTest::addRow("torchrun before slurm") << Vars{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}}
                                               << "torchrun 1/2 0/1 127.0.0.1:29500";
    }
    void identities()
    {
        QFETCH(Vars, vars);
        QFETCH(QString, expected);
        const RankIdentity id = resolveRankIdentity(lookup(vars));
        QCOMPARE(QStringLiteral("%1 %2/%3 %4/%5 %6:%7")
                     .arg(QString::fromStdString(id.source))
                     .arg(id.rank)
                     .arg(id.worldSize)
                     .arg(id.localRank)
                     .arg(id.localWorldSize)
                     .arg(QString::fromStdString(id.masterAddr))
                     .arg(id.masterPort),
                 expected);
    }

    void flagsOverrideEnvironment()
    {
        RankOverrides flags;
        flags.rank = 0;
        flags.masterPort = 12345;
        const RankIdentity id = resolveRankIdentity(lookup({{"RANK", "3"}, {"WORLD_SIZE", "4"}}), flags);
        QCOMPARE(id.rank, 0);
        QCOMPARE(id.worldSize, 4);
        QCOMPARE(id.masterPort, 12345);
        QCOMPARE(id.source, std::string("flags"));
    }

    void badIdentities_data()
    {
        QTest::addColumn<Vars>("vars");
        QTest::addColumn<QString>("message");
        QTest::addRow("rank without world size") << Vars{{"RANK", "1"}} << "torchrun environment is incomplete: WORLD_SIZE is not set";
        QTest::addRow("not an integer") << Vars{{"RANK", "one"}, {"WORLD_SIZE", "2"}} << "RANK=\"one\" is not an integer";
        QTest::addRow("rank beyond world") << Vars{{"RANK", "4"}, {"WORLD_SIZE", "4"}} << "rank 4 is outside 0..3 (from torchrun)";
        QTest::addRow("bad port") << Vars{{"MASTER_PORT", "70000"}} << "master port 70000 is not a TCP port";
        QTest::addRow("bad node list") << Vars{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_NODELIST", "gpu[01-02"}} << "SLURM_NODELIST \"gpu[01-02\" is malformed";
    }
    void badIdentities()
    {
        QFETCH(Vars, vars);
        QFETCH(QString, message);
        try {
            (void)resolveRankIdentity(lookup(vars));
            QFAIL("expected ConfigError");
        } catch (const ConfigError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    void groups_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<int>("world");
        QTest::addColumn<QString>("expected"); // groups as "0,1|2,3"
        QTest::addRow("size:2 of 5") << "size:2" << 5 << "0,1|2,3|4";
        QTest::addRow("explicit ranges") << "0-3;4-7" << 8 << "0,1,2,3|4,5,6,7";
        QTest::addRow("explicit interleaved") << "0,2;1,3" << 4 << "0,2|1,3";
        QTest::addRow("by-host") << "by-host" << 4 << "0,2|1,3";
        QTest::addRow("one group") << "0-2" << 3 << "0,1,2";
    }
    void groups()
    {
        QFETCH(QString, spec);
        QFETCH(int, world);
        QFETCH(QString, expected);
        const RankGroups g = parseRankGroups(spec.toStdString(), world, {"a", "b", "a", "b"});
        QStringList parts;
        for (const auto &group : g.groups) {
            QStringList ranks;
            for (int r : group)
                ranks << QString::number(r);
            parts << ranks.join(QLatin1Char(','));
        }
        QCOMPARE(parts.join(QLatin1Char('|')), expected);
        for (int r = 0; r < world; ++r)
            QVERIFY(g.leaderOf(r) <= r);
    }

    void badGroups_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<QString>("message");
        QTest::addRow("rank missing") << "0-2" << "rank 3 is in no group";
        QTest::addRow("rank twice") << "0-2;2-3" << "rank 2 is in two groups";
        QTest::addRow("out of range") << "0-3;4-5" << "rank 4 in \"4-5\" is outside 0..3";
        QTest::addRow("descending") << "3-0" << "\"3-0\" is not a rank or an ascending range";
        QTest::addRow("empty group") << "0-1;;2-3" << "empty group";
        QTest::addRow("size zero") << "size:0" << "size:K needs K >= 1";
    }
    void badGroups()
    {
        QFETCH(QString, spec);
        QFETCH(QString, message);
        try {
            (void)parseRankGroups(spec.toStdString(), 4);
            QFAIL("expected ConfigError");
        } catch (const ConfigError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }
};

QTEST_APPLESS_MAIN(TestRankEnv)
#include "tst_rank_env.moc"
