// SPDX-License-Identifier: MIT
// The local profile the tests that run real agents on this host share: the byte-level Shakespeare
// model of resources/ on its held-out text, one rank per thread, 128-token windows; the one-rank
// evaluation whose exact sums a distributed run of it must equal bit for bit; and RunDir, the
// fixture directory of a test that runs `clusterppl-cli run` (tst_tensor_parallel_run,
// tst_netns_cluster, tst_netns_slurm): its profiles, its one-rank reference, the CLI's logs.
#pragma once

#include "test_paths.h"
#include "test_process.h"

#include <QFile>
#include <QJsonObject>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <QtGlobal>

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

/// The windows a test run of the shared model evaluates: several sync rounds at 4 ranks, a few
/// seconds on this machine.
inline constexpr int kRunWindows = 37;

/// What `clusterppl-cli run` says when the collector's live exact merge of the ranks' telemetry
/// equals rank 0's result bit for bit (it exits 14 when it differs).
inline bool liveMergeEqualsResult(const ProcessResult &r)
{
    return r.err.contains(QStringLiteral("live exact merge equals rank 0's result"));
}

/// The fixture directory of a test that runs `clusterppl-cli run`: the profiles it writes, the
/// one-rank reference, and the CLI's per-rank logs (XDG_STATE_HOME), all removed with it.
class RunDir
{
public:
    /// Whether other users (the nodes' sshd and slurmd sessions) may read and enter it.
    enum class Access { Owner, OthersRead };

    /// False when the directory could not be made; else XDG_STATE_HOME points into it.
    bool init(Access access = Access::Owner)
    {
        if (!m_dir.isValid())
            return false;
        if (access == Access::OthersRead)
            QFile::setPermissions(m_dir.path(), QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner | QFile::ReadOther | QFile::ExeOther);
        qputenv("XDG_STATE_HOME", path(QStringLiteral("state")).toUtf8());
        return true;
    }

    QString dir() const { return m_dir.path(); }
    QString path(const QString &name) const { return m_dir.filePath(name); }

    /// @p json written to NAME.json in the directory; its path (empty when it could not be written).
    QString writeProfile(const QString &name, const QString &json) const
    {
        const QString file = path(name + QStringLiteral(".json"));
        return writeFile(file, json.toUtf8()) ? file : QString();
    }

#ifdef CPPL_AGENT_EXE
    /// oneRankEval() of @p maxWindows windows (0: all) into @p name; its result, or an empty
    /// object after a warning with the agent's output when it failed.
    QJsonObject oneRank(qint64 maxWindows, const QString &name) const
    {
        const ProcessResult r = oneRankEval(kAgent, kText, maxWindows, path(name));
        if (r.exitCode != 0) {
            qWarning("the one-rank reference failed: %s", qPrintable(r.describe()));
            return {};
        }
        return readJson(path(name));
    }
#endif

private:
    QTemporaryDir m_dir;
};

} // namespace cppl::test
