// SPDX-License-Identifier: MIT
// The check the tokenizer tests make of every file Tokenizer::load refuses.
#pragma once

#include "tokenizer/tokenizer.h"

#include "cppl/errors.h"

#include <QString>
#include <QTest>

namespace cppl::test {

/// Tokenizer::load(@p path) must throw a cppl::Error whose message names the file first and
/// says @p message. A failed check returns from this function only: call it last in a test.
inline void verifyLoadRefused(const QString &path, const QString &message)
{
    try {
        (void)cppl::agent::Tokenizer::load(path.toStdString());
        QFAIL("loading must fail");
    } catch (const cppl::Error &e) {
        const QString what = QString::fromUtf8(e.what());
        QVERIFY2(what.startsWith(path + QStringLiteral(": ")), e.what()); // names the file first
        QVERIFY2(what.contains(message), e.what());
    }
}

} // namespace cppl::test
