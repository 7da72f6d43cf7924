// SPDX-License-Identifier: MIT
#include "cpu_affinity.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace cppl::agent {

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

CpuPlan planCpus(int localRank, int localRanks, int threadsFlag)
{
    CpuPlan p;
    const std::vector<int> cpus = allowedCpus();
    p.allowedCpus = static_cast<int>(cpus.size());
    p.localRanks = std::max(1, localRanks);
    const int per = std::max(1, p.allowedCpus / p.localRanks);
    if (p.localRanks > 1 && p.allowedCpus >= p.localRanks && localRank >= 0 && localRank < p.localRanks) {
        const auto first = cpus.begin() + static_cast<std::ptrdiff_t>(localRank) * per;
        p.pinned.assign(first, first + per);
    }
    if (threadsFlag > 0) {
        p.threads = threadsFlag;
        p.why = "--threads";
        // The kernels' threads all compute at once: more of them than CPUs only makes them take turns
        // (and wait for each other at every step's end).
        if (threadsFlag > per)
            p.why += "; more than this rank's " + std::to_string(per) + " CPU" + (per > 1 ? "s" : "") + " (" + std::to_string(p.allowedCpus)
                     + " allowed / " + std::to_string(p.localRanks) + " local rank" + (p.localRanks > 1 ? "s" : "")
                     + "): its threads take turns, which is slower than " + std::to_string(per);
    } else {
        p.threads = per;
        p.why = std::to_string(p.allowedCpus) + " allowed CPUs / " + std::to_string(p.localRanks) + " local rank" + (p.localRanks > 1 ? "s" : "");
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
