// SPDX-License-Identifier: MIT
#pragma once

// What the ranks' output means to the run engine. Every stdout line is read as the agent ->
// launcher protocol (cppl/agent_lines.h, docs/agent-lines.md): the reporting rank's result, the
// ledger, checkpoint and regroup lines (the run directory's CheckpointWriter), a lost rank (rank-lost
// and regroup lines); a line of a kind or version this side does not know is kept as output and
// warned about once. Anything else, and all of stderr (for humans: nothing in it is read), is the
// rank's output.

#include "run/run_directory.h"

#include "cppl/agent_lines.h"

#include <QByteArray>
#include <QString>
#include <QStringList>

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace cppl::core::run {

/// A rank the others went on without (--on-rank-loss continue), as the agents said it.
struct LostRank
{
    QString detail;   ///< RunEngine::rankLost's words (run_notices.h, rankLostDetail)
    QString cause;    ///< the watchdog's words; empty when only a regroup line named it
    int round = -1;   ///< lost after this round; -1: unknown
};

class AgentOutput
{
public:
    /// What one line asks of the engine, in this order: the lost ranks, then the notices.
    struct Reading
    {
        bool show = true;                        ///< the rank's output (nothing acted on): shown as such
        std::vector<std::pair<int, bool>> lost;  ///< ranks newly lost (true) or newly worded (false)
        QStringList notices;                     ///< for the user
    };

    /// A run whose rank r runs on @p hosts[r]; its committed rounds go to @p checkpoints.
    void begin(std::vector<QString> hosts, std::unique_ptr<CheckpointWriter> checkpoints);
    [[nodiscard]] Reading read(int rank, bool isStderr, const QString &line);

    /// The reporting rank's result JSON (docs/result-json.md); empty until its result line came.
    [[nodiscard]] const QByteArray &result() const noexcept { return m_result; }
    /// Why a result line was not taken ("rank 0: malformed CLUSTERPPL_RESULT line: ..."); empty: none was refused.
    [[nodiscard]] const QString &resultProblem() const noexcept { return m_resultProblem; }
    /// The ranks lost so far, by rank.
    [[nodiscard]] const std::map<int, LostRank> &lost() const noexcept { return m_lost; }
    [[nodiscard]] std::vector<int> lostRanks() const;
    [[nodiscard]] const cppl::lines::Counters &counters() const noexcept { return m_reader.counters(); }

private:
    void takeResult(int rank, const cppl::lines::Decoded &d, Reading &r);
    void takeRankLost(int rank, const cppl::lines::Decoded &d, Reading &r);
    void takeRegroup(const cppl::lines::Decoded &d, Reading &r);
    void takeCheckpointLine(int rank, const cppl::lines::Decoded &d, Reading &r);
    /// Records @p how for @p rank: a new loss, or better words for a known one when @p reworded
    /// (a rank-lost line after a regroup line); a regroup line never rewords.
    void noteLost(int rank, LostRank how, bool reworded, Reading &r);
    /// Once per kind: a line the engine acts on came malformed (it is shown and logged as output).
    void warnMalformed(int rank, const cppl::lines::Decoded &d, Reading &r);
    [[nodiscard]] QString hostOf(int rank) const;

    cppl::lines::LineReader m_reader;
    std::vector<QString> m_hosts;
    std::unique_ptr<CheckpointWriter> m_checkpoints;
    QByteArray m_result;
    QString m_resultProblem;
    std::map<int, LostRank> m_lost;
    std::vector<cppl::lines::Kind> m_malformedSaid;
    int m_checkpointEpoch = 0;      ///< the newest regrouping the checkpoints know of (a notice once each)
    bool m_checkpointErrorShown = false;
};

} // namespace cppl::core::run
