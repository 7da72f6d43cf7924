// SPDX-License-Identifier: MIT
#include "cppl/errors.h"
#include "cppl/hostfile.h"

#include <QTest>

using namespace cppl;

namespace {

QString errorsOf(const QString &text)
{
    const auto r = parseHostfile(text.toStdString(), "hosts.txt");
    QStringList list;
    for (const auto &e : r.errors)
        list << QString::fromStdString(e);
    return list.join(QLatin1Char('\n'));
}

std::vector<HostSpec> hosts(const char *text)
{
    auto r = parseHostfile(text);
    if (!r.ok())
        throw std::runtime_error(r.errors.front());
    return r.hosts;
}

} // namespace

class TestHostfile : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void parsesDeepSpeedFormat()
    {
        const auto h = hosts("# cluster\nworker-0 slots=8   # rack A\n\n  worker-1\tslots=4 group=rackB\r\n");
        QCOMPARE(h.size(), std::size_t{2});
        QCOMPARE(h[0].name, std::string("worker-0"));
        QCOMPARE(h[0].slots, 8);
        QCOMPARE(h[1].slots, 4);
        QCOMPARE(h[1].group, std::string("rackB"));
    }

    void badLines_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<QString>("message");
        QTest::addRow("missing slots") << "node1\n" << "hosts.txt:1: host \"node1\" has no slots=N";
        QTest::addRow("misspelt key") << "node1 slot=4\n" << "hosts.txt:1: unknown key \"slot\" (expected slots=N, group=NAME)";
        QTest::addRow("zero slots") << "a slots=1\nnode1 slots=0\n" << "hosts.txt:2: slots=0 for host \"node1\": expected an integer >= 1";
        QTest::addRow("negative slots") << "node1 slots=-2\n" << "slots=-2 for host \"node1\"";
        QTest::addRow("not a number") << "node1 slots=four\n" << "slots=four for host \"node1\"";
        QTest::addRow("duplicate host") << "node1 slots=4\n# x\nnode1 slots=2\n"
                                        << "hosts.txt:3: host \"node1\" is listed twice (first on line 1)";
        QTest::addRow("stray word") << "node1 slots=4 fast\n" << "hosts.txt:1: unexpected \"fast\"";
        QTest::addRow("empty") << "# nothing\n\n" << "hosts.txt: no hosts";
        QTest::addRow("bad host name") << "slots=4\n" << "hosts.txt:1: \"slots=4\" is not a valid host name";
    }
    void badLines()
    {
        QFETCH(QString, text);
        QFETCH(QString, message);
        const QString errors = errorsOf(text);
        QVERIFY2(errors.contains(message), qPrintable(errors));
    }

    void includeAndExcludeFilters()
    {
        const auto all = hosts("w0 slots=4\nw1 slots=4\nw2 slots=2\n");
        auto inc = applyHostFilter(all, "w0:0,2@w2", "");
        QCOMPARE(inc.size(), std::size_t{2});
        QCOMPARE(inc[0].slots, 2);
        QCOMPARE(inc[0].devices, (std::vector<int>{0, 2}));
        QCOMPARE(inc[1].name, std::string("w2"));
        QCOMPARE(inc[1].slots, 2);
        QVERIFY(inc[1].devices.empty()); // all slots: no explicit list needed
        auto exc = applyHostFilter(all, "", "w1@w0:3");
        QCOMPARE(exc.size(), std::size_t{2});
        QCOMPARE(exc[0].slots, 3);
        QVERIFY(exc[0].devices.empty()); // 0,1,2
        QCOMPARE(exc[1].name, std::string("w2"));
        auto exc2 = applyHostFilter(all, "", "w0:0");
        QCOMPARE(exc2[0].devices, (std::vector<int>{1, 2, 3}));
    }

    void badFilters_data()
    {
        QTest::addColumn<QString>("include");
        QTest::addColumn<QString>("exclude");
        QTest::addColumn<QString>("message");
        QTest::addRow("both") << "w0" << "w1" << "--include and --exclude cannot be used together";
        QTest::addRow("unknown host") << "w9" << "" << "--include: host \"w9\" is not in the hostfile";
        QTest::addRow("slot out of range") << "" << "w0:7" << "--exclude: slot \"7\" does not exist on host \"w0\" (it has 4 slots)";
        QTest::addRow("empty entry") << "w0@@w1" << "" << "empty entry";
        QTest::addRow("nothing left") << "" << "w0@w1" << "leaves no slots to run on";
    }
    void badFilters()
    {
        QFETCH(QString, include);
        QFETCH(QString, exclude);
        QFETCH(QString, message);
        try {
            (void)applyHostFilter(hosts("w0 slots=4\nw1 slots=2\n"), include.toStdString(), exclude.toStdString());
            QFAIL("expected ConfigError");
        } catch (const ConfigError &e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
        }
    }

    void exportRoundTrips()
    {
        const auto h = hosts("a slots=8 group=r1\nb slots=8 group=r1\nc slots=4 group=r2\n");
        const std::string text = hostfileFromHosts(h);
        QCOMPARE(hosts(text.c_str()), h);
        const ClusterProfile p = profileFromHosts(h);
        QVERIFY(p.grouping.mode == GroupingSpec::Mode::ByLabel);
        QVERIFY(validateProfile(p).empty());
        const RankLayout layout = rankLayout(p);
        QCOMPARE(layout.groups.size(), std::size_t{2});
        QCOMPARE(layout.groups[0].ranks.size(), std::size_t{16});
        // Device lists that a hostfile cannot express are kept as a comment with the right filter.
        auto filtered = applyHostFilter(h, "a:1,3", "");
        QVERIFY(hostfileFromHosts(filtered).find("--include a:1,3") != std::string::npos);
    }

    void carriesWhatEveryHostShares()
    {
        auto to = hosts("x slots=2\ny slots=2\n");
        const auto before = to;
        // Nothing to carry from no hosts, nor from hosts at the defaults.
        QVERIFY(carrySharedHostSettings({}, to).empty());
        QVERIFY(carrySharedHostSettings(hosts("a slots=1\nb slots=1\n"), to).empty());
        QCOMPARE(to, before);
        auto from = hosts("a slots=1\nb slots=1\nc slots=1\n");
        for (HostSpec &h : from) {
            h.agent = "/opt/cppl/bin/clusterppl-agent";
            h.ssh.port = 2222;
            h.ssh.passwordAuth = true;
            h.env = {{"NCCL_IB_HCA", "mlx5"}};
            h.address = "10.0.0." + h.name; // per host: never carried
        }
        from[1].env["EXTRA"] = "1";   // not shared
        from[2].ssh.user = "root";    // one host's
        const auto carried = carrySharedHostSettings(from, to);
        QCOMPARE(carried, (std::vector<std::string>{"agent", "ssh port", "password login"}));
        for (const HostSpec &h : to) {
            QCOMPARE(h.agent, std::string("/opt/cppl/bin/clusterppl-agent"));
            QCOMPARE(h.ssh.port, 2222);
            QVERIFY(h.ssh.passwordAuth);
            QVERIFY(h.env.empty());
            QCOMPARE(h.ssh.user, std::string());
            QCOMPARE(h.address, std::string());
            QCOMPARE(h.slots, 2);
        }
    }
};

QTEST_APPLESS_MAIN(TestHostfile)
#include "tst_hostfile.moc"
