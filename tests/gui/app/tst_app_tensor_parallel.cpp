// SPDX-License-Identifier: MIT
// Tensor parallelism in the dashboard, offscreen: the Evaluation page's field and its preview's
// memory plan (the real `clusterppl-agent plan --model`) before and after a pre-flight names the
// GPUs' memory; the Cluster tree and the Run page's rank table naming each rank's group.
#include "evaluation_page.h"
#include "profile_model.h"
#include "rank_table_model.h"

#include "test_paths.h"

#include "cppl/cluster_profile.h"
#include "telemetry/collector_state.h"

#include <QAbstractItemModelTester>
#include <QJsonArray>
#include <QJsonObject>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTest>

using namespace Qt::StringLiterals;

namespace {

cppl::ClusterProfile profileOf(int slots, int n)
{
    const auto parsed = cppl::parseProfile(
        R"({"format": "clusterppl-profile", "version": 1, "launcher": "local", "hosts": [{"name": "node01", "slots": 4}, {"name": "node02", "slots": )"
        + std::to_string(slots) + "}]}");
    cppl::ClusterProfile p = parsed.profile;
    p.evaluation.tensorParallel = n;
    return p;
}

} // namespace

class TestAppTensorParallel : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QSettings().clear();
    }

    void evaluationPreviewShowsThePlan()
    {
        cppl::app::EvaluationPage page;
        page.setAgent(cppl::test::kAgent);
        page.setWorldSize(4);
        page.setGpusPerNode(4);
        cppl::EvaluationSpec e;
        e.model = cppl::test::kModel.toStdString();
        e.text = cppl::test::kText.toStdString();
        e.protocol = "llama.cpp";
        e.context = 128;
        e.tensorParallel = 2;
        page.load(e, {});
        auto *field = page.findChild<QSpinBox *>(u"tensorParallel"_s);
        QVERIFY(field);
        QCOMPARE(field->value(), 2);
        QCOMPARE(page.evaluation().tensorParallel, 2);
        // No pre-flight yet: the figures, and that there is no verdict.
        QTRY_VERIFY_WITH_TIMEOUT(page.previewText().contains(u"Memory per rank"_s), 60000);
        QVERIFY2(page.previewText().contains(u"with tensor parallel 2 (bfloat16)"_s), qPrintable(page.previewText()));
        QVERIFY2(page.previewText().contains(u"No GPU memory known"_s), qPrintable(page.previewText()));
        QVERIFY(page.previewText().contains(u"sync rounds"_s)); // the windows' plan is still there
        // A pre-flight names two hosts' GPUs: the smallest is the one planned against.
        page.notePreflight(QJsonObject{{u"host"_s, u"node01"_s},
                                       {u"cuda"_s, QJsonObject{{u"devices"_s, QJsonArray{QJsonObject{{u"memory_bytes"_s, 80LL << 30}}}}}}});
        page.notePreflight(QJsonObject{{u"host"_s, u"node02"_s},
                                       {u"cuda"_s, QJsonObject{{u"devices"_s, QJsonArray{QJsonObject{{u"memory_bytes"_s, 24LL << 30}}}}}}});
        QTRY_VERIFY_WITH_TIMEOUT(page.previewText().contains(u"of 24.00 GiB per GPU"_s), 60000);
        QVERIFY2(page.previewText().contains(u"<b>fits</b>"_s), qPrintable(page.previewText()));
        // 6 heads: N = 4 is refused, in the agent's words; the smallest that fits is 1.
        QVERIFY2(page.previewText().contains(u"Recommended: N = 1: the smallest that fits"_s), qPrintable(page.previewText()));
        field->setValue(4);
        QTRY_VERIFY_WITH_TIMEOUT(page.previewText().contains(u"the model's 6 attention heads do not divide by it"_s), 60000);
        QCOMPARE(page.evaluation().tensorParallel, 4);
    }

    void clusterTreeNamesTheGroups()
    {
        cppl::app::ProfileModel model;
        QAbstractItemModelTester tester(&model);
        model.setProfile(profileOf(4, 1));
        const QModelIndex host = model.indexOfHost(1, cppl::app::ProfileModel::ColRanks); // node02, ranks 4-7
        QVERIFY(host.isValid());
        QCOMPARE(host.data().toString(), u"ranks 4–7"_s);
        model.setTensorParallel(2);
        QCOMPARE(host.data().toString(), u"ranks 4–7 · TP groups 2–3"_s);
        const QModelIndex hostName = model.indexOfHost(1, cppl::app::ProfileModel::ColName);
        QCOMPARE(model.index(1, cppl::app::ProfileModel::ColRanks, hostName).data().toString(), u"rank 5 · TP group 2 (ranks 4–5)"_s);
        QVERIFY(model.problems().isEmpty());
        // A host whose slots N does not divide is a problem, named.
        model.setProfile(profileOf(3, 2));
        QVERIFY2(model.problems().join(u'\n').contains(u"host \"node02\" has 3 slots, not a multiple of it"_s), qPrintable(model.problems().join(u'\n')));
    }

    void rankTableNamesTheGroups()
    {
        cppl::core::telemetry::Snapshot s;
        s.worldSize = 4;
        for (int r = 0; r < 4; ++r) {
            cppl::core::telemetry::RankView v;
            v.rank = r;
            v.host = "node01";
            s.ranks.push_back(v);
        }
        cppl::app::RankTableModel ranks;
        ranks.setGroupNames({u"node01"_s});
        ranks.update(s);
        const QModelIndex rank3 = ranks.index(3, cppl::app::RankTableModel::ColGroup);
        QCOMPARE(rank3.data().toString(), u"node01"_s);
        ranks.setTensorParallel(2);
        QCOMPARE(rank3.data().toString(), u"node01 · TP 1"_s);
        QCOMPARE(rank3.data(Qt::ToolTipRole).toString(), u"Tensor-parallel group 1: ranks 2–3 split the model (its leader: rank 2)"_s);
        QCOMPARE(ranks.index(1, cppl::app::RankTableModel::ColGroup).data().toString(), u"node01 · TP 0"_s);
    }
};

QTEST_MAIN(TestAppTensorParallel)
#include "tst_app_tensor_parallel.moc"
