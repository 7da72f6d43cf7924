// SPDX-License-Identifier: MIT
#include "run/preflight.h"

#include "run/run_engine.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QObject>

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
        // The host's env from the profile, as its ranks get it (NCCL found through its LD_LIBRARY_PATH,
        // its NCCL_SOCKET_IFNAME), without the ranks' identity or the run id.
        c.env.clear();
        for (const auto &kv : hostEnvironment(profile, profile.hosts[static_cast<std::size_t>(r.hostIndex)]))
            c.env.push_back(kv);
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
                why = u"its report is not JSON (%1 at byte %2 of %3: \"%4\")"_s.arg(pe.errorString())
                          .arg(pe.offset)
                          .arg(it->second.toUtf8().size())
                          .arg(it->second.size() > 120 ? it->second.left(60) + u" ... "_s + it->second.right(60) : it->second);
            else if (e == ends.end())
                why = u"no answer"_s;
            else if (!e->second.reason.isEmpty())
                why = e->second.reason;
            else
                why = (e->second.lastLines.isEmpty() ? QString() : e->second.lastLines.join(u" / "_s) + u"; "_s)
                      + u"exit %1"_s.arg(e->second.exitCode);
            const QString hint = core::agentStartHint(why, e == ends.end() ? -1 : e->second.exitCode);
            h.problems << u"pre-flight did not run (%1)"_s.arg(why) + (hint.isEmpty() ? QString() : u"; "_s + hint);
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

namespace {
QString gib(double bytes)
{
    return QString::number(bytes / (1024.0 * 1024.0 * 1024.0), 'f', 1) + u" GiB"_s;
}
} // namespace

QString preflightSummary(const QJsonObject &report, const QStringList &problems)
{
    if (report.isEmpty())
        return problems.isEmpty() ? QObject::tr("no report") : QObject::tr("✗ %1").arg(problems.front());
    QStringList parts;
    parts << (problems.isEmpty() ? u"✓"_s : u"✗"_s);
    parts << QObject::tr("agent %1").arg(report.value(u"agent_version"_s).toString());
    parts << QObject::tr("LibTorch %1").arg(report.value(u"libtorch_version"_s).toString());
    const QJsonArray gpus = report.value(u"cuda"_s).toObject().value(u"devices"_s).toArray();
    parts << (gpus.size() == 1 ? QObject::tr("1 GPU") : QObject::tr("%1 GPUs").arg(gpus.size()));
    parts << (report.value(u"nccl"_s).toObject().value(u"available"_s).toBool() ? QObject::tr("NCCL") : QObject::tr("no NCCL"));
    // An agent built against a pip torch may lack Gloo (CPU ranks then cannot be combined); an older report has no field.
    if (const QJsonValue gloo = report.value(u"gloo"_s).toObject().value(u"available"_s); gloo.isBool() && !gloo.toBool())
        parts << QObject::tr("no Gloo");
    parts << QObject::tr("%1 free").arg(gib(report.value(u"memory_available_bytes"_s).toDouble()));
    const QJsonArray paths = report.value(u"paths"_s).toArray();
    int unreadable = 0;
    for (const auto &p : paths)
        unreadable += p.toObject().value(u"status"_s).toString() != u"readable"_s;
    if (!paths.isEmpty())
        parts << (unreadable == 0 ? QObject::tr("paths ok") : QObject::tr("%1 of %2 paths unreadable").arg(unreadable).arg(paths.size()));
    if (!problems.isEmpty())
        parts << (problems.size() == 1 ? QObject::tr("1 problem") : QObject::tr("%1 problems").arg(problems.size()));
    return parts.join(u"  "_s);
}

QString preflightDetails(const QJsonObject &report, const QStringList &problems)
{
    QStringList lines;
    // A host without a report: its summary is its first problem already.
    for (qsizetype i = report.isEmpty() ? 1 : 0; i < problems.size(); ++i)
        lines << QObject::tr("refused: %1").arg(problems[i]);
    if (!report.isEmpty()) {
        lines << QObject::tr("agent %1 on %2, LibTorch %3")
                     .arg(report.value(u"agent_version"_s).toString(), report.value(u"host"_s).toString(),
                          report.value(u"libtorch_version"_s).toString());
        const QJsonObject cuda = report.value(u"cuda"_s).toObject();
        const QJsonArray gpus = cuda.value(u"devices"_s).toArray();
        if (gpus.isEmpty())
            lines << (cuda.value(u"libtorch_has_cuda"_s).toBool() ? QObject::tr("GPUs: none visible")
                                                                   : QObject::tr("GPUs: none (LibTorch built without CUDA)"));
        for (qsizetype i = 0; i < gpus.size(); ++i) {
            const QJsonObject g = gpus[i].toObject();
            lines << QObject::tr("GPU %1: %2, %3").arg(i).arg(g.value(u"name"_s).toString(), gib(g.value(u"memory_bytes"_s).toDouble()));
        }
        const QJsonObject nccl = report.value(u"nccl"_s).toObject();
        lines << (nccl.value(u"available"_s).toBool() ? QObject::tr("NCCL: available")
                                                       : QObject::tr("NCCL: not available (%1)").arg(nccl.value(u"reason"_s).toString()));
        // Said only when missing (an agent built against a pip torch without --gloo-include), as in the summary.
        if (const QJsonObject gloo = report.value(u"gloo"_s).toObject(); gloo.value(u"available"_s) == QJsonValue(false))
            lines << QObject::tr("Gloo: not available (%1)").arg(gloo.value(u"reason"_s).toString());
        lines << QObject::tr("memory: %1 available").arg(gib(report.value(u"memory_available_bytes"_s).toDouble()));
        for (const auto &p : report.value(u"paths"_s).toArray()) {
            const QJsonObject o = p.toObject();
            lines << QObject::tr("path %1: %2").arg(o.value(u"path"_s).toString(), o.value(u"status"_s).toString());
        }
        if (const QJsonObject m = report.value(u"master"_s).toObject(); !m.isEmpty())
            lines << QObject::tr("rendezvous %1:%2: %3")
                         .arg(m.value(u"addr"_s).toString())
                         .arg(m.value(u"port"_s).toInt())
                         .arg(m.value(u"status"_s).toString());
        if (const QJsonObject route = report.value(u"master"_s).toObject().value(u"route"_s).toObject(); !route.isEmpty()) {
            QString line = route.contains(u"error"_s) ? QObject::tr("route to the master: %1").arg(route.value(u"error"_s).toString())
                                                      : QObject::tr("route to the master: %1 (%2)")
                                                            .arg(route.value(u"interface"_s).toString(), route.value(u"source"_s).toString());
            for (const QString &v : {u"NCCL_SOCKET_IFNAME"_s, u"GLOO_SOCKET_IFNAME"_s})
                if (route.contains(v))
                    line += u"; %1=%2"_s.arg(v, route.value(v).toString());
            lines << line;
        }
    }
    return lines.join(u'\n');
}

} // namespace cppl::core::run
