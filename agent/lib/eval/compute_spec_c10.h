// SPDX-License-Identifier: MIT
// compute_spec.h's types as c10's, for the TUs that hand them to LibTorch (they include ATen
// anyway). Only c10's value types here: everything else about a run stays torch-free.
#pragma once

#include "compute_spec.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace cppl::agent {

[[nodiscard]] inline c10::ScalarType toScalarType(Dtype dtype) noexcept
{
    switch (dtype) {
    case Dtype::Float32:
        return c10::ScalarType::Float;
    case Dtype::BFloat16:
        return c10::ScalarType::BFloat16;
    case Dtype::Float16:
        return c10::ScalarType::Half;
    }
    return c10::ScalarType::Float;
}

[[nodiscard]] inline c10::Device toDevice(const DeviceSpec &device)
{
    if (!device.cuda)
        return c10::Device(c10::DeviceType::CPU);
    return device.hasIndex() ? c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device.index))
                             : c10::Device(c10::DeviceType::CUDA);
}

[[nodiscard]] inline DeviceSpec toDeviceSpec(const c10::Device &device) noexcept
{
    return {device.is_cuda(), device.is_cuda() && device.has_index() ? static_cast<int>(device.index()) : -1};
}

} // namespace cppl::agent
