// SPDX-License-Identifier: MIT
// execPart (test_parts.h): CPPL_TEST_PART=timed runs the listed functions, untimed all others, unset
// everything or what the arguments name; an unknown part or a stale timed name stops with exit 2.
// The parts run in a child: this executable again, as a three-function sample test.
#include "test_parts.h"

#include <QCoreApplication>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTest>

#include <cstdio>

namespace {

/// The sample the child runs: three functions, one with rows, and Qt Test's fixtures (never a part's).
class Sample : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { std::puts("ran initTestCase"); }
    void fast() { std::puts("ran fast"); }
    void stopped_data()
    {
        QTest::addColumn<int>("n");
        QTest::newRow("one") << 1;
        QTest::newRow("two") << 2;
    }
    void stopped()
    {
        QFETCH(int, n);
        std::printf("ran stopped %d\n", n);
    }
    void slowButUntimed() { std::puts("ran slowButUntimed"); }
    void cleanup() {}
};

struct Child
{
    int exitCode = -1;
    QString out;
    QString err;
};

Child runChild(const QByteArray &part, const QStringList &timed, const QStringList &args = {})
{
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("CPPL_TEST_PARTS_CHILD"), timed.join(QLatin1Char(',')));
    env.remove(QStringLiteral("CPPL_TEST_PART"));
    if (!part.isNull())
        env.insert(QStringLiteral("CPPL_TEST_PART"), QString::fromLatin1(part));
    p.setProcessEnvironment(env);
    p.start(QCoreApplication::applicationFilePath(), args);
    if (!p.waitForFinished(60000))
        p.kill();
    return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardOutput()),
            QString::fromUtf8(p.readAllStandardError())};
}

QStringList ran(const Child &c)
{
    QStringList names;
    for (const QString &line : c.out.split(QLatin1Char('\n')))
        if (line.startsWith(QLatin1String("ran ")))
            names << line.mid(4);
    return names;
}

} // namespace

class TestParts : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void testFunctionsAreThePrivateSlotsLessFixtures()
    {
        Sample s;
        QCOMPARE(cppl::test::testFunctions(s), (QStringList{QStringLiteral("fast"), QStringLiteral("stopped"), QStringLiteral("slowButUntimed")}));
    }

    void eachPartRunsItsFunctions_data()
    {
        QTest::addColumn<QByteArray>("part");
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QStringList>("expected");
        const QStringList all{QStringLiteral("initTestCase"), QStringLiteral("fast"), QStringLiteral("stopped 1"), QStringLiteral("stopped 2"),
                              QStringLiteral("slowButUntimed")};
        QTest::newRow("timed") << QByteArray("timed") << QStringList() << QStringList{QStringLiteral("initTestCase"), QStringLiteral("stopped 1"), QStringLiteral("stopped 2")};
        QTest::newRow("untimed") << QByteArray("untimed") << QStringList()
                                 << QStringList{QStringLiteral("initTestCase"), QStringLiteral("fast"), QStringLiteral("slowButUntimed")};
        QTest::newRow("unset: everything") << QByteArray() << QStringList() << all;
        QTest::newRow("unset: what the arguments name") << QByteArray() << QStringList{QStringLiteral("stopped:two")}
                                                        << QStringList{QStringLiteral("initTestCase"), QStringLiteral("stopped 2")};
    }
    void eachPartRunsItsFunctions()
    {
        QFETCH(QByteArray, part);
        QFETCH(QStringList, args);
        QFETCH(QStringList, expected);
        const Child c = runChild(part, {QStringLiteral("stopped")}, args);
        QVERIFY2(c.exitCode == 0, qPrintable(c.out + c.err));
        QCOMPARE(ran(c), expected);
    }

    void refusals()
    {
        const Child unknown = runChild("serial", {QStringLiteral("stopped")});
        QCOMPARE(unknown.exitCode, 2);
        QVERIFY2(unknown.err.contains(QStringLiteral("CPPL_TEST_PART is \"serial\"; it must be timed, untimed or unset")), qPrintable(unknown.err));
        QVERIFY(ran(unknown).isEmpty());
        // A timed function renamed without its entry in the list: refused, whichever part.
        for (const QByteArray &part : {QByteArray("timed"), QByteArray("untimed"), QByteArray()}) {
            const Child stale = runChild(part, {QStringLiteral("stoppedRank")});
            QCOMPARE(stale.exitCode, 2);
            QVERIFY2(stale.err.contains(QStringLiteral("\"stoppedRank\" is listed as timed but is no test function of Sample")), qPrintable(stale.err));
            QVERIFY(ran(stale).isEmpty());
        }
    }
};

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    const QByteArray child = qgetenv("CPPL_TEST_PARTS_CHILD");
    if (!child.isEmpty()) {
        Sample s;
        return cppl::test::execPart(s, argc, argv, QString::fromLatin1(child).split(QLatin1Char(',')));
    }
    TestParts tc;
    return QTest::qExec(&tc, argc, argv);
}

#include "tst_test_parts.moc"
