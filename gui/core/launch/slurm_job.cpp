// SPDX-License-Identifier: MIT
#include "slurm_job.h"

#include "cppl/agent_lines.h"
#include "cppl/counted.h"
#include "cppl/errors.h"

#include <QByteArray>

#include <algorithm>
#include <charconv>

namespace cppl::core {

namespace {

std::string base64(const std::string &s)
{
    return QByteArray::fromStdString(s).toBase64().toStdString();
}

/// One argument of a script line: quoted, except the placeholders, which become variables.
std::string scriptWord(const std::string &a, std::string_view what)
{
    if (a == kSlurmMasterPlaceholder)
        return "\"$MASTER_ADDR\"";
    if (a == kSlurmRelayPlaceholder)
        return "\"$CPPL_RELAY\"";
    return shellQuote(a, what);
}

std::string words(const std::vector<std::string> &argv, std::string_view what)
{
    std::string s;
    for (const auto &a : argv)
        s += (s.empty() ? "" : " ") + scriptWord(a, what);
    return s;
}

// The driver, on the login node for the job's whole life. Its stdout is the launcher's only view of
// the job: "@cppl ..." lines (its own), "@o"/"@e" lines (the job's stdout/stderr, as srun -l labels
// them). Its stdin carries the telemetry key line (when asked) and then the launcher's decisions;
// EOF there means the launcher is gone or stopping, and cancels the job.
constexpr const char *kDriver = R"SH(set -u
umask 077
say() { printf '@cppl %s\n' "$*"; }
dir="$CPPL_DIR"
mkdir -p "$dir" && cd "$dir" || { say done "cannot create the job directory $dir on $(hostname)"; exit 3; }
printf '%s' "$CPPL_BATCH" | base64 -d > job.sbatch || { say done "cannot write $PWD/job.sbatch"; exit 3; }
say saved "$PWD/job.sbatch"
if [ -n "${CPPL_ENV_SCRIPT:-}" ]; then
  . "$CPPL_ENV_SCRIPT" || { say done "sourcing $CPPL_ENV_SCRIPT failed on $(hostname)"; exit 3; }
fi
command -v sbatch >/dev/null 2>&1 || { say submit-failed "sbatch is not on PATH on $(hostname) (set slurm.env_script or slurm.modules)"; exit 4; }
exec 3<&0
relay_pid=
# A job directory reused (the same run id again, a resume) holds the last job's files: none of
# them may pass for this job's (a stale gate would skip the launcher's decision).
rm -f relay.endpoint agent.keys collector.keys gate gate.tmp preflight.done preflight.*.out preflight.*.err result.json job.out job.err
# "--telemetry ENDPOINT --telemetry-keys-stdin": the SSH launcher's reverse tunnel to the collector
# and the run's key line on stdin; absent when the login node refused the tunnel.
if [ "${1:-}" = --telemetry ]; then
  IFS= read -r keys <&3 || { say done "no telemetry keys on stdin"; exit 3; }
  printf '%s\n' "$keys" > collector.keys
  unset keys
  "$CPPL_AGENT" relay --forward "$2" --keys-file collector.keys --agent-keys-out agent.keys \
      --bind "tcp://0.0.0.0:0" --endpoint-out relay.endpoint > relay.log 2>&1 &
  relay_pid=$!
  i=0
  while [ ! -s relay.endpoint ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  if [ -s relay.endpoint ]; then say relay "$(cat relay.endpoint)"; else say relay "failed: $(tail -n 3 relay.log | tr '\n' ' ')"; fi
fi
out=$(sbatch --parsable job.sbatch 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
  say submit-failed "$(printf '%s' "$out" | tr '\n' ' ')"
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null
  exit 4
fi
job=${out%%;*}
say job "$job"
touch job.out job.err
tail --pid=$$ -n +1 -f job.out 2>/dev/null | while IFS= read -r l; do printf '@o %s\n' "$l"; done &
tail --pid=$$ -n +1 -f job.err 2>/dev/null | while IFS= read -r l; do printf '@e %s\n' "$l"; done &
(
  while IFS= read -r cmd <&3; do
    case "$cmd" in
      go) echo go > gate.tmp && mv gate.tmp gate ;;
      refuse) echo refuse > gate.tmp && mv gate.tmp gate ;;
    esac
  done
  scancel "$job" 2>/dev/null
) &
watcher=$!
trap 'scancel "$job" 2>/dev/null' HUP TERM INT
field() { printf '%s\n' "$info" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
last=
sent=
missing=0
while :; do
  info=$(scontrol -o show job "$job" 2>/dev/null)
  if [ -z "$info" ]; then
    missing=$((missing+1))
    [ $missing -ge 10 ] && { state=UNKNOWN; say state "UNKNOWN|scontrol no longer knows job $job|"; break; }
    sleep 1; continue
  fi
  state=$(field JobState); reason=$(field Reason); nodes=$(field NodeList); code=$(field ExitCode)
  cur="$state|$reason|$nodes|$code"
  [ "$cur" != "$last" ] && say state "$cur"
  last=$cur
  if [ -z "$sent" ] && [ -e preflight.done ]; then
    sent=1
    for f in preflight.*.out; do
      [ -e "$f" ] || continue
      t=${f#preflight.}; t=${t%.out}
      while IFS= read -r l || [ -n "$l" ]; do say pf "$t: $l"; done < "$f"
      [ -e "preflight.$t.err" ] && while IFS= read -r l || [ -n "$l" ]; do say pferr "$t: $l"; done < "preflight.$t.err"
    done
    say preflight-done "$(cat preflight.done)"
  fi
  case "$state" in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE|SPECIAL_EXIT) break ;;
  esac
  sleep 1
done
sleep 2
[ -s result.json ] && say result "$(tr -d '\n' < result.json)"
[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null
rm -f agent.keys collector.keys
kill "$watcher" 2>/dev/null
say done "$state"
exit 0
)SH";

} // namespace

int slurmGpusPerNode(const ClusterProfile &profile)
{
    const SlurmSpec &s = profile.slurm;
    if (s.gpusPerNode > 0)
        return s.gpusPerNode;
    const bool cpuOnly = profile.evaluation.device == "cpu" && profile.evaluation.backend != "nccl";
    return cpuOnly ? 0 : s.ntasksPerNode;
}

ClusterProfile slurmRankProfile(const ClusterProfile &profile)
{
    ClusterProfile p = profile;
    const HostSpec &login = profile.hosts.front();
    p.hosts.clear();
    for (int n = 0; n < profile.slurm.nodes; ++n) {
        HostSpec h;
        h.name = "node-" + std::to_string(n);
        h.slots = profile.slurm.ntasksPerNode;
        h.agent = profile.slurm.agent.empty() ? login.agent : profile.slurm.agent;
        h.workdir = login.workdir;
        h.env = login.env;
        h.devices = login.devices; // each node's GPUs for its tasks, by SLURM_LOCALID
        h.ssh = login.ssh;
        h.address = login.address;
        p.hosts.push_back(std::move(h));
    }
    return p;
}

namespace {

std::string q(const std::string &v, std::string_view what)
{
    return shellQuote(v, what);
}

/// One #SBATCH line. sbatch reads #SBATCH words without a shell: a value must not need quoting there.
std::string directive(const std::string &option)
{
    for (const char c : option)
        if (c == ' ' || c == '\t' || c == '"' || c == '\'' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
            throw ConfigError("slurm: the sbatch option \"" + option + "\" contains a space, quote or backslash, which #SBATCH lines cannot carry");
    return "#SBATCH " + option + "\n";
}

/// The script's head: the allocation it asks for, and what it is.
std::string directives(const ClusterProfile &profile, const SlurmJobInputs &in, const SlurmJob &job)
{
    const SlurmSpec &s = profile.slurm;
    std::string b = "#!/bin/sh\n";
    b += directive("--job-name=cppl-" + in.runId);
    b += directive("--nodes=" + std::to_string(s.nodes));
    // --ntasks, not --ntasks-per-node, for the allocation: with --overcommit a node may take more
    // tasks than it has CPUs (Slurm refuses --ntasks-per-node above the CPU count even then); the
    // steps ask for ntasks-per-node with block distribution, which fixes the rank -> node layout.
    b += directive("--ntasks=" + std::to_string(job.worldSize));
    b += directive("--output=job.out");
    b += directive("--error=job.err");
    const std::pair<const char *, const std::string *> optional[] = {
        {"--partition=", &s.partition}, {"--account=", &s.account}, {"--qos=", &s.qos}, {"--time=", &s.timeLimit}};
    for (const auto &[flag, value] : optional)
        if (!value->empty())
            b += directive(flag + *value);
    const int gpus = slurmGpusPerNode(profile);
    if (gpus > 0)
        b += directive("--gpus-per-node=" + std::to_string(gpus));
    if (!s.constraint.empty())
        b += directive("--constraint=" + s.constraint);
    for (const auto &o : s.sbatchOptions)
        b += directive(o);
    b += "# ClusterPPL run " + in.runId + (in.generatedAt.empty() ? "" : ", generated " + in.generatedAt)
         + (profile.name.empty() ? "" : " from profile \"" + profile.name + "\"") + ".\n";
    b += "# " + counted(job.worldSize, "rank", "ranks") + ": " + counted(s.ntasksPerNode, "agent", "agents") + " on each of "
         + counted(s.nodes, "node", "nodes") + "; each reads its rank from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID.\n";
    b += "# GPUs: " + (s.gpusPerNode > 0   ? counted(gpus, "GPU", "GPUs") + " per node (slurm.gpus_per_node)"
                       : gpus > 0          ? counted(gpus, "GPU", "GPUs") + " per node, one per task: slurm.gpus_per_node is not set and the "
                                                                      "evaluation may use GPUs (device " + profile.evaluation.device + ", backend "
                                                                      + profile.evaluation.backend + "); a cluster that enforces GPU allocation "
                                                                      "shows a task only the GPUs its job asked for"
                                           : std::string("none asked for (device cpu, backend ") + profile.evaluation.backend + ")")
         + ".\n";
    return b;
}

/// The agents' environment: the env script, the modules, the launching environment's
/// pass-through variables and the login host's env (part of the bits, docs/models.md), and the
/// rendezvous on the first allocated node.
std::string environment(const ClusterProfile &profile, const SlurmJobInputs &in)
{
    const SlurmSpec &s = profile.slurm;
    std::string b = "set -u\n";
    if (!s.envScript.empty())
        b += ". " + q(s.envScript, "slurm.env_script") + " || { echo \"@fail sourcing the env script failed\"; exit 3; }\n";
    for (const auto &m : s.modules)
        b += "module load " + q(m, "slurm.modules") + " || { echo \"@fail module load " + m + " failed\"; exit 3; }\n";
    b += "export CLUSTERPPL_RUN_ID=" + q(in.runId, "run id") + "\n";
    for (const auto &[k, v] : in.env) {
        if (k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "LOCAL_WORLD_SIZE" || k == "MASTER_ADDR" || k == "MASTER_PORT"
            || k == "CLUSTERPPL_RUN_ID")
            continue;
        for (const char c : k)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
                throw ConfigError("env: \"" + k + "\" is not a valid environment variable name");
        b += "export " + k + "=" + q(v, "env " + k) + "\n";
    }
    b += "# torchrun's variables would take precedence over Slurm's in the agents.\n"
         "unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE\n"
         "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
         "export MASTER_ADDR\n"
         "export MASTER_PORT=" + std::to_string(in.masterPort) + "\n"
         "echo \"@nodes $(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | paste -sd, -)\"\n";
    return b;
}

/// Step 1: pre-flight on every node, then the launcher's decision (the gate file). Each task's
/// report goes to a file of its own (preflight.TASK.out), unlabelled: srun -l cuts a labelled line
/// into 1 KiB pieces, each labelled again, and a report is one JSON line that can pass 1 KiB.
std::string preflightStep(const SlurmJobInputs &in, const std::string &nodes)
{
    return "# Step 1: pre-flight on every node, then wait for the launcher's decision.\n"
           "srun --nodes=" + nodes + " --ntasks=" + nodes + " --ntasks-per-node=1 --output=preflight.%t.out --error=preflight.%t.err "
           + words(in.preflightArgv, "pre-flight argument") + "\n"
           "echo $? > preflight.done\n"
           "waited=0\n"
           "while [ ! -e gate ]; do\n"
           "  sleep 1; waited=$((waited + 1))\n"
           "  [ $waited -ge 600 ] && { echo \"@fail no decision from the launcher 600 s after pre-flight\"; exit 3; }\n"
           "done\n"
           "[ \"$(cat gate)\" = go ] || { echo \"@fail pre-flight refused the launch\"; exit 3; }\n";
}

/// A tolerant run's store. The batch step runs on the first allocated node, which MASTER_ADDR
/// names. Its stdin is a FIFO this script holds open (fd 4): the script's end, or scancel's
/// signal, ends it, as an SSH session's end does elsewhere. It serves once its store line
/// (docs/agent-lines.md) is in store.out.
std::string storeStep(const SlurmJobInputs &in)
{
    return "# The rendezvous store in a process of its own (on_rank_loss continue): it outlives every rank, rank 0 included.\n"
           "rm -f store.in store.out store.err\n"
           "mkfifo store.in || { echo \"@fail cannot create the FIFO store.in in $PWD\"; exit 3; }\n"
           "( " + words(in.storeArgv, "store argument") + " < store.in > store.out 2> store.err; "
           "echo \"@store-exit $? $(tail -n 1 store.err)\" ) &\n"
           "store_pid=$!\n"
           "exec 4> store.in\n"
           "waited=0\n"
           "until grep -q '^" + std::string(cppl::lines::tagOf(cppl::lines::Kind::StoreReady)) + " ' store.out 2>/dev/null; do\n"
           "  kill -0 $store_pid 2>/dev/null || { echo \"@fail the rendezvous store on $MASTER_ADDR:$MASTER_PORT did not start: "
           "$(tail -n 1 store.err)\"; exit 3; }\n"
           "  [ $waited -ge 300 ] && { echo \"@fail the rendezvous store on $MASTER_ADDR:$MASTER_PORT did not start within 30 s\"; "
           "kill $store_pid; exit 3; }\n"
           "  sleep 0.1; waited=$((waited + 1))\n"
           "done\n"
           "echo \"@store $MASTER_ADDR:$MASTER_PORT\"\n";
}

/// Step 2: one agent per task, with telemetry to the login node's relay when there is one.
std::string evalStep(const ClusterProfile &profile, const SlurmJobInputs &in, const SlurmJob &job, const std::string &nodes)
{
    std::string b = "# Step 2: one agent per task; the wrapper reports how each ended.\n"
                    "echo \"@step eval\"\n";
    std::vector<std::string> argv = in.evalArgv;
    std::erase(argv, std::string("--exit-on-stdin-eof")); // srun's stdin is not the launcher's
    // srun -l cuts long lines into labelled pieces, so rank 0's result comes back as a file the
    // driver sends on one line of its own ("@cppl result").
    std::erase(argv, std::string("--result-line"));
    argv.insert(argv.end(), {"--json", "result.json"});
    auto srunLine = [&](const std::vector<std::string> &a, std::string_view indent) {
        const bool keys = std::find(a.begin(), a.end(), kKeysStdinFlag) != a.end();
        return std::string(indent) + "srun -l --kill-on-bad-exit=0 --nodes=" + nodes + " --ntasks=" + std::to_string(job.worldSize)
               + " --ntasks-per-node=" + std::to_string(profile.slurm.ntasksPerNode) + " --distribution=block \\\n" + std::string(indent)
               + "  /bin/sh -c '\"$@\"" + (keys ? " < agent.keys" : "") + "; rc=$?; echo \"@exit $rc\" >&2; exit $rc' clusterppl-task \\\n"
               + std::string(indent) + "  " + words(a, "eval argument") + "\n";
    };
    std::vector<std::string> plain = argv; // without telemetry: where the login node gave no relay
    for (std::size_t i = 0; i + 1 < plain.size(); ++i)
        if (plain[i] == "--telemetry") {
            plain.erase(plain.begin() + static_cast<std::ptrdiff_t>(i), plain.begin() + static_cast<std::ptrdiff_t>(i) + 2);
            break;
        }
    std::erase(plain, std::string(kKeysStdinFlag));
    if (plain.size() == argv.size())
        return b + srunLine(argv, "");
    return b + "# Telemetry goes to the relay on the login node (docs/telemetry.md, \"Relay\"), when there is one.\n"
               "CPPL_RELAY=$(cat relay.endpoint 2>/dev/null)\n"
               "if [ -n \"$CPPL_RELAY\" ] && [ -s agent.keys ]; then\n"
           + srunLine(argv, "  ") + "else\n  echo \"@note no telemetry relay on the login node: the agents run without live telemetry\"\n"
           + srunLine(plain, "  ") + "fi\n";
}

} // namespace

SlurmJob buildSlurmJob(const ClusterProfile &profile, const SlurmJobInputs &in)
{
    const SlurmSpec &s = profile.slurm;
    SlurmJob job;
    job.dir = s.jobDir + "/" + in.runId;
    job.ranksPerNode = s.ntasksPerNode;
    job.worldSize = s.nodes * s.ntasksPerNode;
    const std::string nodes = std::to_string(s.nodes);
    std::string b = directives(profile, in, job) + environment(profile, in);
    if (!in.preflightArgv.empty())
        b += preflightStep(in, nodes);
    if (!in.storeArgv.empty())
        b += storeStep(in);
    b += evalStep(profile, in, job, nodes);
    b += "rc=$?\n";
    if (!in.storeArgv.empty())
        b += "echo \"@store-closing\"\n"
             "exec 4>&-\n"
             "wait $store_pid\n";
    b += "echo \"@step done $rc\"\n"
         "exit $rc\n";
    job.batchScript = std::move(b);
    job.driverScript = kDriver;
    return job;
}

RankCommand slurmDriverCommand(const ClusterProfile &profile, const SlurmJob &job, bool telemetryKeys)
{
    const HostSpec &login = profile.hosts.front();
    RankCommand c;
    c.rank = 0;
    c.hostIndex = 0;
    c.hostName = login.name;
    c.address = login.address.empty() ? login.name : login.address;
    c.ssh = login.ssh;
    c.workdir = login.workdir;
    // Multi-line scripts travel base64-encoded: the command line SSH runs cannot hold newlines.
    c.env = {{"CPPL_DIR", job.dir},
             {"CPPL_BATCH", base64(job.batchScript)},
             {"CPPL_DRIVER", base64(job.driverScript)},
             {"CPPL_ENV_SCRIPT", profile.slurm.envScript},
             {"CPPL_AGENT", profile.slurm.agent.empty() ? login.agent : profile.slurm.agent}};
    c.argv = {"/bin/sh", "-c", "eval \"$(printf '%s' \"$CPPL_DRIVER\" | base64 -d)\"", "clusterppl-slurm-driver"};
    if (telemetryKeys) // the SSH launcher rewrites the endpoint to its reverse tunnel and sends the key line
        c.argv.insert(c.argv.end(), {"--telemetry", "tcp://127.0.0.1:0", std::string(kKeysStdinFlag)});
    return c;
}

namespace {

int toInt(std::string_view s, int fallback = -1)
{
    int v = fallback;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() ? v : fallback;
}

/// "3: text" (srun -l) -> rank 3, "text". Ranks may be padded with spaces ("  3: ").
bool splitLabel(std::string_view line, int &rank, std::string &text)
{
    std::size_t i = 0;
    while (i < line.size() && line[i] == ' ')
        ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9')
        ++i;
    if (i == start || i + 1 > line.size() || line[i] != ':')
        return false;
    rank = toInt(line.substr(start, i - start));
    text = std::string(line.substr(std::min(line.size(), i + 2)));
    return rank >= 0;
}

/// "@o LINE" / "@e LINE": the job's stdout/stderr as srun labels it, or the batch script's own.
SlurmEvent parseJobOutput(std::string_view line)
{
    SlurmEvent e;
    const bool err = line[1] == 'e';
    const std::string_view body = line.substr(3);
    if (!err && body.starts_with("@nodes ")) {
        e.kind = SlurmEvent::Kind::Nodes;
        e.text = std::string(body.substr(7));
        return e;
    }
    if (!err && body == "@step eval") {
        e.kind = SlurmEvent::Kind::EvalStarted;
        return e;
    }
    std::string text;
    if (splitLabel(body, e.rank, text)) {
        if (err && text.starts_with("@exit ")) {
            e.kind = SlurmEvent::Kind::RankExit;
            e.exitCode = toInt(std::string_view(text).substr(6));
            return e;
        }
        e.kind = err ? SlurmEvent::Kind::RankStderr : SlurmEvent::Kind::RankStdout;
        e.text = std::move(text);
        return e;
    }
    e.kind = SlurmEvent::Kind::JobLine;
    e.text = std::string(body);
    return e;
}

/// "state STATE|REASON|NODES|EXIT" as the driver says it.
SlurmEvent parseState(std::string_view fields)
{
    SlurmEvent e;
    e.kind = SlurmEvent::Kind::State;
    std::string f[4];
    std::size_t k = 0;
    for (const char c : fields) {
        if (c == '|' && k < 3)
            ++k;
        else
            f[k] += c;
    }
    e.state = f[0];
    e.reason = f[1];
    e.nodes = f[2] == "(null)" ? std::string() : f[2];
    e.text = f[3];
    return e;
}

/// "pf LINE" / "pferr LINE": one node's pre-flight output (srun -l labels it with the node).
SlurmEvent parsePreflightLine(std::string_view line)
{
    SlurmEvent e;
    const bool err = line.starts_with("pferr ");
    std::string text;
    const std::string_view body = line.substr(err ? 6 : 3);
    e.kind = SlurmEvent::Kind::PreflightLine;
    e.exitCode = err ? 1 : 0; // 1: a stderr line
    if (splitLabel(body, e.rank, text))
        e.text = std::move(text);
    else
        e.text = std::string(body);
    return e;
}

} // namespace

SlurmEvent parseDriverLine(std::string_view line)
{
    if (line.starts_with("@o ") || line.starts_with("@e "))
        return parseJobOutput(line);
    SlurmEvent e;
    if (!line.starts_with("@cppl ")) {
        e.text = std::string(line);
        return e;
    }
    line.remove_prefix(6);
    if (line.starts_with("state "))
        return parseState(line.substr(6));
    if (line.starts_with("pf ") || line.starts_with("pferr "))
        return parsePreflightLine(line);
    // The driver's one-word lines: "WORD TEXT".
    static constexpr std::pair<std::string_view, SlurmEvent::Kind> kWords[] = {
        {"saved ", SlurmEvent::Kind::Saved},         {"job ", SlurmEvent::Kind::Submitted},   {"submit-failed ", SlurmEvent::Kind::SubmitFailed},
        {"preflight-done ", SlurmEvent::Kind::PreflightDone}, {"result ", SlurmEvent::Kind::Result}, {"relay ", SlurmEvent::Kind::Relay}};
    for (const auto &[word, kind] : kWords)
        if (line.starts_with(word)) {
            e.kind = kind;
            e.text = std::string(line.substr(word.size()));
            return e;
        }
    if (line.starts_with("done")) {
        e.kind = SlurmEvent::Kind::Done;
        e.text = line.size() > 5 ? std::string(line.substr(5)) : std::string();
        return e;
    }
    e.text = std::string(line);
    return e;
}

std::vector<std::string> SrunLineJoiner::add(int rank, std::string_view piece)
{
    std::vector<std::string> out;
    if (const auto it = m_waiting.find(rank); it != m_waiting.end()) {
        Waiting &w = it->second;
        if (!piece.starts_with("CLUSTERPPL_")) {
            w.text += piece;
            if (!cppl::lines::endsEarly(w.text) || piece.size() < w.cut || w.text.size() > cppl::lines::kMaxLineBytes) {
                out.push_back(std::move(w.text));
                m_waiting.erase(it);
            }
            return out;
        }
        out.push_back(std::move(w.text)); // the next line of ours began: that one was whole as it came
        m_waiting.erase(it);
    }
    if (piece.size() >= kMinCut && cppl::lines::endsEarly(piece))
        m_waiting[rank] = {std::string(piece), piece.size()};
    else
        out.emplace_back(piece);
    return out;
}

std::optional<std::string> SrunLineJoiner::flush(int rank)
{
    const auto it = m_waiting.find(rank);
    if (it == m_waiting.end())
        return std::nullopt;
    std::string text = std::move(it->second.text);
    m_waiting.erase(it);
    return text;
}

std::vector<int> SrunLineJoiner::waiting() const
{
    std::vector<int> ranks;
    for (const auto &[rank, w] : m_waiting)
        ranks.push_back(rank);
    return ranks;
}

bool isFinalSlurmState(std::string_view state)
{
    for (std::string_view s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
                               "DEADLINE", "SPECIAL_EXIT", "UNKNOWN"})
        if (state == s)
            return true;
    return false;
}

} // namespace cppl::core
