// SPDX-License-Identifier: MIT
// libFuzzer target for profile JSON (docs/profile.md, docs/fuzzing.md): any bytes are rejected with
// messages or parsed into a valid profile whose canonical JSON parses back to the same profile.
#include "fuzz_support.h"

#include "cppl/cluster_profile.h"

#include <set>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    const auto parsed = parseProfile(fuzz::asText(data, size), "fuzz.json");
    if (!parsed.ok()) {
        for (const auto &e : parsed.errors)
            if (e.empty())
                fuzz::fail("an empty error message");
        return 0;
    }
    const ClusterProfile &p = parsed.profile;
    if (const auto problems = validateProfile(p); !problems.empty())
        fuzz::fail("parseProfile accepted a profile validateProfile rejects", problems.front());

    // Round trip: the canonical JSON is a fixed point and describes the same profile.
    const std::string json = profileToJson(p);
    const auto again = parseProfile(json, "round-trip.json");
    if (!again.ok())
        fuzz::fail("profileToJson wrote JSON parseProfile rejects", again.errors.front() + "\n" + json);
    if (!(again.profile == p))
        fuzz::fail("the profile's JSON parses to a different profile", json);
    if (profileToJson(again.profile) != json)
        fuzz::fail("profileToJson is not stable", json);

    // A valid profile lays out: one rank per slot, each in exactly one group, leaders first.
    const RankLayout layout = rankLayout(p);
    long long slots = 0;
    for (const auto &h : p.hosts)
        slots += h.slots;
    if (layout.worldSize() != slots)
        fuzz::fail("rankLayout: world size differs from the sum of slots", json);
    std::set<int> grouped;
    for (std::size_t g = 0; g < layout.groups.size(); ++g) {
        const auto &ranks = layout.groups[g].ranks;
        if (ranks.empty())
            fuzz::fail("rankLayout: an empty group", json);
        for (std::size_t i = 0; i < ranks.size(); ++i) {
            if (ranks[i] < 0 || ranks[i] >= layout.worldSize() || !grouped.insert(ranks[i]).second)
                fuzz::fail("rankLayout: a rank outside the world or in two groups", json);
            if (i > 0 && ranks[i] <= ranks[i - 1])
                fuzz::fail("rankLayout: group ranks not ascending", json);
            if (layout.ranks[static_cast<std::size_t>(ranks[i])].group != static_cast<int>(g))
                fuzz::fail("rankLayout: a rank's group index disagrees with its group", json);
        }
    }
    if (static_cast<int>(grouped.size()) != layout.worldSize())
        fuzz::fail("rankLayout: a rank in no group", json);
    return 0;
}
