// SPDX-License-Identifier: MIT
// ProfileModel's edits: each one is tried on a copy of the profile and validated before it is
// applied (profile_model.cpp has the tree itself).
#include "profile_model.h"

#include <algorithm>

using namespace Qt::StringLiterals;

namespace cppl::app {

namespace {
QString qs(const std::string &s) { return QString::fromStdString(s); }
std::string ss(const QString &s) { return s.trimmed().toStdString(); }
QString hostPath(int hostIndex) { return u"hosts["_s + QString::number(hostIndex) + u']'; }
} // namespace

QString ProfileModel::refuse(const QString &message)
{
    Q_EMIT editRefused(message);
    return message;
}

QString ProfileModel::commit(ClusterProfile candidate, const QString &fieldPrefix, bool structural)
{
    const QStringList now = problemsOf(candidate);
    QStringList fresh;
    for (const QString &p : now)
        if (!m_problems.contains(p))
            fresh << p;
    // A structural edit renumbers hosts, so old messages change their text: it is judged by the
    // count. The message shown is the one about the edited field when there is one.
    if (!fresh.isEmpty() && (!structural || now.size() > m_problems.size())) {
        for (const QString &p : fresh)
            if (!fieldPrefix.isEmpty() && p.startsWith(fieldPrefix))
                return refuse(p);
        return refuse(fresh.front());
    }
    if (structural) {
        beginResetModel();
        m_profile = std::move(candidate);
        rebuild();
        endResetModel();
    } else if (m_profile.launcher != candidate.launcher || m_profile.slurm.nodes != candidate.slurm.nodes) {
        // Slurm's allocated nodes are the login node's rows: they come and go with the launcher and
        // the node count.
        beginResetModel();
        m_profile = std::move(candidate);
        rebuild();
        endResetModel();
    } else {
        m_profile = std::move(candidate);
        rebuild();
        for (int g = 0; g < groupCount(); ++g) {
            const QModelIndex gi = indexOfGroup(g);
            Q_EMIT dataChanged(index(0, 0, gi), index(rowCount(gi) - 1, ColumnCount - 1, gi));
        }
    }
    Q_EMIT profileEdited();
    return {};
}

QString ProfileModel::setHostField(int h, HostField field, const QVariant &value)
{
    return setHostsField({h}, field, value);
}

QString ProfileModel::setHostsField(const std::vector<int> &hosts, HostField field, const QVariant &value)
{
    // Every host on one copy, validated and committed once: all of them or none.
    ClusterProfile c = m_profile;
    bool structural = false;
    QString prefix;
    for (const int h : hosts) {
        if (h < 0 || h >= int(c.hosts.size()))
            return refuse(tr("no host %1 in the profile").arg(h));
        HostSpec &host = c.hosts[size_t(h)];
        const QString path = hostPath(h);
        auto toInt = [&](const QString &what, int &out) -> QString {
            bool ok = false;
            const int v = value.toString().trimmed().toInt(&ok);
            if (!ok)
                return path + u'.' + what + u": expected an integer, got \""_s + value.toString() + u"\"; type a number"_s;
            out = v;
            return {};
        };
        switch (field) {
        case HostField::Name: {
            const std::string old = host.name;
            host.name = ss(value.toString());
            // The host keeps its group: explicit groups list hosts by name.
            for (GroupSpec &g : c.grouping.groups)
                std::replace(g.hosts.begin(), g.hosts.end(), old, host.name);
            structural = true;
            prefix = path + u".name"_s;
            break;
        }
        case HostField::Address: host.address = ss(value.toString()); prefix = path + u".address"_s; break;
        case HostField::Slots:
            if (QString e = toInt(u"slots"_s, host.slots); !e.isEmpty())
                return refuse(e);
            if (host.slots > 4096)
                return refuse(path + u".slots: "_s + QString::number(host.slots) + u" is more ranks than one host can hold; at most 4096"_s);
            structural = true;
            prefix = path + u".slots"_s;
            break;
        case HostField::Label: host.group = ss(value.toString()); structural = true; prefix = path + u".group"_s; break;
        case HostField::SshAlias: host.ssh.alias = ss(value.toString()); prefix = path + u".ssh"_s; break;
        case HostField::SshUser: host.ssh.user = ss(value.toString()); prefix = path + u".ssh"_s; break;
        case HostField::SshPort:
            if (QString e = toInt(u"ssh.port"_s, host.ssh.port); !e.isEmpty())
                return refuse(e);
            prefix = path + u".ssh"_s;
            break;
        case HostField::SshIdentity: host.ssh.identityFile = ss(value.toString()); prefix = path + u".ssh"_s; break;
        case HostField::SshPassword: host.ssh.passwordAuth = value.toBool(); prefix = path + u".ssh"_s; break;
        case HostField::Agent: host.agent = ss(value.toString()); prefix = path + u".agent"_s; break;
        case HostField::Workdir: host.workdir = ss(value.toString()); prefix = path + u".workdir"_s; break;
        }
    }
    if (c == m_profile)
        return {};
    // With several hosts the message is the first new problem, whichever host it names.
    return commit(std::move(c), hosts.size() == 1 ? prefix : QString(), structural);
}

QString ProfileModel::setEnvironment(int h, const std::map<std::string, std::string> &env)
{
    if (h < -1 || h >= int(m_profile.hosts.size()))
        return refuse(tr("no host %1 in the profile").arg(h));
    ClusterProfile c = m_profile;
    (h < 0 ? c.env : c.hosts[size_t(h)].env) = env;
    if (c == m_profile)
        return {};
    return commit(std::move(c), h < 0 ? u"env"_s : hostPath(h) + u".env"_s, false);
}

QString ProfileModel::renameGroup(int groupRow, const QString &name)
{
    if (groupRow < 0 || groupRow >= groupCount())
        return refuse(tr("no group %1").arg(groupRow));
    const std::string n = ss(name);
    const QString path = u"groups["_s + QString::number(groupRow) + u"].name"_s;
    if (n.empty())
        return refuse(path + u": a group needs a name"_s);
    ClusterProfile c = m_profile;
    if (c.grouping.mode == GroupingSpec::Mode::Explicit && groupRow < int(c.grouping.groups.size())) {
        for (int g = 0; g < int(c.grouping.groups.size()); ++g)
            if (g != groupRow && c.grouping.groups[size_t(g)].name == n)
                return refuse(path + u": group \""_s + name.trimmed() + u"\" already exists; pick another name"_s);
        c.grouping.groups[size_t(groupRow)].name = n;
    } else if (c.grouping.mode == GroupingSpec::Mode::ByLabel) {
        for (int h : m_groups[size_t(groupRow)].hosts)
            c.hosts[size_t(h)].group = n;
    } else {
        return refuse(path + u": groups made by host or by size have fixed names; switch grouping to explicit to name them"_s);
    }
    return commit(std::move(c), path, true);
}

void ProfileModel::makeExplicit(ClusterProfile &p) const
{
    if (p.grouping.mode == GroupingSpec::Mode::Explicit)
        return;
    GroupingSpec g;
    g.mode = GroupingSpec::Mode::Explicit;
    for (const Group &d : deriveGroups(p)) {
        GroupSpec spec;
        spec.name = d.name.isEmpty() ? "group-" + std::to_string(g.groups.size()) : d.name.toStdString();
        for (int h : d.hosts)
            spec.hosts.push_back(p.hosts[size_t(h)].name);
        g.groups.push_back(std::move(spec));
    }
    p.grouping = std::move(g);
}

QString ProfileModel::addGroup(const QString &name)
{
    ClusterProfile c = m_profile;
    if (c.grouping.mode == GroupingSpec::Mode::BySize)
        return refuse(tr("groups: groups of a fixed size cannot take named groups; choose \"explicit\" grouping first"));
    const bool switched = c.grouping.mode != GroupingSpec::Mode::Explicit;
    makeExplicit(c);
    std::string n = ss(name);
    for (int i = int(c.grouping.groups.size()); n.empty(); ++i) {
        const std::string candidate = "group-" + std::to_string(i);
        if (std::none_of(c.grouping.groups.begin(), c.grouping.groups.end(), [&](const GroupSpec &g) { return g.name == candidate; }))
            n = candidate;
    }
    if (std::any_of(c.grouping.groups.begin(), c.grouping.groups.end(), [&](const GroupSpec &g) { return g.name == n; }))
        return refuse(u"groups: group \""_s + qs(n) + u"\" already exists; pick another name"_s);
    c.grouping.groups.push_back({n, {}});
    const QString r = commit(std::move(c), {}, true);
    if (r.isEmpty() && switched)
        Q_EMIT groupingChanged();
    return r;
}

QString ProfileModel::addHost(int groupRow, const QString &name, int slots)
{
    ClusterProfile c = m_profile;
    HostSpec h;
    h.name = ss(name);
    for (int i = int(c.hosts.size()); h.name.empty(); ++i) {
        const std::string candidate = "host-" + std::to_string(i);
        if (std::none_of(c.hosts.begin(), c.hosts.end(), [&](const HostSpec &x) { return x.name == candidate; }))
            h.name = candidate;
    }
    h.slots = slots;
    // Hosts of one group stay next to each other, so ranks of a group stay contiguous.
    int insertAt = int(c.hosts.size());
    if (groupRow >= 0 && groupRow < groupCount() && !m_groups[size_t(groupRow)].hosts.empty()
        && c.grouping.mode != GroupingSpec::Mode::BySize)
        insertAt = m_groups[size_t(groupRow)].hosts.back() + 1;
    if (groupRow >= 0 && groupRow < groupCount()) {
        if (c.grouping.mode == GroupingSpec::Mode::ByLabel)
            h.group = m_groups[size_t(groupRow)].name.toStdString();
        if (c.grouping.mode == GroupingSpec::Mode::Explicit && groupRow < int(c.grouping.groups.size()))
            c.grouping.groups[size_t(groupRow)].hosts.push_back(h.name);
    } else if (c.grouping.mode == GroupingSpec::Mode::Explicit && !c.grouping.groups.empty()) {
        c.grouping.groups.back().hosts.push_back(h.name);
    }
    c.hosts.insert(c.hosts.begin() + insertAt, std::move(h));
    return commit(std::move(c), hostPath(insertAt), true);
}

QString ProfileModel::removeHost(int hostIndex)
{
    return removeHosts({hostIndex});
}

QString ProfileModel::removeHosts(std::vector<int> hosts)
{
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    for (const int h : hosts)
        if (h < 0 || h >= int(m_profile.hosts.size()))
            return refuse(tr("no host %1 in the profile").arg(h));
    ClusterProfile c = m_profile;
    for (auto it = hosts.rbegin(); it != hosts.rend(); ++it) { // from the last, so the indices hold
        const std::string name = c.hosts[size_t(*it)].name;
        c.hosts.erase(c.hosts.begin() + *it);
        for (GroupSpec &g : c.grouping.groups)
            std::erase(g.hosts, name);
    }
    return commit(std::move(c), {}, true);
}

QString ProfileModel::removeGroup(int groupRow)
{
    if (groupRow < 0 || groupRow >= groupCount())
        return refuse(tr("no group %1").arg(groupRow));
    if (!m_groups[size_t(groupRow)].hosts.empty())
        return refuse(tr("groups[%1]: group \"%2\" still has hosts; move or remove them first")
                          .arg(groupRow)
                          .arg(m_groups[size_t(groupRow)].name));
    if (m_profile.grouping.mode != GroupingSpec::Mode::Explicit || groupRow >= int(m_profile.grouping.groups.size()))
        return {};
    ClusterProfile c = m_profile;
    c.grouping.groups.erase(c.grouping.groups.begin() + groupRow);
    return commit(std::move(c), {}, true);
}

QString ProfileModel::moveHost(int hostIndex, int delta)
{
    const int to = hostIndex + delta;
    if (hostIndex < 0 || hostIndex >= int(m_profile.hosts.size()) || to < 0 || to >= int(m_profile.hosts.size()))
        return {};
    ClusterProfile c = m_profile;
    std::swap(c.hosts[size_t(hostIndex)], c.hosts[size_t(to)]);
    return commit(std::move(c), {}, true);
}

std::vector<int> ProfileModel::moveHosts(std::vector<int> hosts, int delta)
{
    std::sort(hosts.begin(), hosts.end());
    hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
    const int n = int(m_profile.hosts.size());
    if (hosts.empty() || (delta != -1 && delta != 1) || hosts.front() < 0 || hosts.back() >= n
        || (delta < 0 ? hosts.front() == 0 : hosts.back() == n - 1))
        return {};
    ClusterProfile c = m_profile;
    // Up: from the first, each host swaps with the one above it (not selected: the block moved
    // already). Down: from the last, likewise.
    if (delta < 0)
        for (const int h : hosts)
            std::swap(c.hosts[size_t(h)], c.hosts[size_t(h - 1)]);
    else
        for (auto it = hosts.rbegin(); it != hosts.rend(); ++it)
            std::swap(c.hosts[size_t(*it)], c.hosts[size_t(*it + 1)]);
    if (!commit(std::move(c), {}, true).isEmpty())
        return {};
    for (int &h : hosts)
        h += delta;
    return hosts;
}

QString ProfileModel::moveHostToGroup(int hostIndex, int groupRow)
{
    if (hostIndex < 0 || hostIndex >= int(m_profile.hosts.size()) || groupRow < 0 || groupRow >= groupCount())
        return refuse(tr("no such host or group"));
    ClusterProfile c = m_profile;
    const std::string name = c.hosts[size_t(hostIndex)].name;
    // The host also moves behind the group's last host, so every group's ranks stay contiguous.
    const auto &target = m_groups[size_t(groupRow)].hosts;
    if (!target.empty() && std::find(target.begin(), target.end(), hostIndex) == target.end()) {
        int to = target.back();
        HostSpec moving = c.hosts[size_t(hostIndex)];
        c.hosts.erase(c.hosts.begin() + hostIndex);
        if (hostIndex < to)
            --to;
        c.hosts.insert(c.hosts.begin() + to + 1, std::move(moving));
        hostIndex = to + 1;
    }
    switch (c.grouping.mode) {
    case GroupingSpec::Mode::BySize:
        return refuse(tr("groups: with groups of a fixed size ranks are grouped by position; choose \"explicit\" grouping to move hosts between groups"));
    case GroupingSpec::Mode::ByLabel:
        c.hosts[size_t(hostIndex)].group = m_groups[size_t(groupRow)].name.toStdString();
        break;
    case GroupingSpec::Mode::ByHost:
    case GroupingSpec::Mode::Explicit: {
        const bool switched = c.grouping.mode != GroupingSpec::Mode::Explicit;
        makeExplicit(c);
        if (groupRow >= int(c.grouping.groups.size()))
            return refuse(tr("groups: \"%1\" is not a group; drop the host on a named group").arg(groupName(groupRow)));
        for (GroupSpec &g : c.grouping.groups)
            std::erase(g.hosts, name);
        c.grouping.groups[size_t(groupRow)].hosts.push_back(name);
        if (switched) {
            const QString r = commit(std::move(c), {}, true);
            if (r.isEmpty())
                Q_EMIT groupingChanged();
            return r;
        }
        break;
    }
    }
    return commit(std::move(c), {}, true);
}

QString ProfileModel::setGrouping(GroupingSpec::Mode mode, int size)
{
    ClusterProfile c = m_profile;
    if (mode == GroupingSpec::Mode::Explicit) {
        makeExplicit(c);
    } else {
        c.grouping.mode = mode;
        c.grouping.groups.clear();
        c.grouping.size = mode == GroupingSpec::Mode::BySize ? size : 0;
        if (mode == GroupingSpec::Mode::BySize && size < 1)
            return refuse(tr("groups: size:K needs K >= 1, got %1").arg(size));
    }
    if (c == m_profile)
        return {};
    // Switching modes may legitimately surface problems (by-label with hosts lacking labels); the
    // mode is the user's explicit choice, so it is applied and the problems are listed.
    beginResetModel();
    m_profile = std::move(c);
    rebuild();
    endResetModel();
    Q_EMIT profileEdited();
    return {};
}

QString ProfileModel::setLauncher(const QString &launcher)
{
    ClusterProfile c = m_profile;
    c.launcher = ss(launcher);
    if (c == m_profile)
        return {};
    // A "slurm" object belongs to the slurm launcher only (validateProfile says so): leaving it
    // puts the object aside, and coming back to it brings it back, so a look at another launcher
    // loses nothing.
    SlurmSpec aside = m_slurmAside;
    if (m_profile.launcher == "slurm" && c.launcher != "slurm") {
        aside = c.slurm;
        c.slurm = {};
    } else if (c.launcher == "slurm" && c.slurm == SlurmSpec{}) {
        c.slurm = m_slurmAside;
    }
    const QString refused = commit(std::move(c), u"launcher"_s, false);
    if (refused.isEmpty())
        m_slurmAside = aside;
    return refused;
}

QStringList ProfileModel::slurmProblems(const SlurmSpec &candidate) const
{
    ClusterProfile c = m_profile;
    c.slurm = candidate;
    QStringList out;
    for (const QString &p : problemsOf(c))
        if (p.startsWith(u"slurm"_s))
            out << p;
    return out;
}

QString ProfileModel::setSlurm(const SlurmSpec &slurm)
{
    if (m_profile.launcher != "slurm")
        return refuse(tr("slurm: the Slurm job applies to the slurm launcher only (this profile's launcher is \"%1\")")
                          .arg(qs(m_profile.launcher)));
    ClusterProfile c = m_profile;
    c.slurm = slurm;
    if (c == m_profile)
        return {};
    return commit(std::move(c), u"slurm"_s, false);
}

} // namespace cppl::app
