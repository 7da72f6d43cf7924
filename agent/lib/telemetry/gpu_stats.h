// SPDX-License-Identifier: MIT
#pragma once

// GPU memory and utilisation for telemetry (docs/telemetry.md, "Memory"). NVML is loaded at run
// time with dlopen("libnvidia-ml.so.1") and never linked: an agent built here runs unchanged on
// nodes without the NVIDIA driver, where these figures are simply absent.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace cppl::agent::telemetry {

/// One reading of one GPU.
struct GpuSample
{
    std::int64_t usedBytes = 0;   // memory in use on the device (all processes)
    std::int64_t totalBytes = 0;  // the device's memory
    std::optional<std::int64_t> utilizationPercent; // 0..100 over the driver's last sample period
};

/// Where GPU figures come from. The publisher asks at most once a second.
class GpuStats
{
public:
    virtual ~GpuStats() = default;
    /// nullopt when the device cannot be read now (the figures are then left out).
    [[nodiscard]] virtual std::optional<GpuSample> sample() = 0;
};

/// How NVML is asked for a device: by PCI bus id when CUDA gave one (the only name both count the
/// same: CUDA's default order, CUDA_DEVICE_ORDER=FASTEST_FIRST, may differ from NVML's PCI bus
/// order), else by the name CUDA_VISIBLE_DEVICES gives (an index or a UUID).
struct NvmlDevice
{
    std::optional<unsigned> index; // NVML index, or
    std::string uuid;              // a UUID to look up, or
    std::string pciBusId;          // "0000:18:00.0", as cudaDeviceGetPCIBusId writes it
};
/// The CUDA_VISIBLE_DEVICES name of CUDA device @p cudaIndex (@p visibleDevices null or empty when
/// unset; entries are indices or UUIDs, "GPU-…", "MIG-…"): the fallback where no bus id is known,
/// right where CUDA counts in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID, or identical GPUs).
[[nodiscard]] std::optional<NvmlDevice> nvmlDeviceFor(int cudaIndex, const char *visibleDevices);

/// NVML through dlopen. null, with @p why set, when the library or the device is not there
/// (no driver, no GPU, a device NVML does not know): never an error for the evaluation.
[[nodiscard]] std::unique_ptr<GpuStats> openNvml(const NvmlDevice &device, std::string *why,
                                                 const char *library = "libnvidia-ml.so.1");

/// openNvml() for the CUDA device the rank evaluates on: by @p pciBusId (the CUDA runtime's
/// cudaDeviceGetPCIBusId for @p cudaIndex), or, where that is empty, by this process's
/// CUDA_VISIBLE_DEVICES name of @p cudaIndex.
[[nodiscard]] std::unique_ptr<GpuStats> openNvmlForCudaDevice(int cudaIndex, const std::string &pciBusId, std::string *why);

} // namespace cppl::agent::telemetry
