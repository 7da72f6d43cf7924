// SPDX-License-Identifier: MIT
// The only two ways a ClusterPPL test may skip. ctest reports a skip as "Skipped" (run_qtest.sh);
// under CI=true only a missing GPU may skip: CI has ../shared/data, sshd, root and every package.
// Raw QSKIP is refused by the tst_skip_policy test. See docs/testing.md.
#pragma once

#include <QByteArray>
#include <QTest>
#include <QtGlobal>

namespace cppl::test {

/// @brief True under CI (CI=true), where a missing prerequisite is a failure, not a skip.
inline bool inCi()
{
    return qgetenv("CI") == "true";
}

} // namespace cppl::test

// The marker run_qtest.sh and scripts/test.sh look for; keep the three in step.
#define CPPL_GPU_SKIP_MARKER "no GPU: "

/// Skips because no usable GPU is here: allowed everywhere, CI included. @p reason: a string literal.
#define CPPL_SKIP_NO_GPU(reason) QSKIP(CPPL_GPU_SKIP_MARKER reason)

/// A prerequisite other than a GPU is missing (data, a package, sshd): skips on a developer machine
/// with the reason, fails under CI=true. @p reason: a const char * (qPrintable for a QString).
#define CPPL_SKIP_MISSING(reason)                                                                                                          \
    do {                                                                                                                                   \
        if (cppl::test::inCi())                                                                                                            \
            QFAIL(QByteArray(QByteArray("CI=true and a prerequisite is missing: ") + (reason)).constData());                               \
        QSKIP(reason);                                                                                                                     \
    } while (false)
