// SPDX-License-Identifier: MIT
// libFuzzer target for DeepSpeed hostfiles and the --include / --exclude filter syntax
// (docs/fuzzing.md). Input: line 1 is a filter, the rest a hostfile. Properties: parsed hosts
// write back to a hostfile that parses to the same hosts; --include F and --exclude F split every
// host's slots into two disjoint parts that together are all of them.
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "cppl/hostfile.h"

#include <algorithm>
#include <map>
#include <set>

namespace {

using cppl::HostSpec;

std::vector<int> slotIds(const HostSpec &h)
{
    if (!h.devices.empty())
        return h.devices;
    std::vector<int> ids(static_cast<std::size_t>(h.slots));
    for (int i = 0; i < h.slots; ++i)
        ids[static_cast<std::size_t>(i)] = i;
    return ids;
}

/// Host name -> slot ids; an empty map when the filter was refused (ConfigError names the problem).
std::map<std::string, std::vector<int>> filtered(const std::vector<HostSpec> &hosts, std::string_view include,
                                                  std::string_view exclude, bool &refused)
{
    std::map<std::string, std::vector<int>> out;
    refused = false;
    try {
        for (const HostSpec &h : cppl::applyHostFilter(hosts, include, exclude)) {
            if (h.slots != static_cast<int>(slotIds(h).size()))
                cppl::fuzz::fail("a filtered host's devices disagree with its slots", h.name);
            out[h.name] = slotIds(h);
        }
    } catch (const cppl::ConfigError &e) {
        if (std::string_view(e.what()).empty())
            cppl::fuzz::fail("an empty filter error");
        refused = true;
    }
    return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    const std::string_view input = fuzz::asText(data, size);
    const auto newline = input.find('\n');
    const std::string_view filter = input.substr(0, newline);
    const std::string_view text = newline == std::string_view::npos ? std::string_view{} : input.substr(newline + 1);

    const auto parsed = parseHostfile(text, "fuzz.hostfile");
    if (!parsed.ok()) {
        for (const auto &e : parsed.errors)
            if (e.empty())
                fuzz::fail("an empty error message");
        return 0;
    }
    const std::string written = hostfileFromHosts(parsed.hosts);
    const auto again = parseHostfile(written, "round-trip.hostfile");
    if (!again.ok() || again.hosts != parsed.hosts)
        fuzz::fail("hostfileFromHosts wrote a hostfile that parses differently", written);

    // Both filters at once are refused; neither is the identity.
    bool refused = false;
    filtered(parsed.hosts, filter.empty() ? "x" : filter, filter.empty() ? "x" : filter, refused);
    if (!refused)
        fuzz::fail("--include and --exclude together were accepted");
    if (applyHostFilter(parsed.hosts, {}, {}) != parsed.hosts)
        fuzz::fail("no filter changed the hosts");
    if (filter.empty())
        return 0;

    bool includeRefused = false;
    bool excludeRefused = false;
    const auto kept = filtered(parsed.hosts, filter, {}, includeRefused);
    const auto left = filtered(parsed.hosts, {}, filter, excludeRefused);
    if (includeRefused && excludeRefused)
        return 0; // a bad filter (unknown host, slot, empty entry) is refused by both
    for (const HostSpec &h : parsed.hosts) {
        std::vector<int> both;
        if (auto it = kept.find(h.name); it != kept.end())
            both = it->second;
        if (auto it = left.find(h.name); it != left.end())
            both.insert(both.end(), it->second.begin(), it->second.end());
        std::sort(both.begin(), both.end());
        // A refused side leaves no slots at all; the other side then has every slot.
        if (both != slotIds(h))
            fuzz::fail("--include F and --exclude F do not split the host's slots", h.name + "\n" + std::string(input));
    }
    // Filtered hosts still describe a hostfile (device lists become comments).
    if (!includeRefused) {
        std::vector<HostSpec> hosts = applyHostFilter(parsed.hosts, filter, {});
        if (!parseHostfile(hostfileFromHosts(hosts), "filtered.hostfile").ok())
            fuzz::fail("a filtered host list writes an unreadable hostfile", std::string(input));
    }
    return 0;
}
