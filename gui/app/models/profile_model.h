// SPDX-License-Identifier: MIT
#pragma once

// The Cluster page's tree: groups -> hosts -> slots over a ClusterProfile. Every edit is checked
// with validateProfile() on a copy first; an edit that makes its own field invalid is refused with
// the profile's message (which names the field), so the profile held here never gains a problem
// through the editor. Problems that came in with a file are shown on their rows instead.

#include "cppl/cluster_profile.h"

#include <QAbstractItemModel>
#include <QMap>
#include <QStringList>

#include <vector>

namespace cppl::app {

class ProfileModel : public QAbstractItemModel
{
    Q_OBJECT

public:
    enum Column { ColName, ColAddress, ColSlots, ColRanks, ColRole, ColSsh, ColPreflight, ColumnCount };
    enum Role { HostIndexRole = Qt::UserRole + 1, GroupRowRole };
    enum class HostField { Name, Address, Slots, Label, SshAlias, SshUser, SshPort, SshIdentity, SshPassword, Agent, Workdir };

    explicit ProfileModel(QObject *parent = nullptr);

    void setProfile(const ClusterProfile &profile);
    /// The Evaluation page's tensor parallel N: the Ranks column names each rank's group (rank r is
    /// in group r / N), and slots N does not divide become problems. No edit of the cluster.
    void setTensorParallel(int n);
    /// The profile as edited, ready to save or run (explicit groups left empty are dropped).
    [[nodiscard]] ClusterProfile profile() const;
    /// validateProfile() of profile(), plus hosts without a name.
    [[nodiscard]] QStringList problems() const { return m_problems; }

    // Edits. Each returns an empty string when done, else why it was refused (field named); a
    // refusal is also emitted as editRefused().
    QString addGroup(const QString &name);
    QString addHost(int groupRow, const QString &name, int slots = 1);
    QString removeHost(int hostIndex);
    /// Several hosts in one edit, validated once (a profile without hosts is refused as any invalid edit is).
    QString removeHosts(std::vector<int> hostIndices);
    QString removeGroup(int groupRow);
    QString moveHost(int hostIndex, int delta);
    /// Moves every host of @p hostIndices one place up (@p delta -1) or down (+1) in one edit, as a
    /// block keeps its gaps; nothing moves when one of them is already first (last). The hosts'
    /// new indices, empty when nothing moved.
    std::vector<int> moveHosts(std::vector<int> hostIndices, int delta);
    QString moveHostToGroup(int hostIndex, int groupRow);
    QString setGrouping(GroupingSpec::Mode mode, int size = 0);
    /// Leaving "slurm" puts the profile's slurm object aside (another launcher may not have one);
    /// switching back restores it.
    QString setLauncher(const QString &launcher);
    /// The Slurm job (launcher "slurm" only); refused with the profile's message for a bad field.
    QString setSlurm(const SlurmSpec &slurm);
    /// The problems under "slurm" the profile would have with @p candidate (the form's inline checks).
    [[nodiscard]] QStringList slurmProblems(const SlurmSpec &candidate) const;
    QString setHostField(int hostIndex, HostField field, const QVariant &value);
    /// The same value for several hosts in one edit, validated once: all of them or none.
    QString setHostsField(const std::vector<int> &hostIndices, HostField field, const QVariant &value);
    QString renameGroup(int groupRow, const QString &name);
    /// The cluster's env (@p hostIndex -1) or a host's, replaced by @p env; refused with the
    /// profile's message (a bad name, device visibility: docs/profile.md).
    QString setEnvironment(int hostIndex, const std::map<std::string, std::string> &env);
    /// Pre-flight outcome for a host by name (shown in ColPreflight with the details as tooltip).
    void setPreflight(const QString &host, bool ok, const QString &summary, const QString &details);
    void clearPreflight();

    [[nodiscard]] int groupCount() const { return static_cast<int>(m_groups.size()); }
    [[nodiscard]] QString groupName(int groupRow) const;
    [[nodiscard]] QModelIndex indexOfHost(int hostIndex, int column = 0) const;
    [[nodiscard]] QModelIndex indexOfGroup(int groupRow) const;
    /// Host index of a host row or a slot row; -1 for a group row.
    [[nodiscard]] int hostIndexOf(const QModelIndex &index) const;
    /// Row and column a validateProfile() message refers to (invalid when it names no host/group).
    [[nodiscard]] QModelIndex indexOfProblem(const QString &message) const;

    QModelIndex index(int row, int column, const QModelIndex &parent = {}) const override;
    QModelIndex parent(const QModelIndex &child) const override;
    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
    Qt::ItemFlags flags(const QModelIndex &index) const override;
    bool setData(const QModelIndex &index, const QVariant &value, int role = Qt::EditRole) override;
    Qt::DropActions supportedDropActions() const override;
    QStringList mimeTypes() const override;
    QMimeData *mimeData(const QModelIndexList &indexes) const override;
    bool canDropMimeData(const QMimeData *data, Qt::DropAction action, int row, int column,
                         const QModelIndex &parent) const override;
    bool dropMimeData(const QMimeData *data, Qt::DropAction action, int row, int column,
                      const QModelIndex &parent) override;

Q_SIGNALS:
    void editRefused(const QString &message);
    /// Any change to the profile (for "modified" state and problem lists).
    void profileEdited();
    /// The grouping mode changed as a side effect (e.g. dragging a host made the groups explicit).
    void groupingChanged();

private:
    struct Group
    {
        QString name;
        std::vector<int> hosts; // indices into m_profile.hosts, in rank order
    };
    struct Preflight
    {
        bool ok = false;
        QString summary;
        QString details;
    };

    /// Applies @p candidate when it adds no problem under @p fieldPrefix; else refuses.
    QString commit(ClusterProfile candidate, const QString &fieldPrefix, bool structural);
    QString refuse(const QString &message);
    void rebuild();
    void makeExplicit(ClusterProfile &p) const;
    [[nodiscard]] std::vector<Group> deriveGroups(const ClusterProfile &p) const;
    [[nodiscard]] static QStringList problemsOf(const ClusterProfile &p);
    [[nodiscard]] int firstRankOf(int hostIndex) const;
    /// A host's child rows: its slots, or for a Slurm profile's login node the nodes Slurm will
    /// allocate (each with its tasks), since the login node runs no rank itself.
    [[nodiscard]] static int childRowsOf(const ClusterProfile &p, int hostIndex);
    [[nodiscard]] QVariant slurmData(const QModelIndex &index, int level) const;
    // data() of a group row, a host row (@p hostIndex) and a slot row (a rank of that host).
    [[nodiscard]] QVariant groupData(const QModelIndex &index, int role) const;
    [[nodiscard]] QVariant hostData(const QModelIndex &index, int hostIndex, int role) const;
    /// A host row's display and edit text; @p problems: its tooltip's problems (a mark on its name).
    [[nodiscard]] QVariant hostText(int hostIndex, int column, int role, const QString &problems) const;
    /// The SSH column: "user@address:port, key NAME, password allowed".
    [[nodiscard]] QString sshText(const HostSpec &host) const;
    [[nodiscard]] QVariant slotData(const QModelIndex &index, int hostIndex, int role) const;
    [[nodiscard]] QString hostTooltip(int hostIndex) const;

    ClusterProfile m_profile;
    std::vector<Group> m_groups;
    std::vector<int> m_firstRank;    // per host
    std::vector<int> m_rankGroup;    // per rank: layout group (valid profiles only)
    std::vector<int> m_leaders;      // layout group -> leader rank
    std::vector<QString> m_layoutGroupNames;
    QStringList m_problems;
    QMap<QString, Preflight> m_preflight;
    SlurmSpec m_slurmAside; // the slurm object while another launcher is chosen
};

} // namespace cppl::app
