// SPDX-License-Identifier: MIT
#include "history_model.h"

#include "cppl/cluster_profile.h"
#include "history/comparison.h"

#include <QFileInfo>
#include <QJsonObject>
#include <QLocale>

#include <map>

using namespace Qt::StringLiterals;
using cppl::core::history::RunRecord;
using cppl::core::history::RunStatus;

namespace cppl::app {

QString statusLabel(RunStatus status)
{
    switch (status) {
    case RunStatus::Running: return u"▶ running"_s;
    case RunStatus::Finished: return u"✓ finished"_s;
    case RunStatus::Failed: return u"✗ failed"_s;
    case RunStatus::Stopped: return u"■ stopped"_s;
    case RunStatus::Interrupted: return u"⚠ interrupted"_s;
    }
    return {};
}

QString shortPath(const QString &path)
{
    const QString name = QFileInfo(path).fileName();
    return name.isEmpty() ? path : name;
}

QString lostRanksSummary(const QJsonArray &lostRanks)
{
    if (lostRanks.isEmpty())
        return {};
    std::vector<int> ranks;
    for (const QJsonValue &v : lostRanks)
        ranks.push_back(v.toObject().value(u"rank"_s).toInt());
    return (lostRanks.size() == 1 ? HistoryModel::tr("rank %1 lost") : HistoryModel::tr("ranks %1 lost"))
        .arg(QString::fromStdString(rankListText(std::move(ranks)))); // "ranks 0–2, 5 lost"
}

QStringList lostRanksDetail(const QJsonArray &lostRanks)
{
    QStringList out;
    for (const QJsonValue &v : lostRanks) {
        const QJsonObject l = v.toObject();
        out << HistoryModel::tr("rank %1 (%2): %3; lost after round %4")
                   .arg(l.value(u"rank"_s).toInt())
                   .arg(l.value(u"host"_s).toString(), l.value(u"cause"_s).toString())
                   .arg(l.value(u"round"_s).toInt());
    }
    return out;
}

HistoryModel::HistoryModel(QObject *parent)
    : QAbstractTableModel(parent)
{
}

void HistoryModel::setRuns(std::vector<RunRecord> runs)
{
    beginResetModel();
    m_runs = std::move(runs);
    // The baseline of a run: the newest finished one-rank run with its settings key (as
    // RunHistory::baselineFor picks it), other than itself. Runs are newest first.
    std::map<QString, std::vector<std::size_t>> oneRank;
    for (std::size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].status == RunStatus::Finished && m_runs[i].worldSize == 1 && !m_runs[i].settingsKey.isEmpty())
            oneRank[m_runs[i].settingsKey].push_back(i);
    m_baseline.assign(m_runs.size(), QString());
    // What `run --resume` would say of each stopped, failed or interrupted run (its run directory).
    m_resume.clear();
    for (const RunRecord &r : m_runs)
        m_resume.push_back(resumeStateOf(r));
    for (std::size_t i = 0; i < m_runs.size(); ++i) {
        const RunRecord &r = m_runs[i];
        if (r.status != RunStatus::Finished || !r.ppl)
            continue;
        const auto it = oneRank.find(r.settingsKey);
        if (it == oneRank.end())
            continue;
        const RunRecord *b = nullptr;
        for (std::size_t j : it->second)
            if (j != i) {
                b = &m_runs[j];
                break;
            }
        if (!b) {
            m_baseline[i] = tr("baseline (1 rank)");
            continue;
        }
        if (!r.nllSumExact.isEmpty() && r.nllSumExact == b->nllSumExact && r.tokensScored == b->tokensScored)
            m_baseline[i] = tr("bit-identical");
        else if (b->ppl && *b->ppl > 0)
            m_baseline[i] = cppl::core::history::relativeDeviationText(*r.ppl / *b->ppl - 1); // as Compare writes it
    }
    endResetModel();
}

int HistoryModel::rowOf(const QString &runId) const
{
    for (std::size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].runId == runId)
            return int(i);
    return -1;
}

int HistoryModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_runs.size());
}

int HistoryModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant HistoryModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount)
        return {};
    const int row = index.row();
    switch (role) {
    case RunIdRole: return m_runs[std::size_t(row)].runId;
    case Qt::TextAlignmentRole:
        switch (index.column()) {
        case ColWorld: case ColGroups: case ColNodes: case ColPpl: case ColTokens: case ColRate:
            return int(Qt::AlignRight | Qt::AlignVCenter);
        default: return int(Qt::AlignLeft | Qt::AlignVCenter);
        }
    case Qt::ToolTipRole: return toolTip(row, index.column());
    case SortRole:
        if (QVariant v = sortKey(row, index.column()); v.isValid())
            return v;
        return displayData(row, index.column()); // the text sorts the rest
    case Qt::DisplayRole: return displayData(row, index.column());
    default: return {};
    }
}

QVariant HistoryModel::toolTip(int row, int column) const
{
    const RunRecord &r = m_runs[std::size_t(row)];
    switch (column) {
    case ColRunId: return r.runId; // whole where a small window elides it in the middle
    case ColModel: return r.model;
    case ColData: return r.data;
    case ColStatus: return statusToolTip(row);
    case ColBaseline:
        return m_baseline[std::size_t(row)].isEmpty()
                   ? tr("No finished one-rank run of the same model, data, protocol and settings is stored")
                   : tr("Deviation from the newest finished one-rank run of the same settings: \"bit-identical\" when the "
                        "exact NLL sums and token counts are equal, else PPL / baseline PPL − 1");
    default: return {};
    }
}

QString HistoryModel::statusToolTip(int row) const
{
    const RunRecord &r = m_runs[std::size_t(row)];
    const ResumeState &st = m_resume[std::size_t(row)];
    QString tip = r.firstCause.isEmpty() ? statusLabel(r.status) : r.firstCause;
    if (!r.lostRanks.isEmpty())
        tip = tr("Recovered: finished without the lost ranks, with the same bits as one rank (the others "
                 "evaluated their unfinished batches again).\n%1")
                  .arg(lostRanksDetail(r.lostRanks).join(u"\n"_s));
    if (st.kind == ResumeState::Kind::Resumable)
        tip += u"\n"_s + tr("%1 (%2 schedule, %3 ranks); Resume finishes it from there with the same bits.")
                             .arg(st.text, st.source->schedule)
                             .arg(st.source->worldSize);
    else if (st.kind != ResumeState::Kind::None)
        tip += u"\n"_s + tr("Resume: %1").arg(st.text);
    return tip;
}

QVariant HistoryModel::sortKey(int row, int column) const
{
    const RunRecord &r = m_runs[std::size_t(row)];
    switch (column) {
    case ColStarted: return r.started.toMSecsSinceEpoch();
    case ColWorld: return r.worldSize;
    case ColGroups: return r.groupsCount;
    case ColNodes: return r.nodeCount;
    case ColPpl: return r.ppl.value_or(-1);
    case ColTokens: return qlonglong(r.tokensScored);
    case ColRate: return r.tokensPerSecond.value_or(-1);
    case ColStatus: return int(r.status);
    default: return {};
    }
}

QString HistoryModel::statusText(int row) const
{
    const RunRecord &r = m_runs[std::size_t(row)];
    const ResumeState &st = m_resume[std::size_t(row)];
    if (st.kind == ResumeState::Kind::Resumable)
        // Short, so the table keeps its columns: the round and batches are in the tooltip, the
        // selection line and the run detail.
        return QString(statusLabel(r.status) + u" — "_s
                       + tr("%1% done, resumable").arg(st.source->batchCount > 0 ? int(100 * st.source->batchesDone / st.source->batchCount) : 0));
    if (st.kind == ResumeState::Kind::Resumed)
        return QString(statusLabel(r.status) + u" — "_s + tr("finished by a resume"));
    if (r.status == RunStatus::Finished && !r.lostRanks.isEmpty())
        return QString(u"✓ "_s + tr("recovered") + u" — "_s + lostRanksSummary(r.lostRanks));
    return statusLabel(r.status);
}

QVariant HistoryModel::displayData(int row, int column) const
{
    const RunRecord &r = m_runs[std::size_t(row)];
    const QLocale loc;
    switch (column) {
    case ColStarted: return r.started.toLocalTime().toString(u"yyyy-MM-dd HH:mm:ss"_s);
    case ColRunId: return r.runId;
    case ColStatus: return statusText(row);
    case ColModel: return shortPath(r.model);
    case ColData: return shortPath(r.data);
    case ColProtocol: return r.protocol;
    case ColWorld: return r.worldSize;
    case ColGroups: return r.groupsCount;
    case ColNodes: return r.nodeCount;
    case ColPpl:
        if (!r.ppl)
            return u"—"_s;
        // As the Run page's headline and the CLI write it (six decimals), so that a stored run reads as it did live.
        return r.pplStderr ? u"%1 ± %2"_s.arg(*r.ppl, 0, 'f', 6).arg(*r.pplStderr, 0, 'f', 6) : QString::number(*r.ppl, 'f', 6);
    case ColTokens: return loc.toString(qlonglong(r.tokensScored));
    case ColRate: return r.tokensPerSecond ? loc.toString(*r.tokensPerSecond, 'f', 0) : u"—"_s;
    case ColBaseline: return m_baseline[std::size_t(row)].isEmpty() ? u"—"_s : m_baseline[std::size_t(row)];
    default: return {};
    }
}

QVariant HistoryModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    static const char *const names[] = {QT_TR_NOOP("Started"), QT_TR_NOOP("Run"),    QT_TR_NOOP("Status"), QT_TR_NOOP("Model"),
                                        QT_TR_NOOP("Data"),    QT_TR_NOOP("Protocol"), QT_TR_NOOP("Ranks"), QT_TR_NOOP("Groups"),
                                        QT_TR_NOOP("Nodes"),   QT_TR_NOOP("PPL ± stderr"), QT_TR_NOOP("Tokens"), QT_TR_NOOP("tok/s"),
                                        QT_TR_NOOP("vs baseline")};
    return section >= 0 && section < ColumnCount ? tr(names[section]) : QVariant();
}

HistoryFilterModel::HistoryFilterModel(QObject *parent)
    : QSortFilterProxyModel(parent)
{
    setSortRole(HistoryModel::SortRole);
}

void HistoryFilterModel::setModelFilter(const QString &text) { m_model = text; invalidateFilter(); }
void HistoryFilterModel::setDataFilter(const QString &text) { m_data = text; invalidateFilter(); }
void HistoryFilterModel::setProtocolFilter(const QString &protocol) { m_protocol = protocol; invalidateFilter(); }
void HistoryFilterModel::setStatusFilter(std::optional<RunStatus> status) { m_status = status; invalidateFilter(); }
void HistoryFilterModel::setNodeCount(int nodes) { m_nodes = nodes; invalidateFilter(); }
void HistoryFilterModel::setSearch(const QString &text) { m_search = text.trimmed(); invalidateFilter(); }

void HistoryFilterModel::setDateRange(const QDate &from, const QDate &to)
{
    m_from = from;
    m_to = to;
    invalidateFilter();
}

bool HistoryFilterModel::filterAcceptsRow(int sourceRow, const QModelIndex &) const
{
    const auto *m = qobject_cast<const HistoryModel *>(sourceModel());
    if (!m || sourceRow >= m->rowCount())
        return false;
    const RunRecord &r = m->runAt(sourceRow);
    if (!m_model.isEmpty() && !r.model.contains(m_model, Qt::CaseInsensitive))
        return false;
    if (!m_data.isEmpty() && !r.data.contains(m_data, Qt::CaseInsensitive))
        return false;
    if (!m_protocol.isEmpty() && r.protocol != m_protocol)
        return false;
    if (m_status && r.status != *m_status)
        return false;
    if (m_nodes > 0 && r.nodeCount != m_nodes)
        return false;
    const QDate day = r.started.toLocalTime().date();
    if (m_from.isValid() && day < m_from)
        return false;
    if (m_to.isValid() && day > m_to)
        return false;
    if (!m_search.isEmpty()) {
        bool hit = false;
        for (const QString *s : {&r.runId, &r.profileName, &r.model, &r.data, &r.firstCause})
            hit = hit || s->contains(m_search, Qt::CaseInsensitive);
        if (!hit)
            return false;
    }
    return true;
}

} // namespace cppl::app
