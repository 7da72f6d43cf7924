// SPDX-License-Identifier: MIT
// Reports of real runs end to end: clusterppl-cli sweeps 1 and 2 local ranks with the real agent
// (recorded in a temporary store), then writes a comparison PDF and a run HTML report of them;
// the PDF's text (pdftotext) and the HTML carry the stored PPL digit for digit, every rank, and
// "bit-identical" for the two-rank run against its one-rank baseline.
#include "report/report.h"
#include "history/run_history.h"
#include "test_paths.h"
#include "test_process.h"
#include "test_verify.h"

#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace Qt::StringLiterals;
using namespace cppl::core::history;
using cppl::core::report::displayNumber;
using cppl::core::report::exactNumber;

using cppl::test::kCli;
using cppl::test::kAgent;
using cppl::test::kModel;
using cppl::test::kText;

namespace {

QByteArray profileJson()
{
    return uR"({"format": "clusterppl-profile", "version": 1, "name": "report-test", "launcher": "local",
  "hosts": [{"name": "localhost", "address": "127.0.0.1", "slots": 2, "agent": "%1",
             "env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}}],
  "evaluation": {"model": "%2", "text": "%3", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2,
                 "max_windows": 6, "dtype": "float32", "device": "cpu", "backend": "gloo"},
  "thresholds": {"sync_every_tokens": 300, "collective_timeout_seconds": 30, "stall_seconds": 5}})"_s
        .arg(kAgent, kModel, kText)
        .toUtf8();
}

QString pdfText(const QString &pdf)
{
    const auto r = cppl::test::runProcess(u"pdftotext"_s, {u"-layout"_s, pdf, u"-"_s}, 60000);
    return r.exitCode == 0 ? r.out : QString();
}

} // namespace

class TestReportRun : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void reportsOfARealSweep()
    {
        QTemporaryDir dir;
        QVERIFY(dir.isValid());
        const QString store = dir.filePath(u"runs.sqlite"_s), profile = dir.filePath(u"profile.json"_s);
        {
            QFile f(profile);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(profileJson());
        }
        qputenv("XDG_STATE_HOME", dir.filePath(u"state"_s).toUtf8());
        const auto sweep = cppl::test::runProcess(kCli,
                                                  {u"sweep"_s, u"--profile"_s, profile, u"--nodes"_s, u"1,2"_s, u"--store"_s, store,
                                                   u"--run-id-prefix"_s, u"rep"_s, u"--no-preflight"_s},
                                                  300000);
        // stderr first: it names the failing run and why; QTest cuts long messages, and stdout's
        // comparison table would fill them.
        CPPL_VERIFY2(sweep.exitCode == 0, qPrintable(u"exit %1\nstderr: %2\nstdout: %3"_s.arg(sweep.exitCode).arg(sweep.err, sweep.out)));

        const QString pdf = dir.filePath(u"sweep.pdf"_s), html = dir.filePath(u"rep-r2.html"_s);
        auto r = cppl::test::runProcess(kCli, {u"report"_s, u"rep-r1"_s, u"rep-r2"_s, u"--store"_s, store, u"-o"_s, pdf});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));
        r = cppl::test::runProcess(kCli, {u"report"_s, u"rep-r2"_s, u"--store"_s, store, u"--format"_s, u"html"_s, u"-o"_s, html});
        CPPL_VERIFY2(r.exitCode == 0, qPrintable(r.describe()));

        const RunHistory s(store);
        const auto one = s.get(u"rep-r1"_s), two = s.get(u"rep-r2"_s);
        QVERIFY(one && two && one->ppl && two->ppl);
        QCOMPARE(two->nllSumExact, one->nllSumExact); // the agent's guarantee the report restates
        const QString text = pdfText(pdf);
        CPPL_VERIFY2(text.contains(exactNumber(*one->ppl) + u" ± "_s + exactNumber(one->pplStderr)), qPrintable(text.left(4000)));
        QVERIFY(text.contains(exactNumber(*two->ppl) + u" ± "_s + exactNumber(two->pplStderr)));
        QVERIFY(text.contains(u"bit-identical"_s));
        QVERIFY(text.contains(u"Recommendation: "_s) && text.contains(u"Scaling"_s));
        QCOMPARE(two->ranks.size(), size_t(2));
        for (const RankSummary &k : two->ranks)
            CPPL_VERIFY2(QRegularExpression(u"^\\s*%1\\s+%2\\s+%3\\s+%4\\s+%5\\s"_s.arg(k.rank)
                                            .arg(QRegularExpression::escape(k.host))
                                            .arg(k.group)
                                            .arg(k.tokens)
                                            .arg(QRegularExpression::escape(displayNumber(k.tokensPerSecond))),
                                        QRegularExpression::MultilineOption)
                         .match(text)
                         .hasMatch(),
                     qPrintable(u"rank %1 row missing:\n"_s.arg(k.rank) + text));

        QFile f(html);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QString h = QString::fromUtf8(f.readAll());
        QVERIFY(!h.contains(u"http://"_s) && !h.contains(u"https://"_s));
        QVERIFY(h.contains(u"<svg"_s));
        QVERIFY(h.contains(exactNumber(*two->ppl).toHtmlEscaped()));
        QVERIFY(h.contains(u"bit-identical: the exact NLL sum and the token count equal the one-rank baseline"_s));
        for (const RankSummary &k : two->ranks)
            QVERIFY(h.contains(u"data-value=\""_s + exactNumber(k.computeSeconds) + u'"'));
    }
};

QTEST_MAIN(TestReportRun)
#include "tst_report_run.moc"
