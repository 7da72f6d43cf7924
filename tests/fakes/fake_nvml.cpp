// SPDX-License-Identifier: MIT
// A fake NVML (soname libnvidia-ml.so.1) for tests on machines without a GPU: the calls
// clusterppl-agent's telemetry makes (agent/lib/telemetry/gpu_stats.cpp), over the same physical
// devices as the fake CUDA runtime (CPPL_FAKE_CUDA_DEVICES, _MEMORY, _PCI_BUS). NVML counts them in
// PCI bus order, whatever order CUDA counts them in (CPPL_FAKE_CUDA_ORDER), and ignores
// CUDA_VISIBLE_DEVICES, as the real NVML does. Declared here from NVIDIA's documented C API:
// nvml.h is not part of the CUDA headers this machine has.
#include "fake_script.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

using NvmlReturn = int;
constexpr NvmlReturn kSuccess = 0;
constexpr NvmlReturn kUninitialized = 1;
constexpr NvmlReturn kInvalidArgument = 2;
constexpr NvmlReturn kNotFound = 6;

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

/// A handle is the physical device's number, plus one (a null handle is never a device).
struct FakeNvmlDevice;
using Handle = FakeNvmlDevice *;

int g_initialized = 0;

const cppl::fakes::FakeDevices &devices()
{
    static const cppl::fakes::FakeDevices d = cppl::fakes::readFakeDevices();
    return d;
}

Handle handleOf(int physical)
{
    return reinterpret_cast<Handle>(static_cast<std::uintptr_t>(physical) + 1);
}

int physicalOf(Handle h)
{
    const auto n = static_cast<long long>(reinterpret_cast<std::uintptr_t>(h)) - 1;
    return n >= 0 && n < devices().count ? static_cast<int>(n) : -1;
}

std::string uuidOf(int physical)
{
    char text[64];
    std::snprintf(text, sizeof text, "GPU-00000000-0000-4000-8000-%012x", physical);
    return text;
}

NvmlReturn found(int physical, Handle *out)
{
    if (!g_initialized)
        return kUninitialized;
    if (!out)
        return kInvalidArgument;
    if (physical < 0 || physical >= devices().count)
        return kNotFound;
    *out = handleOf(physical);
    return kSuccess;
}

} // namespace

extern "C" {

NvmlReturn nvmlInit_v2()
{
    ++g_initialized;
    return kSuccess;
}

NvmlReturn nvmlShutdown()
{
    if (!g_initialized)
        return kUninitialized;
    --g_initialized;
    return kSuccess;
}

const char *nvmlErrorString(NvmlReturn rc)
{
    switch (rc) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case kNotFound: return "Not Found";
    default: return "Unknown Error";
    }
}

NvmlReturn nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!g_initialized)
        return kUninitialized;
    *count = static_cast<unsigned int>(devices().count);
    return kSuccess;
}

NvmlReturn nvmlDeviceGetHandleByIndex_v2(unsigned int index, Handle *device)
{
    return found(index < 64 ? static_cast<int>(index) : -1, device);
}

NvmlReturn nvmlDeviceGetHandleByUUID(const char *uuid, Handle *device)
{
    for (int d = 0; uuid && d < devices().count; ++d)
        if (uuidOf(d) == uuid)
            return found(d, device);
    return g_initialized ? kNotFound : kUninitialized;
}

/// "domain:bus:device.function" in hexadecimal, the domain of 4 or 8 digits (or left out), as
/// cudaDeviceGetPCIBusId writes it.
NvmlReturn nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, Handle *device)
{
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    char tail = 0;
    if (!pciBusId || (std::sscanf(pciBusId, "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &tail) != 4
                      && std::sscanf(pciBusId, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3))
        return g_initialized ? kInvalidArgument : kUninitialized;
    if (domain != 0 || dev != 0 || fn != 0)
        return g_initialized ? kNotFound : kUninitialized;
    return found(static_cast<int>(bus) - devices().pciBusBase, device);
}

NvmlReturn nvmlDeviceGetMemoryInfo(Handle device, NvmlMemory *memory)
{
    const int d = physicalOf(device);
    if (!g_initialized)
        return kUninitialized;
    if (d < 0 || !memory)
        return kInvalidArgument;
    // What other processes use is not known here: the device reads as idle.
    const auto total = static_cast<unsigned long long>(devices().memory[static_cast<std::size_t>(d)]);
    *memory = NvmlMemory{total, total, 0};
    return kSuccess;
}

NvmlReturn nvmlDeviceGetUtilizationRates(Handle device, NvmlUtilization *utilization)
{
    if (!g_initialized)
        return kUninitialized;
    if (physicalOf(device) < 0 || !utilization)
        return kInvalidArgument;
    *utilization = NvmlUtilization{0, 0};
    return kSuccess;
}

} // extern "C"
