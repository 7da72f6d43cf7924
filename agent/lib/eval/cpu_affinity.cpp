// SPDX-License-Identifier: MIT
#include "cpu_affinity.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

namespace cppl::agent {

namespace {

/// A sysfs file's text without its trailing newline; nullopt when it cannot be read.
std::optional<std::string> readSysfs(const std::filesystem::path &path)
{
    std::ifstream in(path);
    if (!in)
        return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
        s.pop_back();
    return s;
}

std::filesystem::path under(const std::string &root, const char *relative)
{
    return std::filesystem::path(root.empty() ? "/" : root) / relative;
}

/// Slice @p k of @p m of @p cpus: equal, disjoint and in order (the remainder stays unused, so that
/// every rank gets as many as the next); empty when there are fewer CPUs than slices.
std::vector<int> slice(const std::vector<int> &cpus, int k, int m)
{
    const auto per = static_cast<std::ptrdiff_t>(cpus.size()) / std::max(1, m);
    if (per == 0 || k < 0 || k >= m)
        return {};
    const auto first = cpus.begin() + k * per;
    return {first, first + per};
}

std::string ranksText(int n)
{
    return std::to_string(n) + " local rank" + (n > 1 ? "s" : "");
}

/// A rank's CPUs from the topology, and how they were chosen.
struct NumaShare
{
    std::vector<int> cpus;
    std::string why;
};

/// Local rank `r` is on node `nodeOf[r]`: this rank's slice of its node, split among the ranks there.
std::optional<NumaShare> shareOfNode(const std::map<int, std::vector<int>> &nodes, const std::vector<int> &nodeOf, int localRank,
                                     const std::string &whose, std::string *note)
{
    const int node = nodeOf[static_cast<std::size_t>(localRank)];
    const int peers = static_cast<int>(std::count(nodeOf.begin(), nodeOf.end(), node));
    const int k = static_cast<int>(std::count(nodeOf.begin(), nodeOf.begin() + localRank, node));
    const std::vector<int> &cpus = nodes.at(node);
    NumaShare share{slice(cpus, k, peers), "NUMA node " + std::to_string(node) + whose + ": " + std::to_string(cpus.size())
                                               + " allowed CPUs / " + ranksText(peers)};
    if (share.cpus.empty()) {
        *note = "NUMA node " + std::to_string(node) + " has fewer allowed CPUs than its " + ranksText(peers) + ": plain split";
        return std::nullopt;
    }
    return share;
}

/// GPU ranks: each on its GPU's node. nullopt (with @p note) where a GPU's node is not known.
std::optional<NumaShare> gpuRanksNearTheirGpus(const std::map<int, std::vector<int>> &nodes, int localRank, const CpuPlacement &placement,
                                               std::string *note)
{
    std::vector<int> nodeOf;
    for (const std::string &bus : placement.gpuBusIds) {
        const auto node = pciNumaNode(placement.sysfsRoot, bus);
        if (!node || !nodes.contains(*node)) {
            *note = "the NUMA node of the GPU at PCI " + bus + " is " + (node ? "without allowed CPUs" : std::string("not known"))
                    + " (sys/bus/pci/devices/" + bus + "/numa_node): plain split";
            return std::nullopt;
        }
        nodeOf.push_back(*node);
    }
    return shareOfNode(nodes, nodeOf, localRank, " (its GPU's)", note);
}

/// CPU-only ranks: spread over the nodes in order, the ranks of one node splitting it; with fewer
/// ranks than nodes, each takes whole nodes.
std::optional<NumaShare> cpuRanksAcrossNodes(const std::map<int, std::vector<int>> &nodes, int localRank, int localRanks, std::string *note)
{
    std::vector<int> ids;
    for (const auto &[node, cpus] : nodes)
        ids.push_back(node);
    const auto n = static_cast<int>(ids.size());
    if (localRanks >= n) {
        std::vector<int> nodeOf;
        for (int r = 0; r < localRanks; ++r)
            nodeOf.push_back(ids[static_cast<std::size_t>(r * n / localRanks)]);
        return shareOfNode(nodes, nodeOf, localRank, " of " + std::to_string(n), note);
    }
    NumaShare share;
    const int first = localRank * n / localRanks, last = (localRank + 1) * n / localRanks;
    for (int i = first; i < last; ++i) {
        const std::vector<int> &cpus = nodes.at(ids[static_cast<std::size_t>(i)]);
        share.cpus.insert(share.cpus.end(), cpus.begin(), cpus.end());
    }
    share.why = "NUMA node" + std::string(last - first > 1 ? "s " : " ") + std::to_string(ids[static_cast<std::size_t>(first)])
                + (last - first > 1 ? "-" + std::to_string(ids[static_cast<std::size_t>(last - 1)]) : "") + " of " + std::to_string(n)
                + ": " + std::to_string(share.cpus.size()) + " allowed CPUs, " + ranksText(localRanks) + " on " + std::to_string(n) + " nodes";
    return share;
}

/// This rank's CPUs by the NUMA topology; nullopt where it is one node (the plain split is the
/// same) or cannot be used (then @p note says why).
std::optional<NumaShare> numaShare(int localRank, int localRanks, const std::vector<int> &allowed, const CpuPlacement &placement, std::string *note)
{
    std::string why;
    std::map<int, std::vector<int>> nodes = readNumaNodes(placement.sysfsRoot, &why);
    if (nodes.empty()) {
        *note = "NUMA topology not read (" + why + "): plain split";
        return std::nullopt;
    }
    for (auto it = nodes.begin(); it != nodes.end();) {
        std::vector<int> mine;
        std::copy_if(it->second.begin(), it->second.end(), std::back_inserter(mine),
                     [&](int c) { return std::binary_search(allowed.begin(), allowed.end(), c); });
        it->second = std::move(mine);
        it = it->second.empty() ? nodes.erase(it) : std::next(it);
    }
    if (nodes.size() <= 1)
        return std::nullopt;
    const auto withGpu = std::count_if(placement.gpuBusIds.begin(), placement.gpuBusIds.end(), [](const std::string &b) { return !b.empty(); });
    if (withGpu == 0)
        return cpuRanksAcrossNodes(nodes, localRank, localRanks, note);
    if (placement.gpuBusIds.size() != static_cast<std::size_t>(localRanks) || withGpu != localRanks) {
        *note = "the GPUs of " + std::to_string(withGpu) + " of " + ranksText(localRanks) + " known: plain split";
        return std::nullopt;
    }
    return gpuRanksNearTheirGpus(nodes, localRank, placement, note);
}

} // namespace

std::optional<std::vector<int>> parseCpuList(std::string_view text)
{
    std::vector<int> cpus;
    while (!text.empty()) {
        const auto comma = text.find(',');
        const std::string_view item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
        int lo = 0, hi = 0;
        const char *end = item.data() + item.size();
        std::from_chars_result r = std::from_chars(item.data(), end, lo);
        hi = lo;
        if (r.ec == std::errc() && r.ptr != end && *r.ptr == '-')
            r = std::from_chars(r.ptr + 1, end, hi);
        if (item.empty() || r.ec != std::errc() || r.ptr != end || hi < lo || hi >= CPU_SETSIZE)
            return std::nullopt;
        for (int c = lo; c <= hi; ++c)
            cpus.push_back(c);
    }
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    return cpus;
}

std::map<int, std::vector<int>> readNumaNodes(const std::string &root, std::string *why)
{
    std::map<int, std::vector<int>> nodes;
    const std::filesystem::path dir = under(root, "sys/devices/system/node");
    std::error_code ec;
    for (const auto &entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        int node = -1;
        if (!name.starts_with("node") || std::from_chars(name.data() + 4, name.data() + name.size(), node).ptr != name.data() + name.size())
            continue;
        const auto text = readSysfs(entry.path() / "cpulist");
        const auto cpus = text ? parseCpuList(*text) : std::nullopt;
        if (!cpus) {
            *why = (entry.path() / "cpulist").string() + (text ? " is malformed" : " cannot be read");
            return {};
        }
        nodes[node] = *cpus;
    }
    if (nodes.empty())
        *why = ec ? dir.string() + ": " + ec.message() : "no node*/cpulist in " + dir.string();
    return nodes;
}

std::optional<int> pciNumaNode(const std::string &root, const std::string &busId)
{
    const auto text = readSysfs(under(root, "sys/bus/pci/devices") / busId / "numa_node");
    int node = -1;
    if (!text || std::from_chars(text->data(), text->data() + text->size(), node).ptr != text->data() + text->size() || node < 0)
        return std::nullopt;
    return node;
}

std::vector<int> allowedCpus()
{
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; ++c)
            if (CPU_ISSET(c, &set))
                cpus.push_back(c);
    }
    if (cpus.empty())
        for (int c = 0; c < static_cast<int>(std::max(1U, std::thread::hardware_concurrency())); ++c)
            cpus.push_back(c);
    return cpus;
}

CpuPlan planCpus(int localRank, int localRanks, int threadsFlag, const CpuPlacement &placement)
{
    return planCpusOn(allowedCpus(), localRank, localRanks, threadsFlag, placement);
}

CpuPlan planCpusOn(const std::vector<int> &cpus, int localRank, int localRanks, int threadsFlag, const CpuPlacement &placement)
{
    CpuPlan p;
    p.allowedCpus = static_cast<int>(cpus.size());
    p.localRanks = std::max(1, localRanks);
    int per = std::max(1, p.allowedCpus / p.localRanks);
    std::string share = std::to_string(p.allowedCpus) + " allowed CPUs / " + ranksText(p.localRanks);
    std::string shareOfThreads = std::to_string(p.allowedCpus) + " allowed / " + ranksText(p.localRanks);
    const bool pin = p.localRanks > 1 && p.allowedCpus >= p.localRanks && localRank >= 0 && localRank < p.localRanks;
    std::optional<NumaShare> numa = pin ? numaShare(localRank, p.localRanks, cpus, placement, &p.note) : std::nullopt;
    if (numa) {
        p.pinned = numa->cpus;
        per = static_cast<int>(numa->cpus.size());
        share = shareOfThreads = numa->why;
    } else if (pin) {
        p.pinned = slice(cpus, localRank, p.localRanks);
    }
    if (threadsFlag > 0) {
        p.threads = threadsFlag;
        p.why = "--threads";
        // The kernels' threads all compute at once: more of them than CPUs only makes them take turns
        // (and wait for each other at every step's end).
        if (threadsFlag > per)
            p.why += "; more than this rank's " + std::to_string(per) + " CPU" + (per > 1 ? "s" : "") + " (" + shareOfThreads
                     + "): its threads take turns, which is slower than " + std::to_string(per);
    } else {
        p.threads = per;
        p.why = share;
        if (p.allowedCpus < p.localRanks)
            p.why += "; fewer CPUs than ranks: 1 thread each, not pinned";
    }
    return p;
}

bool applyPinning(CpuPlan &plan)
{
    if (plan.pinned.empty())
        return true;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : plan.pinned)
        CPU_SET(c, &set);
    if (::sched_setaffinity(0, sizeof set, &set) == 0)
        return true;
    plan.pinned.clear();
    return false;
}

std::string cpuListText(const std::vector<int> &cpus)
{
    std::string s;
    for (std::size_t i = 0; i < cpus.size();) {
        std::size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
            ++j;
        s += (s.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
        i = j + 1;
    }
    return s;
}

} // namespace cppl::agent
