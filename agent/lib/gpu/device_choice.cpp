// SPDX-License-Identifier: MIT
#include "device_choice.h"

#include "cppl/errors.h"
#include "cppl/host.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

namespace cppl::agent {

namespace {

std::string visibleText(const DevicePlacement &p)
{
    return p.cudaVisibleDevices ? "CUDA_VISIBLE_DEVICES=" + (p.cudaVisibleDevices->empty() ? std::string("\"\"") : *p.cudaVisibleDevices)
                                : std::string("CUDA_VISIBLE_DEVICES unset");
}

bool oneEntry(const std::optional<std::string> &v)
{
    return v && !v->empty() && v->find(',') == std::string::npos;
}

/// The host's "devices" entry for this local rank, checked against what this process sees.
int listedDevice(const DevicePlacement &p, const std::string &where, const std::string &seen)
{
    const auto n = static_cast<int>(p.hostDevices.size());
    if (p.requested)
        throw ConfigError(where + ": --device cuda:" + std::to_string(*p.requested) + " and --devices both choose the GPU; use --device cuda with --devices");
    if (p.localRank < 0 || p.localRank >= n)
        throw ConfigError(where + ": --devices lists " + std::to_string(n) + " GPUs for " + std::to_string(p.localWorldSize)
                          + " local ranks; list one per rank (the host's slots)");
    const int d = p.hostDevices[static_cast<std::size_t>(p.localRank)];
    if (d >= p.visibleDevices)
        throw ConfigError(where + ": --devices gives it GPU " + std::to_string(d) + " but " + seen + "; list devices 0 to "
                          + std::to_string(p.visibleDevices - 1) + " in the host's \"devices\"");
    return d;
}

} // namespace

DeviceRequest parseDeviceText(const std::string &text, bool cudaAvailable)
{
    if (text == "auto")
        return DeviceRequest{cudaAvailable, std::nullopt};
    if (text == "cpu")
        return DeviceRequest{};
    if (text == "cuda" || text.starts_with("cuda:")) {
        if (!cudaAvailable)
            throw ConfigError("--device " + text + ": this agent's LibTorch was built without CUDA, or no GPU is visible; use --device cpu");
        if (text == "cuda")
            return DeviceRequest{true, std::nullopt};
        const std::string digits = text.substr(5);
        int index = -1;
        const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || index < 0 || index > 127)
            throw ConfigError("--device \"" + text + "\": the GPU's index must be a number from 0, e.g. cuda:1");
        return DeviceRequest{true, index};
    }
    throw ConfigError("--device \"" + text + "\" is not one of cpu, cuda, cuda:N, auto");
}

std::vector<int> parseDeviceList(const std::string &text)
{
    std::vector<int> out;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        const std::string item = text.substr(at, comma - at);
        int index = -1;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), index);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size() || index < 0 || index > 1 << 20)
            throw ConfigError("--devices \"" + text + "\": expected device indices separated by commas, e.g. 4,5,6,7");
        if (std::find(out.begin(), out.end(), index) != out.end())
            throw ConfigError("--devices \"" + text + "\": device " + item + " is listed twice; each rank needs its own");
        out.push_back(index);
        at = comma + 1;
    }
    return out;
}

int chooseCudaDevice(const DevicePlacement &p)
{
    const std::string where = "host " + p.host + ", local rank " + std::to_string(p.localRank);
    const std::string seen = std::to_string(p.visibleDevices) + " GPU" + (p.visibleDevices == 1 ? "" : "s") + " visible (" + visibleText(p) + ")";
    if (p.visibleDevices <= 0)
        throw ConfigError(where + ": no GPU is visible to this process (" + visibleText(p)
                          + "); check the driver with nvidia-smi, or use --device cpu");
    if (!p.hostDevices.empty())
        return listedDevice(p, where, seen);
    if (p.requested) {
        if (*p.requested < 0 || *p.requested >= p.visibleDevices)
            throw ConfigError(where + ": --device cuda:" + std::to_string(*p.requested) + " but " + seen + "; use cuda:0 to cuda:"
                              + std::to_string(p.visibleDevices - 1) + ", or --device cuda to take cuda:LOCAL_RANK");
        if (p.nccl && !p.shareGpu && p.localWorldSize > 1 && p.visibleDevices > 1)
            throw ConfigError(where + ": --device cuda:" + std::to_string(*p.requested) + " puts all " + std::to_string(p.localWorldSize)
                              + " ranks of this host on one GPU, and NCCL needs a GPU of its own for every rank; use --device cuda "
                                "(each rank takes cuda:LOCAL_RANK) or --backend gloo ("
                              + kNcclShareGpuVariable + "=1 allows it as a test mode)");
        return *p.requested;
    }
    // Several local ranks that each see one GPU: the launcher gave every rank its own. When the
    // variable is unset they all see the same one.
    const bool ownGpuEach = p.visibleDevices == 1 && oneEntry(p.cudaVisibleDevices);
    if (p.nccl && !p.shareGpu && p.localWorldSize > p.visibleDevices && !ownGpuEach)
        throw ConfigError(where + ": backend nccl with " + std::to_string(p.localWorldSize) + " ranks on this host but " + seen
                          + "; NCCL needs a GPU of its own for every rank: start at most " + std::to_string(p.visibleDevices)
                          + " ranks here (--nproc-per-node, slots in the profile), make more GPUs visible, or use --backend gloo ("
                          + kNcclShareGpuVariable + "=1 lets NCCL ranks share a GPU as a test mode, slowly: docs/communication.md)");
    if (p.visibleDevices == 1)
        return 0;
    return p.localRank % p.visibleDevices; // past the count only with gloo or the test mode, where sharing a GPU is allowed
}

int ranksPerCudaDevice(const DevicePlacement &p)
{
    const int local = std::max(p.localWorldSize, 1);
    if (p.visibleDevices <= 0)
        return 1;
    if (p.visibleDevices == 1 && oneEntry(p.cudaVisibleDevices) && local > 1)
        return 1;
    if (!p.hostDevices.empty()) // distinct by parseDeviceList
        return 1; // the launcher gave every rank a GPU of its own (chooseCudaDevice assumes the same)
    if (p.requested) // every rank of the host names the same index (the arguments are the same)
        return local;
    const int device = chooseCudaDevice(p);
    int n = 0;
    for (int r = 0; r < local; ++r)
        n += (p.visibleDevices == 1 ? 0 : r % p.visibleDevices) == device ? 1 : 0;
    return std::max(n, 1);
}

bool ncclShareGpuRequested()
{
    const char *v = std::getenv(kNcclShareGpuVariable);
    return v && std::string(v) == "1";
}

std::string ncclHostId()
{
    if (const char *id = std::getenv("NCCL_HOSTID"); id && *id) // as NCCL reads it: each such process its own host
        return id;
    return localHostName();
}

std::string prepareNcclGpuSharing(int rank)
{
    if (!ncclShareGpuRequested())
        return {};
    std::string set;
    if (const char *id = std::getenv("NCCL_HOSTID"); !id || !*id) {
        const std::string value = localHostName() + "-rank" + std::to_string(rank);
        ::setenv("NCCL_HOSTID", value.c_str(), 1);
        set = "NCCL_HOSTID=" + value;
    }
    if (const char *net = std::getenv("NCCL_NET"); !net || !*net) {
        ::setenv("NCCL_NET", "Socket", 1);
        set += std::string(set.empty() ? "" : ", ") + "NCCL_NET=Socket";
    }
    if (set.empty())
        return {};
    return std::string("nccl: ") + kNcclShareGpuVariable + "=1 (a test mode: several ranks on one GPU, slowly): " + set
           + " before NCCL starts, so that NCCL sees each rank as a host of its own";
}

std::optional<std::pair<int, int>> findSharedGpu(const std::vector<RankGpu> &ranks)
{
    std::map<std::pair<std::string, std::string>, int> first;
    for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
        const RankGpu &g = ranks[static_cast<std::size_t>(r)];
        const auto [it, fresh] = first.emplace(std::make_pair(g.host, g.busId), r);
        if (!fresh)
            return std::make_pair(it->second, r);
    }
    return std::nullopt;
}

} // namespace cppl::agent
