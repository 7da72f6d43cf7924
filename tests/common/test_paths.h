// SPDX-License-Identifier: MIT
// Paths the tests share, defined once: the executables this build made and the repository's test
// model and held-out text. The executables come from the per-test compile definitions CMake sets
// (CPPL_CLI_EXE, CPPL_AGENT_EXE: `$<TARGET_FILE:...>` or CLUSTERPPL_TEST_AGENT for a tree without
// the agent); a constant exists only in the tests whose CMake names that executable, so a test
// that uses one it was not given fails to compile instead of running a wrong path.
#pragma once

#include <QString>

namespace cppl::test {

#ifdef CPPL_CLI_EXE
/// This build's clusterppl-cli.
inline const QString kCli = QStringLiteral(CPPL_CLI_EXE);
#endif
#ifdef CPPL_AGENT_EXE
/// This build's clusterppl-agent (or CLUSTERPPL_TEST_AGENT where this tree builds none).
inline const QString kAgent = QStringLiteral(CPPL_AGENT_EXE);
#endif
/// The byte-level Shakespeare model of resources/ (float32, CPU).
inline const QString kModel = QStringLiteral(CPPL_SOURCE_DIR "/resources/models/shakespeare-byte-llama");
/// Its held-out text.
inline const QString kText = QStringLiteral(CPPL_SOURCE_DIR "/resources/data/tinyshakespeare-heldout.txt");

} // namespace cppl::test
