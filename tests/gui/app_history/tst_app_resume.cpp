// SPDX-License-Identifier: MIT
// Resume from the dashboard (docs/dashboard.md, History): a real 4-rank `clusterppl-cli run`,
// recorded in a real SQLite store, is SIGKILLed with its agents after its second committed round
// (a power loss). The History page shows it interrupted with its progress and resumes it through
// the same RunEngine path as `run --resume`: the Run page says where it resumed from, the result
// has the one-rank run's exact bits and is stored next to the interrupted run. Every refusal the
// CLI gives is shown with the CLI's words: a profile that evaluates something else (the field
// named), data changed since the interruption, a run without a committed round, a finished run.

#include "history_model.h"
#include "history_page.h"
#include "main_window.h"
#include "message_bar.h"
#include "resume_state.h"
#include "run_detail.h"
#include "run_page.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_profile.h"
#include "test_verify.h"

#include "history/run_history.h"

#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QProcess>
#include <QSignalSpy>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <QThread>
#include <QMenu>
#include <QToolButton>

#include <functional>

#include <QScopeGuard>

#include <signal.h>

using namespace Qt::StringLiterals;
using cppl::app::HistoryModel;
using cppl::app::MainWindow;
using cppl::app::ResumeState;
using cppl::core::history::RunStatus;
using cppl::core::history::RunHistory;
using cppl::test::killRun;
using cppl::test::readFile;
using cppl::test::readJson;
using cppl::test::writeFile;

using cppl::test::kCli;
using cppl::test::kAgent;
using cppl::test::kText;

namespace {

constexpr int kWindows = 128;

/// The shared local profile on @p text, dynamic schedule, a sync round every 128 scored tokens.
QByteArray profileJson(const QString &text, int slots, int context = 128)
{
    QString json = cppl::test::localProfileJson(u"resume-test"_s, kAgent, slots, u"size:2"_s, kWindows);
    json.replace(kText, text);
    json.replace(u"\"context\": 128"_s, u"\"context\": %1"_s.arg(context));
    json.replace(u"\"topology\": \"hierarchical\"}"_s, u"\"topology\": \"hierarchical\", \"schedule\": \"dynamic\"}"_s);
    json.replace(u"\"sync_every_tokens\": 300"_s, u"\"sync_every_tokens\": 128"_s);
    return json.toUtf8();
}

} // namespace

class TestAppResume : public QObject
{
    Q_OBJECT

    QTemporaryDir m_dir;
    QString m_store, m_text, m_profile;
    QJsonObject m_oneRank;
    int m_round = -1;

    QString runDir(const QString &id) const { return m_dir.filePath(u"state/clusterppl/runs/"_s + id); }

    /// Starts `clusterppl-cli run` (recorded in the history), waits until @p ready says so, then kills
    /// the CLI and every agent of the run with SIGKILL, as a power loss would.
    bool startAndKill(const QString &profile, const QString &runId, const std::function<bool()> &ready)
    {
        QProcess p;
        p.start(kCli, {u"run"_s, u"--profile"_s, profile, u"--run-id"_s, runId, u"--no-preflight"_s});
        if (!p.waitForStarted())
            return false;
        QElapsedTimer t;
        t.start();
        bool seen = false;
        while (t.elapsed() < 120000 && p.state() == QProcess::Running && !(seen = ready()))
            QThread::msleep(20);
        const bool gone = killRun(p, runId);
        if (!seen)
            qWarning("%s: not ready before it ended:\n%s", qPrintable(runId), p.readAllStandardError().constData());
        return seen && gone;
    }

    std::unique_ptr<MainWindow> window()
    {
        auto w = std::make_unique<MainWindow>();
        w->setAgentOverride(kAgent);
        w->setStoreRuns(true);
        [&] { QVERIFY(w->openProfile(m_profile)); }();
        w->resize(1500, 940);
        w->show();
        w->showPage(MainWindow::HistoryPageIndex); // opens the history: the killed runs become interrupted
        return w;
    }

    int rowOf(MainWindow &w, const QString &runId) { return w.historyPage()->model()->rowOf(runId); }

    QString statusText(MainWindow &w, const QString &runId)
    {
        HistoryModel *m = w.historyPage()->model();
        return m->data(m->index(rowOf(w, runId), HistoryModel::ColStatus)).toString();
    }

    /// Selects @p runId and presses Resume (or its menu's "on the Cluster page's hosts").
    void pressResume(MainWindow &w, const QString &runId, bool onHosts = false)
    {
        w.historyPage()->selectRuns({runId});
        QVERIFY(w.historyPage()->resumeButton()->isEnabled());
        if (onHosts)
            w.historyPage()->resumeButton()->menu()->actions().front()->trigger();
        else
            w.historyPage()->resumeButton()->click();
    }

    QString shownError(MainWindow &w) { return w.messageBar()->isVisible() ? w.messageBar()->text() : QString(); }

private Q_SLOTS:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_dir.isValid());
        qputenv("XDG_STATE_HOME", m_dir.filePath(u"state"_s).toUtf8());
        m_store = m_dir.filePath(u"history/runs.sqlite"_s);
        qputenv("CLUSTERPPL_STORE", m_store.toUtf8());
        m_text = m_dir.filePath(u"text.txt"_s); // a copy: one test changes it
        QVERIFY(QFile::copy(kText, m_text));
        m_profile = m_dir.filePath(u"profile.json"_s);
        QVERIFY(writeFile(m_profile, profileJson(m_text, 4)));
        const QString json = m_dir.filePath(u"one-rank.json"_s);
        const auto r = cppl::test::oneRankEval(kAgent, m_text, kWindows, json);
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        m_oneRank = readJson(json);

        // The interrupted run: killed after its second committed round.
        const QString checkpoint = runDir(u"killed"_s) + u"/checkpoint.json"_s;
        QVERIFY(startAndKill(m_profile, u"killed"_s, [&] { return readJson(checkpoint).value(u"round"_s).toInt(-1) >= 2; }));
        m_round = readJson(checkpoint).value(u"round"_s).toInt(-1);
        QVERIFY(m_round >= 2);
        // One killed before it could commit a round: one rank syncs only at the end.
        const QString oneRank = m_dir.filePath(u"one.json"_s);
        QVERIFY(writeFile(oneRank, profileJson(m_text, 1)));
        QVERIFY(startAndKill(oneRank, u"uncommitted"_s, [&] {
            // Recorded in the history (read through another connection), and its run directory begun.
            if (!QFile::exists(runDir(u"uncommitted"_s) + u"/run.json"_s))
                return false;
            QThread::msleep(100);
            return RunHistory(m_store).contains(u"uncommitted"_s);
        }));
    }

    void historyShowsTheProgress()
    {
        auto w = window();
        HistoryModel *m = w->historyPage()->model();
        QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(rowOf(*w, u"killed"_s) >= 0);
        QCOMPARE(m->runAt(rowOf(*w, u"killed"_s)).status, RunStatus::Interrupted);
        const QJsonObject cp = readJson(runDir(u"killed"_s) + u"/checkpoint.json"_s);
        const QString progress = u"stopped after round %1 (%2 of %3 global batches), resumable"_s.arg(m_round)
                                     .arg(m->resumeState(rowOf(*w, u"killed"_s)).source->batchesDone)
                                     .arg(cp.value(u"batch_count"_s).toInteger());
        const qint64 done = m->resumeState(rowOf(*w, u"killed"_s)).source->batchesDone;
        QCOMPARE(statusText(*w, u"killed"_s), u"⚠ interrupted — %1% done, resumable"_s.arg(100 * done / (kWindows / 2)));
        const QString tip = m->data(m->index(rowOf(*w, u"killed"_s), HistoryModel::ColStatus), Qt::ToolTipRole).toString();
        CPPL_VERIFY2(tip.contains(progress + u" (dynamic schedule, 4 ranks)"_s), qPrintable(tip));
        QCOMPARE(cp.value(u"batch_count"_s).toInteger(), qint64(kWindows / 2));
        w->historyPage()->selectRuns({u"killed"_s});
        CPPL_VERIFY2(w->historyPage()->resumeText().contains(u"Run killed "_s + progress), qPrintable(w->historyPage()->resumeText()));
        QVERIFY(w->historyPage()->findChild<QLabel *>(u"historyResumeInfo"_s)->isVisible());
        // The run detail says the same.
        RunHistory store(m_store);
        cppl::app::RunDetailDialog detail(*store.get(u"killed"_s));
        const auto *summary = qobject_cast<QTextBrowser *>(detail.tabs()->widget(0));
        QVERIFY(summary);
        CPPL_VERIFY2(summary->toPlainText().contains(progress), qPrintable(summary->toPlainText()));
        // The one-rank run killed before its end: interrupted, and why it cannot be resumed.
        QCOMPARE(statusText(*w, u"uncommitted"_s), u"⚠ interrupted"_s);
        QCOMPARE(m->resumeState(rowOf(*w, u"uncommitted"_s)).kind, ResumeState::Kind::Refused);
    }

    void refusalsNameTheCause()
    {
        auto w = window();
        // No committed round: the CLI's message, without its "--resume DIR:" prefix.
        pressResume(*w, u"uncommitted"_s);
        QTRY_VERIFY(shownError(*w).contains(u"Cannot resume run uncommitted: run uncommitted has no committed round"_s));
        QCOMPARE(w->pages()->currentIndex(), int(MainWindow::HistoryPageIndex)); // nothing started

        // On the Cluster page's hosts, with a profile that evaluates something else: each field named.
        const QString other = m_dir.filePath(u"other.json"_s);
        QVERIFY(writeFile(other, profileJson(m_text, 4, 64)));
        QVERIFY(w->openProfile(other));
        w->showPage(MainWindow::HistoryPageIndex);
        pressResume(*w, u"killed"_s, true);
        QTRY_VERIFY2(shownError(*w).contains(u"the profile does not evaluate what run killed evaluated:\n  evaluation.context is 64, the run "
                                             "evaluated 128"_s),
                     qPrintable(shownError(*w)));
        QVERIFY(QFile::exists(runDir(u"killed"_s) + u"/checkpoint.json"_s));

        // Data changed since the interruption: rank 0 compares the token stream and refuses.
        const QByteArray text = readFile(m_text);
        QByteArray changed = text;
        changed[100] = changed[100] == 'a' ? 'b' : 'a';
        QVERIFY(writeFile(m_text, changed));
        QSignalSpy ended(w.get(), &MainWindow::runFinished);
        pressResume(*w, u"killed"_s);
        QVERIFY(ended.wait(180000));
        QVERIFY(writeFile(m_text, text));
        const auto outcome = ended.front().front().value<cppl::core::run::RunOutcome>();
        QCOMPARE(outcome.phase, cppl::core::run::RunPhase::Failed);
        // Rank 0's refusal is the first cause even when a peer that only gave up (exit 5, its peer
        // left) is reaped first, and the message bar shows it.
        const QString refusal = u"the data as the model sees it changed since the interrupted run"_s;
        // Every rank refuses on its own (before they connect): whichever is reaped first is named.
        CPPL_VERIFY2(outcome.firstCause.contains(u"exit code 2"_s) && outcome.firstCause.contains(refusal),
                 qPrintable(outcome.firstCause + u'\n' + outcome.summary));
        CPPL_VERIFY2(shownError(*w).contains(refusal), qPrintable(shownError(*w)));
        QVERIFY(QFile::exists(runDir(u"killed"_s) + u"/checkpoint.json"_s)); // still resumable
    }

    void autoBatchRunResumes()
    {
        // "batch": "auto" on a GPU: the batch comes from free memory, which may differ when the run
        // resumes, and the batch is part of what a resume must match. The checkpoint records the
        // batch the run used, and Resume gives it to every rank as --batch: the one-rank bits.
        // CLUSTERPPL_TEST_GPU_FREE_BYTES makes the CPU agents size their batch as on a GPU. Resumed
        // on the Cluster page's hosts: a profile that says batch 2 evaluates something else, one
        // that says batch 1 (what auto came out as) evaluates the same and resumes.
        const QString profile = m_dir.filePath(u"auto.json"_s);
        QByteArray json = profileJson(m_text, 4);
        QVERIFY(json.contains("\"batch\": 2"));
        json.replace("\"batch\": 2", "\"batch\": \"auto\"");
        QVERIFY(writeFile(profile, json));
        // 1 GiB free is all reserve: batch 1, so the run has many rounds to be killed between.
        qputenv("CLUSTERPPL_TEST_GPU_FREE_BYTES", QByteArray::number(qint64(1) << 30));
        const auto unset = qScopeGuard([] { qunsetenv("CLUSTERPPL_TEST_GPU_FREE_BYTES"); });
        const QString checkpoint = runDir(u"auto-killed"_s) + u"/checkpoint.json"_s;
        const bool killed = startAndKill(profile, u"auto-killed"_s, [&] { return readJson(checkpoint).value(u"round"_s).toInt(-1) >= 1; });
        QVERIFY(killed);
        QCOMPARE(readJson(checkpoint).value(u"batch"_s).toInteger(), qint64(1));
        auto w = window();
        CPPL_VERIFY2(statusText(*w, u"auto-killed"_s).startsWith(u"⚠ interrupted"_s), qPrintable(statusText(*w, u"auto-killed"_s)));
        const QString batch2 = m_dir.filePath(u"batch-2.json"_s);
        QVERIFY(writeFile(batch2, profileJson(m_text, 4)));
        QVERIFY(w->openProfile(batch2));
        w->showPage(MainWindow::HistoryPageIndex);
        pressResume(*w, u"auto-killed"_s, true);
        QTRY_VERIFY2(shownError(*w).contains(u"the profile does not evaluate what run auto-killed evaluated:\n  evaluation.batch is 2, the run "
                                             "evaluated auto (batch 1 in this run)"_s),
                     qPrintable(shownError(*w)));
        const QString batch1 = m_dir.filePath(u"batch-1.json"_s);
        QByteArray fixed = profileJson(m_text, 4);
        fixed.replace("\"batch\": 2", "\"batch\": 1");
        QVERIFY(writeFile(batch1, fixed));
        QVERIFY(w->openProfile(batch1));
        w->showPage(MainWindow::HistoryPageIndex);
        QSignalSpy ended(w.get(), &MainWindow::runFinished);
        pressResume(*w, u"auto-killed"_s, true);
        QVERIFY(ended.wait(300000));
        const auto outcome = ended.front().front().value<cppl::core::run::RunOutcome>();
        CPPL_VERIFY2(outcome.phase == cppl::core::run::RunPhase::Finished, qPrintable(outcome.firstCause + u'\n' + outcome.summary));
        const QJsonObject res = QJsonDocument::fromJson(outcome.resultJson).object();
        QCOMPARE(res.value(u"batch"_s).toInteger(), qint64(1));
        QCOMPARE(res.value(u"nll_sum_exact"_s).toString(), m_oneRank.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(res.value(u"tokens_scored"_s).toInteger(), m_oneRank.value(u"tokens_scored"_s).toInteger());
        QVERIFY(QFile::exists(runDir(u"auto-killed"_s) + u"/result.json"_s));
    }

    void resumeFinishesWithTheOneRankBits()
    {
        auto w = window();
        QSignalSpy ended(w.get(), &MainWindow::runFinished);
        pressResume(*w, u"killed"_s);
        QCOMPARE(w->pages()->currentIndex(), int(MainWindow::RunPageIndex));
        CPPL_VERIFY2(w->runPage()->resumedText().contains(u"Resumed run killed from round %1: "_s.arg(m_round)), qPrintable(w->runPage()->resumedText()));
        QVERIFY(ended.wait(300000));
        const auto outcome = ended.front().front().value<cppl::core::run::RunOutcome>();
        CPPL_VERIFY2(outcome.phase == cppl::core::run::RunPhase::Finished, qPrintable(outcome.firstCause + outcome.summary));
        QVERIFY(w->runPage()->resumedText().contains(u"from round %1"_s.arg(m_round))); // still said when it ends
        const QJsonObject res = QJsonDocument::fromJson(outcome.resultJson).object();
        QCOMPARE(res.value(u"nll_sum_exact"_s).toString(), m_oneRank.value(u"nll_sum_exact"_s).toString());
        QCOMPARE(res.value(u"tokens_scored"_s).toInteger(), m_oneRank.value(u"tokens_scored"_s).toInteger());
        QCOMPARE(res.value(u"resumed"_s).toObject().value(u"from_round"_s).toInt(), m_round);
        QVERIFY(QFile::exists(runDir(u"killed"_s) + u"/result.json"_s));

        // Stored as killed.N beside the interrupted run, which now says a resume finished it.
        w->historyPage()->refresh();
        RunHistory store(m_store);
        QString resumedId;
        for (const auto &r : store.list())
            if (r.runId.startsWith(u"killed."_s) && r.status == RunStatus::Finished)
                resumedId = r.runId;
        CPPL_VERIFY2(!resumedId.isEmpty(), "the resumed run is not in the store");
        const auto resumed = store.get(resumedId);
        QCOMPARE(resumed->nllSumExact, m_oneRank.value(u"nll_sum_exact"_s).toString());
        CPPL_VERIFY2(resumed->settings.value(u"resumed_from_round"_s).toInt() == m_round,
                 QJsonDocument(resumed->settings).toJson().constData());
        QCOMPARE(resumed->settings.value(u"run_directory"_s).toString(), runDir(u"killed"_s));
        QCOMPARE(statusText(*w, u"killed"_s), u"⚠ interrupted — finished by a resume"_s);

        // A finished run is not resumed: the CLI's words.
        pressResume(*w, u"killed"_s);
        QTRY_VERIFY2(shownError(*w).contains(u"Cannot resume run killed: run killed finished (ppl "_s)
                         && shownError(*w).contains(u"there is nothing to resume"_s),
                     qPrintable(shownError(*w)));
        if (const QByteArray dir = qgetenv("CPPL_RESUME_SHOTS"); !dir.isEmpty()) {
            w->showPage(MainWindow::HistoryPageIndex);
            w->historyPage()->selectRuns({u"killed"_s});
            QTest::qWait(100);
            QVERIFY(w->grab().save(QString::fromLocal8Bit(dir) + u"/history-resumed.png"_s));
        }
    }
};

QTEST_MAIN(TestAppResume)
#include "tst_app_resume.moc"
