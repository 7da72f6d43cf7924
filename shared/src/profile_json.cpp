// SPDX-License-Identifier: MIT
// A profile back to its JSON form (profileToJson): what run.json and the history keep, and what the
// dashboard saves. The reading side, its checks and the rank layout are in cluster_profile.cpp.
#include "cppl/cluster_profile.h"

#include <nlohmann/json.hpp>

namespace cppl {

using nlohmann::ordered_json;

namespace {

ordered_json hostJson(const HostSpec &h)
{
    ordered_json j = {{"name", h.name}, {"slots", h.slots}};
    if (!h.address.empty())
        j["address"] = h.address;
    ordered_json ssh = ordered_json::object();
    if (!h.ssh.alias.empty())
        ssh["alias"] = h.ssh.alias;
    if (!h.ssh.user.empty())
        ssh["user"] = h.ssh.user;
    if (h.ssh.port != 22)
        ssh["port"] = h.ssh.port;
    if (!h.ssh.identityFile.empty())
        ssh["identity_file"] = h.ssh.identityFile;
    if (h.ssh.passwordAuth)
        ssh["password_auth"] = true;
    if (!ssh.empty())
        j["ssh"] = ssh;
    if (!h.devices.empty())
        j["devices"] = h.devices;
    static const HostSpec kDefault; // a named default: GCC 12 misreads a temporary's members as uninitialised here
    if (h.agent != kDefault.agent)
        j["agent"] = h.agent;
    if (!h.workdir.empty())
        j["workdir"] = h.workdir;
    if (!h.env.empty())
        j["env"] = h.env;
    if (!h.group.empty())
        j["group"] = h.group;
    return j;
}

ordered_json slurmJson(const SlurmSpec &s)
{
    ordered_json sl = {{"nodes", s.nodes}, {"ntasks_per_node", s.ntasksPerNode}};
    for (const auto &[key, value] : {std::pair<const char *, const std::string *>{"partition", &s.partition}, {"account", &s.account},
                                     {"qos", &s.qos}, {"time_limit", &s.timeLimit}, {"constraint", &s.constraint},
                                     {"agent", &s.agent}, {"env_script", &s.envScript}})
        if (!value->empty())
            sl[key] = *value;
    if (s.gpusPerNode > 0)
        sl["gpus_per_node"] = s.gpusPerNode;
    if (!s.sbatchOptions.empty())
        sl["sbatch_options"] = s.sbatchOptions;
    if (!s.modules.empty())
        sl["modules"] = s.modules;
    static const SlurmSpec kDefault;
    if (s.jobDir != kDefault.jobDir)
        sl["job_dir"] = s.jobDir;
    return sl;
}

ordered_json groupingJson(const GroupingSpec &g)
{
    switch (g.mode) {
    case GroupingSpec::Mode::ByHost: return "by-host";
    case GroupingSpec::Mode::ByLabel: return "by-label";
    case GroupingSpec::Mode::BySize: return "size:" + std::to_string(g.size);
    case GroupingSpec::Mode::Explicit: break;
    }
    ordered_json groups = ordered_json::array();
    for (const GroupSpec &gs : g.groups)
        groups.push_back({{"name", gs.name}, {"hosts", gs.hosts}});
    return groups;
}

/// The quantization and reference fields, each only when it is not the default (older readers
/// and saved profiles stay as they were).
void addQuantization(const EvaluationSpec &e, ordered_json &ev)
{
    const EvaluationSpec d;
    if (e.quantize != d.quantize)
        ev["quantize"] = e.quantize;
    if (e.quantGroup != d.quantGroup)
        ev["quant_group"] = e.quantGroup;
    if (e.quantizeHead)
        ev["quantize_head"] = true;
    if (!e.referenceModel.empty())
        ev["reference_model"] = e.referenceModel;
    if (e.referenceDtype != d.referenceDtype)
        ev["reference_dtype"] = e.referenceDtype;
    if (e.referenceQuantize != d.referenceQuantize)
        ev["reference_quantize"] = e.referenceQuantize;
}

ordered_json evaluationJson(const EvaluationSpec &e)
{
    ordered_json ev = {{"tokenizer", e.tokenizer}, {"protocol", e.protocol}, {"context", e.context}, {"stride", e.stride},
                       {"batch", e.batch == kAutoBatch ? ordered_json("auto") : ordered_json(e.batch)}, {"dtype", e.dtype}, {"device", e.device},
                       {"backend", e.backend}, {"topology", e.topology}, {"schedule", e.schedule}};
    ev["on_rank_loss"] = e.onRankLoss; // always: a saved profile says what ran, whatever a later default
    if (!e.overlapSync)
        ev["overlap_sync"] = false;
    if (e.tensorParallel != 1)
        ev["tensor_parallel"] = e.tensorParallel;
    if (e.loadTimeoutSeconds != EvaluationSpec{}.loadTimeoutSeconds) // the default left out: profiles save as before
        ev["load_timeout"] = e.loadTimeoutSeconds;
    if (!e.model.empty())
        ev["model"] = e.model;
    if (!e.tokens.empty())
        ev["tokens"] = e.tokens;
    if (!e.text.empty())
        ev["text"] = e.text;
    if (e.maxWindows != 0)
        ev["max_windows"] = e.maxWindows;
    addQuantization(e, ev);
    return ev;
}

} // namespace

std::string profileToJson(const ClusterProfile &p)
{
    ordered_json root = ordered_json::object();
    root["format"] = "clusterppl-profile";
    root["version"] = ClusterProfile::kVersion;
    if (!p.name.empty())
        root["name"] = p.name;
    root["launcher"] = p.launcher;
    if (!p.env.empty())
        root["env"] = p.env;
    ordered_json hosts = ordered_json::array();
    for (const HostSpec &h : p.hosts)
        hosts.push_back(hostJson(h));
    root["hosts"] = std::move(hosts);
    if (p.launcher == "slurm" || p.slurm != SlurmSpec{})
        root["slurm"] = slurmJson(p.slurm);
    root["groups"] = groupingJson(p.grouping);
    root["evaluation"] = evaluationJson(p.evaluation);
    const Thresholds &t = p.thresholds;
    root["thresholds"] = {{"sync_every_tokens", t.syncEveryTokens},
                          {"deviation_tolerance", t.deviationTolerance},
                          {"comm_share_alert", t.commShareAlert},
                          {"stall_seconds", t.stallSeconds},
                          {"collective_timeout_seconds", t.collectiveTimeoutSeconds}};
    return root.dump(2) + "\n";
}

} // namespace cppl
