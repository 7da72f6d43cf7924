// SPDX-License-Identifier: MIT
#include "profile_model.h"

#include <QBrush>
#include <QColor>
#include <QDataStream>
#include <QFont>
#include <QIODevice>
#include <QMimeData>
#include <QPalette>

#include <algorithm>
#include <map>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {

constexpr auto kHostMime = "application/x-clusterppl-host-index";

// internalId holds the parent chain: bits 0-1 the node's level, then the group row and host row
// of its parent (20 bits each), so parent() needs no pointers into containers that get rebuilt.
constexpr quintptr kLevelBits = 2;
constexpr quintptr kRowBits = 20;
constexpr quintptr kRowMask = (quintptr(1) << kRowBits) - 1;

quintptr packId(int level, int groupRow, int hostRow)
{
    return quintptr(level) | (quintptr(groupRow) << kLevelBits) | (quintptr(hostRow) << (kLevelBits + kRowBits));
}
int levelOf(quintptr id) { return int(id & 3); }
int groupOf(quintptr id) { return int((id >> kLevelBits) & kRowMask); }
int hostRowOf(quintptr id) { return int((id >> (kLevelBits + kRowBits)) & kRowMask); }

QString qs(const std::string &s) { return QString::fromStdString(s); }

QString hostPath(int hostIndex) { return u"hosts["_s + QString::number(hostIndex) + u']'; }

} // namespace

ProfileModel::ProfileModel(QObject *parent)
    : QAbstractItemModel(parent)
{
    rebuild();
}

void ProfileModel::setProfile(const ClusterProfile &profile)
{
    beginResetModel();
    m_profile = profile;
    m_preflight.clear();
    m_slurmAside = {};
    rebuild();
    endResetModel();
    Q_EMIT profileEdited();
}

void ProfileModel::setTensorParallel(int n)
{
    if (n == m_profile.evaluation.tensorParallel)
        return;
    Q_EMIT layoutAboutToBeChanged(); // the same rows: only texts and problems change
    m_profile.evaluation.tensorParallel = n;
    rebuild();
    Q_EMIT layoutChanged();
}

ClusterProfile ProfileModel::profile() const
{
    ClusterProfile p = m_profile;
    if (p.grouping.mode == GroupingSpec::Mode::Explicit)
        std::erase_if(p.grouping.groups, [](const GroupSpec &g) { return g.hosts.empty(); });
    return p;
}

QStringList ProfileModel::problemsOf(const ClusterProfile &input)
{
    ClusterProfile p = input;
    if (p.grouping.mode == GroupingSpec::Mode::Explicit)
        std::erase_if(p.grouping.groups, [](const GroupSpec &g) { return g.hosts.empty(); });
    QStringList out;
    // validateProfile leaves these to the JSON parser; the editor has no parser in between.
    for (std::size_t i = 0; i < p.hosts.size(); ++i) {
        const HostSpec &h = p.hosts[i];
        if (h.name.empty())
            out << hostPath(int(i)) + u".name: a host needs a name (the hostname, or a label with an address)"_s;
        else if (std::any_of(h.name.begin(), h.name.end(), [](unsigned char c) { return c <= ' ' || c == 0x7f; }))
            out << hostPath(int(i)) + u".name: \""_s + qs(h.name) + u"\" contains spaces or control characters"_s;
        if (h.ssh.port < 1 || h.ssh.port > 65535)
            out << hostPath(int(i)) + u".ssh.port: expected 1..65535, got "_s + QString::number(h.ssh.port);
        if (h.agent.empty())
            out << hostPath(int(i)) + u".agent: the agent executable must not be empty (default clusterppl-agent)"_s;
    }
    for (const std::string &e : validateProfile(p))
        out << qs(e);
    return out;
}

std::vector<ProfileModel::Group> ProfileModel::deriveGroups(const ClusterProfile &p) const
{
    std::vector<Group> groups;
    const int n = int(p.hosts.size());
    switch (p.grouping.mode) {
    case GroupingSpec::Mode::ByHost:
        for (int i = 0; i < n; ++i)
            groups.push_back({qs(p.hosts[size_t(i)].name), {i}});
        break;
    case GroupingSpec::Mode::BySize: {
        Group all{tr("groups of %1 consecutive ranks").arg(p.grouping.size), {}};
        for (int i = 0; i < n; ++i)
            all.hosts.push_back(i);
        groups.push_back(std::move(all));
        break;
    }
    case GroupingSpec::Mode::ByLabel:
        for (int i = 0; i < n; ++i) {
            const QString label = qs(p.hosts[size_t(i)].group);
            auto it = std::find_if(groups.begin(), groups.end(), [&](const Group &g) { return g.name == label; });
            if (it == groups.end())
                groups.push_back({label, {i}});
            else
                it->hosts.push_back(i);
        }
        break;
    case GroupingSpec::Mode::Explicit: {
        std::vector<bool> placed(size_t(n), false);
        for (const GroupSpec &spec : p.grouping.groups) {
            Group g{qs(spec.name), {}};
            for (int i = 0; i < n; ++i)
                if (std::find(spec.hosts.begin(), spec.hosts.end(), p.hosts[size_t(i)].name) != spec.hosts.end()
                    && !placed[size_t(i)]) {
                    g.hosts.push_back(i);
                    placed[size_t(i)] = true;
                }
            groups.push_back(std::move(g));
        }
        Group rest{tr("(in no group)"), {}};
        for (int i = 0; i < n; ++i)
            if (!placed[size_t(i)])
                rest.hosts.push_back(i);
        if (!rest.hosts.empty())
            groups.push_back(std::move(rest));
        break;
    }
    }
    return groups;
}

void ProfileModel::rebuild()
{
    m_groups = deriveGroups(m_profile);
    m_problems = problemsOf(m_profile);
    m_firstRank.clear();
    int rank = 0;
    for (const HostSpec &h : m_profile.hosts) {
        m_firstRank.push_back(rank);
        rank += std::max(h.slots, 0);
    }
    m_rankGroup.assign(size_t(rank), -1);
    m_leaders.clear();
    m_layoutGroupNames.clear();
    if (m_problems.isEmpty() && !m_profile.hosts.empty()) {
        const RankLayout layout = rankLayout(profile());
        for (const RankInfo &r : layout.ranks)
            if (r.rank >= 0 && r.rank < rank)
                m_rankGroup[size_t(r.rank)] = r.group;
        for (const auto &g : layout.groups) {
            m_leaders.push_back(g.ranks.empty() ? -1 : g.ranks.front());
            m_layoutGroupNames.push_back(qs(g.name));
        }
    }
}

int ProfileModel::firstRankOf(int hostIndex) const
{
    return hostIndex >= 0 && hostIndex < int(m_firstRank.size()) ? m_firstRank[size_t(hostIndex)] : 0;
}

QString ProfileModel::groupName(int groupRow) const
{
    return groupRow >= 0 && groupRow < groupCount() ? m_groups[size_t(groupRow)].name : QString();
}

QModelIndex ProfileModel::index(int row, int column, const QModelIndex &parent) const
{
    if (row < 0 || column < 0 || column >= ColumnCount || row >= rowCount(parent))
        return {};
    if (!parent.isValid())
        return createIndex(row, column, packId(0, 0, 0));
    const quintptr pid = parent.internalId();
    if (levelOf(pid) == 0)
        return createIndex(row, column, packId(1, parent.row(), 0));
    if (levelOf(pid) == 1)
        return createIndex(row, column, packId(2, groupOf(pid), parent.row()));
    return {};
}

QModelIndex ProfileModel::parent(const QModelIndex &child) const
{
    if (!child.isValid())
        return {};
    const quintptr id = child.internalId();
    switch (levelOf(id)) {
    case 1: return createIndex(groupOf(id), 0, packId(0, 0, 0));
    case 2: return createIndex(hostRowOf(id), 0, packId(1, groupOf(id), 0));
    default: return {};
    }
}

int ProfileModel::rowCount(const QModelIndex &parent) const
{
    if (!parent.isValid())
        return groupCount();
    if (parent.column() != 0)
        return 0;
    const quintptr id = parent.internalId();
    if (levelOf(id) == 0)
        return parent.row() < groupCount() ? int(m_groups[size_t(parent.row())].hosts.size()) : 0;
    if (levelOf(id) == 1) {
        const int h = hostIndexOf(parent);
        return h >= 0 ? childRowsOf(m_profile, h) : 0;
    }
    return 0;
}

int ProfileModel::childRowsOf(const ClusterProfile &p, int h)
{
    if (h < 0 || h >= int(p.hosts.size()))
        return 0;
    return p.launcher == "slurm" ? std::max(p.slurm.nodes, 0) : std::max(p.hosts[size_t(h)].slots, 0);
}

QVariant ProfileModel::slurmData(const QModelIndex &index, int level) const
{
    // The login node submits the job; the ranks run on the nodes Slurm allocates, known by name
    // only when the job starts (docs/launching.md, "Slurm launcher").
    const SlurmSpec &s = m_profile.slurm;
    const int tasks = std::max(s.ntasksPerNode, 1);
    const int ranks = std::max(s.nodes, 0) * tasks;
    const int col = index.column();
    const auto rankRange = [](int first, int count) {
        return (count == 1 ? tr("rank %1") : tr("ranks %1")).arg(qs(rankRangeText(first, first + count - 1)));
    };
    if (level == 0) {
        switch (col) {
        case ColSlots: return ranks;
        case ColRanks:
            return QString((ranks == 1 ? tr("1 rank") : tr("%1 ranks").arg(ranks))
                           + (s.nodes == 1 ? tr(" on 1 Slurm node") : tr(" on %1 Slurm nodes").arg(s.nodes)));
        default: return {};
        }
    }
    if (level == 1) {
        switch (col) {
        case ColSlots: return ranks;
        case ColRanks: return tr("%1, on the allocation").arg(rankRange(0, ranks));
        case ColRole: return tr("login node: submits the job");
        default: return {};
        }
    }
    const int first = index.row() * tasks;
    switch (col) {
    case ColName: return tr("Slurm node %1").arg(index.row() + 1);
    case ColAddress:
        return s.gpusPerNode <= 0 ? tr("allocated at start")
               : s.gpusPerNode == 1 ? tr("1 GPU, allocated at start")
                                    : tr("%1 GPUs, allocated at start").arg(s.gpusPerNode);
    case ColSlots: return tasks;
    case ColRanks: return rankRange(first, tasks);
    case ColRole: {
        if (m_profile.grouping.mode == GroupingSpec::Mode::BySize && m_profile.grouping.size > 0) {
            QStringList leaders;
            for (int r = first; r < first + tasks; ++r)
                if (r % m_profile.grouping.size == 0)
                    leaders << QString::number(r);
            if (leaders.isEmpty())
                return tr("in a group led on an earlier node");
            return leaders.size() == 1 ? tr("rank %1 leads its group").arg(leaders.front())
                                       : tr("ranks %1 lead their groups").arg(leaders.join(u", "_s));
        }
        return tr("rank %1 leads this node's group").arg(first);
    }
    default: return {};
    }
}

int ProfileModel::columnCount(const QModelIndex &) const
{
    return ColumnCount;
}

int ProfileModel::hostIndexOf(const QModelIndex &index) const
{
    if (!index.isValid())
        return -1;
    const quintptr id = index.internalId();
    int g = 0;
    int row = 0;
    if (levelOf(id) == 1) {
        g = groupOf(id);
        row = index.row();
    } else if (levelOf(id) == 2) {
        g = groupOf(id);
        row = hostRowOf(id);
    } else {
        return -1;
    }
    if (g >= groupCount() || row >= int(m_groups[size_t(g)].hosts.size()))
        return -1;
    return m_groups[size_t(g)].hosts[size_t(row)];
}

QModelIndex ProfileModel::indexOfHost(int hostIndex, int column) const
{
    for (int g = 0; g < groupCount(); ++g) {
        const auto &hosts = m_groups[size_t(g)].hosts;
        for (int r = 0; r < int(hosts.size()); ++r)
            if (hosts[size_t(r)] == hostIndex)
                return createIndex(r, column, packId(1, g, 0));
    }
    return {};
}

QModelIndex ProfileModel::indexOfGroup(int groupRow) const
{
    return groupRow >= 0 && groupRow < groupCount() ? createIndex(groupRow, 0, packId(0, 0, 0)) : QModelIndex();
}

QModelIndex ProfileModel::indexOfProblem(const QString &message) const
{
    static const std::map<QString, int> fieldColumn{{u"name"_s, ColName}, {u"address"_s, ColAddress},
                                                    {u"slots"_s, ColSlots}, {u"devices"_s, ColSlots},
                                                    {u"ssh"_s, ColSsh}};
    if (message.startsWith(u"hosts["_s)) {
        const int close = int(message.indexOf(u']'));
        const int host = message.mid(6, close - 6).toInt();
        const QString field = message.mid(close + 2).section(u'.', 0, 0).section(u':', 0, 0);
        const auto it = fieldColumn.find(field);
        return indexOfHost(host, it == fieldColumn.end() ? ColName : it->second);
    }
    if (message.startsWith(u"groups: host \""_s)) {
        const QString name = message.section(u'"', 1, 1);
        for (int i = 0; i < int(m_profile.hosts.size()); ++i)
            if (qs(m_profile.hosts[size_t(i)].name) == name)
                return indexOfHost(i);
    }
    if (message.startsWith(u"groups["_s))
        return indexOfGroup(message.mid(7, int(message.indexOf(u']')) - 7).toInt());
    return {};
}

QString ProfileModel::hostTooltip(int h) const
{
    QStringList lines;
    for (const QString &p : m_problems)
        if (p.startsWith(hostPath(h) + u'.') || indexOfProblem(p) == indexOfHost(h))
            lines << p;
    return lines.join(u'\n');
}

QVariant ProfileModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid())
        return {};
    const int level = levelOf(index.internalId());
    if (level == 0)
        return groupData(index, role);
    const int h = hostIndexOf(index);
    if (h < 0)
        return {};
    if (role == HostIndexRole)
        return h;
    return level == 1 ? hostData(index, h, role) : slotData(index, h, role);
}

QVariant ProfileModel::groupData(const QModelIndex &index, int role) const
{
    const Group &g = m_groups[size_t(index.row())];
    const int col = index.column();
    if (role == GroupRowRole)
        return index.row();
    if (m_profile.launcher == "slurm" && role == Qt::DisplayRole && (col == ColSlots || col == ColRanks))
        return slurmData(index, 0);
    // Slurm's by-host groups are the allocated nodes, not the login host the row is derived from.
    if (m_profile.launcher == "slurm" && role == Qt::DisplayRole && col == ColName && m_profile.grouping.mode == GroupingSpec::Mode::ByHost)
        return tr("one group per allocated node");
    if (role == Qt::FontRole && col == ColName) {
        QFont f;
        f.setBold(true);
        return f;
    }
    if (role != Qt::DisplayRole && role != Qt::EditRole)
        return {};
    int ranks = 0;
    for (int h : g.hosts)
        ranks += m_profile.hosts[size_t(h)].slots;
    switch (col) {
    case ColName: return g.name.isEmpty() && role == Qt::DisplayRole ? tr("(no label)") : g.name;
    case ColSlots: return role == Qt::DisplayRole ? QVariant(ranks) : QVariant();
    case ColRanks:
        if (g.hosts.empty())
            return tr("empty: drop hosts here");
        return QString((ranks == 1 ? tr("1 rank") : tr("%1 ranks").arg(ranks))
                       + (g.hosts.size() == 1 ? tr(" on 1 host") : tr(" on %1 hosts").arg(g.hosts.size())));
    default: return {};
    }
}

QVariant ProfileModel::hostData(const QModelIndex &index, int h, int role) const
{
    const HostSpec &host = m_profile.hosts[size_t(h)];
    const int col = index.column();
    const QString problems = hostTooltip(h);
    const bool checked = m_preflight.contains(qs(host.name));
    switch (role) {
    case Qt::ToolTipRole:
        if (col == ColPreflight && checked)
            return m_preflight.value(qs(host.name)).details;
        return problems.isEmpty() ? QVariant() : QVariant(problems);
    case Qt::DecorationRole: return col == ColName && !problems.isEmpty() ? QVariant(QColor(0xd5, 0x5e, 0x00)) : QVariant();
    case Qt::ForegroundRole:
        if (col == ColPreflight && checked)
            return m_preflight.value(qs(host.name)).ok ? QVariant() : QVariant(QColor(0xd5, 0x5e, 0x00));
        return {};
    case Qt::DisplayRole:
    case Qt::EditRole:
        if (m_profile.launcher == "slurm" && role == Qt::DisplayRole && (col == ColSlots || col == ColRanks || col == ColRole))
            return slurmData(index, 1);
        return hostText(h, col, role, problems);
    default: return {};
    }
}

QVariant ProfileModel::hostText(int h, int col, int role, const QString &problems) const
{
    const HostSpec &host = m_profile.hosts[size_t(h)];
    switch (col) {
    case ColName: return QString(qs(host.name) + (role == Qt::DisplayRole && !problems.isEmpty() ? u"  ⚠"_s : QString()));
    case ColAddress: return qs(host.address);
    case ColSlots: return host.slots;
    case ColRanks: {
        const int first = firstRankOf(h), last = first + std::max(host.slots, 1) - 1, n = m_profile.evaluation.tensorParallel;
        const QString ranks = (host.slots <= 1 ? tr("rank %1") : tr("ranks %1")).arg(qs(rankRangeText(first, last)));
        if (n <= 1 || role != Qt::DisplayRole)
            return ranks;
        // Tensor-parallel group k is ranks [kN, kN+N): the groups this host's ranks form.
        return (first / n == last / n ? tr("%1 · TP group %2") : tr("%1 · TP groups %2")).arg(ranks, qs(rankRangeText(first / n, last / n)));
    }
    case ColRole: {
        if (role == Qt::EditRole)
            return {};
        QStringList leads;
        for (size_t g = 0; g < m_leaders.size(); ++g)
            if (m_leaders[g] >= firstRankOf(h) && m_leaders[g] < firstRankOf(h) + host.slots)
                leads << m_layoutGroupNames[g];
        return leads.isEmpty() ? QString() : tr("leads %1").arg(leads.join(u", "_s));
    }
    case ColSsh:
        if (role == Qt::EditRole || m_profile.launcher == "local") // a Slurm login node is reached over SSH
            return role == Qt::DisplayRole ? tr("local") : QVariant();
        return sshText(host);
    case ColPreflight:
        if (role == Qt::EditRole)
            return {};
        return m_preflight.contains(qs(host.name)) ? m_preflight.value(qs(host.name)).summary : tr("not checked");
    default: return {};
    }
}

QString ProfileModel::sshText(const HostSpec &host) const
{
    QString s = host.ssh.alias.empty() ? qs(host.address.empty() ? host.name : host.address) : qs(host.ssh.alias);
    if (!host.ssh.user.empty())
        s = qs(host.ssh.user) + u'@' + s;
    if (host.ssh.port != 22)
        s += u':' + QString::number(host.ssh.port);
    if (!host.ssh.identityFile.empty())
        s += tr(", key %1").arg(qs(host.ssh.identityFile).section(u'/', -1));
    if (host.ssh.passwordAuth)
        s += tr(", password allowed");
    return s;
}

QVariant ProfileModel::slotData(const QModelIndex &index, int h, int role) const
{
    // A slot: one rank.
    const HostSpec &host = m_profile.hosts[size_t(h)];
    const int rank = firstRankOf(h) + index.row();
    if (role != Qt::DisplayRole)
        return {};
    if (m_profile.launcher == "slurm")
        return slurmData(index, 2);
    switch (index.column()) {
    case ColName: return tr("slot %1").arg(index.row());
    case ColAddress: {
        const int device = index.row() < int(host.devices.size()) ? host.devices[size_t(index.row())] : index.row();
        return tr("device %1").arg(device);
    }
    case ColRanks: {
        const int n = m_profile.evaluation.tensorParallel;
        if (n <= 1)
            return tr("rank %1").arg(rank);
        const int first = rank / n * n;
        return tr("rank %1 · TP group %2 (ranks %3)").arg(rank).arg(rank / n).arg(qs(rankRangeText(first, first + n - 1)));
    }
    case ColRole: {
        if (rank >= int(m_rankGroup.size()) || m_rankGroup[size_t(rank)] < 0)
            return {};
        const int g = m_rankGroup[size_t(rank)];
        return m_leaders[size_t(g)] == rank ? tr("leader of %1").arg(m_layoutGroupNames[size_t(g)])
                                            : tr("in %1").arg(m_layoutGroupNames[size_t(g)]);
    }
    default: return {};
    }
}

QVariant ProfileModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (section) {
    case ColName: return tr("Group / host / slot");
    case ColAddress: return tr("Address");
    case ColSlots: return tr("Slots");
    case ColRanks: return tr("Ranks");
    case ColRole: return tr("Group leader");
    case ColSsh: return tr("Connection");
    case ColPreflight: return tr("Pre-flight");
    default: return {};
    }
}

Qt::ItemFlags ProfileModel::flags(const QModelIndex &index) const
{
    if (!index.isValid())
        return Qt::ItemIsDropEnabled;
    Qt::ItemFlags f = Qt::ItemIsEnabled | Qt::ItemIsSelectable;
    const int level = levelOf(index.internalId());
    const auto mode = m_profile.grouping.mode;
    if (level == 0) {
        const bool named = mode == GroupingSpec::Mode::ByLabel
                           || (mode == GroupingSpec::Mode::Explicit && index.row() < int(m_profile.grouping.groups.size()));
        if (index.column() == ColName && named)
            f |= Qt::ItemIsEditable;
        if (mode != GroupingSpec::Mode::BySize)
            f |= Qt::ItemIsDropEnabled;
    } else if (level == 1) {
        f |= Qt::ItemIsDragEnabled;
        // A Slurm login node's slots are not ranks (the job's nodes × tasks are, in the Slurm form).
        if (index.column() == ColName || index.column() == ColAddress || (index.column() == ColSlots && m_profile.launcher != "slurm"))
            f |= Qt::ItemIsEditable;
    } else {
        f |= Qt::ItemNeverHasChildren;
    }
    return f;
}

bool ProfileModel::setData(const QModelIndex &index, const QVariant &value, int role)
{
    if (!index.isValid() || role != Qt::EditRole)
        return false;
    const int level = levelOf(index.internalId());
    if (level == 0 && index.column() == ColName)
        return renameGroup(index.row(), value.toString()).isEmpty();
    if (level != 1)
        return false;
    const int h = hostIndexOf(index);
    switch (index.column()) {
    case ColName: return setHostField(h, HostField::Name, value).isEmpty();
    case ColAddress: return setHostField(h, HostField::Address, value).isEmpty();
    case ColSlots: return setHostField(h, HostField::Slots, value).isEmpty();
    default: return false;
    }
}

void ProfileModel::setPreflight(const QString &host, bool ok, const QString &summary, const QString &details)
{
    m_preflight.insert(host, {ok, summary, details});
    for (int i = 0; i < int(m_profile.hosts.size()); ++i)
        if (qs(m_profile.hosts[size_t(i)].name) == host) {
            const QModelIndex idx = indexOfHost(i, ColPreflight);
            Q_EMIT dataChanged(idx, idx);
        }
}

void ProfileModel::clearPreflight()
{
    m_preflight.clear();
    for (int g = 0; g < groupCount(); ++g) {
        const QModelIndex gi = indexOfGroup(g);
        if (rowCount(gi) > 0)
            Q_EMIT dataChanged(index(0, ColPreflight, gi), index(rowCount(gi) - 1, ColPreflight, gi));
    }
}

Qt::DropActions ProfileModel::supportedDropActions() const
{
    return Qt::MoveAction;
}

QStringList ProfileModel::mimeTypes() const
{
    return {QString::fromLatin1(kHostMime)};
}

QMimeData *ProfileModel::mimeData(const QModelIndexList &indexes) const
{
    // Every selected host row (a row's cells all come: each host once), as "3,5,7".
    QList<int> hosts;
    for (const QModelIndex &i : indexes)
        if (i.isValid() && levelOf(i.internalId()) == 1)
            if (const int h = hostIndexOf(i); h >= 0 && !hosts.contains(h))
                hosts << h;
    if (hosts.isEmpty())
        return nullptr;
    QByteArrayList parts;
    for (const int h : hosts)
        parts << QByteArray::number(h);
    auto *m = new QMimeData;
    m->setData(QString::fromLatin1(kHostMime), parts.join(','));
    return m;
}

bool ProfileModel::canDropMimeData(const QMimeData *data, Qt::DropAction action, int, int, const QModelIndex &parent) const
{
    return data && data->hasFormat(QString::fromLatin1(kHostMime)) && action == Qt::MoveAction && parent.isValid()
           && levelOf(parent.internalId()) == 0 && m_profile.grouping.mode != GroupingSpec::Mode::BySize;
}

bool ProfileModel::dropMimeData(const QMimeData *data, Qt::DropAction action, int row, int column, const QModelIndex &parent)
{
    if (!canDropMimeData(data, action, row, column, parent))
        return false;
    // Hosts and the group by name: each move renumbers hosts, and a label group may go.
    std::vector<std::string> names;
    for (const QByteArray &part : data->data(QString::fromLatin1(kHostMime)).split(',')) {
        bool ok = false;
        const int h = part.toInt(&ok);
        if (ok && h >= 0 && h < int(m_profile.hosts.size()))
            names.push_back(m_profile.hosts[size_t(h)].name);
    }
    const QString group = m_groups[size_t(parent.row())].name;
    // The move is done here; returning false stops the view from also removing the source rows.
    for (const std::string &name : names) {
        int h = -1, g = -1;
        for (int i = 0; i < int(m_profile.hosts.size()); ++i)
            if (m_profile.hosts[size_t(i)].name == name)
                h = i;
        for (int i = 0; i < groupCount(); ++i)
            if (m_groups[size_t(i)].name == group)
                g = i;
        if (h < 0 || g < 0 || !moveHostToGroup(h, g).isEmpty())
            break; // refused: the message is out, the rest stay
    }
    return false;
}

} // namespace cppl::app
