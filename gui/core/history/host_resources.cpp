// SPDX-License-Identifier: MIT
#include "history/host_resources.h"

#include "cppl/counted.h"

#include <QJsonDocument>

#include <map>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

namespace {

/// The index in @p hosts of the host named @p name; -1 when none is.
int hostIndex(const QJsonArray &hosts, const QString &name)
{
    for (qsizetype i = 0; i < hosts.size(); ++i)
        if (hosts[i].toObject().value(u"name"_s).toString() == name)
            return int(i);
    return -1;
}

void setIfAbsent(QJsonArray &hosts, int i, const QString &key, const QJsonValue &value)
{
    QJsonObject h = hosts[i].toObject();
    if (h.contains(key) || !value.isDouble())
        return;
    h.insert(key, value.toInt());
    hosts[i] = h;
}

} // namespace

void recordHostResources(RunRecord &run)
{
    for (const QJsonValue &v : std::as_const(run.preflight)) {
        const QJsonObject entry = v.toObject();
        const QJsonObject report = entry.value(u"report"_s).toObject();
        const int i = hostIndex(run.hosts, entry.value(u"host"_s).toString());
        if (i < 0 || report.isEmpty())
            continue;
        setIfAbsent(run.hosts, i, u"cpus"_s, report.value(u"cpus"_s).toObject().value(u"allowed"_s));
        const QJsonValue cuda = report.value(u"cuda"_s);
        if (cuda.isObject())
            setIfAbsent(run.hosts, i, u"gpus"_s, QJsonValue(cuda.toObject().value(u"devices"_s).toArray().size()));
    }
    // Rank 0 runs on the first host (ranks are numbered host by host) and says what it could use.
    const QJsonObject result = QJsonDocument::fromJson(run.resultJson).object();
    if (!run.hosts.isEmpty())
        setIfAbsent(run.hosts, 0, u"cpus"_s, result.value(u"cpus"_s).toObject().value(u"allowed"_s));
}

bool ranOnGpus(const RunRecord &run)
{
    const QString ran = QJsonDocument::fromJson(run.resultJson).object().value(u"device"_s).toString();
    if (!ran.isEmpty())
        return ran.startsWith(u"cuda"_s);
    const QString asked = run.settings.value(u"device"_s).toString();
    if (asked == u"cuda"_s || asked == u"cpu"_s)
        return asked == u"cuda"_s;
    for (const QJsonValue &h : run.hosts) // auto: a GPU when the agents see one
        if (h.toObject().value(u"gpus"_s).toInt() > 0)
            return true;
    return false;
}

QString SharedHost::text() const
{
    return u"%1 share the %2 of %3"_s.arg(QString::fromStdString(cppl::counted(ranks, "rank", "ranks")),
                                          QString::fromStdString(gpus ? cppl::counted(capacity, "GPU", "GPUs")
                                                                      : cppl::counted(capacity, "CPU core", "CPU cores")),
                                          host);
}

std::vector<SharedHost> sharedHosts(const RunRecord &run)
{
    if (run.launcher == u"slurm"_s) // the hosts are the login node; the ranks run on the allocation
        return {};
    const bool gpus = ranOnGpus(run);
    const QString key = gpus ? u"gpus"_s : u"cpus"_s;
    // One machine per address (a local run: all of them on this one).
    struct Machine
    {
        QString name;
        int ranks = 0;
        int capacity = 0; // 0: not known
    };
    std::map<QString, Machine> machines;
    std::vector<QString> order;
    for (const QJsonValue &v : run.hosts) {
        const QJsonObject h = v.toObject();
        const QString name = h.value(u"name"_s).toString();
        const QString at = run.launcher == u"local"_s ? QString() : h.value(u"address"_s).toString(name);
        auto [it, added] = machines.try_emplace(at, Machine{name, 0, 0});
        if (added)
            order.push_back(at);
        it->second.ranks += h.value(u"slots"_s).toInt();
        it->second.capacity = std::max(it->second.capacity, h.value(key).toInt());
    }
    std::vector<SharedHost> out;
    for (const QString &at : order) {
        const Machine &m = machines.at(at);
        if (m.capacity > 0 && m.ranks > m.capacity)
            out.push_back({m.name, m.ranks, m.capacity, gpus});
    }
    return out;
}

} // namespace cppl::core::history
