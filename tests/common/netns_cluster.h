// SPDX-License-Identifier: MIT
// Hosts that are really separate, on one machine (issue 43): a test cluster of nodes, each a
// network namespace with its own address on a private bridge (one per rack; the racks joined by
// one link that can be rate-limited), its own hostname (UTS namespace) and /etc/hosts naming every
// node, its own sshd on port 22 of its address, and optionally a Slurm with one slurmd per node
// (NodeName=nodeN, NodeAddr its address) and slurmctld on this host ("head"). The file system is
// shared, as NFS is on a cluster. This host keeps an address on rack 1 (the workstation the CLI or
// dashboard runs on); no route leaves the machine.
//
// Robust by construction: tests/common/netns_cluster.sh owns the namespaces and links, named after
// this process (pid and a letter) and recorded in /run/clusterppl-netns; start() first removes any
// cluster whose owner is gone (a test that was killed), stop() and the destructor remove this one,
// and every daemon started here dies with this process (PR_SET_PDEATHSIG). Root only: start() says
// why it cannot run (a reason to skip with CPPL_SKIP_MISSING, a failure under CI=true).
#pragma once

#include "test_process.h"

#include <QList>
#include <QProcess>
#include <QString>
#include <QStringList>

#include <memory>
#include <vector>

namespace cppl::test {

class NetnsCluster
{
public:
    NetnsCluster() = default;
    ~NetnsCluster() { stop(); }
    NetnsCluster(const NetnsCluster &) = delete;
    NetnsCluster &operator=(const NetnsCluster &) = delete;

    /// Removes leftovers of killed runs, then makes @p nodes nodes (at most 9) in @p racks racks
    /// (1 or 2; rack 2 has the upper half) with every file under @p dir. Empty on success, else why not.
    QString start(const QString &dir, int nodes = 4, int racks = 2);
    /// An sshd on every node (port 22 of its address, its own host key), one client key, and an
    /// ssh_config with the aliases node1..nodeN (and "login" for node1) and a known_hosts that
    /// trusts every node's key. Empty on success, else why not.
    QString startSshd();
    /// munged and slurmctld on this host (as "head", the rack-1 bridge's address) and one slurmd per
    /// node; waits until every node is idle. Partition "debug" (default). Empty on success.
    QString startSlurm();
    /// Stops every daemon, kills what is left in the nodes, removes the namespaces and links.
    void stop();

    [[nodiscard]] int nodes() const { return m_nodes; }
    /// The address of node @p node (from 1), e.g. 10.77.3.2.
    [[nodiscard]] QString address(int node) const { return m_net + QLatin1Char('.') + QString::number(node); }
    /// This host's address on rack 1 (the workstation's; Slurm's controller "head").
    [[nodiscard]] QString hostAddress() const { return m_net + QStringLiteral(".254"); }
    [[nodiscard]] QString tag() const { return m_tag; }
    [[nodiscard]] QString path(const QString &name) const { return m_dir + QLatin1Char('/') + name; }
    [[nodiscard]] QString sshConfigFile() const { return path(QStringLiteral("ssh/ssh_config")); }
    [[nodiscard]] QString knownHosts() const { return path(QStringLiteral("ssh/known_hosts")); }
    [[nodiscard]] QString slurmConf() const { return path(QStringLiteral("slurm/slurm.conf")); }
    /// Sourced by a login shell before Slurm's clients (the Slurm profile's env_script).
    [[nodiscard]] QString slurmEnvScript() const { return path(QStringLiteral("slurm/slurm-env.sh")); }

    /// Runs @p command on node @p node (its network, hostname and hosts file) and waits.
    [[nodiscard]] ProcessResult exec(int node, const QStringList &command, int timeoutMs = 60000) const;
    /// Node @p node's link to its rack up or down (ip link set, the host's end).
    QString setLink(int node, bool up) const;
    /// A token bucket (tc tbf) of @p rate (e.g. "2mbit") and @p burst (at least one frame) on the
    /// link between the racks, both ways; "off" removes it.
    QString limitRacks(const QString &rate, const QString &burst = QStringLiteral("16kb")) const;
    /// The live processes in node @p node's network namespace.
    [[nodiscard]] QList<qint64> processesOn(int node) const;
    /// The node whose network namespace process @p pid is in; 0 when none (this host).
    [[nodiscard]] int nodeOf(qint64 pid) const;
    /// The end of a daemon's log under the cluster's directory (for failure messages).
    [[nodiscard]] QString tail(const QString &file) const;

    /// tests/common/netns_cluster.sh in the source tree.
    [[nodiscard]] static QString script();

private:
    QString daemon(const QString &name, const QStringList &command, int node);
    ProcessResult run(const QStringList &args, int timeoutMs = 60000) const;
    QString writeSlurmConf();

    QString m_dir, m_tag, m_net;
    int m_nodes = 0;
    bool m_up = false;
    std::vector<std::unique_ptr<QProcess>> m_daemons; ///< started last, stopped first
};

} // namespace cppl::test
