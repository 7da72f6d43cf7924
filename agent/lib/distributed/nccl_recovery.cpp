// SPDX-License-Identifier: MIT
#include "nccl_recovery.h"

#include "cppl/errors.h"

#include <algorithm>
#include <charconv>

namespace cppl::agent::dist {

std::string ncclVersionText(int code)
{
    return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." + std::to_string(code % 100);
}

std::string ncclKeyPrefix(int epoch)
{
    return epoch == 0 ? std::string("cppl/nccl/") : "cppl/epoch" + std::to_string(epoch) + "/nccl/";
}

std::string formatShrinkAbility(const ShrinkAbility &a)
{
    return "v" + std::to_string(a.ncclVersion) + " s" + (a.hasShrink ? "1" : "0") + " p" + (a.parentUsable ? "1" : "0");
}

std::optional<ShrinkAbility> parseShrinkAbility(const std::string &text)
{
    // Exactly "v<digits> s<0|1> p<0|1>".
    if (text.size() < 8 || text[0] != 'v')
        return std::nullopt;
    ShrinkAbility a;
    const char *begin = text.data() + 1, *end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(begin, end, a.ncclVersion);
    if (ec != std::errc() || p == begin || a.ncclVersion < 0 || end - p != 6)
        return std::nullopt;
    auto flag = [](char c) { return c == '0' || c == '1'; };
    if (p[0] != ' ' || p[1] != 's' || !flag(p[2]) || p[3] != ' ' || p[4] != 'p' || !flag(p[5]))
        return std::nullopt;
    a.hasShrink = p[2] == '1';
    a.parentUsable = p[5] == '1';
    return a;
}

std::vector<int> excludedRanks(const std::vector<int> &oldMembers, const std::vector<int> &newMembers)
{
    for (std::size_t i = 0; i < newMembers.size(); ++i) {
        const int r = newMembers[i];
        if (std::find(oldMembers.begin(), oldMembers.end(), r) == oldMembers.end())
            throw ProtocolError("nccl regrouping: rank " + std::to_string(r) + " is among the survivors but was not in the old communicator");
        if (std::find(newMembers.begin(), newMembers.begin() + static_cast<std::ptrdiff_t>(i), r) != newMembers.begin() + static_cast<std::ptrdiff_t>(i))
            throw ProtocolError("nccl regrouping: rank " + std::to_string(r) + " is listed twice among the survivors");
    }
    std::vector<int> out;
    for (std::size_t i = 0; i < oldMembers.size(); ++i)
        if (std::find(newMembers.begin(), newMembers.end(), oldMembers[i]) == newMembers.end())
            out.push_back(static_cast<int>(i));
    return out;
}

bool keepsOrder(const std::vector<int> &oldMembers, const std::vector<int> &newMembers)
{
    auto at = oldMembers.begin();
    for (int r : newMembers) {
        at = std::find(at, oldMembers.end(), r);
        if (at == oldMembers.end())
            return false;
        ++at;
    }
    return true;
}

NcclRebuildPlan planNcclRebuild(const std::vector<int> &oldMembers, const std::vector<int> &newMembers, const std::vector<ShrinkAbility> &abilities)
{
    NcclRebuildPlan plan;
    const std::vector<int> exclude = excludedRanks(oldMembers, newMembers);
    if (abilities.size() != newMembers.size())
        throw ProtocolError("nccl regrouping: " + std::to_string(abilities.size()) + " survivors said what they can do, expected "
                            + std::to_string(newMembers.size()));
    if (exclude.empty()) {
        plan.reason = "nobody left the communicator: a new one over the same ranks";
        return plan;
    }
    if (!keepsOrder(oldMembers, newMembers)) {
        plan.reason = "the survivors are not in the old order (ncclCommShrink keeps it): a new communicator";
        return plan;
    }
    for (std::size_t i = 0; i < abilities.size(); ++i) {
        const ShrinkAbility &a = abilities[i];
        const std::string who = "rank " + std::to_string(newMembers[i]);
        if (a.ncclVersion < kNcclShrinkVersion || !a.hasShrink) {
            plan.reason = who + "'s NCCL " + ncclVersionText(a.ncclVersion) + " has no ncclCommShrink (needs " + ncclVersionText(kNcclShrinkVersion)
                          + "): a new communicator from a fresh unique id";
            return plan;
        }
        if (!a.parentUsable) {
            plan.reason = who + " has no intact world communicator to shrink (aborted after an error or a timeout): a new communicator "
                                "from a fresh unique id";
            return plan;
        }
    }
    plan.shrink = true;
    plan.exclude = exclude;
    plan.reason = "ncclCommShrink of the world communicator without " + std::to_string(exclude.size()) + " rank" + (exclude.size() > 1 ? "s" : "");
    return plan;
}

} // namespace cppl::agent::dist
