// SPDX-License-Identifier: MIT
#include "cppl/hostfile.h"

#include "cppl/errors.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <sstream>

namespace cppl {

namespace {

std::vector<std::string_view> splitWhitespace(std::string_view line)
{
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
            ++i;
        const std::size_t start = i;
        while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            ++i;
        if (i > start)
            out.push_back(line.substr(start, i - start));
    }
    return out;
}

std::vector<std::string_view> split(std::string_view s, char sep)
{
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    return out;
}

bool parseInt(std::string_view s, long long &out)
{
    if (s.empty())
        return false;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && ptr == s.data() + s.size();
}

bool validName(std::string_view s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':' || c == '[' || c == ']';
    });
}

// Whether `id` is one of the host's slot ids, without building the list: hosts may have 2^20 slots
// and a filter may name thousands of slots (quadratic before; tests/fuzz/fuzz_hostfile).
bool hasSlot(const HostSpec &h, long long id)
{
    if (h.devices.empty())
        return id >= 0 && id < h.slots;
    return std::find(h.devices.begin(), h.devices.end(), id) != h.devices.end();
}

std::vector<int> slotIds(const HostSpec &h)
{
    if (!h.devices.empty())
        return h.devices;
    std::vector<int> ids(h.slots);
    for (int i = 0; i < h.slots; ++i)
        ids[i] = i;
    return ids;
}

} // namespace

HostfileParseResult parseHostfile(std::string_view text, std::string_view source)
{
    HostfileParseResult result;
    std::map<std::string, int, std::less<>> firstLine;
    int lineNo = 0;
    for (std::string_view line : split(text, '\n')) {
        ++lineNo;
        const std::string where = std::string(source) + ":" + std::to_string(lineNo) + ": ";
        if (auto hash = line.find('#'); hash != std::string_view::npos)
            line = line.substr(0, hash);
        const auto fields = splitWhitespace(line);
        if (fields.empty())
            continue;
        HostSpec h;
        h.name = std::string(fields[0]);
        if (!validName(fields[0]) || fields[0].find('=') != std::string_view::npos) {
            result.errors.push_back(where + "\"" + h.name + "\" is not a valid host name; expected \"HOST slots=N\"");
            continue;
        }
        bool haveSlots = false;
        bool bad = false;
        for (std::size_t i = 1; i < fields.size(); ++i) {
            const auto eq = fields[i].find('=');
            const std::string_view key = fields[i].substr(0, eq);
            const std::string_view value = eq == std::string_view::npos ? std::string_view{} : fields[i].substr(eq + 1);
            if (eq == std::string_view::npos) {
                result.errors.push_back(where + "unexpected \"" + std::string(fields[i]) + "\"; expected key=value (slots=N, group=NAME)");
                bad = true;
            } else if (key == "slots") {
                long long n = 0;
                if (!parseInt(value, n) || n < 1 || n > (1 << 20)) {
                    result.errors.push_back(where + "slots=" + std::string(value) + " for host \"" + h.name
                                            + "\": expected an integer >= 1");
                    bad = true;
                } else {
                    h.slots = static_cast<int>(n);
                    haveSlots = true;
                }
            } else if (key == "group") {
                if (!validName(value)) {
                    result.errors.push_back(where + "group=" + std::string(value) + ": expected a group name (letters, digits, -_.)");
                    bad = true;
                } else {
                    h.group = std::string(value);
                }
            } else {
                result.errors.push_back(where + "unknown key \"" + std::string(key) + "\" (expected slots=N, group=NAME)");
                bad = true;
            }
        }
        if (!haveSlots && !bad) {
            result.errors.push_back(where + "host \"" + h.name + "\" has no slots=N");
            bad = true;
        }
        if (auto [it, fresh] = firstLine.emplace(h.name, lineNo); !fresh) {
            result.errors.push_back(where + "host \"" + h.name + "\" is listed twice (first on line " + std::to_string(it->second)
                                    + "); give each host one line with its total slots");
            continue;
        }
        if (!bad)
            result.hosts.push_back(std::move(h));
    }
    if (result.errors.empty() && result.hosts.empty())
        result.errors.push_back(std::string(source) + ": no hosts; expected lines like \"node01 slots=8\"");
    return result;
}

std::vector<HostSpec> applyHostFilter(const std::vector<HostSpec> &hosts, std::string_view include, std::string_view exclude)
{
    if (!include.empty() && !exclude.empty())
        throw ConfigError("--include and --exclude cannot be used together; use one of them");
    const bool isInclude = !include.empty();
    const std::string_view filter = isInclude ? include : exclude;
    if (filter.empty())
        return hosts;
    const std::string flag = isInclude ? "--include" : "--exclude";

    std::map<std::string, std::set<int>> selected; // host -> slot ids (empty set: all)
    std::set<std::string> wholeHosts;
    for (std::string_view part : split(filter, '@')) {
        if (part.empty())
            throw ConfigError(flag + " \"" + std::string(filter) + "\": empty entry; expected HOST[:SLOT,SLOT]@HOST...");
        const auto colon = part.find(':');
        const std::string name(part.substr(0, colon));
        auto it = std::find_if(hosts.begin(), hosts.end(), [&](const HostSpec &h) { return h.name == name; });
        if (it == hosts.end())
            throw ConfigError(flag + ": host \"" + name + "\" is not in the hostfile");
        if (colon == std::string_view::npos) {
            wholeHosts.insert(name);
            continue;
        }
        for (std::string_view slot : split(part.substr(colon + 1), ',')) {
            long long n = -1;
            if (!parseInt(slot, n) || !hasSlot(*it, n))
                throw ConfigError(flag + ": slot \"" + std::string(slot) + "\" does not exist on host \"" + name + "\" (it has "
                                  + std::to_string(it->slots) + " slots)");
            selected[name].insert(static_cast<int>(n));
        }
    }
    std::vector<HostSpec> out;
    for (const HostSpec &h : hosts) {
        const auto ids = slotIds(h);
        const bool whole = wholeHosts.count(h.name) != 0;
        const auto chosen = selected.find(h.name);
        std::vector<int> keep;
        for (int id : ids) {
            const bool listed = whole || (chosen != selected.end() && chosen->second.count(id) != 0);
            if (listed == isInclude)
                keep.push_back(id);
        }
        if (keep.empty())
            continue;
        HostSpec copy = h;
        copy.slots = static_cast<int>(keep.size());
        bool identity = true; // devices 0..k-1 need no explicit list
        for (std::size_t i = 0; i < keep.size(); ++i)
            identity = identity && keep[i] == static_cast<int>(i);
        copy.devices = identity ? std::vector<int>{} : keep;
        out.push_back(std::move(copy));
    }
    if (out.empty())
        throw ConfigError(flag + " \"" + std::string(filter) + "\" leaves no slots to run on");
    return out;
}

std::string hostfileFromHosts(const std::vector<HostSpec> &hosts)
{
    std::ostringstream out;
    out << "# ClusterPPL hostfile (DeepSpeed format; group= is a ClusterPPL extension)\n";
    std::string include;
    for (const HostSpec &h : hosts) {
        out << h.name << " slots=" << h.slots;
        if (!h.group.empty())
            out << " group=" << h.group;
        out << '\n';
    }
    for (const HostSpec &h : hosts) {
        if (h.devices.empty())
            continue;
        std::string ids;
        for (int d : h.devices) {
            ids += ids.empty() ? "" : ",";
            ids += std::to_string(d);
        }
        out << "# " << h.name << " uses devices " << ids << ", which a hostfile cannot express: pass --include "
            << h.name << ":" << ids << "\n";
    }
    return out.str();
}

std::vector<std::string> carrySharedHostSettings(const std::vector<HostSpec> &from, std::vector<HostSpec> &to)
{
    std::vector<std::string> carried;
    if (from.empty())
        return carried;
    const HostSpec defaults;
    // One field: carried when every host of `from` has the first one's value and it is not the default.
    auto carry = [&](const char *what, auto member) {
        const auto &first = member(from.front());
        if (first == member(defaults))
            return;
        for (const HostSpec &h : from)
            if (!(member(h) == first))
                return;
        for (HostSpec &h : to)
            member(h) = first;
        carried.emplace_back(what);
    };
    carry("agent", [](auto &h) -> auto & { return h.agent; });
    carry("workdir", [](auto &h) -> auto & { return h.workdir; });
    carry("env", [](auto &h) -> auto & { return h.env; });
    carry("ssh user", [](auto &h) -> auto & { return h.ssh.user; });
    carry("ssh port", [](auto &h) -> auto & { return h.ssh.port; });
    carry("ssh key", [](auto &h) -> auto & { return h.ssh.identityFile; });
    carry("password login", [](auto &h) -> auto & { return h.ssh.passwordAuth; });
    return carried;
}

ClusterProfile profileFromHosts(std::vector<HostSpec> hosts, std::string launcher)
{
    ClusterProfile p;
    p.launcher = std::move(launcher);
    const bool labelled = std::any_of(hosts.begin(), hosts.end(), [](const HostSpec &h) { return !h.group.empty(); });
    p.grouping.mode = labelled ? GroupingSpec::Mode::ByLabel : GroupingSpec::Mode::ByHost;
    p.hosts = std::move(hosts);
    return p;
}

} // namespace cppl
