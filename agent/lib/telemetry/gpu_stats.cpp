// SPDX-License-Identifier: MIT
#include "telemetry/gpu_stats.h"

#include <dlfcn.h>

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace cppl::agent::telemetry {

namespace {

// The few NVML declarations used, from NVIDIA's documented C API (nvml.h is not needed to build).
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlDeviceSt;
using NvmlDeviceHandle = NvmlDeviceSt *;
struct NvmlMemory
{
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
};
struct NvmlUtilization
{
    unsigned int gpu;
    unsigned int memory;
};

class Nvml final : public GpuStats
{
public:
    ~Nvml() override
    {
        if (m_shutdown)
            m_shutdown();
        if (m_lib)
            ::dlclose(m_lib);
    }

    /// Loads the library and finds the device; false with @p why otherwise.
    bool open(const NvmlDevice &device, const char *library, std::string *why)
    {
        m_lib = ::dlopen(library, RTLD_NOW | RTLD_LOCAL);
        if (!m_lib)
            return fail(why, std::string("NVML not loaded (") + library + ": " + lastDlError() + ")");
        auto init = symbol<NvmlReturn (*)()>("nvmlInit_v2");
        auto byIndex = symbol<NvmlReturn (*)(unsigned, NvmlDeviceHandle *)>("nvmlDeviceGetHandleByIndex_v2");
        auto byUuid = symbol<NvmlReturn (*)(const char *, NvmlDeviceHandle *)>("nvmlDeviceGetHandleByUUID");
        auto byBusId = symbol<NvmlReturn (*)(const char *, NvmlDeviceHandle *)>("nvmlDeviceGetHandleByPciBusId_v2");
        m_errorString = symbol<const char *(*)(NvmlReturn)>("nvmlErrorString");
        m_memory = symbol<NvmlReturn (*)(NvmlDeviceHandle, NvmlMemory *)>("nvmlDeviceGetMemoryInfo");
        m_utilization = symbol<NvmlReturn (*)(NvmlDeviceHandle, NvmlUtilization *)>("nvmlDeviceGetUtilizationRates");
        auto shutdown = symbol<NvmlReturn (*)()>("nvmlShutdown");
        if (!init || !byIndex || !byUuid || !byBusId || !m_memory || !shutdown)
            return fail(why, std::string(library) + " lacks the NVML functions used (a driver older than NVML v2?)");
        if (const NvmlReturn rc = init(); rc != kNvmlSuccess)
            return fail(why, "nvmlInit: " + errorText(rc));
        m_shutdown = shutdown; // from here on, the destructor shuts NVML down
        const std::string name = !device.pciBusId.empty() ? "at PCI " + device.pciBusId
                                 : !device.uuid.empty()    ? device.uuid
                                                           : std::to_string(device.index.value_or(0));
        const NvmlReturn rc = !device.pciBusId.empty() ? byBusId(device.pciBusId.c_str(), &m_device)
                              : !device.uuid.empty()    ? byUuid(device.uuid.c_str(), &m_device)
                                                        : byIndex(device.index.value_or(0), &m_device);
        if (rc != kNvmlSuccess)
            return fail(why, "NVML has no device " + name + ": " + errorText(rc));
        return true;
    }

    std::optional<GpuSample> sample() override
    {
        NvmlMemory mem{};
        if (m_memory(m_device, &mem) != kNvmlSuccess || mem.total == 0 || mem.used > mem.total)
            return std::nullopt;
        GpuSample s;
        s.usedBytes = static_cast<std::int64_t>(mem.used);
        s.totalBytes = static_cast<std::int64_t>(mem.total);
        // Not supported on MIG slices and some boards: the memory figures still go out.
        NvmlUtilization u{};
        if (m_utilization && m_utilization(m_device, &u) == kNvmlSuccess && u.gpu <= 100)
            s.utilizationPercent = u.gpu;
        return s;
    }

private:
    template <typename Fn>
    Fn symbol(const char *name)
    {
        return reinterpret_cast<Fn>(::dlsym(m_lib, name));
    }
    static std::string lastDlError()
    {
        const char *e = ::dlerror();
        return e ? e : "unknown error";
    }
    std::string errorText(NvmlReturn rc) const
    {
        const char *s = m_errorString ? m_errorString(rc) : nullptr;
        return (s ? std::string(s) : std::string("error")) + " (" + std::to_string(rc) + ")";
    }
    static bool fail(std::string *why, std::string text)
    {
        if (why)
            *why = std::move(text);
        return false;
    }

    void *m_lib = nullptr;
    NvmlDeviceHandle m_device = nullptr;
    NvmlReturn (*m_shutdown)() = nullptr;
    NvmlReturn (*m_memory)(NvmlDeviceHandle, NvmlMemory *) = nullptr;
    NvmlReturn (*m_utilization)(NvmlDeviceHandle, NvmlUtilization *) = nullptr;
    const char *(*m_errorString)(NvmlReturn) = nullptr;
};

} // namespace

std::optional<NvmlDevice> nvmlDeviceFor(int cudaIndex, const char *visibleDevices)
{
    if (cudaIndex < 0)
        return std::nullopt;
    if (!visibleDevices || !*visibleDevices)
        return NvmlDevice{static_cast<unsigned>(cudaIndex), {}, {}};
    std::vector<std::string_view> entries;
    std::string_view rest(visibleDevices);
    while (true) {
        const auto comma = rest.find(',');
        std::string_view e = rest.substr(0, comma);
        while (!e.empty() && e.front() == ' ')
            e.remove_prefix(1);
        while (!e.empty() && e.back() == ' ')
            e.remove_suffix(1);
        entries.push_back(e);
        if (comma == std::string_view::npos)
            break;
        rest.remove_prefix(comma + 1);
    }
    if (static_cast<std::size_t>(cudaIndex) >= entries.size())
        return std::nullopt;
    const std::string_view e = entries[static_cast<std::size_t>(cudaIndex)];
    if (e.starts_with("GPU-") || e.starts_with("MIG-"))
        return NvmlDevice{std::nullopt, std::string(e), {}};
    unsigned index = 0;
    const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), index);
    if (ec != std::errc() || end != e.data() + e.size())
        return std::nullopt; // CUDA itself stops at an invalid entry
    return NvmlDevice{index, {}, {}};
}

std::unique_ptr<GpuStats> openNvml(const NvmlDevice &device, std::string *why, const char *library)
{
    auto nvml = std::make_unique<Nvml>();
    if (!nvml->open(device, library, why))
        return nullptr;
    return nvml;
}

std::unique_ptr<GpuStats> openNvmlForCudaDevice(int cudaIndex, const std::string &pciBusId, std::string *why)
{
    if (!pciBusId.empty())
        return openNvml(NvmlDevice{std::nullopt, {}, pciBusId}, why);
    const auto device = nvmlDeviceFor(cudaIndex, std::getenv("CUDA_VISIBLE_DEVICES"));
    if (!device) {
        if (why)
            *why = "CUDA device " + std::to_string(cudaIndex) + " has no NVML name in CUDA_VISIBLE_DEVICES";
        return nullptr;
    }
    return openNvml(*device, why);
}

} // namespace cppl::agent::telemetry
