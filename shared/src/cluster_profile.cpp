// SPDX-License-Identifier: MIT
#include "cppl/cluster_profile.h"

#include "cppl/errors.h"
#include "cppl/window_plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

namespace cppl {

using nlohmann::json;

namespace {

constexpr std::array<std::string_view, 5> kQuantSchemes = {"none", "int8", "int4", "int4-sym", "int4-asym"};

std::string describe(const json &v)
{
    std::string s = v.dump();
    if (s.size() > 40)
        s = s.substr(0, 37) + "...";
    return s;
}

std::string typeName(const json &v)
{
    switch (v.type()) {
    case json::value_t::string:
        return "a string";
    case json::value_t::boolean:
        return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
        return "an integer";
    case json::value_t::number_float:
        return "a number";
    case json::value_t::array:
        return "an array";
    case json::value_t::object:
        return "an object";
    case json::value_t::null:
        return "null";
    default:
        return "a value";
    }
}

// Reads the fields of one JSON object, recording a message per problem. Unknown keys are errors,
// so a typo ("slot" for "slots") never silently falls back to a default.
class ObjectReader
{
public:
    ObjectReader(const json &obj, std::string path, std::vector<std::string> &errors)
        : m_obj(obj), m_path(std::move(path)), m_errors(errors)
    {
        if (!m_obj.is_object())
            fail("", "expected an object, got " + typeName(m_obj));
    }

    ~ObjectReader() = default;
    ObjectReader(const ObjectReader &) = delete;
    ObjectReader &operator=(const ObjectReader &) = delete;

    [[nodiscard]] bool valid() const { return m_obj.is_object(); }
    [[nodiscard]] std::string path(std::string_view key) const
    {
        return m_path.empty() ? std::string(key) : m_path + "." + std::string(key);
    }
    [[nodiscard]] const json *find(std::string_view key)
    {
        m_known.emplace(key);
        if (!valid())
            return nullptr;
        auto it = m_obj.find(std::string(key));
        return it == m_obj.end() ? nullptr : &*it;
    }
    void fail(std::string_view key, const std::string &what)
    {
        const std::string where = key.empty() ? (m_path.empty() ? std::string("(top level)") : m_path) : path(key);
        m_errors.push_back(where + ": " + what);
    }

    void boolean(std::string_view key, bool &out)
    {
        const json *v = find(key);
        if (!v)
            return;
        if (!v->is_boolean())
            return fail(key, "expected true or false, got " + typeName(*v) + " " + describe(*v));
        out = v->get<bool>();
    }

    void string(std::string_view key, std::string &out, bool required = false)
    {
        const json *v = find(key);
        if (!v) {
            if (required)
                fail(key, "missing (required)");
            return;
        }
        if (!v->is_string())
            return fail(key, "expected a string, got " + typeName(*v) + " " + describe(*v));
        out = v->get<std::string>();
        if (required && out.empty())
            fail(key, "must not be empty");
    }
    template<typename Int>
    void integer(std::string_view key, Int &out, std::int64_t min, std::int64_t max, std::string_view hint = {})
    {
        const json *v = find(key);
        if (!v)
            return;
        if (!v->is_number_integer()) {
            fail(key, "expected an integer, got " + typeName(*v) + " " + describe(*v));
            return;
        }
        const auto x = v->get<std::int64_t>();
        if (x < min || x > max) {
            std::string range = "expected an integer >= " + std::to_string(min);
            if (max != std::numeric_limits<std::int64_t>::max())
                range += " and <= " + std::to_string(max);
            fail(key, range + ", got " + std::to_string(x) + (hint.empty() ? "" : " (" + std::string(hint) + ")"));
            return;
        }
        out = static_cast<Int>(x);
    }
    void number(std::string_view key, double &out, double min, double max)
    {
        const json *v = find(key);
        if (!v)
            return;
        if (!v->is_number()) {
            fail(key, "expected a number, got " + typeName(*v) + " " + describe(*v));
            return;
        }
        const double x = v->get<double>();
        if (!(x >= min && x <= max)) {
            std::ostringstream s;
            s << "expected a number in [" << min << ", " << max << "], got " << x;
            fail(key, s.str());
            return;
        }
        out = x;
    }
    void oneOf(std::string_view key, std::string &out, std::initializer_list<std::string_view> allowed)
    {
        std::string value = out;
        const std::size_t before = m_errors.size();
        string(key, value);
        if (m_errors.size() != before)
            return;
        if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
            std::string list;
            for (auto a : allowed) {
                list += list.empty() ? "" : ", ";
                list += std::string(a);
            }
            fail(key, "unknown value \"" + value + "\" (expected one of: " + list + ")");
            return;
        }
        out = value;
    }
    // Call last: reports keys nobody asked for.
    void rejectUnknown()
    {
        if (!valid())
            return;
        for (auto it = m_obj.begin(); it != m_obj.end(); ++it) {
            if (m_known.count(it.key()))
                continue;
            std::string list;
            for (const auto &k : m_known) {
                list += list.empty() ? "" : ", ";
                list += k;
            }
            fail(it.key(), "unknown field (known fields here: " + list + ")");
        }
    }

private:
    const json &m_obj;
    std::string m_path;
    std::vector<std::string> &m_errors;
    std::set<std::string, std::less<>> m_known;
};

/// An "env" object of NAME: "value" strings, at the host or at the top.
void readEnv(ObjectReader &r, std::map<std::string, std::string> &out)
{
    const json *env = r.find("env");
    if (!env)
        return;
    if (!env->is_object()) {
        r.fail("env", "expected an object of NAME: value strings, got " + typeName(*env));
        return;
    }
    for (auto it = env->begin(); it != env->end(); ++it) {
        if (!it.value().is_string())
            r.fail("env", "variable " + it.key() + " must be a string, got " + typeName(it.value()));
        else
            out[it.key()] = it.value().get<std::string>();
    }
}

void readHost(const json &j, const std::string &path, HostSpec &h, std::vector<std::string> &errors)
{
    ObjectReader r(j, path, errors);
    r.string("name", h.name, true);
    r.string("address", h.address);
    if (const json *ssh = r.find("ssh")) {
        ObjectReader s(*ssh, r.path("ssh"), errors);
        s.string("alias", h.ssh.alias);
        s.string("user", h.ssh.user);
        s.integer("port", h.ssh.port, 1, 65535);
        s.string("identity_file", h.ssh.identityFile);
        s.boolean("password_auth", h.ssh.passwordAuth);
        s.rejectUnknown();
    }
    r.integer("slots", h.slots, 1, 1 << 20, "a host needs at least one slot; remove the host instead");
    if (const json *d = r.find("devices")) {
        if (!d->is_array()) {
            r.fail("devices", "expected an array of device indices, got " + typeName(*d));
        } else {
            for (std::size_t i = 0; i < d->size(); ++i) {
                const json &e = (*d)[i];
                if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() > 1 << 20)
                    r.fail("devices", "element " + std::to_string(i) + " must be a device index >= 0, got " + describe(e));
                else
                    h.devices.push_back(e.get<int>());
            }
        }
    }
    r.string("agent", h.agent);
    r.string("workdir", h.workdir);
    readEnv(r, h.env);
    r.string("group", h.group);
    r.rejectUnknown();
}

void readGrouping(const json &g, GroupingSpec &out, std::vector<std::string> &errors)
{
    if (g.is_string()) {
        const auto s = g.get<std::string>();
        if (s == "by-host") {
            out.mode = GroupingSpec::Mode::ByHost;
        } else if (s == "by-label") {
            out.mode = GroupingSpec::Mode::ByLabel;
        } else if (s.starts_with("size:")) {
            out.mode = GroupingSpec::Mode::BySize;
            try {
                std::size_t used = 0;
                out.size = std::stoi(s.substr(5), &used);
                if (used != s.size() - 5 || out.size < 1)
                    throw std::invalid_argument("bad");
            } catch (const std::exception &) {
                errors.push_back("groups: \"" + s + "\" needs a group size >= 1, e.g. \"size:8\"");
            }
        } else {
            errors.push_back("groups: unknown value \"" + s + "\" (expected \"by-host\", \"by-label\", \"size:K\" or a list of {name, hosts})");
        }
        return;
    }
    if (!g.is_array()) {
        errors.push_back("groups: expected \"by-host\", \"by-label\", \"size:K\" or a list of {name, hosts}, got " + typeName(g));
        return;
    }
    out.mode = GroupingSpec::Mode::Explicit;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const std::string path = "groups[" + std::to_string(i) + "]";
        ObjectReader r(g[i], path, errors);
        GroupSpec spec;
        r.string("name", spec.name, true);
        if (const json *hosts = r.find("hosts")) {
            if (!hosts->is_array() || hosts->empty())
                r.fail("hosts", "expected a non-empty array of host names");
            else
                for (const json &h : *hosts) {
                    if (h.is_string())
                        spec.hosts.push_back(h.get<std::string>());
                    else
                        r.fail("hosts", "expected host names (strings), got " + describe(h));
                }
        } else {
            r.fail("hosts", "missing (required)");
        }
        r.rejectUnknown();
        out.groups.push_back(std::move(spec));
    }
}

} // namespace

namespace {

void readSlurm(const json &j, SlurmSpec &s, std::vector<std::string> &errors)
{
    ObjectReader r(j, "slurm", errors);
    r.string("partition", s.partition);
    r.string("account", s.account);
    r.string("qos", s.qos);
    r.string("time_limit", s.timeLimit);
    r.integer("nodes", s.nodes, 1, 1 << 16);
    r.integer("ntasks_per_node", s.ntasksPerNode, 1, 1 << 12, "one agent per task; at least one");
    r.integer("gpus_per_node", s.gpusPerNode, 0, 1 << 10);
    r.string("constraint", s.constraint);
    auto strings = [&](std::string_view key, std::vector<std::string> &out) {
        const json *v = r.find(key);
        if (!v)
            return;
        if (!v->is_array())
            return r.fail(key, "expected an array of strings, got " + typeName(*v));
        for (std::size_t i = 0; i < v->size(); ++i) {
            if (!(*v)[i].is_string())
                r.fail(key, "element " + std::to_string(i) + " must be a string, got " + typeName((*v)[i]));
            else
                out.push_back((*v)[i].get<std::string>());
        }
    };
    strings("sbatch_options", s.sbatchOptions);
    r.string("agent", s.agent);
    strings("modules", s.modules);
    r.string("env_script", s.envScript);
    r.string("job_dir", s.jobDir);
    r.rejectUnknown();
}

void validateSlurm(const ClusterProfile &p, std::vector<std::string> &errors)
{
    const SlurmSpec &s = p.slurm;
    if (p.hosts.size() != 1)
        errors.push_back("hosts: the slurm launcher needs exactly one host, the login node the job is submitted on (got "
                         + std::to_string(p.hosts.size()) + "); the compute nodes come from the allocation (slurm.nodes)");
    if (p.grouping.mode != GroupingSpec::Mode::ByHost && p.grouping.mode != GroupingSpec::Mode::BySize)
        errors.emplace_back("groups: with the slurm launcher use \"by-host\" (ranks sharing an allocated node) or \"size:K\"; "
                            "node names are known only once the job runs, so labels and lists cannot name them");
    // Names Slurm accepts; anything else (spaces, quotes, $) is a typo or an attempt to inject.
    auto plainWord = [&](std::string_view key, const std::string &v, std::string_view allowedExtra) {
        for (const char c : v)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || allowedExtra.find(c) != std::string_view::npos)) {
                errors.push_back("slurm." + std::string(key) + ": \"" + v + "\" contains '" + std::string(1, c)
                                 + "', which Slurm does not accept there (letters, digits and " + std::string(allowedExtra) + ")");
                return;
            }
    };
    plainWord("partition", s.partition, "_-.,");
    plainWord("account", s.account, "_-.");
    plainWord("qos", s.qos, "_-.");
    plainWord("constraint", s.constraint, "_-.&|[]*:!()");
    if (!s.timeLimit.empty()) {
        bool ok = std::isdigit(static_cast<unsigned char>(s.timeLimit.front())) && std::isdigit(static_cast<unsigned char>(s.timeLimit.back()));
        for (const char c : s.timeLimit)
            ok = ok && (std::isdigit(static_cast<unsigned char>(c)) || c == ':' || c == '-');
        if (!ok)
            errors.push_back("slurm.time_limit: \"" + s.timeLimit
                             + "\" is not a Slurm time (\"MM\", \"MM:SS\", \"HH:MM:SS\", \"D-HH\", \"D-HH:MM\" or \"D-HH:MM:SS\")");
    }
    for (std::size_t i = 0; i < s.sbatchOptions.size(); ++i) {
        const std::string &o = s.sbatchOptions[i];
        const std::string where = "slurm.sbatch_options[" + std::to_string(i) + "]";
        if (!o.starts_with("--") || o.size() < 3)
            errors.push_back(where + ": \"" + o + "\" must be one long option, e.g. \"--exclusive\" or \"--mem=0\"");
        for (const char c : o)
            if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
                errors.push_back(where + ": contains a control character; remove it");
                break;
            }
        for (std::string_view managed : {"--nodes", "--ntasks", "--job-name", "--output", "--error", "--chdir", "--parsable"})
            if (o == managed || o.starts_with(std::string(managed) + "="))
                errors.push_back(where + ": " + std::string(managed) + " is set by ClusterPPL (" + (managed == "--nodes" || managed == "--ntasks" ? "use slurm.nodes and slurm.ntasks_per_node" : "the job's files and name are its own") + ")");
    }
    for (std::size_t i = 0; i < s.modules.size(); ++i)
        plainWord("modules[" + std::to_string(i) + "]", s.modules[i], "_-./+");
    if (s.jobDir.empty())
        errors.emplace_back("slurm.job_dir: must not be empty (default \".clusterppl/jobs\")");
    if (s.gpusPerNode > 0 && s.gpusPerNode < s.ntasksPerNode && p.evaluation.backend == "nccl")
        errors.push_back("slurm.gpus_per_node: " + std::to_string(s.gpusPerNode) + " GPUs for " + std::to_string(s.ntasksPerNode)
                         + " tasks per node; the nccl backend needs one GPU per task (raise gpus_per_node or lower ntasks_per_node)");
}

/// What the agents would refuse of evaluation.quantize ... reference_quantize, said before a launch.
void validateQuantization(const EvaluationSpec &e, std::vector<std::string> &errors)
{
    const auto known = [](const std::string &v) { return std::find(kQuantSchemes.begin(), kQuantSchemes.end(), v) != kQuantSchemes.end(); };
    for (const auto &[field, value] : {std::pair{"quantize", &e.quantize}, std::pair{"reference_quantize", &e.referenceQuantize}})
        if (!known(*value))
            errors.push_back(std::string("evaluation.") + field + ": unknown value \"" + *value + "\" (expected one of: none, int8, int4, int4-sym, int4-asym)");
    if (e.quantGroup < 32 || e.quantGroup % 32 != 0)
        errors.push_back("evaluation.quant_group: " + std::to_string(e.quantGroup)
                         + " is not a multiple of 32 (the kernels quantize activations in blocks of 32; a group holds whole blocks)");
    if (e.quantizeHead && e.quantize == "none")
        errors.emplace_back("evaluation.quantize_head: quantizes the vocabulary head as well; set evaluation.quantize too");
    if (e.referenceModel.empty() && (e.referenceDtype != "auto" || e.referenceQuantize != "none"))
        errors.emplace_back("evaluation: reference_dtype and reference_quantize describe the reference model; set evaluation.reference_model too");
}

} // namespace

namespace {

/// evaluation.tensor_parallel N: each group is N consecutive ranks of one host, so every host's
/// slots (a Slurm job's tasks per node) are a multiple of N, and then so is the world size.
void validateTensorParallel(const ClusterProfile &p, std::vector<std::string> &errors)
{
    const int n = p.evaluation.tensorParallel;
    if (n < 1) {
        errors.push_back("evaluation.tensor_parallel: expected an integer >= 1, got " + std::to_string(n));
        return;
    }
    if (n == 1)
        return;
    const std::string what = "evaluation.tensor_parallel: " + std::to_string(n) + ": ";
    if (p.launcher == "slurm") {
        if (p.slurm.ntasksPerNode % n != 0)
            errors.push_back(what + "slurm.ntasks_per_node " + std::to_string(p.slurm.ntasksPerNode)
                             + " is not a multiple of it; a tensor-parallel group is " + std::to_string(n)
                             + " consecutive ranks of one node");
        return;
    }
    // Every host's slots a multiple of N makes the world size one too.
    for (const HostSpec &h : p.hosts) {
        if (h.slots % n != 0)
            errors.push_back(what + "host \"" + h.name + "\" has " + std::to_string(h.slots) + " slots, not a multiple of it; a tensor-parallel group is "
                             + std::to_string(n) + " consecutive ranks of one host (give it a multiple of " + std::to_string(n)
                             + " slots, or a smaller tensor_parallel)");
    }
}

/// Names a shell and the agents accept, values without control characters, and no device
/// visibility: a launcher's CUDA_VISIBLE_DEVICES would send every rank of a host to the same GPUs.
void checkEnv(const std::map<std::string, std::string> &env, const std::string &path, std::vector<std::string> &errors)
{
    for (const auto &[k, v] : env) {
        const bool nameOk = !k.empty() && !std::isdigit(static_cast<unsigned char>(k[0]))
                            && std::all_of(k.begin(), k.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
        if (!nameOk)
            errors.push_back(path + ": \"" + k + "\" is not a valid environment variable name (letters, digits, _)");
        if (std::any_of(v.begin(), v.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
            errors.push_back(path + "." + k + ": contains a control character");
        if (isDeviceVisibilityVariable(k))
            errors.push_back(path + "." + k + ": device visibility is not set through env (every rank of a host would see the same "
                                              "devices); list the host's GPUs in its \"devices\", one per slot");
    }
}

} // namespace

bool isDeviceVisibilityVariable(std::string_view name)
{
    return name == "CUDA_VISIBLE_DEVICES" || name == "NVIDIA_VISIBLE_DEVICES" || name == "HIP_VISIBLE_DEVICES" || name == "ROCR_VISIBLE_DEVICES"
           || name == "GPU_DEVICE_ORDINAL";
}

std::map<std::string, std::string> hostEnvironment(const ClusterProfile &profile, const HostSpec &host)
{
    std::map<std::string, std::string> env = host.env;
    env.insert(profile.env.begin(), profile.env.end()); // insert keeps the host's value for a name both set
    return env;
}

std::vector<std::string> validateProfile(const ClusterProfile &p)
{
    std::vector<std::string> errors;
    checkEnv(p.env, "env", errors);
    if (p.hosts.empty())
        errors.emplace_back("hosts: the profile lists no hosts; add at least one {\"name\": ..., \"slots\": N}");
    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < p.hosts.size(); ++i) {
        const HostSpec &h = p.hosts[i];
        const std::string path = "hosts[" + std::to_string(i) + "]";
        if (h.name.empty())
            continue; // reported by the parser
        if (auto [it, fresh] = seen.emplace(h.name, i); !fresh)
            errors.push_back(path + ".name: host \"" + h.name + "\" is listed twice (also hosts[" + std::to_string(it->second)
                             + "]); give each host one entry with its total slots");
        if (h.slots < 1)
            errors.push_back(path + ".slots: expected an integer >= 1, got " + std::to_string(h.slots));
        // Slurm: the login host's list is every allocated node's, one device per task.
        const bool slurm = p.launcher == "slurm";
        if (const int want = slurm ? p.slurm.ntasksPerNode : h.slots; !h.devices.empty() && static_cast<int>(h.devices.size()) != want)
            errors.push_back(path + ".devices: lists " + std::to_string(h.devices.size()) + " devices but " + (slurm ? "slurm.ntasks_per_node" : "slots")
                             + " is " + std::to_string(want) + "; they must match");
        std::set<int> devs(h.devices.begin(), h.devices.end());
        if (devs.size() != h.devices.size())
            errors.push_back(path + ".devices: a device index is listed twice");
        checkEnv(h.env, path + ".env", errors);
    }
    if (p.grouping.mode == GroupingSpec::Mode::Explicit) {
        std::map<std::string, std::string> hostGroup;
        std::set<std::string> names;
        for (std::size_t g = 0; g < p.grouping.groups.size(); ++g) {
            const GroupSpec &spec = p.grouping.groups[g];
            const std::string path = "groups[" + std::to_string(g) + "]";
            if (!spec.name.empty() && !names.insert(spec.name).second)
                errors.push_back(path + ".name: group \"" + spec.name + "\" is defined twice");
            for (const auto &h : spec.hosts) {
                if (!seen.count(h))
                    errors.push_back(path + ".hosts: \"" + h + "\" is not one of the profile's hosts");
                else if (auto [it, fresh] = hostGroup.emplace(h, spec.name); !fresh)
                    errors.push_back(path + ".hosts: \"" + h + "\" is already in group \"" + it->second + "\"; a host belongs to one group");
            }
        }
        for (const HostSpec &h : p.hosts)
            if (!h.name.empty() && !hostGroup.count(h.name))
                errors.push_back("groups: host \"" + h.name + "\" is in no group; list it in one, or use \"by-host\"");
    }
    if (p.grouping.mode == GroupingSpec::Mode::BySize && p.grouping.size < 1)
        errors.emplace_back("groups: size:K needs K >= 1");
    if (p.launcher != "local" && p.launcher != "ssh" && p.launcher != "slurm")
        errors.push_back("launcher: unknown value \"" + p.launcher + "\" (expected one of: local, ssh, slurm)");
    if (p.launcher == "slurm")
        validateSlurm(p, errors);
    else if (p.slurm != SlurmSpec{})
        errors.emplace_back("slurm: only used with \"launcher\": \"slurm\" (this profile's launcher is \"" + p.launcher
                            + "\"); remove the object or set the launcher");
    const EvaluationSpec &e = p.evaluation;
    if (!parseProtocol(e.protocol))
        errors.push_back("evaluation.protocol: unknown value \"" + e.protocol + "\" (expected one of: hf-sliding, llama.cpp, lm-eval-rolling)");
    if (e.context < 2)
        errors.push_back("evaluation.context: expected an integer >= 2, got " + std::to_string(e.context));
    if (e.stride < 0 || e.stride > e.context)
        errors.push_back("evaluation.stride: " + std::to_string(e.stride) + " must be between 0 (= context) and the context "
                         + std::to_string(e.context));
    if (!e.tokens.empty() && !e.text.empty())
        errors.emplace_back("evaluation: give either \"tokens\" or \"text\", not both");
    validateQuantization(e, errors);
    validateTensorParallel(p, errors);
    return errors;
}

namespace {

/// The document, or nullopt with the reason in @p errors: line:column for a syntax error.
std::optional<json> parseJson(std::string_view text, std::string_view source, std::vector<std::string> &errors)
{
    try {
        return json::parse(text.begin(), text.end());
    } catch (const json::parse_error &e) {
        // Translate the byte offset into line:column, which editors understand.
        std::size_t line = 1;
        std::size_t col = 1;
        for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
            if (text[i] == '\n') {
                ++line;
                col = 1;
            } else {
                ++col;
            }
        }
        std::string what = e.what();
        if (auto pos = what.find("syntax error"); pos != std::string::npos)
            what = what.substr(pos);
        errors.push_back(std::string(source) + ":" + std::to_string(line) + ":" + std::to_string(col) + ": not valid JSON: " + what);
    } catch (const json::exception &e) {
        // A number too large for a double ("1e999") is an out_of_range, not a parse_error
        // (found by tests/fuzz/fuzz_profile; it used to escape and end the program).
        errors.push_back(std::string(source) + ": not valid JSON: " + e.what());
    }
    return std::nullopt;
}

/// "format" and "version": a ClusterPPL profile this build reads.
void readFormat(ObjectReader &r)
{
    std::string format;
    r.string("format", format, true);
    if (!format.empty() && format != "clusterppl-profile")
        r.fail("format", "expected \"clusterppl-profile\", got \"" + format + "\": is this a ClusterPPL profile?");
    int version = 0;
    if (!r.find("version"))
        r.fail("version", "missing (required; this build reads version " + std::to_string(ClusterProfile::kVersion) + ")");
    r.integer("version", version, 1, std::numeric_limits<std::int64_t>::max());
    if (version > ClusterProfile::kVersion)
        r.fail("version", "profile version " + std::to_string(version) + " is newer than this build understands ("
                              + std::to_string(ClusterProfile::kVersion) + "); update ClusterPPL");
}

void readHosts(ObjectReader &r, std::vector<HostSpec> &out, std::vector<std::string> &errors)
{
    const json *hosts = r.find("hosts");
    if (!hosts)
        return r.fail("hosts", "missing (required)");
    if (!hosts->is_array())
        return r.fail("hosts", "expected an array of hosts, got " + typeName(*hosts));
    for (std::size_t i = 0; i < hosts->size(); ++i) {
        HostSpec h;
        readHost((*hosts)[i], "hosts[" + std::to_string(i) + "]", h, errors);
        out.push_back(std::move(h));
    }
}

/// evaluation.quantize ... reference_quantize (the agents' --quantize ... --reference-quantize).
void readQuantization(ObjectReader &e, EvaluationSpec &s)
{
    e.oneOf("quantize", s.quantize, {"none", "int8", "int4", "int4-sym", "int4-asym"});
    e.integer("quant_group", s.quantGroup, 32, std::int64_t{1} << 20);
    e.boolean("quantize_head", s.quantizeHead);
    e.string("reference_model", s.referenceModel);
    e.oneOf("reference_dtype", s.referenceDtype, {"auto", "float32", "bfloat16", "float16"});
    e.oneOf("reference_quantize", s.referenceQuantize, {"none", "int8", "int4", "int4-sym", "int4-asym"});
}

void readEvaluation(const json &ev, EvaluationSpec &s, std::vector<std::string> &errors)
{
    ObjectReader e(ev, "evaluation", errors);
    e.string("model", s.model);
    e.string("tokens", s.tokens);
    e.string("text", s.text);
    e.string("tokenizer", s.tokenizer);
    e.oneOf("protocol", s.protocol, {"hf-sliding", "llama.cpp", "lm-eval-rolling"});
    e.integer("context", s.context, 2, std::int64_t{1} << 24);
    e.integer("stride", s.stride, 0, std::int64_t{1} << 24);
    if (const json *b = e.find("batch"); b && b->is_string()) {
        // "auto": no --batch, the agent's own default (from free memory on a GPU).
        if (b->get<std::string>() == "auto")
            s.batch = kAutoBatch;
        else
            e.fail("batch", "expected an integer >= 1 and <= 65536 or \"auto\", got " + describe(*b));
    } else {
        e.integer("batch", s.batch, 1, 1 << 16, "or \"auto\": sized from free GPU memory on CUDA, 8 on the CPU");
    }
    e.integer("max_windows", s.maxWindows, 0, std::numeric_limits<std::int64_t>::max());
    e.oneOf("dtype", s.dtype, {"auto", "float32", "bfloat16", "float16"});
    e.string("device", s.device);
    e.oneOf("backend", s.backend, {"auto", "gloo", "nccl"});
    e.oneOf("topology", s.topology, {"hierarchical", "flat"});
    e.oneOf("schedule", s.schedule, {"static", "dynamic"});
    // Absent (a profile from before the default changed, or one that never said): the
    // schedule's default, continue for dynamic, fail for static.
    s.onRankLoss = defaultOnRankLoss(s.schedule);
    e.oneOf("on_rank_loss", s.onRankLoss, {"fail", "continue"});
    if (const json *o = e.find("overlap_sync"); o && !o->is_boolean())
        // The agent's flag reads on|off; the profile's field is a JSON boolean.
        e.fail("overlap_sync", "expected true or false, got " + typeName(*o) + " " + describe(*o) +
                                   " (write true for the agents' --overlap-sync on, the default, or false for off)");
    else
        e.boolean("overlap_sync", s.overlapSync);
    readQuantization(e, s);
    e.integer("tensor_parallel", s.tensorParallel, 1, 1024, "ranks of one host per tensor-parallel group; 1 = none");
    e.number("load_timeout", s.loadTimeoutSeconds, 1.0, 7 * 86400.0);
    e.rejectUnknown();
}

void readThresholds(const json &th, Thresholds &s, std::vector<std::string> &errors)
{
    ObjectReader t(th, "thresholds", errors);
    t.integer("sync_every_tokens", s.syncEveryTokens, -1, std::numeric_limits<std::int64_t>::max());
    t.number("deviation_tolerance", s.deviationTolerance, 0.0, 1.0);
    t.number("comm_share_alert", s.commShareAlert, 0.0, 1.0);
    t.number("stall_seconds", s.stallSeconds, 0.1, 86400.0);
    t.number("collective_timeout_seconds", s.collectiveTimeoutSeconds, 1.0, 7 * 86400.0);
    t.rejectUnknown();
}

} // namespace

ProfileParseResult parseProfile(std::string_view text, std::string_view source)
{
    ProfileParseResult result;
    auto &errors = result.errors;
    const std::optional<json> root = parseJson(text, source, errors);
    if (!root)
        return result;
    ClusterProfile &p = result.profile;
    ObjectReader r(*root, "", errors);
    if (!r.valid())
        return result;
    readFormat(r);
    r.string("name", p.name);
    r.oneOf("launcher", p.launcher, {"local", "ssh", "slurm"});
    readEnv(r, p.env);
    if (const json *sl = r.find("slurm"))
        readSlurm(*sl, p.slurm, errors);
    readHosts(r, p.hosts, errors);
    if (const json *g = r.find("groups"))
        readGrouping(*g, p.grouping, errors);
    if (const json *ev = r.find("evaluation"))
        readEvaluation(*ev, p.evaluation, errors);
    if (const json *th = r.find("thresholds"))
        readThresholds(*th, p.thresholds, errors);
    r.rejectUnknown();
    if (errors.empty())
        errors = validateProfile(p);
    return result;
}

ClusterProfile loadProfile(const std::string &path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw IoError(path + ": cannot open the profile (does the file exist and is it readable?)");
    std::ostringstream buf;
    buf << in.rdbuf();
    ProfileParseResult r = parseProfile(buf.str(), path);
    if (!r.ok()) {
        std::string msg = path + ": invalid profile:";
        for (const auto &e : r.errors)
            msg += "\n  " + e;
        throw ConfigError(msg);
    }
    return r.profile;
}

std::string rankRangeText(int first, int last)
{
    return first == last ? std::to_string(first) : std::to_string(first) + "\u2013" + std::to_string(last);
}

std::string rankListText(std::vector<int> ranks)
{
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    std::string out;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
            ++j;
        if (!out.empty())
            out += ", ";
        // Two neighbours read better as a range too: "0–1", as the groups of size 2 are named.
        out += rankRangeText(ranks[i], ranks[j]);
        i = j + 1;
    }
    return out;
}

RankLayout rankLayout(const ClusterProfile &p)
{
    RankLayout layout;
    std::map<std::string, int> groupIndex;
    auto groupFor = [&](const std::string &name) {
        auto [it, fresh] = groupIndex.emplace(name, static_cast<int>(layout.groups.size()));
        if (fresh)
            layout.groups.push_back({name, {}});
        return it->second;
    };
    std::map<std::string, std::string> explicitGroup;
    for (const GroupSpec &g : p.grouping.groups)
        for (const auto &h : g.hosts)
            explicitGroup[h] = g.name;
    int world = 0;
    for (const HostSpec &h : p.hosts)
        world += h.slots;
    int rank = 0;
    for (std::size_t hi = 0; hi < p.hosts.size(); ++hi) {
        const HostSpec &h = p.hosts[hi];
        for (int local = 0; local < h.slots; ++local, ++rank) {
            RankInfo info;
            info.rank = rank;
            info.hostIndex = static_cast<int>(hi);
            info.localRank = local;
            info.device = h.devices.empty() ? local : h.devices[local];
            switch (p.grouping.mode) {
            case GroupingSpec::Mode::ByHost:
                info.group = groupFor(h.name);
                break;
            case GroupingSpec::Mode::ByLabel:
                info.group = groupFor(h.group.empty() ? h.name : h.group);
                break;
            case GroupingSpec::Mode::BySize: {
                const int first = rank / p.grouping.size * p.grouping.size;
                const int last = std::min(first + p.grouping.size, world) - 1;
                info.group = groupFor((first == last ? "rank " : "ranks ") + rankRangeText(first, last));
                break;
            }
            case GroupingSpec::Mode::Explicit:
                info.group = groupFor(explicitGroup.at(h.name));
                break;
            }
            layout.groups[info.group].ranks.push_back(rank);
            layout.ranks.push_back(info);
        }
    }
    return layout;
}

} // namespace cppl
