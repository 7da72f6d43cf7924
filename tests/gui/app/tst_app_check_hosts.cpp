// SPDX-License-Identifier: MIT
// The dashboard's "Check hosts" (the engine's pre-flight-only mode) on the embedded default profile
// with this build's agent, and its host-key dialog's three answers reaching a real SSH launcher
// through SshPrompter against a real sshd on 127.0.0.1 (tests/common/test_sshd.h).
#include "cluster_page.h"
#include "evaluation_page.h"
#include "host_dialogs.h"
#include "main_window.h"
#include "message_bar.h"
#include "profile_model.h"
#include "run/run_engine.h"
#include "test_paths.h"
#include "test_skip.h"
#include "test_ssh_echo.h"
#include "test_sshd.h"

#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using cppl::app::HostKeyDialog;
using cppl::app::MainWindow;
using cppl::app::ProfileModel;
using cppl::core::run::RunEngine;
using cppl::core::run::RunPhase;

using cppl::test::kAgent;

namespace {
} // namespace

class TestAppCheckHosts : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;

    /// One rank of `echo ok` on node1 through the SSH launcher with the prompter's callbacks (its
    /// BlockingQueuedConnection is answered in the helper's event loop).
    static int runOne(const cppl::core::LauncherSettings &settings, QStringList *errors)
    {
        const cppl::test::SshEcho o = cppl::test::runEchoOnNode1(settings);
        *errors << o.hostErrors;
        return o.exitCode;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        qputenv("CLUSTERPPL_STORE", m_dir.filePath(u"store.sqlite"_s).toUtf8());
    }

    void checkHostsLocal()
    {
        MainWindow w;
        w.setAgentOverride(kAgent);
        w.loadStartupProfile();
        w.show();
        QVERIFY(w.checkHosts());
        RunEngine *e = w.checkEngine();
        QVERIFY(e);
        // While it runs every host says so.
        const QModelIndex host = w.clusterPage()->model()->indexOfHost(0, ProfileModel::ColPreflight);
        QSignalSpy finished(e, &RunEngine::finished);
        QVERIFY(finished.wait(60000));
        QCOMPARE(e->outcome().phase, RunPhase::Finished);
        QVERIFY(e->plan().ranks.size() == 4 && e->outcome().ends.empty()); // four ranks planned, none started
        QVERIFY2(host.data().toString().startsWith(u"✓"_s) && host.data().toString().contains(u"agent "_s), qPrintable(host.data().toString()));
        QVERIFY(host.data(Qt::ToolTipRole).toString().contains(u"memory: "_s));
        const QString inline_ = w.clusterPage()->checkResultsText();
        QVERIFY2(inline_.contains(u"localhost"_s) && inline_.contains(u"LibTorch"_s) && inline_.contains(u"passed pre-flight"_s),
                 qPrintable(inline_));
        QVERIFY2(w.messageBar()->text().contains(u"passed pre-flight"_s), qPrintable(w.messageBar()->text()));
        QVERIFY(!w.engine()); // the Run page's engine was never created
    }

    void checkHostsRefusalNamesHost()
    {
        MainWindow w;
        w.setAgentOverride(kAgent);
        w.loadStartupProfile();
        auto ev = w.evaluationPage()->evaluation();
        ev.model = m_dir.filePath(u"no-such-model"_s).toStdString();
        w.evaluationPage()->load(ev, w.evaluationPage()->thresholds());
        w.show();
        QVERIFY(w.checkHosts());
        QSignalSpy finished(w.checkEngine(), &RunEngine::finished);
        QVERIFY(finished.wait(60000));
        QCOMPARE(w.checkEngine()->outcome().phase, RunPhase::Failed);
        const QModelIndex host = w.clusterPage()->model()->indexOfHost(0, ProfileModel::ColPreflight);
        QVERIFY2(host.data().toString().startsWith(u"✗"_s), qPrintable(host.data().toString()));
        QVERIFY(host.data(Qt::ForegroundRole).isValid()); // marked, besides the ✗
        QVERIFY2(w.messageBar()->text().contains(u"host localhost"_s) && w.messageBar()->text().contains(u"no-such-model: missing"_s),
                 qPrintable(w.messageBar()->text()));
        QVERIFY(w.clusterPage()->checkResultsText().contains(u"refused: "_s));
    }

    void checkHostsAgentMissingSaysWhatToDo()
    {
        // A host whose agent is not where the profile says: the Cluster page's results, the host's
        // cell and the message bar carry the host's words and what to do.
        MainWindow w;
        w.setAgentOverride(m_dir.filePath(u"no-such-dir/clusterppl-agent"_s));
        w.loadStartupProfile();
        w.show();
        QVERIFY(w.checkHosts());
        QSignalSpy finished(w.checkEngine(), &RunEngine::finished);
        QVERIFY(finished.wait(60000));
        QCOMPARE(w.checkEngine()->outcome().phase, RunPhase::Failed);
        const QString hint = u"there is no agent at that path on this host: install it there"_s;
        const QString results = w.clusterPage()->checkResultsText();
        // Said once (the host's line), counted in the verdict.
        QVERIFY2(results.contains(u"No such file or directory"_s) && results.count(hint) == 1, qPrintable(results));
        QVERIFY2(results.contains(u"1 of 1 host failed pre-flight (above); nothing was launched."_s), qPrintable(results));
        const QModelIndex host = w.clusterPage()->model()->indexOfHost(0, ProfileModel::ColPreflight);
        QVERIFY2(host.data().toString().startsWith(u"✗"_s), qPrintable(host.data().toString()));
        QVERIFY2(host.data(Qt::ToolTipRole).toString().contains(hint), qPrintable(host.data(Qt::ToolTipRole).toString()));
        QVERIFY2(w.messageBar()->text().contains(hint), qPrintable(w.messageBar()->text()));
    }

    void hostKeyDialogAnswersReachTheLauncher()
    {
        cppl::test::TestSshd sshd;
        if (const QString why = sshd.start(m_dir.path()); !why.isEmpty())
            CPPL_SKIP_MISSING(qPrintable(why));
        QWidget parent;
        cppl::app::SshPrompter prompter(&parent);
        HostKeyDialog::Answer answer = HostKeyDialog::Refuse;
        int asked = 0;
        prompter.setHostKeyHook([&](const QString &host, const QString &fp) {
            ++asked;
            return host.startsWith(u"node1"_s) && fp.contains(u"SHA256:"_s) ? answer : HostKeyDialog::Refuse;
        });
        cppl::core::LauncherSettings s;
        prompter.install(s);
        s.sshConfigFile = sshd.sshConfigFile().toStdString();
        s.knownHostsFile = sshd.knownHosts().toStdString();
        s.connectTimeoutSeconds = 5;
        QStringList errors;

        QCOMPARE(runOne(s, &errors) != 0, true); // Refuse (the default button)
        QVERIFY2(errors.size() == 1 && errors[0].contains(u"host node1"_s) && errors[0].contains(u"refused"_s), qPrintable(errors.join(u'\n')));
        QVERIFY(!QFile::exists(sshd.knownHosts()));

        answer = HostKeyDialog::AcceptOnce; // "Accept for this session"
        errors.clear();
        QCOMPARE(runOne(s, &errors), 0);
        QVERIFY(!sshd.knownHostsContent().contains("127.0.0.1"));
        QCOMPARE(asked, 2);
        // This session remembers it in memory: the next connection is not asked, still nothing written.
        QCOMPARE(runOne(s, &errors), 0);
        QCOMPARE(asked, 2);
        QVERIFY(!sshd.knownHostsContent().contains("127.0.0.1"));

        // A new dashboard session asks again; "Accept and remember" writes known_hosts.
        cppl::app::SshPrompter next(&parent);
        next.setHostKeyHook([&](const QString &, const QString &) {
            ++asked;
            return HostKeyDialog::AcceptAlways;
        });
        cppl::core::LauncherSettings s2 = s;
        next.install(s2);
        QCOMPARE(runOne(s2, &errors), 0);
        QCOMPARE(asked, 3);
        QVERIFY(sshd.knownHostsContent().contains("127.0.0.1"));
    }
};

QTEST_MAIN(TestAppCheckHosts)
#include "tst_app_check_hosts.moc"
