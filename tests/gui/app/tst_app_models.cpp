// SPDX-License-Identifier: MIT
// The dashboard's models under QAbstractItemModelTester, the Cluster page's hostfile round trip and
// its refusals of invalid edits (each naming the field).

#include "alert_model.h"
#include "cluster_page.h"
#include "evaluation_page.h"
#include "profile_model.h"
#include "rank_table_model.h"
#include "run_charts.h"
#include "history_model.h"
#include "run_page.h"
#include "synthetic_run.h"

#include "cppl/hostfile.h"
#include "cppl/statistics.h"
#include "cppl/telemetry.h"
#include "telemetry/collector_state.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QToolBar>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFile>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QMimeData>
#include <QSettings>
#include <QScrollArea>
#include <QScrollBar>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStyledItemDelegate>
#include <QTableView>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeView>

#include <cmath>
#include <map>

using namespace Qt::StringLiterals;
using cppl::app::ProfileModel;

namespace {

cppl::ClusterProfile twoRacks()
{
    const auto parsed = cppl::parseHostfile("node-a slots=2 group=rack1\nnode-b slots=2 group=rack1\nnode-c slots=4 group=rack2\n");
    return cppl::profileFromHosts(parsed.hosts, "ssh");
}

QByteArray readAll(const QString &path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

/// @p json written to @p name in @p dir; its path (empty when it could not be written).
QString writeIn(const QTemporaryDir &dir, const QString &name, const QByteArray &json)
{
    QFile f(dir.filePath(name));
    return f.open(QIODevice::WriteOnly) && f.write(json) == json.size() ? f.fileName() : QString();
}

} // namespace

class TestAppModels : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void profileModelStructure();
    void profileModelEditsUnderTester();
    void invalidEditsRefused_data();
    void invalidEditsRefused();
    void dragHostBetweenGroups();
    void problemsMapToRows();
    void hostfileRoundTrip();
    void moveSeveralHosts();
    void hostFormEditsSeveralHosts();
    void slurmForm();
    void slurmTree();
    void evaluationPageBatchAuto();
    void evaluationPageSharesInPercent();
    void evaluationPageScrollsOnlyVertically();
    void rankAndAlertModels();
    void finishedRanksKeepTheirRate();
    void evaluationPageKeepsScheduleAndRankLoss();
    void evaluationSettingsFromBeforeTheDefaultFlip_data();
    void evaluationSettingsFromBeforeTheDefaultFlip();
    void evaluationSettingsBaseThatIsGone();
    void evaluationPageOverlapSync();
    void evaluationPageQuantization();
    void alertStormCoalesced();
    void lostRankAlertTakesOverFailed();
    void noticeLineWhileRecovering();
    void runPageSaysHowTheBaselineCompared();
    void syntheticRunSaysWhatARealRunSays();
    void runPageWidthDoesNotFollowTheRanks();
    void deviationChartNamesTheSchedule();
    void alertStormOnTheRunPage();
    void memoryColumn_data();
    void memoryColumn();
    void unknownFiguresReadAsDash();
    void rankTableGroupsDigitsAsThePageDoes();
    void syntheticTelemetryLossComesMidRun();
    void rankTableAndAlertsFitANarrowWindow();
    void etaFromTheCurrentRate();
    void historyWritesFiguresAsTheRunPage();
};

void TestAppModels::profileModelStructure()
{
    ProfileModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setProfile(twoRacks());
    QVERIFY(m.problems().isEmpty());
    // by-label: two groups, rack1 with two hosts, rack2 with one; slots under hosts.
    QCOMPARE(m.rowCount(), 2);
    QCOMPARE(m.index(0, 0).data().toString(), u"rack1"_s);
    const QModelIndex rack1 = m.index(0, 0);
    QCOMPARE(m.rowCount(rack1), 2);
    const QModelIndex nodeC = m.index(0, 0, m.index(1, 0));
    QCOMPARE(nodeC.data().toString(), u"node-c"_s);
    QCOMPARE(m.rowCount(nodeC), 4);
    QCOMPARE(m.index(0, ProfileModel::ColRanks, nodeC).data().toString(), u"rank 4"_s);
    // Group leaders come from rankLayout(): the first rank of each group.
    QCOMPARE(m.index(0, ProfileModel::ColRole, nodeC).data().toString(), u"leader of rack2"_s);
    QCOMPARE(m.index(1, ProfileModel::ColRole, nodeC).data().toString(), u"in rack2"_s);
    QCOMPARE(m.index(0, ProfileModel::ColRole, rack1).data().toString(), u"leads rack1"_s);
    QCOMPARE(m.index(1, ProfileModel::ColRole, rack1).data().toString(), QString());
}

void TestAppModels::profileModelEditsUnderTester()
{
    ProfileModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setProfile(twoRacks());
    QVERIFY(m.setData(m.index(0, ProfileModel::ColAddress, m.index(0, 0)), u"10.0.0.1"_s));
    QCOMPARE(m.profile().hosts[0].address, std::string("10.0.0.1"));
    QVERIFY(m.setData(m.index(0, ProfileModel::ColSlots, m.index(0, 0)), 3));
    QCOMPARE(m.rowCount(m.index(0, 0, m.index(0, 0))), 3);
    QVERIFY(m.addHost(1, u"node-d"_s, 2).isEmpty());
    QCOMPARE(m.profile().hosts.size(), size_t(4));
    QCOMPARE(m.profile().hosts[3].group, std::string("rack2"));
    QVERIFY(m.addGroup(u"rack3"_s).isEmpty()); // becomes explicit
    QCOMPARE(m.profile().grouping.mode, cppl::GroupingSpec::Mode::Explicit);
    QCOMPARE(m.rowCount(), 3);
    QVERIFY(m.moveHostToGroup(3, 2).isEmpty());
    QCOMPARE(m.rowCount(m.index(2, 0)), 1);
    QVERIFY(m.moveHost(0, 1).isEmpty());
    QCOMPARE(m.profile().hosts[0].name, std::string("node-b"));
    QVERIFY(m.renameGroup(2, u"rack-3"_s).isEmpty());
    QCOMPARE(m.index(2, 0).data().toString(), u"rack-3"_s);
    QVERIFY(m.setGrouping(cppl::GroupingSpec::Mode::BySize, 2).isEmpty());
    QCOMPARE(m.rowCount(), 1);
    // Groups of consecutive ranks are named by their range, an en dash as in the Ranks column.
    const QModelIndex firstHost = m.index(0, 0, m.index(0, 0));
    QCOMPARE(m.index(0, ProfileModel::ColRanks, m.index(0, 0)).data().toString().contains(u'-'), false);
    QVERIFY2(m.index(firstHost.row(), ProfileModel::ColRole, m.index(0, 0)).data().toString().startsWith(u"leads ranks 0–1"_s),
             qPrintable(m.index(firstHost.row(), ProfileModel::ColRole, m.index(0, 0)).data().toString()));
    QVERIFY(m.removeHost(0).isEmpty());
    QCOMPARE(m.profile().hosts.size(), size_t(3));
    m.setPreflight(u"node-a"_s, true, u"✓ agent 0.1.0"_s, u"details"_s);
    QVERIFY(m.problems().isEmpty());
}

void TestAppModels::invalidEditsRefused_data()
{
    QTest::addColumn<int>("column");
    QTest::addColumn<QVariant>("value");
    QTest::addColumn<QString>("field");
    QTest::addRow("slots 0") << int(ProfileModel::ColSlots) << QVariant(0) << u"hosts[0].slots"_s;
    QTest::addRow("slots not a number") << int(ProfileModel::ColSlots) << QVariant(u"four"_s) << u"hosts[0].slots"_s;
    QTest::addRow("empty name") << int(ProfileModel::ColName) << QVariant(QString()) << u"hosts[0].name"_s;
    QTest::addRow("duplicate name") << int(ProfileModel::ColName) << QVariant(u"node-b"_s) << u".name: host \"node-b\" is listed twice"_s;
    QTest::addRow("name with a space") << int(ProfileModel::ColName) << QVariant(u"node a"_s) << u"hosts[0].name"_s;
}

void TestAppModels::invalidEditsRefused()
{
    QFETCH(int, column);
    QFETCH(QVariant, value);
    QFETCH(QString, field);
    ProfileModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setProfile(twoRacks());
    const auto before = m.profile();
    QSignalSpy refused(&m, &ProfileModel::editRefused);
    QVERIFY(!m.setData(m.index(0, column, m.index(0, 0)), value));
    QCOMPARE(refused.size(), 1);
    const QString message = refused.front().front().toString();
    QVERIFY2(message.contains(field), qPrintable(message));
    QVERIFY(m.profile() == before);
    QVERIFY(m.problems().isEmpty());
}

void TestAppModels::dragHostBetweenGroups()
{
    ProfileModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setProfile(twoRacks());
    const QModelIndex nodeA = m.index(0, 0, m.index(0, 0));
    std::unique_ptr<QMimeData> mime(m.mimeData({nodeA}));
    QVERIFY(mime);
    const QModelIndex rack2 = m.index(1, 0);
    QVERIFY(m.canDropMimeData(mime.get(), Qt::MoveAction, -1, 0, rack2));
    m.dropMimeData(mime.get(), Qt::MoveAction, -1, 0, rack2);
    // by-label: the drop relabels the host and moves it behind rack2's hosts (contiguous ranks).
    const auto hosts = m.profile().hosts;
    QCOMPARE(hosts.size(), size_t(3));
    QCOMPARE(hosts[2].name, std::string("node-a"));
    QCOMPARE(hosts[2].group, std::string("rack2"));
    QCOMPARE(m.index(0, 0).data().toString(), u"rack1"_s);
    QCOMPARE(m.rowCount(m.index(0, 0)), 1);
    QCOMPARE(m.rowCount(m.index(1, 0)), 2);
    QCOMPARE(m.index(1, 0, m.index(1, 0)).data().toString(), u"node-a"_s);
    // Two hosts dragged together (both selected): both move, in their order; rack2 empties and goes.
    const QModelIndex rack2Hosts = m.index(1, 0);
    std::unique_ptr<QMimeData> both(m.mimeData({m.index(0, 0, rack2Hosts), m.index(0, 1, rack2Hosts), m.index(1, 0, rack2Hosts)}));
    QVERIFY(both);
    QCOMPARE(both->data(both->formats().front()), QByteArray("1,2"));
    m.dropMimeData(both.get(), Qt::MoveAction, -1, 0, m.index(0, 0));
    QCOMPARE(m.rowCount(), 1);
    QCOMPARE(m.rowCount(m.index(0, 0)), 3);
    for (const auto &h : m.profile().hosts)
        QCOMPARE(h.group, std::string("rack1"));
    QCOMPARE(m.profile().hosts[1].name, std::string("node-c"));
    QCOMPARE(m.profile().hosts[2].name, std::string("node-a"));
    // By size: refused with the reason.
    QVERIFY(m.setGrouping(cppl::GroupingSpec::Mode::BySize, 2).isEmpty());
    QSignalSpy refused(&m, &ProfileModel::editRefused);
    QVERIFY(!m.moveHostToGroup(0, 0).isEmpty());
    QCOMPARE(refused.size(), 1);
    QVERIFY(refused.front().front().toString().contains(u"explicit"_s));
}

void TestAppModels::problemsMapToRows()
{
    // A profile read from a file may carry problems: they are listed and mapped to their row.
    auto p = twoRacks();
    p.grouping.mode = cppl::GroupingSpec::Mode::Explicit;
    p.grouping.groups = {{"r1", {"node-a", "node-b"}}};
    ProfileModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setProfile(p);
    QCOMPARE(m.problems().size(), 1);
    QVERIFY(m.problems().front().contains(u"node-c"_s));
    const QModelIndex row = m.indexOfProblem(m.problems().front());
    QVERIFY(row.isValid());
    QCOMPARE(m.hostIndexOf(row), 2);
    QVERIFY(row.data(Qt::ToolTipRole).toString().contains(u"node-c"_s));
    // Fixing it through the editor clears the problem.
    QVERIFY(m.moveHostToGroup(2, 0).isEmpty());
    QVERIFY(m.problems().isEmpty());
}

/// Several hosts selected (Ctrl/Shift-click, or a group row): the form shows what they share,
/// "differs" for the rest, and an edit applies to all of them in one validated step; where to
/// connect stays each host's own; Remove takes the selected hosts.
void TestAppModels::moveSeveralHosts()
{
    // Move up/down take every selected host, as a block keeps its gaps, and they stay selected;
    // at the top (bottom) nothing moves.
    QTemporaryDir dir;
    const QString in = writeIn(dir, u"four.json"_s, R"({"format": "clusterppl-profile", "version": 1, "name": "four", "launcher": "ssh",
                   "hosts": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d"}, {"name": "e"}],
                   "evaluation": {"model": "m", "tokens": "t.u32"}})");
    QVERIFY(!in.isEmpty());
    cppl::app::ClusterPage page;
    page.show();
    QVERIFY(page.openProfile(in));
    auto *tools = page.findChild<QToolBar *>(u"clusterTools"_s);
    QVERIFY(tools);
    QAction *up = nullptr, *down = nullptr;
    for (QAction *a : tools->actions()) {
        if (a->text() == u"Move up"_s)
            up = a;
        if (a->text() == u"Move down"_s)
            down = a;
    }
    QVERIFY(up && down);
    auto order = [&] {
        QString o;
        for (const auto &h : page.profile().hosts)
            o += QString::fromStdString(h.name);
        return o;
    };
    auto selected = [&] {
        QString o;
        for (const QModelIndex &i : page.tree()->selectionModel()->selectedRows())
            if (const int h = page.model()->hostIndexOf(i); h >= 0)
                o += QString::fromStdString(page.profile().hosts[size_t(h)].name);
        std::sort(o.begin(), o.end());
        return o;
    };
    QItemSelectionModel *sm = page.tree()->selectionModel();
    sm->setCurrentIndex(page.model()->indexOfHost(1), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    sm->select(page.model()->indexOfHost(3), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    sm->select(page.model()->indexOfHost(4), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    up->trigger(); // b, d and e: b above a, the block d-e above c
    QCOMPARE(order(), u"badec"_s);
    QCOMPARE(selected(), u"bde"_s);
    up->trigger(); // b is first: nothing moves
    QCOMPARE(order(), u"badec"_s);
    QCOMPARE(selected(), u"bde"_s);
    down->trigger();
    QCOMPARE(order(), u"abcde"_s);
    QCOMPARE(selected(), u"bde"_s);
    down->trigger(); // e is last
    QCOMPARE(order(), u"abcde"_s);
    // One host, as before.
    sm->setCurrentIndex(page.model()->indexOfHost(2), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    down->trigger();
    QCOMPARE(order(), u"abdce"_s);
    QCOMPARE(selected(), u"c"_s);
    QCOMPARE(page.model()->hostIndexOf(page.tree()->currentIndex()), 3);
}

void TestAppModels::hostFormEditsSeveralHosts()
{
    QTemporaryDir dir;
    const QString in = writeIn(dir, u"three.json"_s, R"({"format": "clusterppl-profile", "version": 1, "name": "three", "launcher": "ssh",
                   "hosts": [{"name": "node1", "slots": 2, "ssh": {"user": "alice"}, "agent": "/opt/a/clusterppl-agent"},
                             {"name": "node2", "slots": 2, "ssh": {"user": "bob"}, "agent": "/opt/a/clusterppl-agent"},
                             {"name": "node3", "slots": 2, "agent": "/opt/b/clusterppl-agent"}],
                   "groups": [{"name": "rackA", "hosts": ["node1", "node2"]}, {"name": "rackB", "hosts": ["node3"]}],
                   "evaluation": {"model": "m", "tokens": "t.u32"}})");
    QVERIFY(!in.isEmpty());
    cppl::app::ClusterPage page;
    QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    page.show();
    QVERIFY(page.openProfile(in));
    auto edit = [&](ProfileModel::HostField f) { return page.findChild<QLineEdit *>(u"host_"_s + QString::number(int(f))); };
    auto *password = page.findChild<QCheckBox *>(u"host_"_s + QString::number(int(ProfileModel::HostField::SshPassword)));
    QVERIFY(edit(ProfileModel::HostField::Agent) && password);
    auto host = [&](int h) { return page.profile().hosts[size_t(h)]; };
    auto type = [&](ProfileModel::HostField f, const QString &text) {
        QLineEdit *e = edit(f);
        e->selectAll();
        QTest::keyClicks(e, text); // a user's typing: the field is modified
        Q_EMIT e->editingFinished();
    };
    // Ctrl-click node1, then node2.
    QItemSelectionModel *sm = page.tree()->selectionModel();
    sm->setCurrentIndex(page.model()->indexOfHost(0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    sm->select(page.model()->indexOfHost(1), QItemSelectionModel::Select | QItemSelectionModel::Rows);
    QCOMPARE(page.hostBox()->title(), u"2 hosts: an edit applies to all of them"_s);
    QCOMPARE(edit(ProfileModel::HostField::Agent)->text(), u"/opt/a/clusterppl-agent"_s); // shared
    QCOMPARE(edit(ProfileModel::HostField::SshUser)->text(), QString());                  // differs
    QCOMPARE(edit(ProfileModel::HostField::SshUser)->placeholderText(), u"differs"_s);
    QVERIFY(!edit(ProfileModel::HostField::Address)->isEnabled());
    QCOMPARE(edit(ProfileModel::HostField::Address)->placeholderText(), u"one per host"_s);

    // Typed once, set on both; the third host keeps its own; both stay selected.
    type(ProfileModel::HostField::Agent, u"/shared/opt/clusterppl/bin/clusterppl-agent"_s);
    QCOMPARE(host(0).agent, std::string("/shared/opt/clusterppl/bin/clusterppl-agent"));
    QCOMPARE(host(1).agent, std::string("/shared/opt/clusterppl/bin/clusterppl-agent"));
    QCOMPARE(host(2).agent, std::string("/opt/b/clusterppl-agent"));
    QCOMPARE(page.hostBox()->title(), u"2 hosts: an edit applies to all of them"_s);
    // A field left as it was ("differs") changes nobody when editing ends.
    Q_EMIT edit(ProfileModel::HostField::SshUser)->editingFinished();
    QCOMPARE(host(0).ssh.user, std::string("alice"));
    QCOMPARE(host(1).ssh.user, std::string("bob"));
    type(ProfileModel::HostField::SshUser, u"eval"_s);
    QCOMPARE(host(0).ssh.user, std::string("eval"));
    QCOMPARE(host(1).ssh.user, std::string("eval"));
    QCOMPARE(edit(ProfileModel::HostField::SshUser)->placeholderText(), QString()); // shared now
    // An invalid value is refused for all of them: nobody changes.
    QSignalSpy refused(page.model(), &ProfileModel::editRefused);
    type(ProfileModel::HostField::SshPort, u"22x"_s);
    QCOMPARE(refused.size(), 1);
    QCOMPARE(host(0).ssh.port, 22);
    QCOMPARE(host(1).ssh.port, 22);
    // Password login differs: shown partly checked, a click sets it on both.
    QVERIFY(page.model()->setHostField(1, ProfileModel::HostField::SshPassword, true).isEmpty());
    page.selectHosts({0, 1});
    QCOMPARE(password->checkState(), Qt::PartiallyChecked);
    password->click();
    QVERIFY(host(0).ssh.passwordAuth && host(1).ssh.passwordAuth && !host(2).ssh.passwordAuth);
    QVERIFY(!password->isTristate());

    // A group row: its hosts. A label typed there regroups nothing here (explicit groups) but is set on both.
    sm->setCurrentIndex(page.model()->indexOfGroup(1), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    QCOMPARE(page.hostBox()->title(), u"Host node3"_s);
    sm->setCurrentIndex(page.model()->indexOfGroup(0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    QCOMPARE(page.hostBox()->title(), u"2 hosts: an edit applies to all of them"_s);
    type(ProfileModel::HostField::Workdir, u"/scratch/eval"_s);
    QCOMPARE(host(0).workdir, std::string("/scratch/eval"));
    QCOMPARE(host(1).workdir, std::string("/scratch/eval"));
    QCOMPARE(host(2).workdir, std::string());
    // One host again: the form is that host's, every field its own.
    page.selectHosts({2});
    QCOMPARE(page.hostBox()->title(), u"Host node3"_s);
    QVERIFY(edit(ProfileModel::HostField::Address)->isEnabled());
    QCOMPARE(edit(ProfileModel::HostField::SshUser)->placeholderText(), QString());

    // Remove with two host rows selected: both go, in one edit; a group row alone removes no host.
    page.selectHosts({0, 1});
    QAction *remove = nullptr;
    for (QAction *a : page.findChildren<QAction *>())
        if (a->text() == u"Remove"_s)
            remove = a;
    QVERIFY(remove);
    sm->setCurrentIndex(page.model()->indexOfGroup(1), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    remove->trigger();
    QCOMPARE(int(page.profile().hosts.size()), 3); // rackB still has node3: refused, nothing removed
    page.selectHosts({0, 1});
    remove->trigger();
    QCOMPARE(int(page.profile().hosts.size()), 1);
    QCOMPARE(host(0).name, std::string("node3"));
}

void TestAppModels::hostfileRoundTrip()
{
    QTemporaryDir dir;
    const QString in = dir.filePath(u"in.hostfile"_s);
    {
        QFile f(in);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("# two racks\nnode-a slots=2 group=rack1\nnode-b slots=2 group=rack1\nnode-c slots=4 group=rack2\n");
    }
    cppl::app::ClusterPage page;
    QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy failed(&page, &cppl::app::ClusterPage::failed);
    QVERIFY(page.importHostfile(in));
    QCOMPARE(page.profile().hosts.size(), size_t(3));
    // Edit: one more slot on node-c, node-b moves to rack2, a new host in rack1.
    auto *m = page.model();
    QVERIFY(m->setHostField(2, ProfileModel::HostField::Slots, 8).isEmpty());
    QVERIFY(m->moveHostToGroup(1, 1).isEmpty());
    QVERIFY(m->addHost(0, u"node-d"_s, 1).isEmpty());
    const QString out = dir.filePath(u"out.hostfile"_s);
    QVERIFY(page.exportHostfile(out));
    QCOMPARE(failed.size(), 0);
    const auto reread = cppl::parseHostfile(readAll(out).toStdString());
    QVERIFY(reread.ok());
    const auto expected = page.profile().hosts;
    QCOMPARE(reread.hosts.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
        QCOMPARE(reread.hosts[i].name, expected[i].name);
        QCOMPARE(reread.hosts[i].slots, expected[i].slots);
        QCOMPARE(reread.hosts[i].group, expected[i].group);
    }
    auto byName = [&](const char *name) {
        return *std::find_if(reread.hosts.begin(), reread.hosts.end(), [&](const cppl::HostSpec &h) { return h.name == name; });
    };
    QCOMPARE(byName("node-d").group, std::string("rack1"));
    QCOMPARE(byName("node-b").group, std::string("rack2"));
    QCOMPARE(byName("node-c").slots, 8);
    // Groups stay contiguous in rank order: rack1's hosts first, then rack2's.
    QCOMPARE(reread.hosts[0].group, std::string("rack1"));
    QCOMPARE(reread.hosts[1].group, std::string("rack1"));
    QCOMPARE(reread.hosts[2].group, std::string("rack2"));
    // Import of what was exported gives the same hosts again.
    QVERIFY(page.importHostfile(out));
    QVERIFY(page.profile().hosts == expected);
    // What every host shares and a hostfile cannot say stays on every imported host; the message says what.
    QSignalSpy info(&page, &cppl::app::ClusterPage::info);
    QVERIFY(m->setHostsField({0, 1, 2, 3}, ProfileModel::HostField::Agent, u"/shared/bin/clusterppl-agent"_s).isEmpty());
    QVERIFY(m->setHostsField({0, 1, 2, 3}, ProfileModel::HostField::SshUser, u"eval"_s).isEmpty());
    QVERIFY(m->setHostField(0, ProfileModel::HostField::Workdir, u"/scratch/only-a"_s).isEmpty());
    QVERIFY(page.importHostfile(in));
    QCOMPARE(page.profile().hosts.size(), size_t(3));
    for (const cppl::HostSpec &h : page.profile().hosts) {
        QCOMPARE(h.agent, std::string("/shared/bin/clusterppl-agent"));
        QCOMPARE(h.ssh.user, std::string("eval"));
        QCOMPARE(h.workdir, std::string()); // one host's own: not carried
    }
    QCOMPARE(info.size(), 1);
    QCOMPARE(info.back().front().toString(),
             u"Imported 3 hosts from %1; every host keeps what the earlier hosts shared: agent, ssh user"_s.arg(in));

    // Errors name the file and the cause.
    QVERIFY(!page.importHostfile(dir.filePath(u"missing"_s)));
    QCOMPARE(failed.size(), 1);
    QVERIFY(failed.back().front().toString().contains(u"does not exist"_s));
    const QString bad = dir.filePath(u"bad.hostfile"_s);
    {
        QFile f(bad);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("node-a slots=zero\n");
    }
    QVERIFY(!page.importHostfile(bad));
    QVERIFY2(failed.back().front().toString().contains(u"bad.hostfile:1"_s), qPrintable(failed.back().front().toString()));
    // Profile JSON round trip as well.
    const QString json = dir.filePath(u"p.json"_s);
    QVERIFY(page.saveProfile(json));
    const auto parsed = cppl::parseProfile(readAll(json).toStdString());
    QVERIFY(parsed.ok());
    QVERIFY(parsed.profile == page.profile());
}

/// The Slurm job's form: filled from a slurm profile, each field checked as typed (the profile's own
/// message, the field marked) and applied only when valid, the spin boxes alike, the other
/// launchers hiding it (and putting the slurm object aside), and the JSON round trip.
void TestAppModels::slurmForm()
{
    QTemporaryDir dir;
    const QString in = writeIn(dir, u"slurm.json"_s, R"({"format": "clusterppl-profile", "version": 1, "name": "cluster", "launcher": "slurm",
                   "hosts": [{"name": "login1", "ssh": {"user": "eval"}}],
                   "evaluation": {"model": "m", "tokens": "t.u32", "backend": "nccl"},
                   "slurm": {"partition": "gpu", "account": "proj1", "time_limit": "01:30:00", "nodes": 2,
                             "ntasks_per_node": 4, "gpus_per_node": 4, "sbatch_options": ["--exclusive", "--mem=0"],
                             "modules": ["cuda/12.2"]}})");
    QVERIFY(!in.isEmpty());
    cppl::app::ClusterPage page;
    QAbstractItemModelTester tester(page.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy failed(&page, &cppl::app::ClusterPage::failed);
    page.show(); // typed keys reach a shown line edit
    QVERIFY(page.openProfile(in));
    QVERIFY(!page.slurmBox()->isHidden());
    auto edit = [&](const char *key) { return page.findChild<QLineEdit *>(u"slurm_"_s + QLatin1String(key)); };
    auto spin = [&](const char *key) { return page.findChild<QSpinBox *>(u"slurm_"_s + QLatin1String(key)); };
    auto marked = [&](QLineEdit *e) {
        const auto actions = e->actions();
        return std::any_of(actions.begin(), actions.end(), [](QAction *a) { return a->isVisible() && !a->toolTip().isEmpty(); });
    };
    for (const char *key : {"partition", "account", "qos", "time_limit", "constraint", "sbatch_options", "modules", "env_script", "agent", "job_dir"})
        QVERIFY2(edit(key) && !edit(key)->toolTip().isEmpty(), key);
    QCOMPARE(edit("partition")->text(), u"gpu"_s);
    QCOMPARE(edit("time_limit")->text(), u"01:30:00"_s);
    QCOMPARE(edit("sbatch_options")->text(), u"--exclusive --mem=0"_s);
    QCOMPARE(edit("job_dir")->text(), QString()); // the default, shown as the placeholder
    QCOMPARE(edit("job_dir")->placeholderText(), u".clusterppl/jobs"_s);
    QCOMPARE(spin("nodes")->value(), 2);
    QCOMPARE(spin("ntasks_per_node")->value(), 4);
    QCOMPARE(spin("gpus_per_node")->value(), 4);
    QVERIFY2(page.slurmStatusText().startsWith(u"2 × 4 = 8 ranks, 4 GPUs per node"_s), qPrintable(page.slurmStatusText()));

    // A valid edit is applied when editing ends.
    edit("partition")->clear();
    QTest::keyClicks(edit("partition"), u"a100"_s);
    Q_EMIT edit("partition")->editingFinished();
    QCOMPARE(page.profile().slurm.partition, std::string("a100"));

    // An invalid time limit: marked and explained as typed, not applied, kept in its field.
    edit("time_limit")->clear();
    QTest::keyClicks(edit("time_limit"), u"1h30"_s);
    QVERIFY(marked(edit("time_limit")));
    QVERIFY(!marked(edit("partition")));
    QVERIFY2(page.slurmStatusText().contains(u"Not applied: slurm.time_limit: \"1h30\" is not a Slurm time"_s), qPrintable(page.slurmStatusText()));
    Q_EMIT edit("time_limit")->editingFinished();
    QCOMPARE(page.profile().slurm.timeLimit, std::string("01:30:00"));
    QCOMPARE(edit("time_limit")->text(), u"1h30"_s);
    edit("time_limit")->clear();
    QTest::keyClicks(edit("time_limit"), u"2-00:00:00"_s);
    Q_EMIT edit("time_limit")->editingFinished();
    QVERIFY(!marked(edit("time_limit")));
    QCOMPARE(page.profile().slurm.timeLimit, std::string("2-00:00:00"));

    // An option ClusterPPL sets itself, and a partition with a space: refused with the reason.
    edit("sbatch_options")->setText(u"--exclusive --nodes=3"_s);
    Q_EMIT edit("sbatch_options")->textEdited(edit("sbatch_options")->text());
    QVERIFY(marked(edit("sbatch_options")));
    QVERIFY2(page.slurmStatusText().contains(u"--nodes is set by ClusterPPL"_s), qPrintable(page.slurmStatusText()));
    Q_EMIT edit("sbatch_options")->editingFinished();
    QCOMPARE(page.profile().slurm.sbatchOptions, (std::vector<std::string>{"--exclusive", "--mem=0"}));
    edit("sbatch_options")->setText(u"--exclusive  --mem=0 --gres=gpu:4"_s);
    Q_EMIT edit("sbatch_options")->editingFinished();
    QCOMPARE(page.profile().slurm.sbatchOptions, (std::vector<std::string>{"--exclusive", "--mem=0", "--gres=gpu:4"}));

    // Fewer GPUs than tasks per node with nccl: not applied; more tasks and nodes: applied.
    spin("gpus_per_node")->setValue(2);
    QCOMPARE(page.profile().slurm.gpusPerNode, 4);
    QVERIFY2(page.slurmStatusText().contains(u"slurm.gpus_per_node: 2 GPUs for 4 tasks per node"_s), qPrintable(page.slurmStatusText()));
    spin("gpus_per_node")->setValue(8);
    spin("ntasks_per_node")->setValue(8);
    spin("nodes")->setValue(3);
    QCOMPARE(page.profile().slurm.gpusPerNode, 8);
    QCOMPARE(page.profile().slurm.ntasksPerNode, 8);
    QCOMPARE(page.profile().slurm.nodes, 3);
    QVERIFY2(page.slurmStatusText().startsWith(u"3 × 8 = 24 ranks"_s), qPrintable(page.slurmStatusText()));

    // Other launchers hide the job and put it aside (a slurm object is an error there); back to slurm restores it.
    const cppl::SlurmSpec job = page.profile().slurm;
    auto *launcher = page.findChild<QComboBox *>(u"launcher"_s);
    QVERIFY(launcher);
    auto choose = [&](const QString &name) {
        const int i = launcher->findData(name);
        launcher->setCurrentIndex(i);
        Q_EMIT launcher->activated(i);
    };
    choose(u"ssh"_s);
    QCOMPARE(page.profile().launcher, std::string("ssh"));
    QVERIFY(page.slurmBox()->isHidden());
    QVERIFY(page.profile().slurm == cppl::SlurmSpec{});
    QVERIFY2(page.model()->problems().isEmpty(), qPrintable(page.model()->problems().join(u'\n')));
    choose(u"slurm"_s);
    QVERIFY(!page.slurmBox()->isHidden());
    QVERIFY(page.profile().slurm == job);
    QCOMPARE(edit("partition")->text(), u"a100"_s);
    QCOMPARE(failed.size(), 0);

    // Saved and read back: the same job.
    const QString out = dir.filePath(u"out.json"_s);
    QVERIFY(page.saveProfile(out));
    const auto parsed = cppl::parseProfile(readAll(out).toStdString());
    QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.errors.front().c_str());
    QVERIFY(parsed.profile.slurm == job);
    QCOMPARE(parsed.profile.slurm.account, std::string("proj1"));
    QCOMPARE(parsed.profile.slurm.modules, std::vector<std::string>{"cuda/12.2"});

    // Two hosts cannot be a slurm profile: the switch is refused and the combo shows the launcher kept.
    QVERIFY(page.importHostfile(QStringLiteral(CPPL_SOURCE_DIR "/resources/profiles/two-racks.hostfile")));
    choose(u"slurm"_s);
    QCOMPARE(page.profile().launcher, std::string("ssh"));
    QCOMPARE(launcher->currentData().toString(), u"ssh"_s);
    QVERIFY(page.slurmBox()->isHidden());
}

void TestAppModels::finishedRanksKeepTheirRate()
{
    // A finished rank shows the rate of its last progress message, as the collector keeps a real
    // agent's (the screenshots' 1024-rank finished page showed 0 tok/s in every row before).
    cppl::app::SyntheticRun run = cppl::app::SyntheticRun::advanced(64, 120);
    std::vector<double> live;
    for (const auto &r : run.snapshot().ranks)
        live.push_back(r.tokensPerSecond);
    QVERIFY(run.snapshot().tokensPerSecond > 0);
    run.finish();
    const auto &done = run.snapshot();
    QCOMPARE(done.ranks.size(), live.size());
    for (std::size_t i = 0; i < live.size(); ++i) {
        QCOMPARE(done.ranks[i].state, cppl::core::telemetry::RankState::Done);
        QVERIFY2(done.ranks[i].tokensPerSecond > 0, qPrintable(u"rank %1 shows 0 tok/s when finished"_s.arg(i)));
    }
    // The run's total counts evaluating ranks only; the finished headline shows the result's rate.
    QCOMPARE(done.tokensPerSecond, 0.0);
    cppl::app::RankTableModel ranks;
    ranks.update(done);
    QVERIFY(ranks.index(0, cppl::app::RankTableModel::ColRate).data().toString() != u"0"_s);
}

void TestAppModels::slurmTree()
{
    // The login node runs no rank: the tree shows what Slurm will allocate, and follows the form.
    const auto parsed = cppl::parseProfile(R"({"format": "clusterppl-profile", "version": 1, "name": "cluster", "launcher": "slurm",
        "hosts": [{"name": "login1", "ssh": {"user": "eval"}}], "groups": "size:2",
        "evaluation": {"model": "m", "tokens": "t.u32", "backend": "nccl"},
        "slurm": {"nodes": 2, "ntasks_per_node": 3, "gpus_per_node": 4}})");
    QVERIFY(parsed.ok());
    ProfileModel m;
    QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
    m.setProfile(parsed.profile);
    const QModelIndex group = m.index(0, 0);
    QCOMPARE(m.index(0, ProfileModel::ColRanks).data().toString(), u"6 ranks on 2 Slurm nodes"_s);
    const QModelIndex login = m.index(0, 0, group);
    QCOMPARE(login.data().toString(), u"login1"_s);
    QCOMPARE(m.index(0, ProfileModel::ColRole, group).data().toString(), u"login node: submits the job"_s);
    QCOMPARE(m.index(0, ProfileModel::ColRanks, group).data().toString(), u"ranks 0–5, on the allocation"_s);
    QCOMPARE(m.index(0, ProfileModel::ColSsh, group).data().toString(), u"eval@login1"_s);
    QVERIFY(!(m.flags(m.index(0, ProfileModel::ColSlots, group)) & Qt::ItemIsEditable));
    QCOMPARE(m.rowCount(login), 2);
    QCOMPARE(m.index(1, ProfileModel::ColName, login).data().toString(), u"Slurm node 2"_s);
    QCOMPARE(m.index(1, ProfileModel::ColAddress, login).data().toString(), u"4 GPUs, allocated at start"_s);
    QCOMPARE(m.index(1, ProfileModel::ColRanks, login).data().toString(), u"ranks 3–5"_s);
    QCOMPARE(m.index(0, ProfileModel::ColRole, login).data().toString(), u"ranks 0, 2 lead their groups"_s);
    QCOMPARE(m.index(1, ProfileModel::ColRole, login).data().toString(), u"rank 4 leads its group"_s);
    // More nodes in the form: more rows (a reset, checked by the tester).
    cppl::SlurmSpec more = m.profile().slurm;
    more.nodes = 5;
    QVERIFY(m.setSlurm(more).isEmpty());
    QCOMPARE(m.rowCount(m.index(0, 0, m.index(0, 0))), 5);
    // Another launcher: the host's slots again.
    QVERIFY(m.setLauncher(u"ssh"_s).isEmpty());
    QCOMPARE(m.rowCount(m.index(0, 0, m.index(0, 0))), 1);
    QCOMPARE(m.index(0, ProfileModel::ColRanks, m.index(0, 0, m.index(0, 0))).data().toString(), u"rank 0"_s);
}

void TestAppModels::evaluationPageBatchAuto()
{
    // "Auto (from GPU memory)": the profile's "auto" (no --batch), or a number beside it.
    cppl::app::EvaluationPage page;
    auto *autoBox = page.findChild<QCheckBox *>(u"batchAuto"_s);
    QVERIFY(autoBox);
    QCOMPARE(page.evaluation().batch, cppl::kAutoBatch); // the default
    QVERIFY(autoBox->isChecked());
    cppl::EvaluationSpec e = page.evaluation();
    e.batch = 12;
    page.load(e, page.thresholds());
    QVERIFY(!autoBox->isChecked());
    QCOMPARE(page.evaluation().batch, std::int64_t{12});
    autoBox->setChecked(true);
    QCOMPARE(page.evaluation().batch, cppl::kAutoBatch);
    autoBox->setChecked(false);
    QCOMPARE(page.evaluation().batch, std::int64_t{12}); // the number it had
}

void TestAppModels::evaluationPageSharesInPercent()
{
    // The comm share alert and the deviation tolerance read in percent, as the Run page shows them
    // ("alert threshold 15.0%"; the page showed "0.150"), and the profile keeps the exact fractions.
    cppl::app::EvaluationPage page;
    auto *comm = page.findChild<QDoubleSpinBox *>(u"commShareAlert"_s);
    auto *tolerance = page.findChild<QDoubleSpinBox *>(u"deviationTolerance"_s);
    QVERIFY(comm && tolerance);
    cppl::Thresholds t = page.thresholds();
    t.commShareAlert = 0.15;
    t.deviationTolerance = 0;
    page.load(page.evaluation(), t);
    QCOMPARE(comm->text(), u"15.0 %"_s);
    QCOMPARE(tolerance->text(), u"none: bit-identical"_s);
    QCOMPARE(page.thresholds().commShareAlert, 0.15);
    QCOMPARE(page.thresholds().deviationTolerance, 0.0);
    // Every value shown reads back as the fraction a user would write (0.7 % is 0.007 exactly).
    for (int tenths = 0; tenths <= 1000; ++tenths) {
        comm->setValue(tenths / 10.0);
        QCOMPARE(page.thresholds().commShareAlert, QString::number(tenths / 1000.0, 'g', 6).toDouble());
    }
    tolerance->setValue(0.0123);
    QCOMPARE(tolerance->text(), u"0.0123 %"_s);
    QCOMPARE(page.thresholds().deviationTolerance, 0.000123);
    // Token counts grouped as the preview writes them.
    t = page.thresholds();
    t.syncEveryTokens = 65536;
    page.load(page.evaluation(), t);
    const auto spins = page.findChildren<QSpinBox *>();
    QVERIFY(std::any_of(spins.begin(), spins.end(), [](const QSpinBox *b) { return b->text() == QLocale().toString(65536); }));
    QCOMPARE(page.thresholds().syncEveryTokens, std::int64_t{65536});
}

void TestAppModels::evaluationPageScrollsOnlyVertically()
{
    // Shorter than its form (the window under a message bar): a vertical scroll bar, and the form
    // narrowed beside it, not a horizontal bar for the few pixels the vertical one took.
    cppl::app::EvaluationPage page;
    page.resize(1380, 600);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    auto *scroll = page.findChild<QScrollArea *>();
    QVERIFY(scroll);
    QTRY_VERIFY(scroll->verticalScrollBar()->isVisible());
    QVERIFY(!scroll->horizontalScrollBar()->isVisible());
    QVERIFY2(scroll->widget()->width() <= scroll->viewport()->width(),
             qPrintable(u"%1 > %2"_s.arg(scroll->widget()->width()).arg(scroll->viewport()->width())));
}

void TestAppModels::evaluationPageKeepsScheduleAndRankLoss()
{
    // The page built its EvaluationSpec from its controls only, so a profile's "schedule" and
    // "on_rank_loss" were dropped (back to the defaults) when the dashboard ran it. The defaults:
    // dynamic batches, continue without a lost rank (the profile's, EvaluationSpec{}).
    cppl::app::EvaluationPage page;
    cppl::EvaluationSpec e = page.evaluation();
    QCOMPARE(e.schedule, std::string("dynamic"));
    QCOMPARE(e.onRankLoss, std::string("continue"));
    QCOMPARE(e.schedule, cppl::EvaluationSpec{}.schedule);
    QCOMPARE(e.onRankLoss, cppl::EvaluationSpec{}.onRankLoss);
    e.schedule = "static"; // a profile that asks for static shards keeps them, and fails fast (its only choice)
    e.onRankLoss = "fail";
    page.load(e, page.thresholds());
    QCOMPARE(page.evaluation().schedule, std::string("static"));
    QCOMPARE(page.evaluation().onRankLoss, std::string("fail"));
    e.schedule = "dynamic";
    e.onRankLoss = "fail"; // fail fast, asked for
    page.load(e, page.thresholds());
    QCOMPARE(page.evaluation().onRankLoss, std::string("fail"));
    e.onRankLoss = "continue";
    page.load(e, page.thresholds());
    const cppl::EvaluationSpec back = page.evaluation();
    QCOMPARE(back.schedule, std::string("dynamic"));
    QCOMPARE(back.onRankLoss, std::string("continue"));
    QComboBox *lost = nullptr;
    for (auto *c : page.findChildren<QComboBox *>())
        if (c->findData(u"continue"_s) >= 0)
            lost = c;
    QVERIFY2(lost && lost->currentData().toString() == u"continue"_s && !lost->toolTip().isEmpty(),
             "the lost-rank control shows the loaded value and has a tooltip");
    // Static shards cannot move: choosing them turns the control to fail and disables it; back on
    // dynamic, the choice made there returns.
    QComboBox *schedule = nullptr;
    for (auto *c : page.findChildren<QComboBox *>())
        if (c->findData(u"static"_s) >= 0)
            schedule = c;
    QVERIFY(schedule);
    schedule->setCurrentIndex(schedule->findData(u"static"_s));
    QCOMPARE(page.evaluation().onRankLoss, std::string("fail"));
    QVERIFY(!lost->isEnabled());
    schedule->setCurrentIndex(schedule->findData(u"dynamic"_s));
    QCOMPARE(page.evaluation().onRankLoss, std::string("continue"));
    QVERIFY(lost->isEnabled());
}

void TestAppModels::evaluationSettingsFromBeforeTheDefaultFlip_data()
{
    QTest::addColumn<QVariant>("version"); // the "evaluation" group's; invalid: absent (before version 2)
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<QString>("saved"); // its onRankLoss
    QTest::addColumn<QString>("expected");
    QTest::addColumn<QString>("dtype");         // saved
    QTest::addColumn<QString>("expectedDtype");
    // Before the flip fail was the default and the page saved every field: a saved fail is read as
    // the schedule's default, as a profile without on_rank_loss is. Likewise float32 before dtype
    // auto became the default (version 3).
    QTest::addRow("no version, dynamic, fail: the new default") << QVariant() << "dynamic" << "fail" << "continue" << "float32" << "auto";
    QTest::addRow("no version, dynamic, continue: kept") << QVariant() << "dynamic" << "continue" << "continue" << "bfloat16" << "bfloat16";
    QTest::addRow("no version, static, fail: kept") << QVariant() << "static" << "fail" << "fail" << "float32" << "auto";
    QTest::addRow("version 2, dynamic, fail: chosen, kept") << QVariant(2) << "dynamic" << "fail" << "fail" << "float32" << "auto";
    QTest::addRow("version 3, float32: chosen, kept") << QVariant(3) << "dynamic" << "fail" << "fail" << "float32" << "float32";
}

void TestAppModels::evaluationSettingsFromBeforeTheDefaultFlip()
{
    QFETCH(QVariant, version);
    QFETCH(QString, schedule);
    QFETCH(QString, saved);
    QFETCH(QString, expected);
    QFETCH(QString, dtype);
    QFETCH(QString, expectedDtype);
    {
        QSettings s; // this test's own settings (its application name)
        s.remove(u"evaluation"_s);
        s.beginGroup(u"evaluation"_s);
        s.setValue(u"saved"_s, true);
        if (version.isValid())
            s.setValue(u"version"_s, version);
        s.setValue(u"schedule"_s, schedule);
        s.setValue(u"onRankLoss"_s, saved);
        s.setValue(u"dtype"_s, dtype);
    }
    cppl::app::EvaluationPage page;
    QVERIFY(page.restoreSettings());
    QCOMPARE(page.evaluation().schedule, schedule.toStdString());
    QCOMPARE(page.evaluation().onRankLoss, expected.toStdString());
    QCOMPARE(page.evaluation().dtype, expectedDtype.toStdString());
    auto *precision = page.findChild<QComboBox *>(u"dtype"_s);
    QVERIFY(precision);
    QCOMPARE(precision->currentData().toString(), expectedDtype);
    // Saved again, the settings say version 3: a fail, or a float32, chosen from now on is kept.
    cppl::EvaluationSpec e = page.evaluation();
    if (schedule == u"dynamic"_s)
        e.onRankLoss = "fail";
    e.dtype = "float32";
    page.load(e, page.thresholds());
    page.saveSettings();
    {
        QSettings s;
        QCOMPARE(s.value(u"evaluation/version"_s).toInt(), 3);
    }
    cppl::app::EvaluationPage again;
    QVERIFY(again.restoreSettings());
    QCOMPARE(again.evaluation().onRankLoss, std::string("fail"));
    QCOMPARE(again.evaluation().dtype, std::string("float32"));
    QSettings().remove(u"evaluation"_s);
}

void TestAppModels::evaluationSettingsBaseThatIsGone()
{
    // The saved settings' base directory (what their relative paths were written against) wins
    // over the profile's, unless it is gone: then relative paths keep resolving against the
    // profile's directory instead of a deleted checkout's.
    QTemporaryDir profileDir, savedDir;
    QVERIFY(profileDir.isValid() && savedDir.isValid());
    for (const QString &saved : {savedDir.path(), savedDir.filePath(u"gone"_s)}) {
        {
            QSettings s;
            s.remove(u"evaluation"_s);
            s.beginGroup(u"evaluation"_s);
            s.setValue(u"saved"_s, true);
            s.setValue(u"version"_s, 3);
            s.setValue(u"base"_s, saved);
        }
        cppl::app::EvaluationPage page;
        page.setBaseDirectory(profileDir.path());
        QVERIFY(page.restoreSettings());
        QCOMPARE(page.baseDirectory(), saved == savedDir.path() ? savedDir.path() : profileDir.path());
    }
    QSettings().remove(u"evaluation"_s);
}

void TestAppModels::evaluationPageOverlapSync()
{
    // The Sync rounds control shows evaluation.overlap_sync and gives it back; the tooltip says what
    // it does; with on_rank_loss continue it stays enabled (tolerant runs overlap too).
    cppl::app::EvaluationPage page;
    auto *overlap = page.findChild<QComboBox *>(u"overlapSync"_s);
    QVERIFY(overlap);
    QVERIFY(page.evaluation().overlapSync); // the default
    QCOMPARE(overlap->currentData().toString(), u"on"_s);
    QVERIFY(overlap->toolTip().contains(u"round r+1"_s) && overlap->toolTip().contains(u"bits"_s));
    cppl::EvaluationSpec e = page.evaluation();
    e.overlapSync = false;
    page.load(e, page.thresholds());
    QCOMPARE(overlap->currentData().toString(), u"off"_s);
    QVERIFY(!page.evaluation().overlapSync);
    QVERIFY(overlap->isEnabled());
    overlap->setCurrentIndex(overlap->findData(u"on"_s));
    QVERIFY(page.evaluation().overlapSync);
    e.overlapSync = false;
    e.schedule = "dynamic";
    e.onRankLoss = "continue";
    page.load(e, page.thresholds());
    QVERIFY(overlap->isEnabled());
    QVERIFY(!page.evaluation().overlapSync);
    // Through a saved profile and back.
    cppl::ClusterProfile p;
    p.hosts.push_back(cppl::HostSpec{});
    p.hosts.back().name = "a";
    p.evaluation = page.evaluation();
    const auto parsed = cppl::parseProfile(cppl::profileToJson(p));
    QVERIFY(parsed.ok());
    cppl::app::EvaluationPage again;
    again.load(parsed.profile.evaluation, parsed.profile.thresholds);
    QVERIFY(!again.evaluation().overlapSync);
}

void TestAppModels::evaluationPageQuantization()
{
    // The Quantization and Reference model fields show evaluation.quantize ... reference_quantize and
    // give them back, through a saved profile and the page's own settings.
    QSettings().remove(u"evaluation"_s);
    cppl::app::EvaluationPage page;
    auto *quantize = page.findChild<QComboBox *>(u"quantize"_s);
    auto *group = page.findChild<QSpinBox *>(u"quantGroup"_s);
    auto *head = page.findChild<QCheckBox *>(u"quantizeHead"_s);
    auto *reference = page.findChild<QLineEdit *>(u"referenceModel"_s);
    auto *refDtype = page.findChild<QComboBox *>(u"referenceDtype"_s);
    auto *refQuantize = page.findChild<QComboBox *>(u"referenceQuantize"_s);
    QVERIFY(quantize && group && head && reference && refDtype && refQuantize);
    QCOMPARE(page.evaluation().quantize, std::string("none")); // the defaults: a float run, no reference
    QVERIFY(page.evaluation().referenceModel.empty());
    cppl::EvaluationSpec e = page.evaluation();
    e.quantize = "int4-sym"; // the agents' other name of int4
    e.quantGroup = 128;
    e.quantizeHead = true;
    e.referenceModel = "/models/base";
    e.referenceDtype = "bfloat16";
    e.referenceQuantize = "int8";
    page.load(e, page.thresholds());
    QCOMPARE(quantize->currentData().toString(), u"int4"_s);
    QCOMPARE(group->value(), 128);
    QVERIFY(head->isChecked());
    QCOMPARE(reference->text(), u"/models/base"_s);
    const cppl::EvaluationSpec shown = page.evaluation();
    QCOMPARE(shown.quantize, std::string("int4"));
    QCOMPARE(shown.quantGroup, std::int64_t{128});
    QVERIFY(shown.quantizeHead);
    QCOMPARE(shown.referenceModel, std::string("/models/base"));
    QCOMPARE(shown.referenceDtype, std::string("bfloat16"));
    QCOMPARE(shown.referenceQuantize, std::string("int8"));
    quantize->setCurrentIndex(quantize->findData(u"int4-asym"_s));
    QCOMPARE(page.evaluation().quantize, std::string("int4-asym"));
    // Through a saved profile and back, and through the page's settings.
    cppl::ClusterProfile p;
    p.hosts.push_back(cppl::HostSpec{});
    p.hosts.back().name = "a";
    p.evaluation = page.evaluation();
    const auto parsed = cppl::parseProfile(cppl::profileToJson(p));
    QVERIFY(parsed.ok());
    QVERIFY(parsed.profile.evaluation == page.evaluation());
    page.saveSettings();
    cppl::app::EvaluationPage again;
    QVERIFY(again.restoreSettings());
    QVERIFY(again.evaluation() == page.evaluation());
    QSettings().remove(u"evaluation"_s);
}

void TestAppModels::rankAndAlertModels()
{
    cppl::app::RankTableModel ranks;
    cppl::app::AlertModel alerts;
    QSortFilterProxyModel proxy;
    proxy.setSourceModel(&ranks);
    proxy.setSortRole(cppl::app::RankTableModel::SortRole);
    proxy.sort(cppl::app::RankTableModel::ColRate);
    QAbstractItemModelTester t1(&ranks, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t2(&alerts, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QAbstractItemModelTester t3(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
    // The telemetry column names what was lost: beside a rank whose state is "⊘ lost", a "Lost"
    // column reading 0 contradicted it.
    QCOMPARE(ranks.headerData(cppl::app::RankTableModel::ColLost, Qt::Horizontal).toString(), u"Msgs lost"_s);
    cppl::app::SyntheticRun run(64);
    QSignalSpy changed(&ranks, &QAbstractItemModel::dataChanged);
    for (double t = 5; t <= 400; t += 5) {
        run.advanceTo(t);
        ranks.update(run.snapshot());
    }
    QCOMPARE(ranks.rowCount(), 64);
    // One dataChanged per update (after the first, which resets), over every rank (all of them
    // progress) from the State column on: rank, host and group did not change.
    QCOMPARE(changed.size(), 79);
    const auto range = changed.back();
    QCOMPARE(range.at(0).toModelIndex(), ranks.index(0, cppl::app::RankTableModel::ColState));
    QCOMPARE(range.at(1).toModelIndex(), ranks.index(63, cppl::app::RankTableModel::ColumnCount - 1));
    // The same snapshot again changes nothing; one rank heard from again changes its row only.
    changed.clear();
    ranks.update(run.snapshot());
    QCOMPARE(changed.size(), 0);
    auto one = run.snapshot();
    one.ranks[17].received += 1;
    one.ranks[17].stats.tokens += 100;
    ranks.update(one);
    QCOMPARE(changed.size(), 1);
    QCOMPARE(changed.back().at(0).toModelIndex(), ranks.index(17, cppl::app::RankTableModel::ColState));
    QCOMPARE(changed.back().at(1).toModelIndex(), ranks.index(17, cppl::app::RankTableModel::ColumnCount - 1));
    QCOMPARE(ranks.index(17, cppl::app::RankTableModel::ColTokens).data(cppl::app::RankTableModel::SortRole).toLongLong(),
             qlonglong(one.ranks[17].stats.tokens));
    // Sorted by tok/s: the stalled rank (0 tok/s) first, then the slow ranks.
    QCOMPARE(proxy.index(0, 0).data(cppl::app::RankTableModel::RankRole).toInt(), run.stalledRank());
    std::vector<int> next;
    for (int row = 1; row <= 3; ++row)
        next.push_back(proxy.index(row, 0).data(cppl::app::RankTableModel::RankRole).toInt());
    std::sort(next.begin(), next.end());
    QCOMPARE(next, run.slowRanks());
    for (const auto &a : run.alerts())
        alerts.append(a);
    QVERIFY(alerts.rowCount() > 0);
    QVERIFY(alerts.index(0, cppl::app::AlertModel::ColMessage).data().toString().size() > 10);
    proxy.setFilterKeyColumn(-1);
    proxy.setFilterFixedString(u"node-004"_s);
    QCOMPARE(proxy.rowCount(), 8);
    ranks.clear();
    alerts.clear();
}

namespace {
// 1024 ranks stalling and recovering 12 times (as when telemetry lagged behind a loaded collector):
// 12,288 alerts, plus a failed rank and a few comm-share alerts.
std::vector<cppl::core::run::RunAlert> storm(int ranks, int episodes)
{
    using cppl::core::run::AlertKind;
    std::vector<cppl::core::run::RunAlert> all;
    for (int e = 0; e < episodes; ++e)
        for (int r = 0; r < ranks; ++r)
            all.push_back({10.0 * e + 0.001 * r, QDateTime::currentDateTimeUtc(), r, AlertKind::Stalled,
                           u"rank %1 on node%2: no telemetry for 3.1 s (threshold 3 s)"_s.arg(r).arg(r / 8)});
    all.push_back({125.0, QDateTime::currentDateTimeUtc(), 7, AlertKind::Failed, u"rank 7 on node0 failed (exit 6)"_s});
    for (int r = 0; r < 3; ++r)
        all.push_back({126.0, QDateTime::currentDateTimeUtc(), r, AlertKind::CommShare, u"rank %1: communication 22%"_s.arg(r)});
    return all;
}
} // namespace

void TestAppModels::noticeLineWhileRecovering()
{
    // --on-rank-loss continue: while the run goes on without a rank the notice line says so, and
    // the notices after it (the checkpoints' regrouping) go below it, not in its place. Once the
    // run ended the line is the engine's last word.
    using cppl::core::run::RunPhase;
    using cppl::core::run::rankLostNotice;
    cppl::app::RunPage page;
    page.reset(u"r"_s, 4, {}, cppl::Thresholds{});
    page.setPhase(RunPhase::Running);
    const QString start = cppl::core::run::runStartNotice(u"r"_s, 4, 1, u"local"_s, "0,1;2,3", u"127.0.0.1"_s, 29500);
    QCOMPARE(start, u"run r: 4 ranks on 1 host (local), groups [0–1] [2–3], master 127.0.0.1:29500"_s);
    page.setNotice(start);
    QCOMPARE(page.noticeText(), start);
    page.rankLost(2, u"rank 2 (localhost): lost after round 3; the others regrouped without it"_s);
    QCOMPARE(page.noticeText(), u"rank 2 lost; the others regrouped without it and the run goes on"_s);
    page.setNotice(rankLostNotice({2})); // what the engine says next: the same words, once
    QCOMPARE(page.noticeText(), u"rank 2 lost; the others regrouped without it and the run goes on"_s);
    // What the checkpoints mean for a user, in plain words: what can be resumed, from which round
    // (no epochs, no "checkpoint of round N or later").
    const QString checkpoints = cppl::core::run::checkpointRegroupNotice(4, 2);
    QCOMPARE(checkpoints, u"if the run is interrupted, it can be resumed from round 2, the last one saved; the next to be saved is "
                           "round 4, the first after the regrouping"_s);
    QCOMPARE(cppl::core::run::checkpointRegroupNotice(2, -1),
             u"if the run is interrupted before round 2 (the first after the regrouping) is saved, it cannot be resumed: no round "
             "was saved before the loss"_s);
    for (const QString &said : {checkpoints, cppl::core::run::checkpointRegroupNotice(2, -1)})
        for (const QString &jargon : {u"epoch"_s, u"checkpoint"_s, u"ledger"_s})
            QVERIFY2(!said.contains(jargon), qPrintable(said));
    page.setNotice(checkpoints);
    QCOMPARE(page.noticeText(), u"rank 2 lost; the others regrouped without it and the run goes on\n"_s + checkpoints);
    page.rankLost(3, u"rank 3 (localhost): lost after round 5; the others regrouped without it"_s);
    page.setNotice(rankLostNotice({2, 3}));
    QCOMPARE(page.noticeText(), u"ranks 2–3 lost; the others regrouped without them and the run goes on"_s);
    cppl::core::run::RunOutcome failed;
    failed.phase = RunPhase::Failed;
    failed.firstCause = u"run failed: rank 1 on localhost: killed by signal 9"_s;
    page.showOutcome(failed);
    QCOMPARE(page.noticeText(), u"ranks 2–3 lost; the others went on without them until the run failed"_s);
    // Many groups: named in one line, not a screenful.
    QStringList groups;
    for (int g = 0; g < 128; ++g) {
        QStringList ranks;
        for (int r = 8 * g; r < 8 * g + 8; ++r)
            ranks << QString::number(r);
        groups << ranks.join(u',');
    }
    QCOMPARE(cppl::core::run::runStartNotice(u"big"_s, 1024, 128, u"ssh"_s, groups.join(u';').toStdString(), u"node-000"_s, 29500),
             u"run big: %1 ranks on 128 hosts (ssh), groups [0–7] [8–15] [16–23] … [1016–1023] (128 groups), master node-000:29500"_s
                 .arg(QLocale().toString(1024)));
}

void TestAppModels::runPageSaysHowTheBaselineCompared()
{
    // The finished run's deviation line: bit-identical, a deviation, not compared (a baseline that
    // ran in another dtype: the profiles' dtype auto on GPUs and CPUs), or no baseline at all.
    cppl::app::RunPage page;
    auto *line = page.findChild<QLabel *>(u"deviation"_s);
    QVERIFY(line);
    cppl::core::run::RunOutcome o;
    o.phase = cppl::core::run::RunPhase::Finished;
    o.resultJson = R"({"ppl": 4.3, "tokens_scored": 100, "nll_sum_exact": "xs1:00"})";
    o.baselineIdentical = true;
    page.showOutcome(o);
    QVERIFY2(line->text().contains(u"Final deviation from the one-rank baseline: none (bit-identical sums)"_s), qPrintable(line->text()));
    o.baselineIdentical = false;
    o.baselineRelativeDeviation = 0.004;
    page.showOutcome(o);
    QVERIFY2(line->text().contains(u"Final deviation from the one-rank baseline: 0.4%"_s), qPrintable(line->text()));
    o.baselineIdentical.reset();
    o.baselineNotCompared = u"it ran in float32, this run in bfloat16"_s;
    page.showOutcome(o);
    QVERIFY2(line->text().contains(u"Final deviation from the one-rank baseline: not compared (it ran in float32, this run in bfloat16)"_s),
             qPrintable(line->text()));
    o.baselineNotCompared.clear();
    page.showOutcome(o);
    QVERIFY2(line->text().contains(u"not known (no baseline run of these settings)"_s), qPrintable(line->text()));
}

void TestAppModels::syntheticRunSaysWhatARealRunSays()
{
    // The screenshots' synthetic run tells the Run page what the engine tells it in a real run:
    // the start notice mid-run; once the others regrouped without the stalled rank, the notice that
    // it was lost and the run goes on, the badge and the alert; at
    // the end, recovered.
    cppl::app::SyntheticRun run = cppl::app::SyntheticRun::advanced(1024, 0.6 * 600 + 12);
    cppl::app::RunPage page;
    page.resize(1500, 900);
    run.showOn(page);
    QCOMPARE(page.noticeText(), u"run synthetic-1024-ranks: %1 ranks on 128 hosts (ssh), groups [0–7] [8–15] [16–23] … [1016–1023] "
                                 "(128 groups), master node-000:29500"_s
                                    .arg(QLocale().toString(1024)));
    const int lost = run.stalledRank();
    QCOMPARE(lost, 777);
    run.showStalledRankLostOn(page);
    QCOMPARE(page.noticeText(), u"rank 777 lost; the others regrouped without it and the run goes on\n"_s
                                    + cppl::core::run::checkpointRegroupNotice(43, 41));
    QVERIFY2(page.phaseText().contains(u"Recovering"_s), qPrintable(page.phaseText()));
    QTRY_VERIFY(!page.alertModel()->allAlerts().empty());
    QCOMPARE(page.alertModel()->allAlerts().back().kind, cppl::core::run::AlertKind::RankLost);
    QCOMPARE(page.alertModel()->allAlerts().back().rank, lost);
    // Its time as "elapsed 6:12" writes it, not "06:12"; the lost telemetry named as messages (beside
    // "Recovering", "telemetry: 33 lost" read as lost ranks).
    const int lastRow = page.alertModel()->rowCount() - 1;
    QCOMPARE(page.alertModel()->alertAt(lastRow).kind, cppl::core::run::AlertKind::RankLost);
    QCOMPARE(page.alertModel()->index(lastRow, cppl::app::AlertModel::ColTime).data().toString(), u"6:12"_s);
    const QLabel *telemetry = page.findChild<QLabel *>(u"telemetry"_s);
    QVERIFY(telemetry);
    QCOMPARE(telemetry->text(), u"telemetry messages: %1 lost"_s.arg(run.snapshot().lostTotal));
    // The next run on the same page (here: the stalled rank caught up, nothing was lost) is not
    // told the last run's lost ranks: its slowest ranks are "slow", none "lost".
    cppl::app::SyntheticRun caughtUp = cppl::app::SyntheticRun::advanced(1024, 600);
    caughtUp.finish();
    caughtUp.showOn(page);
    const QStringList slowest = page.charts()->slowestRanks();
    QCOMPARE(slowest.size(), 3);
    for (const QString &name : slowest)
        QVERIFY2(name.endsWith(u" slow"_s), qPrintable(slowest.join(u", "_s)));
    cppl::app::SyntheticRun finished = cppl::app::SyntheticRun::advanced(1024, 600);
    finished.finish(true);
    finished.showOn(page);
    finished.showRecoveredOn(page);
    // The engine's last notice, "recovered (rank 777 …)", is said by the "Recovered: rank 777 …" line
    // under the headline: the notice line does not repeat it.
    QCOMPARE(page.noticeText(), QString());
    const QLabel *lines = page.findChild<QLabel *>(u"deviation"_s);
    QVERIFY(lines);
    QVERIFY2(lines->text().contains(u"Recovered: rank 777 (node-097): stopped responding"_s), qPrintable(lines->text()));
    QVERIFY2(page.phaseText().contains(u"Recovered"_s), qPrintable(page.phaseText()));
    // Its alert list ends as a real recovered run's does: the lost rank's row amended, not "goes on".
    const auto &said = page.alertModel()->allAlerts();
    QCOMPARE(said.back().kind, cppl::core::run::AlertKind::RankLost);
    QCOMPARE(said.back().message, u"rank 777 (node-097) lost: killed by signal 9 (after round 41); the others finished the run without "
                                   "it, its unfinished batches evaluated again"_s);
    // Its headline (the widest badge, 22,054,752 windows) fits beside the page list in the
    // screenshots' 1500 px window (side by side with the times, it widened that window to 1,525 px).
    QVERIFY2(page.minimumSizeHint().width() <= 1300, qPrintable(QString::number(page.minimumSizeHint().width())));
    // Four ranks: the default profile's launch.
    cppl::app::SyntheticRun four = cppl::app::SyntheticRun::advanced(4, 60);
    four.showOn(page);
    QCOMPARE(page.noticeText(), u"run synthetic-4-ranks: 4 ranks on 1 host (local), groups [0–1] [2–3], master 127.0.0.1:40213"_s);
}

void TestAppModels::runPageWidthDoesNotFollowTheRanks()
{
    // The window's minimum width is its pages' widest minimum: with 1024 ranks the Run page's
    // headline figures ("3,501,727,834 tokens scored · windows …", "✓ Recovered · rank 777 lost")
    // made it 1,127–1,277 px, with 4 ranks 728–850, so a 1024 px screen could not show a large run.
    // The figures wrap when narrow: the page's minimum is the same in each state for 4 and 1024
    // ranks, and leaves room for the page list in a 1024 px window.
    std::map<QString, int> widths;
    for (const int n : {4, 1024}) {
        cppl::app::SyntheticRun live = cppl::app::SyntheticRun::advanced(n, 0.6 * 600 + 12);
        cppl::app::RunPage page;
        page.resize(1500, 900);
        live.showOn(page);
        QStringList states{u"live"_s};
        std::vector<int> seen{page.minimumSizeHint().width()};
        live.showStalledRankLostOn(page);
        states << u"recovering"_s;
        seen.push_back(page.minimumSizeHint().width());
        cppl::app::SyntheticRun finished = cppl::app::SyntheticRun::advanced(n, 600);
        finished.finish();
        finished.showOn(page);
        states << u"finished"_s;
        seen.push_back(page.minimumSizeHint().width());
        cppl::app::SyntheticRun recovered = cppl::app::SyntheticRun::advanced(n, 600);
        recovered.finish(true);
        recovered.showOn(page);
        recovered.showRecoveredOn(page);
        states << u"recovered"_s;
        seen.push_back(page.minimumSizeHint().width());
        for (qsizetype i = 0; i < states.size(); ++i) {
            QVERIFY2(seen[size_t(i)] <= 880, qPrintable(u"%1 ranks, %2: %3 px"_s.arg(n).arg(states[i]).arg(seen[size_t(i)])));
            const auto [it, fresh] = widths.emplace(states[i], seen[size_t(i)]);
            if (!fresh)
                QVERIFY2(it->second == seen[size_t(i)], qPrintable(u"%1: %2 px with 4 ranks, %3 px with %4"_s.arg(states[i]).arg(it->second).arg(seen[size_t(i)]).arg(n)));
        }
    }
}

void TestAppModels::lostRankAlertTakesOverFailed()
{
    // on_rank_loss continue: rank 2's process ends (a failure alert, as with fail), then the
    // others regroup without it: its row becomes a warning that says the run goes on, not a
    // second row beside the failure. Every alert is still kept.
    using cppl::app::AlertModel;
    using cppl::core::run::AlertKind;
    AlertModel alerts;
    QAbstractItemModelTester tester(&alerts, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto now = QDateTime::currentDateTimeUtc();
    alerts.append({{3.0, now, 1, AlertKind::CommShare, u"rank 1 on node0: communication 22%"_s},
                   {4.0, now, 2, AlertKind::Failed, u"rank 2 on node1 ended: killed by signal 9"_s}});
    QCOMPARE(alerts.rowCount(), 2);
    QCOMPARE(alerts.index(1, AlertModel::ColKind).data().toString(), u"✗ failed"_s);
    QVERIFY(alerts.index(1, AlertModel::ColKind).data(Qt::ForegroundRole).isValid()); // the failure colour
    QSignalSpy changed(&alerts, &QAbstractItemModel::dataChanged);
    const QString lost = u"rank 2 (node1) lost, the run goes on without it: killed by signal 9 (after round 3); "
                         "the others redo its unfinished batches"_s;
    alerts.append({5.0, now, 2, AlertKind::RankLost, lost});
    QCOMPARE(alerts.rowCount(), 2);
    QCOMPARE(changed.size(), 1);
    QCOMPARE(alerts.index(1, AlertModel::ColKind).data().toString(), u"⚠ rank lost"_s);
    QVERIFY(!alerts.index(1, AlertModel::ColKind).data(Qt::ForegroundRole).isValid()); // a warning, not a failure
    QCOMPARE(alerts.index(1, AlertModel::ColMessage).data().toString(), lost);
    QCOMPARE(alerts.index(1, 0).data(AlertModel::CountRole).toInt(), 1);
    QCOMPARE(alerts.alertAt(1).kind, AlertKind::RankLost);
    QCOMPARE(alerts.allAlerts().size(), std::size_t(3));
    // Another rank's failure (on_rank_loss fail, or the run failing after all) stays a failure.
    alerts.append({6.0, now, 3, AlertKind::Failed, u"rank 3 on node1 ended: exit code 6"_s});
    QCOMPARE(alerts.rowCount(), 3);
    QCOMPARE(alerts.index(2, AlertModel::ColKind).data().toString(), u"✗ failed"_s);
    // The run failed after all: the engine amends rank 2's alert. Its row shows the new words, the
    // same event told again (no "×2"); both are kept.
    const QString amended = u"rank 2 (node1) lost: killed by signal 9 (after round 3); the others went on without it until the run failed"_s;
    alerts.append({7.0, now, 2, AlertKind::RankLost, amended});
    QCOMPARE(alerts.rowCount(), 3);
    QCOMPARE(alerts.index(1, AlertModel::ColMessage).data().toString(), amended);
    QCOMPARE(alerts.index(1, AlertModel::ColKind).data().toString(), u"⚠ rank lost"_s);
    QCOMPARE(alerts.index(1, 0).data(AlertModel::CountRole).toInt(), 1);
    QCOMPARE(alerts.allAlerts().size(), std::size_t(5));
}

void TestAppModels::deviationChartNamesTheSchedule()
{
    // Under the dynamic schedule (the default) no rank has a shard: its PPL is over the batches it
    // evaluated. The chart's title and tooltip follow the run's schedule.
    cppl::app::RunPage page;
    QCOMPARE(page.charts()->deviationTitle(), u"PPL of each rank's batches vs global PPL"_s);
    auto *view = page.findChild<QWidget *>(u"deviationChart"_s);
    QVERIFY(view);
    QVERIFY(view->toolTip().contains(u"batches it evaluated"_s));
    QVERIFY(!view->toolTip().contains(u"shard"_s));
    page.setSchedule(u"static"_s);
    QCOMPARE(page.charts()->deviationTitle(), u"PPL of each rank's shard vs global PPL"_s);
    QVERIFY(view->toolTip().contains(u"its own shard"_s));
    page.reset(u"next"_s, 4, {}, cppl::Thresholds{}); // kept until the next run says otherwise
    QCOMPARE(page.charts()->deviationTitle(), u"PPL of each rank's shard vs global PPL"_s);
    page.setSchedule(u"dynamic"_s);
    QCOMPARE(page.charts()->deviationTitle(), u"PPL of each rank's batches vs global PPL"_s);
}

void TestAppModels::alertStormCoalesced()
{
    using cppl::app::AlertModel;
    using cppl::core::run::AlertKind;
    AlertModel alerts;
    QAbstractItemModelTester tester(&alerts, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy inserted(&alerts, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&alerts, &QAbstractItemModel::dataChanged);
    const auto all = storm(1024, 12);
    // The first episode in one batch: one insertion of kMaxRows rows of their own plus the
    // "more ranks" row of the stalled kind.
    alerts.append(std::vector(all.begin(), all.begin() + 1024));
    QCOMPARE(inserted.size(), 1);
    QCOMPARE(alerts.rowCount(), AlertModel::kMaxRows + 1);
    QCOMPARE(changed.size(), 0);
    const int overflow = AlertModel::kMaxRows;
    QVERIFY(alerts.index(overflow, 0).data(AlertModel::OverflowRole).toBool());
    QCOMPARE(alerts.index(overflow, AlertModel::ColRank).data().toString(), u"+%1"_s.arg(1024 - AlertModel::kMaxRows));
    // It says what it stands for, its ranks written as every rank range of the dashboard is.
    QCOMPARE(alerts.index(overflow, AlertModel::ColMessage).data().toString(),
             u"… and 768 more ranks with this alert (ranks 256–1023), not listed one by one; latest: %1"_s.arg(all[1023].message));
    QVERIFY2(alerts.index(overflow, 0).data(Qt::ToolTipRole).toString().startsWith(u"768 stalled alerts of 768 more ranks (ranks 256–1023)"_s),
             qPrintable(alerts.index(overflow, 0).data(Qt::ToolTipRole).toString()));
    // The rest in one batch: the repeats update the rows in place (one dataChanged over them), the
    // failed and comm-share alerts come beyond the cap into overflow rows of their kinds.
    alerts.append(std::vector(all.begin() + 1024, all.end()));
    QCOMPARE(inserted.size(), 2);
    QCOMPARE(changed.size(), 1);
    QCOMPARE(changed.back().at(0).toModelIndex().row(), 0);
    QCOMPARE(changed.back().at(1).toModelIndex().row(), overflow);
    QCOMPARE(alerts.rowCount(), AlertModel::kMaxRows + 3);
    QCOMPARE(qsizetype(alerts.allAlerts().size()), qsizetype(all.size())); // nothing lost
    QCOMPARE(alerts.index(5, AlertModel::ColKind).data().toString(), u"⚠ stalled ×12"_s);
    // 9,216 alerts: counted with the locale's digit grouping, as the Alerts tab counts them.
    QCOMPARE(alerts.index(overflow, AlertModel::ColKind).data().toString(), u"⚠ stalled ×%1"_s.arg(QLocale().toString(12 * 768)));
    QVERIFY(alerts.index(overflow, 0).data(Qt::ToolTipRole).toString().startsWith(u"%1 stalled alerts of 768 more ranks"_s.arg(QLocale().toString(12 * 768))));
    QCOMPARE(alerts.index(5, 0).data(AlertModel::CountRole).toInt(), 12);
    QCOMPARE(alerts.alertAt(5).seconds, all[11 * 1024 + 5].seconds); // the row shows its latest
    QCOMPARE(alerts.index(overflow, 0).data(AlertModel::CountRole).toInt(), 12 * (1024 - AlertModel::kMaxRows));
    QCOMPARE(alerts.alertAt(overflow + 1).kind, AlertKind::Failed);
    QCOMPARE(alerts.index(overflow + 1, 0).data(AlertModel::RankRole).toInt(), 7);
    QCOMPARE(alerts.index(overflow + 1, AlertModel::ColRank).data().toString(), u"7"_s); // one rank: shown as itself
    QCOMPARE(alerts.index(overflow + 1, AlertModel::ColMessage).data().toString(), all[12 * 1024].message);
    QCOMPARE(alerts.index(overflow + 2, 0).data(AlertModel::CountRole).toInt(), 3);
    int counted = 0;
    for (int row = 0; row < alerts.rowCount(); ++row)
        counted += alerts.index(row, 0).data(AlertModel::CountRole).toInt();
    QCOMPARE(counted, int(all.size()));
    const QStringList lines = alerts.allAlertsAsText().split(u'\n', Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), int(all.size()) + 1);
    QVERIFY(lines.last().contains(u"comm share"_s));
    // Below the cap a new (rank, kind) gets its own row; a repeat in the same batch is counted on it.
    AlertModel few;
    QAbstractItemModelTester fewTester(&few, QAbstractItemModelTester::FailureReportingMode::QtTest);
    few.append(std::vector{all[0], all[1], all[1024], all.back()});
    QCOMPARE(few.rowCount(), 3);
    QCOMPARE(few.index(0, 0).data(AlertModel::CountRole).toInt(), 2);
    few.clear();
    QCOMPARE(few.rowCount(), 0);
    alerts.clear();
    // Ranks with rows of their own between those of the overflow row are not claimed by it: every
    // even rank stalls first (256 rows of their own: ranks 0–510), then every rank.
    std::vector<cppl::core::run::RunAlert> gaps;
    for (int r = 0; r < 1024; r += 2)
        gaps.push_back(all[std::size_t(r)]);
    for (int r = 0; r < 1024; ++r)
        gaps.push_back(all[std::size_t(1024 + r)]);
    alerts.append(gaps);
    QCOMPARE(alerts.rowCount(), AlertModel::kMaxRows + 1);
    // 256 even ranks 512..1022 and the 256 odd ranks below 512 alternate with listed ones: many
    // runs; the row names the first three, the tooltip every one.
    const QString message = alerts.index(overflow, AlertModel::ColMessage).data().toString();
    QVERIFY2(message.startsWith(u"… and 768 more ranks with this alert (ranks 1, 3, 5, …), not listed one by one"_s), qPrintable(message));
    const QString tip = alerts.index(overflow, 0).data(Qt::ToolTipRole).toString();
    QVERIFY2(tip.contains(u"(ranks 1, 3, 5, "_s) && tip.contains(u", 509, 511–1023)"_s), qPrintable(tip));
}

void TestAppModels::alertStormOnTheRunPage()
{
    // The engine emits alerts one by one; the page queues them and inserts them together when
    // control returns to the event loop.
    cppl::app::RunPage page;
    page.resize(1600, 1000);
    page.reset(u"storm"_s, 1024, {}, cppl::Thresholds{});
    page.show();
    auto *model = page.alertModel();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QSignalSpy inserted(model, &QAbstractItemModel::rowsInserted);
    const auto all = storm(1024, 12);
    QElapsedTimer clock;
    clock.start();
    for (const auto &a : all)
        page.addAlert(a);
    QCOMPARE(model->rowCount(), 0); // queued
    QTRY_COMPARE(qsizetype(model->allAlerts().size()), qsizetype(all.size()));
    QCOMPARE(inserted.size(), 1);
    QCOMPARE(model->rowCount(), cppl::app::AlertModel::kMaxRows + 3);
    auto *tabs = page.findChild<QTabWidget *>();
    QVERIFY(tabs);
    QCOMPARE(tabs->tabText(0), u"Alerts (%1)"_s.arg(QLocale().toString(qlonglong(all.size()))));
    // Every row has the one fixed height: nothing was measured row by row.
    auto *view = page.findChild<QTableView *>(u"alertView"_s);
    QVERIFY(view);
    const int height = view->rowHeight(0);
    QVERIFY(height > view->fontMetrics().lineSpacing());
    for (int row = 0; row < model->rowCount(); ++row)
        QCOMPARE(view->rowHeight(row), height);
    // The next snapshot's alerts, and a reset.
    page.addAlerts({all.front()});
    QCOMPARE(qsizetype(model->allAlerts().size()), qsizetype(all.size()) + 1);
    QCOMPARE(inserted.size(), 1);
    // The whole storm in one call (what the queue does), timed: the GUI thread's share of it.
    page.reset(u"storm-again"_s, 1024, {}, cppl::Thresholds{});
    clock.restart();
    page.addAlerts(all);
    qInfo("%zu alerts inserted in one batch in %.1f ms (%d rows)", all.size(), double(clock.nsecsElapsed()) / 1e6, model->rowCount());
    QCOMPARE(model->rowCount(), cppl::app::AlertModel::kMaxRows + 3);
    page.reset(u"next"_s, 4, {}, cppl::Thresholds{});
    QCOMPARE(model->rowCount(), 0);
    QCOMPARE(tabs->tabText(0), u"Alerts"_s);
}

void TestAppModels::memoryColumn_data()
{
    QTest::addColumn<qint64>("rss");
    QTest::addColumn<qint64>("used"); // -1: absent
    QTest::addColumn<qint64>("total");
    QTest::addColumn<int>("util");
    QTest::addColumn<QString>("text");
    const qint64 gib = qint64(1) << 30;
    QTest::addRow("no GPU: RSS") << qint64(1932735283) << qint64(-1) << qint64(-1) << -1 << u"1.8 GiB RSS"_s;
    QTest::addRow("GPU, 80 GiB, busy") << gib << qint64(12.3 * double(gib)) << 80 * gib << 97 << u"12.3/80 GiB · 97%"_s;
    QTest::addRow("GPU without utilisation (MIG)") << gib << 5 * gib << 10 * gib << -1 << u"5.0/10 GiB"_s;
    QTest::addRow("small device, one decimal") << gib << qint64(1.5 * double(gib)) << 8 * gib << 0 << u"1.5/8.0 GiB · 0%"_s;
    QTest::addRow("used only") << gib << 3 * gib << qint64(-1) << -1 << u"3.0 GiB GPU"_s;
    QTest::addRow("nothing yet") << qint64(0) << qint64(-1) << qint64(-1) << -1 << QString();
}

void TestAppModels::memoryColumn()
{
    QFETCH(qint64, rss);
    QFETCH(qint64, used);
    QFETCH(qint64, total);
    QFETCH(int, util);
    QFETCH(QString, text);
    cppl::core::telemetry::RankView r;
    r.rssBytes = rss;
    if (used >= 0)
        r.deviceMemoryBytes = used;
    if (total >= 0)
        r.deviceMemoryTotalBytes = total;
    if (util >= 0)
        r.gpuUtilizationPercent = util;
    QCOMPARE(cppl::app::RankTableModel::memoryText(r), text);
    const QString tip = cppl::app::RankTableModel::memoryToolTip(r);
    QVERIFY(used >= 0 ? tip.contains(u"GPU memory"_s) : tip.contains(u"no GPU figures"_s));
}

void TestAppModels::unknownFiguresReadAsDash()
{
    // Mid-run a rank's comm totals stay 0 until its first sync round: its Comm cell read "0.0 %"
    // ("no communication") where the share is not known yet; its tok/s was blank before its
    // first progress message. Both read "—" until the rank reports them, through the real
    // collector fed with the agent's wire messages.
    using cppl::telemetry::Kind;
    using Col = cppl::app::RankTableModel::Column;
    cppl::core::telemetry::CollectorState collector({});
    std::int64_t seq = 0;
    auto message = [&seq](std::int64_t rank, Kind kind) {
        cppl::telemetry::Message m;
        m.header.run = "r";
        m.header.rank = rank;
        m.header.host = "node0";
        m.header.localRank = rank;
        m.header.worldSize = 2;
        m.header.seq = seq++;
        m.header.t = 1.7e9 + double(m.header.seq);
        m.header.kind = kind;
        m.phase = cppl::telemetry::Phase::Loading;
        return m;
    };
    auto deliver = [&collector](const cppl::telemetry::Message &m, double now) {
        cppl::telemetry::Message wire;
        return cppl::telemetry::decode(cppl::telemetry::encode(m), wire).ok() && collector.apply(wire, now);
    };
    cppl::NllStats stats;
    for (int i = 0; i < 100; ++i)
        stats.addToken(2.0 + 0.01 * i);
    stats.windows = 1;
    auto progress = [&](std::int64_t rank, double compute, double wait, double transfer) {
        auto m = message(rank, Kind::Progress);
        m.progress.tokensScoredTotal = stats.tokens;
        m.progress.tokensPerSecond = 1234;
        m.progress.windowsDone = stats.windows;
        m.progress.windowsTotal = 10;
        m.progress.computeSecondsTotal = compute;
        m.progress.commWaitSecondsTotal = wait;
        m.progress.commTransferSecondsTotal = transfer;
        m.progress.nll = stats.nll;
        m.progress.nllSquared = stats.nllSquared;
        return m;
    };
    cppl::app::RankTableModel ranks;
    QAbstractItemModelTester tester(&ranks, QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto cell = [&ranks](int row, Col col, int role = Qt::DisplayRole) { return ranks.index(row, col).data(role); };

    // Rank 0 says hello (loading); rank 1 is not heard from yet.
    QVERIFY(deliver(message(0, Kind::Hello), 0.0));
    ranks.update(collector.snapshot(0.0));
    QCOMPARE(ranks.rowCount(), 2);
    for (int row : {0, 1}) {
        QCOMPARE(cell(row, Col::ColRate).toString(), u"—"_s);
        QCOMPARE(cell(row, Col::ColComm).toString(), u"—"_s);
    }

    // Its first progress, before any sync round: the rate is known, the comm share is not.
    QVERIFY(deliver(progress(0, 2.0, 0.0, 0.0), 1.0));
    ranks.update(collector.snapshot(1.0));
    QCOMPARE(cell(0, Col::ColRate).toString(), QLocale().toString(1234));
    QCOMPARE(cell(0, Col::ColComm).toString(), u"—"_s);
    QVERIFY2(cell(0, Col::ColComm, Qt::ToolTipRole).toString().contains(u"not known yet"_s),
             qPrintable(cell(0, Col::ColComm, Qt::ToolTipRole).toString()));
    QVERIFY(!cppl::app::commShareKnown(collector.snapshot(1.0).ranks[0]));
    // Unknown sorts below every known share, 0 % included.
    QVERIFY(cell(0, Col::ColComm, cppl::app::RankTableModel::SortRole).toDouble() < 0.0);

    // After its first sync round: 0.5 s waiting and 0.16 s transfer of 10 s.
    QVERIFY(deliver(progress(0, 9.34, 0.5, 0.16), 2.0));
    ranks.update(collector.snapshot(2.0));
    QCOMPARE(cell(0, Col::ColComm).toString(), u"6.6 %"_s);
    QCOMPARE(cell(0, Col::ColComm, Qt::ToolTipRole).toString(), u"waiting for stragglers 5.0%, transfer 1.6%"_s);
    QVERIFY(qAbs(cell(0, Col::ColComm, cppl::app::RankTableModel::SortRole).toDouble() - 0.066) < 1e-12);
    QCOMPARE(cell(1, Col::ColComm).toString(), u"—"_s);

    // A rank that finished without communicating (nothing to wait for) had none: 0.0 %, not unknown.
    QVERIFY(deliver(progress(1, 3.0, 0.0, 0.0), 3.0));
    auto bye = message(1, Kind::Bye);
    bye.exitCode = 0;
    QVERIFY(deliver(bye, 3.0));
    ranks.update(collector.snapshot(3.0));
    QCOMPARE(ranks.index(1, Col::ColState).data().toString(), cppl::app::rankStateLabel(cppl::core::telemetry::RankState::Done));
    QCOMPARE(cell(1, Col::ColComm).toString(), u"0.0 %"_s);
}

void TestAppModels::rankTableGroupsDigitsAsThePageDoes()
{
    // The Tokens column and the headline group digits ("3,563,120"); tok/s printed "9603" beside
    // them. A rank is a name, not a count: the delegate grouped it as one ("1,000") where the charts,
    // the heat map and the alerts write "rank 1000".
    struct Restore
    {
        QLocale before;
        ~Restore() { QLocale::setDefault(before); }
    } restore;
    QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
    using Col = cppl::app::RankTableModel::Column;
    cppl::app::SyntheticRun run = cppl::app::SyntheticRun::advanced(1024, 400);
    cppl::app::RankTableModel ranks;
    QAbstractItemModelTester tester(&ranks, QAbstractItemModelTester::FailureReportingMode::QtTest);
    ranks.update(run.snapshot());
    const auto &r = run.snapshot().ranks[1000];
    QVERIFY(r.hasProgress && r.tokensPerSecond > 1000 && r.stats.tokens > 1000000);
    // As the table's delegate writes it (it groups an integer by the locale).
    const QStyledItemDelegate delegate;
    QCOMPARE(delegate.displayText(ranks.index(1000, Col::ColRank).data(), QLocale()), u"1000"_s);
    const QString tokens = ranks.index(1000, Col::ColTokens).data().toString();
    const QString rate = ranks.index(1000, Col::ColRate).data().toString();
    QCOMPARE(tokens, QLocale().toString(qlonglong(r.stats.tokens)));
    QCOMPARE(rate, QLocale().toString(qlonglong(std::llround(r.tokensPerSecond))));
    QVERIFY2(rate.size() >= 5 && rate.at(rate.size() - 4) == u',', qPrintable(rate)); // "9,603"
    QCOMPARE(tokens.count(u','), 2);                                                  // "3,563,120"
    // Sorting still goes by the numbers.
    QCOMPARE(ranks.index(1000, Col::ColRank).data(cppl::app::RankTableModel::SortRole).toLongLong(), 1000);
    QCOMPARE(ranks.index(1000, Col::ColRate).data(cppl::app::RankTableModel::SortRole).toDouble(), r.tokensPerSecond);
}

void TestAppModels::syntheticTelemetryLossComesMidRun()
{
    // The screenshots' 1024-rank run said "telemetry messages: 33 lost" 3 s in, with the ranks
    // that lost them still loading (0 tokens, and "⚠ lost telemetry" alerts at 0:00): messages
    // counted lost before any was sent. The loss now comes mid-run, as a congested link's would.
    using cppl::core::run::AlertKind;
    cppl::app::SyntheticRun run = cppl::app::SyntheticRun::advanced(1024, 3);
    cppl::app::RunPage page;
    page.resize(1500, 900);
    run.showOn(page);
    QCOMPARE(run.snapshot().lostTotal, 0);
    const QLabel *telemetry = page.findChild<QLabel *>(u"telemetry"_s);
    QVERIFY(telemetry);
    QVERIFY2(telemetry->isHidden(), qPrintable(telemetry->text()));
    for (const auto &a : run.alerts())
        QVERIFY2(a.kind != AlertKind::LostMessages, qPrintable(a.message));
    run.advanceTo(0.6 * 600 + 12); // the live screenshot's moment
    run.showOn(page);
    QVERIFY(run.snapshot().lostTotal > 0);
    QCOMPARE(telemetry->text(), u"telemetry messages: %1 lost"_s.arg(run.snapshot().lostTotal));
    int raised = 0;
    for (const auto &a : run.alerts())
        if (a.kind == AlertKind::LostMessages) {
            ++raised;
            QVERIFY2(a.seconds >= cppl::app::SyntheticRun::kTelemetryLossSeconds, qPrintable(QString::number(a.seconds)));
        }
    QVERIFY(raised > 0);
}

void TestAppModels::rankTableAndAlertsFitANarrowWindow()
{
    // A 1024 px window leaves the Run page some 880 px: the rank table beside the alerts scrolled
    // sideways (Msgs lost, Heard and Memory out of sight) and the alert list showed 60 px of its
    // messages. Narrow, the table is the first tab beside Alerts and Logs, each with the whole
    // width; wide, they sit side by side as before. Both fit without scrolling sideways.
    cppl::app::SyntheticRun run = cppl::app::SyntheticRun::advanced(1024, 0.6 * 600 + 12);
    cppl::app::RunPage page;
    page.resize(880, 640);
    run.showOn(page);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    auto *table = page.findChild<QTableView *>(u"rankTable"_s);
    auto *alerts = page.findChild<QTableView *>(u"alertView"_s);
    QVERIFY(table && alerts);
    auto *tabs = qobject_cast<QTabWidget *>(alerts->parentWidget()->parentWidget());
    QVERIFY(tabs);
    QVERIFY(page.rankTableInTabs());
    QCOMPARE(tabs->tabText(0), u"Ranks"_s);
    // The headline's figures go on a line under the PPL here (they wrapped beside it: three lines,
    // tst_app_narrow runHeadlineTwoLines); the "Recovering" badge keeps the height of its text.
    run.showStalledRankLostOn(page);
    auto *tokens = page.findChild<QLabel *>(u"tokens"_s);
    auto *badge = page.findChild<QLabel *>(u"phase"_s);
    QVERIFY(tokens && badge);
    QTRY_VERIFY(page.figuresBelow());
    QTRY_VERIFY2(tokens->height() < 2 * tokens->fontMetrics().lineSpacing(), qPrintable(QString::number(tokens->height())));
    QVERIFY2(badge->height() <= badge->fontMetrics().lineSpacing() + badge->contentsMargins().top() + badge->contentsMargins().bottom() + 4,
             qPrintable(u"%1 px tall"_s.arg(badge->height())));
    QCOMPARE(tabs->tabText(1), u"Alerts (%1)"_s.arg(QLocale().toString(qlonglong(page.alertModel()->allAlerts().size()))));
    QVERIFY(table->isVisible());
    QTRY_VERIFY(table->viewport()->width() > 0);
    QTRY_COMPARE(table->horizontalScrollBar()->maximum(), 0);
    tabs->setCurrentWidget(alerts);
    QTRY_VERIFY(alerts->isVisible());
    QTRY_VERIFY2(alerts->columnWidth(cppl::app::AlertModel::ColMessage) >= 400,
                 qPrintable(QString::number(alerts->columnWidth(cppl::app::AlertModel::ColMessage))));
    QCOMPARE(alerts->horizontalScrollBar()->maximum(), 0);
    // The 1500 px window of the screenshots: side by side, nothing scrolls sideways, and the
    // alert count is still on its tab.
    page.resize(1370, 800);
    QTRY_VERIFY(!page.rankTableInTabs());
    QTRY_VERIFY(table->isVisible() && alerts->isVisible());
    QCOMPARE(tabs->tabText(0), u"Alerts (%1)"_s.arg(QLocale().toString(qlonglong(page.alertModel()->allAlerts().size()))));
    const int tableRight = table->mapTo(&page, QPoint(table->width(), 0)).x();
    const int alertsLeft = alerts->mapTo(&page, QPoint(0, 0)).x();
    QVERIFY2(tableRight <= alertsLeft, qPrintable(u"%1 > %2"_s.arg(tableRight).arg(alertsLeft)));
    QTRY_COMPARE(table->horizontalScrollBar()->maximum(), 0);
    QVERIFY2(alerts->columnWidth(cppl::app::AlertModel::ColMessage) >= 150,
             qPrintable(QString::number(alerts->columnWidth(cppl::app::AlertModel::ColMessage))));
    // The default 1400 px window: still side by side, the alerts narrower so that the table's
    // columns fit.
    page.resize(1265, 800);
    QTRY_VERIFY(table->isVisible() && alerts->isVisible());
    QVERIFY(!page.rankTableInTabs());
    QTRY_COMPARE(table->horizontalScrollBar()->maximum(), 0);
    QVERIFY2(alerts->columnWidth(cppl::app::AlertModel::ColMessage) >= 100,
             qPrintable(QString::number(alerts->columnWidth(cppl::app::AlertModel::ColMessage))));
    // Narrow again (the window resized back): the table returns to the tabs, alerts after it.
    page.resize(880, 640);
    QTRY_VERIFY(page.rankTableInTabs());
    QCOMPARE(tabs->count(), 3);
    QCOMPARE(tabs->indexOf(alerts), 1);
}

QTEST_MAIN(TestAppModels)
#include "tst_app_models.moc"

void TestAppModels::etaFromTheCurrentRate()
{
    // The headline's ETA, read at several moments of the synthetic 1024-rank run, must predict about
    // the same end. From the elapsed time (model loading and ranks not started counted as
    // evaluation) it read 49:26 at 3 s, an end at 49:29, against about 10:03 from 0:10 on; from
    // the current rate while ranks were still starting, 14:04 (their rates were missing).
    cppl::app::SyntheticRun run(1024);
    cppl::app::RunPage page;
    page.resize(1500, 900);
    const QLabel *eta = page.findChild<QLabel *>(u"eta"_s);
    QVERIFY(eta);
    const auto predictedEnd = [&](double at) {
        run.advanceTo(at);
        run.showOn(page);
        const QString text = eta->text();
        const qsizetype i = text.indexOf(u"ETA "_s);
        if (i < 0 || text.endsWith(u"ETA —"_s)) // "—": ranks still starting, no estimate
            return -1.0;
        double seconds = 0;
        for (const QString &part : text.mid(i + 4).split(u':'))
            seconds = 60 * seconds + part.toDouble();
        return at + seconds;
    };
    // At 1 s no rank has reported: no estimate yet.
    QCOMPARE(predictedEnd(1), -1.0);
    QVERIFY2(eta->text().startsWith(u"elapsed 0:01"_s), qPrintable(eta->text()));
    QList<std::pair<double, QString>> ends; // the run only goes forward: read in order, compared with the last
    for (double at : {3.0, 10.0, 60.0, 180.0, 360.0}) {
        const double end = predictedEnd(at);
        if (end < 0 && at < 10) // ranks still starting
            continue;
        QVERIFY2(end > at, qPrintable(u"at %1 s: %2"_s.arg(at).arg(eta->text())));
        ends.append({end, u"at %1 s: %2"_s.arg(at).arg(eta->text())});
    }
    const double settled = ends.last().first;
    for (const auto &[end, what] : ends)
        QVERIFY2(std::fabs(end - settled) <= 0.25 * settled, qPrintable(u"%1, an end at %2 s against %3 s at 6:00"_s.arg(what).arg(end).arg(settled)));
}

void TestAppModels::historyWritesFiguresAsTheRunPage()
{
    // A stored run's PPL and tok/s read as the Run page's headline wrote them (six decimals; whole
    // tokens per second, grouped): History had four decimals and one, so a run compared by eye with
    // its live headline or the CLI's line seemed to differ.
    cppl::core::history::RunRecord r;
    r.runId = u"r1"_s;
    r.ppl = 4.3138351234;
    r.pplStderr = 0.0024881;
    r.tokensPerSecond = 4913.4;
    cppl::app::HistoryModel m;
    m.setRuns({r});
    QCOMPARE(m.index(0, cppl::app::HistoryModel::ColPpl).data().toString(), u"4.313835 ± 0.002488"_s);
    QCOMPARE(m.index(0, cppl::app::HistoryModel::ColRate).data().toString(), QLocale().toString(4913.0, 'f', 0));
    r.pplStderr.reset();
    r.tokensPerSecond.reset();
    m.setRuns({r});
    QCOMPARE(m.index(0, cppl::app::HistoryModel::ColPpl).data().toString(), u"4.313835"_s);
    QCOMPARE(m.index(0, cppl::app::HistoryModel::ColRate).data().toString(), u"—"_s);
}
