// SPDX-License-Identifier: MIT
// The agent's two halves (docs/ARCHITECTURE.md, "The agent's two halves"): clusterppl-agent loads
// no LibTorch and execs clusterppl-agent-torch for eval, comm-check and preflight, in the same
// process; copied alone it still runs its own commands and names what is missing for the others;
// installed (bin/ and lib/clusterppl/) it finds its torch half.
#include "exit_codes.h"

#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using cppl::agent::kExitOk;
using cppl::agent::kExitRuntime;
using cppl::test::kAgent;
using cppl::test::kModel;
using cppl::test::kText;
using cppl::test::readFile;
using cppl::test::runProcess;

namespace {

const QString kTorchAgent = QStringLiteral(CPPL_AGENT_TORCH_EXE);

/// The line of /proc/@p pid/status that starts with @p field ("VmRSS:"), its number (kB); -1 if none.
qint64 statusField(qint64 pid, const QByteArray &field)
{
    for (const QByteArray &line : readFile(u"/proc/%1/status"_s.arg(pid)).split('\n'))
        if (line.startsWith(field))
            return line.mid(field.size()).trimmed().split(' ').value(0).toLongLong();
    return -1;
}

/// A copy of @p from at @p to, executable; false when it cannot be made.
bool copyExecutable(const QString &from, const QString &to)
{
    return QDir().mkpath(QFileInfo(to).absolutePath()) && QFile::copy(from, to)
           && QFile::setPermissions(to, QFile::permissions(from) | QFileDevice::ExeUser);
}

/// `eval` of the demo model's first windows, its result in @p json.
QStringList shortEval(const QString &json)
{
    return {u"eval"_s,       u"--model"_s, kModel,      u"--text"_s,    kText,          u"--tokenizer"_s, u"bytes"_s, u"--max-windows"_s,
            u"3"_s,          u"--context"_s, u"64"_s,   u"--threads"_s, u"1"_s,         u"--json"_s,      json,       u"--quiet"_s};
}

} // namespace

class TestAgentFront : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    // A store served by the front carries no LibTorch; a torch command started through the front
    // is the torch half in the very process the launcher started (its PID, its argv).
    void torchCommandsBecomeTheTorchHalfInPlace()
    {
        QProcess store;
        QByteArray out;
        const int port = cppl::test::startStore(store, kAgent, {u"--port"_s, u"0"_s, u"--bind"_s, u"127.0.0.1"_s}, out);
        CPPL_VERIFY2(port > 0, (out + store.readAllStandardError()).constData());
        const QByteArray storeMaps = readFile(u"/proc/%1/maps"_s.arg(store.processId()));
        QVERIFY(!storeMaps.isEmpty());
        CPPL_VERIFY2(!storeMaps.contains("libtorch") && !storeMaps.contains("libc10"), "the store has LibTorch mapped");
        const qint64 storeRss = statusField(store.processId(), "VmRSS:");
        CPPL_VERIFY2(storeRss > 0 && storeRss < 32 * 1024, qPrintable(u"the store's RSS is %1 kB"_s.arg(storeRss)));
        qInfo("clusterppl-agent store: %lld kB resident", storeRss);

        // Rank 1 of 2 waits at the rendezvous for a rank 0 that never comes.
        QProcess rank;
        rank.start(kAgent, {u"comm-check"_s, u"--backend"_s, u"gloo"_s, u"--timeout"_s, u"60"_s, u"--rank"_s, u"1"_s, u"--world-size"_s,
                            u"2"_s, u"--master-addr"_s, u"127.0.0.1"_s, u"--master-port"_s, QString::number(port)});
        QVERIFY(rank.waitForStarted());
        const qint64 pid = rank.processId();
        const QString torchHalf = QFileInfo(kTorchAgent).canonicalFilePath();
        QTRY_COMPARE_WITH_TIMEOUT(QFileInfo(u"/proc/%1/exe"_s.arg(pid)).symLinkTarget(), torchHalf, 10000);
        const QList<QByteArray> argv = readFile(u"/proc/%1/cmdline"_s.arg(pid)).split('\0');
        CPPL_VERIFY2(argv.value(0) == kAgent.toUtf8() && argv.value(1) == "comm-check", readFile(u"/proc/%1/cmdline"_s.arg(pid)).constData());
        QTRY_VERIFY_WITH_TIMEOUT(readFile(u"/proc/%1/maps"_s.arg(pid)).contains("libtorch_cpu"), 10000);
        QCOMPARE(rank.state(), QProcess::Running);
        // The launcher's signal reaches the rank itself: the PID it holds is the rank's.
        rank.terminate();
        QVERIFY(rank.waitForFinished(20000));
        store.closeWriteChannel();
        QVERIFY(store.waitForFinished(10000));
        QCOMPARE(store.exitCode(), 0);
    }

    // Copied alone, the front runs its own commands, and for the torch ones says what is missing,
    // where it looked and what to do.
    void copiedAloneNamesTheMissingHalf_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addRow("eval") << shortEval(u"/nonexistent/r.json"_s);
        QTest::addRow("comm-check") << QStringList{u"comm-check"_s, u"--rank"_s, u"0"_s, u"--world-size"_s, u"1"_s};
        QTest::addRow("preflight") << QStringList{u"preflight"_s, u"--json"_s};
    }
    void copiedAloneNamesTheMissingHalf()
    {
        QFETCH(QStringList, args);
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString front = QFileInfo(dir.path()).canonicalFilePath() + u"/bin/clusterppl-agent"_s;
        QVERIFY(copyExecutable(kAgent, front));

        const auto version = runProcess(front, {u"--version"_s});
        CPPL_VERIFY2(version.exitCode == int(kExitOk) && version.out.startsWith(u"clusterppl-agent "_s), qPrintable(version.describe()));
        const QStringList plan{u"plan"_s, u"--text"_s, kText, u"--tokenizer"_s, u"bytes"_s, u"--ranks"_s, u"3"_s};
        const auto alone = runProcess(front, plan);
        const auto built = runProcess(kAgent, plan);
        CPPL_VERIFY2(alone.exitCode == int(kExitOk) && built.exitCode == int(kExitOk), qPrintable(alone.describe()));
        QCOMPARE(alone.out, built.out);

        const auto r = runProcess(front, args);
        QCOMPARE(r.exitCode, int(kExitRuntime));
        const QString expected = u"clusterppl-agent: %1 loads LibTorch in clusterppl-agent-torch, which is not installed beside %2 "
                                 "(looked for %3/bin/clusterppl-agent-torch, %3/lib/clusterppl/clusterppl-agent-torch); install the "
                                 "clusterppl-agent package whole, or copy clusterppl-agent-torch next to clusterppl-agent\n"_s
                                     .arg(args.front(), front, QFileInfo(dir.path()).canonicalFilePath());
        QCOMPARE(r.err, expected);
        QVERIFY(r.out.isEmpty());
    }

    // Installed as a package lays it out (bin/clusterppl-agent, lib/clusterppl/clusterppl-agent-torch),
    // the front finds its torch half; the result is the torch half's own, run directly.
    void installedLayoutFindsTheTorchHalf()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString front = dir.filePath(u"prefix/bin/clusterppl-agent"_s);
        QVERIFY(copyExecutable(kAgent, front));
        QVERIFY(copyExecutable(kTorchAgent, dir.filePath(u"prefix/lib/clusterppl/clusterppl-agent-torch"_s)));
        const auto installed = runProcess(front, shortEval(dir.filePath(u"installed.json"_s)));
        CPPL_VERIFY2(installed.exitCode == int(kExitOk), qPrintable(installed.describe()));
        const auto direct = runProcess(kTorchAgent, shortEval(dir.filePath(u"direct.json"_s)));
        CPPL_VERIFY2(direct.exitCode == int(kExitOk), qPrintable(direct.describe()));
        const QJsonObject a = cppl::test::readJson(dir.filePath(u"installed.json"_s));
        const QJsonObject b = cppl::test::readJson(dir.filePath(u"direct.json"_s));
        QCOMPARE(a.value(u"windows"_s).toInt(), 3);
        QVERIFY(!a.value(u"nll_sum_exact"_s).toString().isEmpty());
        QCOMPARE(a.value(u"nll_sum_exact"_s).toString(), b.value(u"nll_sum_exact"_s).toString());
    }
};

QTEST_GUILESS_MAIN(TestAgentFront)
#include "tst_agent_front.moc"
