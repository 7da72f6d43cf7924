// SPDX-License-Identifier: MIT
#include "history/sweep.h"

#include "cppl/errors.h"

#include <QStringList>

#include <algorithm>
#include <set>

using namespace Qt::StringLiterals;

namespace cppl::core::history {

ClusterProfile profileForRanks(const ClusterProfile &profile, int ranks)
{
    int total = 0;
    for (const auto &h : profile.hosts)
        total += h.slots;
    if (ranks < 1 || ranks > total)
        throw ConfigError(QString(u"--nodes: %1 ranks asked for, but the profile \"%2\" has %3 slots in all; "
                                  "add hosts or slots to it, or ask for at most %3"_s.arg(ranks).arg(QString::fromStdString(profile.name)).arg(total))
                              .toStdString());
    ClusterProfile p = profile;
    p.hosts.clear();
    int left = ranks;
    for (const auto &h : profile.hosts) {
        if (left == 0)
            break;
        HostSpec host = h;
        host.slots = std::min(h.slots, left);
        if (!host.devices.empty())
            host.devices.resize(static_cast<std::size_t>(host.slots));
        left -= host.slots;
        p.hosts.push_back(std::move(host));
    }
    std::set<std::string> kept;
    for (const auto &h : p.hosts)
        kept.insert(h.name);
    if (p.grouping.mode == GroupingSpec::Mode::Explicit) {
        std::vector<GroupSpec> groups;
        for (GroupSpec g : p.grouping.groups) {
            std::erase_if(g.hosts, [&](const std::string &h) { return !kept.count(h); });
            if (!g.hosts.empty())
                groups.push_back(std::move(g));
        }
        p.grouping.groups = std::move(groups);
    } else if (p.grouping.mode == GroupingSpec::Mode::BySize && p.grouping.size > ranks) {
        p.grouping.size = ranks;
    }
    if (!p.name.empty())
        p.name += "-" + std::to_string(ranks) + "r";
    return p;
}

std::vector<int> parseRankList(const QString &list)
{
    std::set<int> out;
    const QStringList items = list.split(u',', Qt::SkipEmptyParts);
    if (items.isEmpty())
        throw ConfigError("--nodes: expected a list of rank counts such as 1,2,4,8");
    for (const QString &item : items) {
        bool ok = false;
        const int n = item.trimmed().toInt(&ok);
        if (!ok || n < 1 || n > 4096)
            throw ConfigError(QString(u"--nodes: \"%1\" is not a rank count 1-4096 (expected e.g. 1,2,4,8)"_s.arg(item)).toStdString());
        out.insert(n);
    }
    return {out.begin(), out.end()};
}

ClusterProfile profileWithPrecision(ClusterProfile profile, const QString &quantize, const QString &reference)
{
    EvaluationSpec &e = profile.evaluation;
    e.quantize = quantize.toStdString();
    if (!reference.isEmpty())
        e.referenceModel = reference.toStdString();
    else if (e.referenceModel.empty())
        e.referenceModel = e.model;
    return profile;
}

std::vector<SweepRun> planSweep(const ClusterProfile &profile, const std::vector<int> &counts, const QStringList &precisions,
                                const QString &reference)
{
    std::vector<SweepRun> runs;
    for (int n : counts) {
        const ClusterProfile sized = profileForRanks(profile, n);
        if (precisions.isEmpty()) {
            runs.push_back({sized, n, {}, u"r%1"_s.arg(n)});
            continue;
        }
        for (const QString &q : precisions)
            runs.push_back({profileWithPrecision(sized, q, reference), n, q, u"r%1-%2"_s.arg(n).arg(q)});
    }
    return runs;
}

} // namespace cppl::core::history
