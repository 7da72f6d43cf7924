// SPDX-License-Identifier: MIT
// CPPL_VERIFY2: QVERIFY2 for descriptions that carry a process's log.
//
// Qt Test formats a QVERIFY2 failure into a 1024-byte buffer (QTestResult::verify), so a
// description holding the agents' stderr loses everything after its first kilobyte, and with it
// the lines that say why a rank exited (the end of the log). CPPL_VERIFY2 prints a long
// description whole to stderr first, then fails with its first line and its last lines.
#pragma once

#include <QByteArray>
#include <QTest>

#include <cstdio>

namespace cppl::test {

constexpr qsizetype kFailureTextFits = 900; // Qt Test's buffer is 1024, with the statement and "returned FALSE"

/// @brief @p all itself when it fits Qt Test's message, else its first line and its last lines.
inline QByteArray fitFailureText(const QByteArray &all)
{
    constexpr qsizetype kFits = kFailureTextFits;
    constexpr qsizetype kHead = 160;
    if (all.size() <= kFits)
        return all;
    qsizetype headEnd = all.indexOf('\n');
    if (headEnd < 0 || headEnd > kHead)
        headEnd = kHead;
    const qsizetype tailSize = kFits - headEnd - 80;
    qsizetype tailStart = all.size() - tailSize;
    const qsizetype lineStart = all.indexOf('\n', tailStart);
    if (lineStart >= 0 && lineStart + 1 < all.size())
        tailStart = lineStart + 1; // whole lines
    return all.left(headEnd) + "\n[... " + QByteArray::number(tailStart - headEnd) + " bytes left out here, printed whole above ...]\n" + all.mid(tailStart);
}

/// @brief What CPPL_VERIFY2 gives Qt Test: fitFailureText(@p text), with a text that does not fit
/// printed whole to stderr first.
inline QByteArray failureDescription(const char *text)
{
    const QByteArray all(text ? text : "");
    if (all.size() > kFailureTextFits) {
        std::fprintf(stderr, "---- the whole failure description (%lld bytes; Qt Test prints only its first kilobyte) ----\n%s\n---- end of the failure description ----\n",
                     static_cast<long long>(all.size()), all.constData());
        std::fflush(stderr);
    }
    return fitFailureText(all);
}

} // namespace cppl::test

/// QVERIFY2 that keeps the end of a long description (see above). @p description is evaluated
/// only on failure.
#define CPPL_VERIFY2(statement, description)                                                                                                         \
    do {                                                                                                                                             \
        const bool cpplOk_ = static_cast<bool>(statement);                                                                                          \
        const QByteArray cpplWhy_ = cpplOk_ ? QByteArray() : ::cppl::test::failureDescription(description);                                              \
        if (!QTest::qVerify(cpplOk_, #statement, cpplWhy_.constData(), __FILE__, __LINE__))                                                          \
            return;                                                                                                                                  \
    } while (false)
