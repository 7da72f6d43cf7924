// SPDX-License-Identifier: MIT
// One Qt Test executable registered as two ctest tests (clusterppl_add_test ... SPLIT_TIMED): the
// functions whose checks hold only on a machine nobody else loads (a stopped rank noticed after a
// 6 s heartbeat timeout, a rendezvous of 3 s) run alone (NAME_timed, RUN_SERIAL), and the others,
// whose bounds only catch a hang, beside other tests (NAME). ctest says which part through
// CPPL_TEST_PART=timed|untimed; without it the executable runs whatever it is asked, as any Qt Test.
#pragma once

#include <QByteArray>
#include <QMetaMethod>
#include <QObject>
#include <QStringList>
#include <QTest>

#include <cstdio>

namespace cppl::test {

/// The test functions of `tc`: its private slots without arguments, less Qt Test's fixtures and
/// the `_data` functions.
inline QStringList testFunctions(const QObject &tc)
{
    static const QStringList fixtures{QStringLiteral("initTestCase"), QStringLiteral("initTestCase_data"), QStringLiteral("cleanupTestCase"),
                                      QStringLiteral("init"), QStringLiteral("cleanup")};
    QStringList names;
    const QMetaObject *mo = tc.metaObject();
    for (int i = mo->methodOffset(); i < mo->methodCount(); ++i) {
        const QMetaMethod m = mo->method(i);
        const QString name = QString::fromLatin1(m.name());
        if (m.methodType() == QMetaMethod::Slot && m.access() == QMetaMethod::Private && m.parameterCount() == 0 && !name.endsWith(QLatin1String("_data"))
            && !fixtures.contains(name))
            names << name;
    }
    return names;
}

/// Runs `tc` as QTest::qExec would, with the functions of the part CPPL_TEST_PART names appended to
/// the arguments: `timed` those listed in `timed`, `untimed` all others. Exit 2, with the reason, for
/// an unknown part or a listed name that is no test function (a rename would otherwise move a timed
/// function beside other tests unseen).
inline int execPart(QObject &tc, int argc, char **argv, const QStringList &timed)
{
    const QStringList all = testFunctions(tc);
    for (const QString &name : timed)
        if (!all.contains(name)) {
            std::fprintf(stderr, "%s: \"%s\" is listed as timed but is no test function of %s\n", argv[0], qPrintable(name), tc.metaObject()->className());
            return 2;
        }
    QStringList args;
    for (int i = 0; i < argc; ++i)
        args << QString::fromLocal8Bit(argv[i]);
    const QByteArray part = qgetenv("CPPL_TEST_PART");
    if (part == "timed") {
        args << timed;
    } else if (part == "untimed") {
        for (const QString &name : all)
            if (!timed.contains(name))
                args << name;
    } else if (!part.isEmpty()) {
        std::fprintf(stderr, "%s: CPPL_TEST_PART is \"%s\"; it must be timed, untimed or unset\n", argv[0], part.constData());
        return 2;
    }
    return QTest::qExec(&tc, args);
}

} // namespace cppl::test
