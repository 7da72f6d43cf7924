// SPDX-License-Identifier: MIT
#include "launch_plan.h"

#include "cppl/errors.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace cppl::core {

namespace {

std::string resolve(const std::string &path, const std::string &base)
{
    if (path.empty() || base.empty() || std::filesystem::path(path).is_absolute() || path == "bytes")
        return path;
    return (std::filesystem::path(base) / path).lexically_normal().string();
}

std::string groupsList(const RankLayout &layout)
{
    std::string s;
    for (const auto &g : layout.groups) {
        if (!s.empty())
            s += ';';
        for (std::size_t i = 0; i < g.ranks.size(); ++i)
            s += (i ? "," : "") + std::to_string(g.ranks[i]);
    }
    return s;
}

} // namespace

bool readsKeyLine(const RankCommand &rank)
{
    return std::find(rank.argv.begin(), rank.argv.end(), kKeysStdinFlag) != rank.argv.end();
}

std::string shellQuote(std::string_view value, std::string_view what)
{
    for (const char c : value)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            throw ConfigError(std::string(what) + ": contains a control character (code " + std::to_string(static_cast<int>(c))
                              + "); remove it from the profile");
    std::string out = "'";
    for (const char c : value) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

std::string remoteCommand(const RankCommand &r)
{
    const std::string who = "host " + r.hostName + ", rank " + std::to_string(r.rank);
    std::string cmd;
    if (!r.workdir.empty())
        cmd += "cd " + shellQuote(r.workdir, who + ": workdir") + " && ";
    cmd += "exec env";
    for (const auto &[k, v] : r.env) {
        for (const char c : k)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
                throw ConfigError(who + ": environment variable name \"" + k + "\" is not a valid name");
        cmd += " " + shellQuote(k + "=" + v, who + ": env " + k);
    }
    for (const auto &a : r.argv)
        cmd += " " + shellQuote(a, who + ": argument");
    return cmd;
}

namespace {

/// A rank's environment: torchrun's identity and rendezvous, the run id, then the profile's env for
/// its host. Nothing of the launching machine's environment: its CUDA_VISIBLE_DEVICES,
/// NCCL_SOCKET_IFNAME or LD_LIBRARY_PATH describe that machine, not the nodes (issue 43).
std::vector<std::pair<std::string, std::string>> rankEnv(const RankInfo &ri, int worldSize, const ClusterProfile &profile, const HostSpec &h,
                                                         const LaunchPlan &plan, const LaunchOptions &o, bool ownStore)
{
    std::vector<std::pair<std::string, std::string>> env = {{"RANK", std::to_string(ri.rank)},
                                                            {"WORLD_SIZE", std::to_string(worldSize)},
                                                            {"LOCAL_RANK", std::to_string(ri.localRank)},
                                                            {"LOCAL_WORLD_SIZE", std::to_string(h.slots)},
                                                            {"MASTER_ADDR", plan.masterAddr},
                                                            {"MASTER_PORT", std::to_string(plan.masterPort)},
                                                            {"CLUSTERPPL_RUN_ID", o.runId}};
    if (ownStore)
        env.emplace_back("TORCHELASTIC_USE_AGENT_STORE", "True");
    for (const auto &[k, v] : hostEnvironment(profile, h))
        env.emplace_back(k, v);
    return env;
}

/// `AGENT eval ...`: every evaluation setting as a flag; relative paths against @p base.
/// evaluation.quantize ... reference_quantize as the agents' flags, each only when it is not the
/// default (the command lines of float runs stay as they were).
void appendQuantization(const EvaluationSpec &e, const std::string &base, std::vector<std::string> &a)
{
    if (e.quantize != "none")
        a.insert(a.end(), {"--quantize", e.quantize});
    if (e.quantGroup != 32)
        a.insert(a.end(), {"--quant-group", std::to_string(e.quantGroup)});
    if (e.quantizeHead)
        a.emplace_back("--quantize-head");
    if (e.referenceModel.empty())
        return;
    a.insert(a.end(), {"--reference-model", resolve(e.referenceModel, base)});
    if (e.referenceDtype != "auto")
        a.insert(a.end(), {"--reference-dtype", e.referenceDtype});
    if (e.referenceQuantize != "none")
        a.insert(a.end(), {"--reference-quantize", e.referenceQuantize});
}

std::vector<std::string> evalArgv(const ClusterProfile &profile, const HostSpec &h, const LaunchPlan &plan, const LaunchOptions &o,
                                  const std::string &base, bool keysOnStdin)
{
    const EvaluationSpec &e = profile.evaluation;
    std::vector<std::string> a;
    a.push_back(o.agentOverride.empty() ? h.agent : o.agentOverride);
    a.push_back("eval");
    a.insert(a.end(), {"--model", resolve(e.model, base)});
    if (!e.tokens.empty())
        a.insert(a.end(), {"--tokens", resolve(e.tokens, base)});
    else
        a.insert(a.end(), {"--text", resolve(e.text, base), "--tokenizer", resolve(e.tokenizer, base)});
    a.insert(a.end(), {"--protocol", e.protocol, "--context", std::to_string(e.context)});
    if (e.batch != kAutoBatch) // "auto": the agent sizes it (from free memory on a GPU)
        a.insert(a.end(), {"--batch", std::to_string(e.batch)});
    else if (o.resumeBatch > 0 && !o.resumeState.empty()) // a resumed auto run: the batch it used
        a.insert(a.end(), {"--batch", std::to_string(o.resumeBatch)});
    if (e.stride > 0)
        a.insert(a.end(), {"--stride", std::to_string(e.stride)});
    if (e.maxWindows > 0)
        a.insert(a.end(), {"--max-windows", std::to_string(e.maxWindows)});
    if (e.dtype != "auto") // "auto": the agent's own default, bfloat16 on a GPU and float32 on the CPU
        a.insert(a.end(), {"--dtype", e.dtype});
    appendQuantization(e, base, a);
    if (!h.devices.empty()) { // the host's GPUs, local rank L on the L-th (the agent checks them against what it sees)
        std::string list;
        for (const int d : h.devices)
            list += (list.empty() ? "" : ",") + std::to_string(d);
        a.insert(a.end(), {"--devices", list});
    }
    a.insert(a.end(), {"--device", e.device, "--backend", e.backend, "--topology", e.topology, "--groups", plan.groups, "--schedule", e.schedule});
    const std::int64_t sync = profile.thresholds.syncEveryTokens;
    a.insert(a.end(), {"--sync-every-tokens", sync < 0 ? std::string("end") : std::to_string(sync)});
    a.insert(a.end(), {"--timeout", std::to_string(std::max<std::int64_t>(1, static_cast<std::int64_t>(profile.thresholds.collectiveTimeoutSeconds)))});
    a.insert(a.end(), {"--load-timeout", std::to_string(std::max<std::int64_t>(1, static_cast<std::int64_t>(e.loadTimeoutSeconds)))});
    // Always said, like --schedule, so every launcher's command line (local, SSH, the Slurm
    // script's srun) shows it, whatever an agent's own default.
    a.insert(a.end(), {"--on-rank-loss", e.onRankLoss});
    a.insert(a.end(), {"--overlap-sync", e.overlapSync ? "on" : "off"});
    if (e.tensorParallel != 1) // 1 is the agents' default
        a.insert(a.end(), {"--tensor-parallel", std::to_string(e.tensorParallel)});
    // A host's OMP_NUM_THREADS, when the profile sets it, overrides the agent's default (its CPUs / local
    // ranks). With the native float32 kernels the bits do not depend on it; with --gemm blas|onednn
    // they do, so such runs keep one thread count everywhere (docs/models.md, docs/speed.md).
    const auto env = hostEnvironment(profile, h);
    if (const auto it = env.find("OMP_NUM_THREADS"); it != env.end())
        a.insert(a.end(), {"--threads", it->second});
    if (const auto it = env.find("OPENBLAS_NUM_THREADS"); it != env.end())
        a.insert(a.end(), {"--blas-threads", it->second});
    // The lines of the agent protocol (docs/agent-lines.md): the result, committed rounds for the
    // run directory, lost ranks; and the state a resumed run starts from.
    a.insert(a.end(), {"--exit-on-stdin-eof", "--result-line"});
    // Committed rounds for the run directory (under --tensor-parallel, the groups' leaders' lines).
    a.emplace_back("--checkpoint-lines");
    if (!o.resumeState.empty())
        a.insert(a.end(), {"--resume-state", o.resumeState});
    if (!o.telemetry.empty())
        a.insert(a.end(), {"--telemetry", o.telemetry});
    if (keysOnStdin)
        a.emplace_back(kKeysStdinFlag);
    return a;
}

/// A tolerant run's `clusterppl-agent store` on rank 0's host, with rank 0's environment (the run
/// id finds it among the run's processes; LD_LIBRARY_PATH and the host's env as for the agents)
/// without the rank's identity.
RankCommand storeCommand(const RankCommand &zero, bool local, int port)
{
    RankCommand st;
    st.rank = -1;
    st.hostIndex = zero.hostIndex;
    st.hostName = zero.hostName;
    st.address = zero.address;
    st.ssh = zero.ssh;
    st.workdir = zero.workdir;
    for (const auto &kv : zero.env)
        if (kv.first != "RANK" && kv.first != "WORLD_SIZE" && kv.first != "LOCAL_RANK" && kv.first != "LOCAL_WORLD_SIZE"
            && kv.first != "TORCHELASTIC_USE_AGENT_STORE")
            st.env.push_back(kv);
    // Local runs stay on loopback; elsewhere every host's ranks connect (TCPStore of LibTorch
    // 1.13 listens on every interface anyway).
    st.argv = {zero.argv.front(), "store", "--port", std::to_string(port), "--bind", local ? "127.0.0.1" : "0.0.0.0"};
    return st;
}

} // namespace

LaunchPlan buildLaunchPlan(const ClusterProfile &profile, const LaunchOptions &o)
{
    const RankLayout layout = rankLayout(profile);
    LaunchPlan plan;
    plan.launcher = profile.launcher;
    plan.groups = groupsList(layout);
    const HostSpec &first = profile.hosts.front();
    plan.masterAddr = !o.masterAddr.empty() ? o.masterAddr
                      : profile.launcher == "local" ? "127.0.0.1"
                      : !first.address.empty()      ? first.address
                                                    : first.name;
    plan.masterPort = o.masterPort;
    const bool local = profile.launcher == "local";
    const bool keysOnStdin = !o.telemetry.empty() && o.telemetryCredentials.has_value();
    if (keysOnStdin)
        plan.keyLine = cppl::telemetry::formatKeyLine(*o.telemetryCredentials);
    // A tolerant run's store must outlive any rank, rank 0 included: a process of its own on the
    // master host (docs/launching.md, "Losing a rank").
    const bool ownStore = profile.evaluation.onRankLoss == "continue";
    for (const RankInfo &ri : layout.ranks) {
        const HostSpec &h = profile.hosts[static_cast<std::size_t>(ri.hostIndex)];
        RankCommand c;
        c.rank = ri.rank;
        c.hostIndex = ri.hostIndex;
        c.hostName = h.name;
        c.address = h.address.empty() ? h.name : h.address;
        c.ssh = h.ssh;
        c.workdir = h.workdir;
        c.env = rankEnv(ri, layout.worldSize(), profile, h, plan, o, ownStore);
        c.argv = evalArgv(profile, h, plan, o, local ? o.profileDir : std::string(), keysOnStdin);
        plan.ranks.push_back(std::move(c));
    }
    if (ownStore && !plan.ranks.empty())
        plan.store = storeCommand(plan.ranks.front(), local, plan.masterPort);
    return plan;
}

} // namespace cppl::core
