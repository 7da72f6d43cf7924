// SPDX-License-Identifier: MIT
#include "run/agent_output.h"

#include "run/run_notices.h"

#include <QCoreApplication>

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("RunEngine", text);
}

} // namespace

void AgentOutput::begin(std::vector<QString> hosts, std::unique_ptr<CheckpointWriter> checkpoints)
{
    m_hosts = std::move(hosts);
    m_checkpoints = std::move(checkpoints);
}

std::vector<int> AgentOutput::lostRanks() const
{
    std::vector<int> out;
    for (const auto &l : m_lost)
        out.push_back(l.first);
    return out;
}

QString AgentOutput::hostOf(int rank) const
{
    return rank >= 0 && static_cast<std::size_t>(rank) < m_hosts.size() ? m_hosts[static_cast<std::size_t>(rank)] : QString();
}

AgentOutput::Reading AgentOutput::read(int rank, bool isStderr, const QString &line)
{
    Reading r;
    if (isStderr || rank < 0)
        return r; // for humans, and the launcher's own lines
    const cppl::lines::Decoded d = m_reader.read(line.toStdString());
    if (!d.warning.empty())
        r.notices << tr("rank %1: %2").arg(rank).arg(QString::fromStdString(d.warning));
    if (!d.kind)
        return r; // its output, or a kind a newer agent prints: kept as output
    using cppl::lines::Kind;
    switch (*d.kind) {
    case Kind::Result: takeResult(rank, d, r); break;
    case Kind::RankLost: takeRankLost(rank, d, r); break;
    case Kind::Regroup:
        takeRegroup(d, r);
        takeCheckpointLine(rank, d, r);
        break;
    case Kind::Ledger:
    case Kind::Checkpoint: takeCheckpointLine(rank, d, r); break;
    case Kind::StoreReady: break; // a store's, not a rank's: shown
    }
    return r;
}

void AgentOutput::takeResult(int rank, const cppl::lines::Decoded &d, Reading &r)
{
    if (d.ok()) {
        m_result = QByteArray::fromStdString(std::get<cppl::lines::Result>(d.event).json);
        r.show = false;
        return;
    }
    m_resultProblem = tr("rank %1: %2").arg(rank).arg(QString::fromStdString(d.reason()));
    if (d.status == cppl::lines::Status::Malformed)
        warnMalformed(rank, d, r);
}

void AgentOutput::takeRankLost(int rank, const cppl::lines::Decoded &d, Reading &r)
{
    if (!d.ok()) {
        if (d.status == cppl::lines::Status::Malformed)
            warnMalformed(rank, d, r);
        return;
    }
    const auto &e = std::get<cppl::lines::RankLost>(d.event);
    if (static_cast<std::size_t>(e.rank) >= m_hosts.size())
        return warnMalformed(rank, d, r);
    r.show = false;
    noteLost(e.rank, {rankLostDetail(e), QString::fromStdString(e.cause), e.round}, true, r);
}

void AgentOutput::takeRegroup(const cppl::lines::Decoded &d, Reading &r)
{
    if (!d.ok())
        return; // the checkpoints say it
    for (const cppl::lines::LostBatches &l : std::get<cppl::lines::Regroup>(d.event).lost)
        if (static_cast<std::size_t>(l.rank) < m_hosts.size())
            noteLost(l.rank, {regroupedWithoutDetail(l.rank, hostOf(l.rank), l.round), {}, l.round}, false, r);
}

void AgentOutput::noteLost(int rank, LostRank how, bool reworded, Reading &r)
{
    const auto it = m_lost.find(rank);
    if (it != m_lost.end() && (!reworded || it->second.detail == how.detail))
        return; // known (a regroup line names every rank lost so far)
    r.lost.emplace_back(rank, it == m_lost.end());
    m_lost[rank] = std::move(how);
}

void AgentOutput::takeCheckpointLine(int rank, const cppl::lines::Decoded &d, Reading &r)
{
    if (!m_checkpoints)
        return;
    if (m_checkpoints->take(rank, d))
        r.show = false;
    if (const int epoch = m_checkpoints->regroupEpoch(); epoch > m_checkpointEpoch) {
        m_checkpointEpoch = epoch; // --on-rank-loss continue: checkpoints go on after the regrouping
        r.notices << checkpointRegroupNotice(m_checkpoints->regroupFirstRound(), m_checkpoints->writtenRound());
    }
    if (!m_checkpoints->error().isEmpty() && !m_checkpointErrorShown) {
        m_checkpointErrorShown = true;
        r.notices << tr("checkpoints: %1").arg(m_checkpoints->error());
    }
}

void AgentOutput::warnMalformed(int rank, const cppl::lines::Decoded &d, Reading &r)
{
    if (std::find(m_malformedSaid.begin(), m_malformedSaid.end(), *d.kind) != m_malformedSaid.end())
        return;
    m_malformedSaid.push_back(*d.kind);
    const QString why = d.ok() ? tr("%1 names a rank this run does not have").arg(QString::fromStdString(d.tag)) : QString::fromStdString(d.reason());
    r.notices << tr("rank %1: %2; kept in its log, not acted on").arg(rank).arg(why);
}

} // namespace cppl::core::run
