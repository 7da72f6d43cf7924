// SPDX-License-Identifier: MIT
#include "run/preflight.h"

#include "run/run_engine.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <set>

using namespace Qt::StringLiterals;

namespace cppl::core::run {

LaunchPlan preflightPlan(const ClusterProfile &profile, const LaunchPlan &plan)
{
    LaunchPlan pre = plan;
    pre.ranks.clear();
    std::set<int> seen;
    std::map<int, int> slots;
    for (const auto &r : plan.ranks)
        ++slots[r.hostIndex];
    for (const auto &r : plan.ranks) {
        if (!seen.insert(r.hostIndex).second)
            continue;
        RankCommand c = r;
        c.rank = static_cast<int>(pre.ranks.size());
        c.env.clear();
        auto argOf = [&](const std::string &flag) {
            for (std::size_t i = 0; i + 1 < r.argv.size(); ++i)
                if (r.argv[i] == flag)
                    return r.argv[i + 1];
            return std::string();
        };
        c.argv = {r.argv.front(), "preflight", "--json", "--model", argOf("--model")};
        for (const char *flag : {"--tokens", "--text"})
            if (const auto v = argOf(flag); !v.empty())
                c.argv.insert(c.argv.end(), {"--data", v});
        if (const auto t = argOf("--tokenizer"); !t.empty() && t != "bytes")
            c.argv.insert(c.argv.end(), {"--tokenizer", t});
        c.argv.insert(c.argv.end(), {"--backend", profile.evaluation.backend, "--slots", std::to_string(slots[r.hostIndex])});
        c.argv.insert(c.argv.end(), {"--master-addr", plan.masterAddr, "--master-port", std::to_string(plan.masterPort)});
        pre.ranks.push_back(std::move(c));
    }
    pre.keyLine.clear(); // pre-flight sends no telemetry
    return pre;
}

std::vector<HostPreflight> judgePreflight(const LaunchPlan &preflight, const std::map<int, QString> &json,
                                          const std::map<int, RankEnd> &ends)
{
    std::vector<HostPreflight> out;
    for (const auto &r : preflight.ranks) {
        HostPreflight h;
        h.hostIndex = r.hostIndex;
        h.host = QString::fromStdString(r.hostName);
        const auto it = json.find(r.rank);
        QJsonParseError pe{};
        const QJsonDocument doc = it == json.end() ? QJsonDocument() : QJsonDocument::fromJson(it->second.toUtf8(), &pe);
        if (!doc.isObject()) {
            const auto e = ends.find(r.rank);
            QString why;
            if (it != json.end())
                why = u"its report is not JSON (%1)"_s.arg(pe.errorString());
            else if (e == ends.end())
                why = u"no answer"_s;
            else if (!e->second.reason.isEmpty())
                why = e->second.reason;
            else
                why = (e->second.lastLines.isEmpty() ? QString() : e->second.lastLines.join(u" / "_s) + u"; "_s)
                      + u"exit %1"_s.arg(e->second.exitCode);
            h.problems << u"pre-flight did not run (%1)"_s.arg(why);
        } else {
            h.ran = true;
            h.report = doc.object();
            for (const auto &p : h.report.value(u"problems"_s).toArray())
                h.problems << p.toString();
        }
        out.push_back(std::move(h));
    }
    return out;
}

QStringList preflightRefusals(const std::vector<HostPreflight> &reports)
{
    QStringList refusals;
    QString firstVersion, firstHost;
    for (const auto &h : reports) {
        if (h.ran) {
            const QString version = h.report.value(u"agent_version"_s).toString();
            if (firstHost.isEmpty()) {
                firstVersion = version;
                firstHost = h.host;
            } else if (version != firstVersion) {
                refusals << u"host %1 runs agent %2 but host %3 runs %4: use one agent version everywhere"_s.arg(h.host, version, firstHost, firstVersion);
            }
        }
        for (const auto &p : h.problems)
            refusals << u"host %1: %2"_s.arg(h.host, p);
    }
    return refusals;
}

} // namespace cppl::core::run
