// SPDX-License-Identifier: MIT
// Finished runs made up for the tests of the run store and the reports: an agent result JSON
// (docs/result-json.md) and the record a recorder stores when it arrives (docs/run-history.md).
// For tests that link clusterppl_core.
#pragma once

#include "history/run_record.h"

#include <QByteArray>
#include <QDateTime>
#include <QJsonDocument>
#include <QJsonObject>
#include <QString>

namespace cppl::test {

/// A result of @p worldSize ranks evaluating @p model on @p data (llama.cpp protocol, context 128,
/// batch 2, 16 windows, float32; hierarchical above one rank, a sync round every
/// @p syncEveryTokens tokens) with these figures; seconds = tokens / tps. No per-rank figures.
inline QJsonObject agentResult(int worldSize, double ppl, double pplStderr, const QString &exact, qint64 tokens, double tps,
                               const QString &model, const QString &data, qint64 syncEveryTokens = 1000)
{
    return {{QStringLiteral("ppl"), ppl},
            {QStringLiteral("ppl_stderr"), pplStderr},
            {QStringLiteral("nll_sum_exact"), exact},
            {QStringLiteral("tokens_scored"), tokens},
            {QStringLiteral("tokens_per_second"), tps},
            {QStringLiteral("world_size"), worldSize},
            {QStringLiteral("protocol"), QStringLiteral("llama.cpp")},
            {QStringLiteral("context"), 128},
            {QStringLiteral("stride"), 0},
            {QStringLiteral("batch"), 2},
            {QStringLiteral("max_windows"), 16},
            {QStringLiteral("dtype"), QStringLiteral("float32")},
            {QStringLiteral("seconds"), static_cast<double>(tokens) / tps},
            {QStringLiteral("model"), QJsonObject{{QStringLiteral("path"), model}}},
            {QStringLiteral("data"), QJsonObject{{QStringLiteral("path"), data}}},
            {QStringLiteral("version"), QStringLiteral("0.9.0")},
            {QStringLiteral("topology"), worldSize > 1 ? QStringLiteral("hierarchical") : QStringLiteral("none")},
            {QStringLiteral("sync_every_tokens"), syncEveryTokens}};
}

/// The run stored when @p result (rank 0's result JSON, as received) arrives: finished
/// @p seconds after @p started with exit code 0, source "test", its figures (applyResult) and
/// its settings and settings key from the result. Launcher, hosts and the rest are the caller's.
inline core::history::RunRecord finishedRun(const QString &id, const QByteArray &result, const QDateTime &started, int seconds)
{
    using namespace core::history;
    RunRecord r;
    r.runId = id;
    r.status = RunStatus::Finished;
    r.started = started;
    r.ended = started.addSecs(seconds);
    r.source = QStringLiteral("test");
    r.resultJson = result;
    r.exitCode = 0;
    applyResult(r);
    const SettingsKeyInputs in = settingsInputsFromResult(QJsonDocument::fromJson(result).object());
    r.settings = settingsJson(in);
    r.model = in.model;
    r.data = in.data;
    r.protocol = in.protocol;
    r.settingsKey = settingsKey(in);
    return r;
}

} // namespace cppl::test
