// SPDX-License-Identifier: MIT
// The local profile the tests that run real agents on this host share: the byte-level Shakespeare
// model of resources/ on its held-out text, one rank per thread, 128-token windows; and the
// one-rank evaluation whose exact sums a distributed run of it must equal bit for bit.
#pragma once

#include "test_paths.h"
#include "test_process.h"

#include <QString>
#include <QStringList>

namespace cppl::test {

/// A local profile named @p name: @p slots ranks of @p agent on localhost in groups @p groups
/// ("size:2", "by-host"), evaluating @p model on the held-out text with at most @p maxWindows
/// windows (0: all); stall_seconds 5.
inline QString localProfileJson(const QString &name, const QString &agent, int slots, const QString &groups, qint64 maxWindows,
                                const QString &model = kModel)
{
    return QStringLiteral(R"({"format": "clusterppl-profile", "version": 1, "name": "%1", "launcher": "local",
  "hosts": [{"name": "localhost", "address": "127.0.0.1", "slots": %2, "agent": "%3",
             "env": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}}],
  "groups": "%4",
  "evaluation": {"model": "%5", "text": "%6", "tokenizer": "bytes", "protocol": "llama.cpp", "context": 128, "batch": 2,
                 "max_windows": %7, "dtype": "float32", "device": "cpu", "backend": "gloo", "topology": "hierarchical"},
  "thresholds": {"sync_every_tokens": 300, "collective_timeout_seconds": 30, "stall_seconds": 5}})")
        .arg(name)
        .arg(slots)
        .arg(agent, groups, model, kText)
        .arg(maxWindows);
}

/// The one-rank reference: @p agent evaluates the shared model on @p text with the per-rank
/// settings of localProfileJson() (llama.cpp, context 128, batch 2, at most @p maxWindows windows,
/// float32 on the CPU, one thread, one BLAS thread) and writes its result JSON to @p json.
inline ProcessResult oneRankEval(const QString &agent, const QString &text, qint64 maxWindows, const QString &json,
                                 int timeoutMs = 300000)
{
    return runProcess(agent, {QStringLiteral("eval"), QStringLiteral("--model"), kModel, QStringLiteral("--text"), text,
                              QStringLiteral("--tokenizer"), QStringLiteral("bytes"), QStringLiteral("--protocol"),
                              QStringLiteral("llama.cpp"), QStringLiteral("--context"), QStringLiteral("128"),
                              QStringLiteral("--batch"), QStringLiteral("2"), QStringLiteral("--max-windows"),
                              QString::number(maxWindows), QStringLiteral("--dtype"), QStringLiteral("float32"),
                              QStringLiteral("--device"), QStringLiteral("cpu"), QStringLiteral("--threads"), QStringLiteral("1"),
                              QStringLiteral("--blas-threads"), QStringLiteral("1"), QStringLiteral("--quiet"),
                              QStringLiteral("--json"), json},
                      timeoutMs);
}

} // namespace cppl::test
