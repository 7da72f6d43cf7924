// SPDX-License-Identifier: MIT
// CPPL_VERIFY2 (test_verify.h): a long failure description keeps its first line and its end within
// Qt Test's 1024-byte message, and is built only when the statement fails.
#include "test_verify.h"

#include <QObject>
#include <QTest>

class TestVerify : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void shortDescriptionUnchanged()
    {
        QCOMPARE(cppl::test::fitFailureText("exit 6\nrank 1: timed out"), QByteArray("exit 6\nrank 1: timed out"));
        QCOMPARE(cppl::test::failureDescription(nullptr), QByteArray());
    }

    void longDescriptionKeepsHeadAndTail()
    {
        QByteArray log = "exit 6\n";
        for (int i = 0; i < 400; ++i)
            log += "[rank " + QByteArray::number(i % 4) + "] [round " + QByteArray::number(i) + "/400] ppl 4.9\n";
        log += "[rank 2] clusterppl-agent run: rank 2 exits 6: the collective timed out after 6 s\n";
        const QByteArray fitted = cppl::test::fitFailureText(log);
        // Qt Test's buffer holds 1024 bytes with "'statement' returned FALSE. (" around the description.
        QVERIFY2(fitted.size() <= 900, fitted.constData());
        QVERIFY(fitted.startsWith("exit 6\n[... "));
        QVERIFY(fitted.endsWith("[rank 2] clusterppl-agent run: rank 2 exits 6: the collective timed out after 6 s\n"));
        QVERIFY(fitted.contains("[rank 3] [round 399/400] ppl 4.9\n"));
        // Whole lines only after the cut.
        const qsizetype cut = fitted.indexOf("printed whole above ...]\n") + 25;
        QVERIFY(fitted.mid(cut).startsWith("[rank "));
        // A first line too long to be a headline is cut too.
        const QByteArray oneLine(5000, 'x');
        QVERIFY(cppl::test::fitFailureText(oneLine).size() <= 900);
    }

    void descriptionBuiltOnlyOnFailure()
    {
        int built = 0;
        auto describe = [&] {
            ++built;
            return "why";
        };
        CPPL_VERIFY2(1 + 1 == 2, describe());
        QCOMPARE(built, 0);
    }
};

QTEST_APPLESS_MAIN(TestVerify)
#include "tst_test_verify.moc"
