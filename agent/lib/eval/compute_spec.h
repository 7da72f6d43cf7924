// SPDX-License-Identifier: MIT
// How and where a model computes, as the options and the result name it: the number format, the
// device and the CPU's matrix-product library. Torch-free, so that option parsing, the round loop
// and the result writing compile without LibTorch; compute_spec_c10.h converts these to c10's
// types in the TUs that include ATen anyway.
#pragma once

#include <string>

namespace cppl::agent {

/// The number format of the weights and activations (the log-softmax is float32 whatever it is).
/// The options resolve the default (bfloat16 on a GPU, else float32) as soon as the device is
/// known, so no "auto" value reaches the model.
enum class Dtype {
    Float32,
    BFloat16,
    Float16,
};

/// "float32", "bfloat16" or "float16" -> the Dtype; throws ConfigError naming the choices otherwise.
[[nodiscard]] Dtype dtypeFromName(const std::string &name);
/// The name the options take and the result records.
[[nodiscard]] std::string dtypeName(Dtype dtype);
/// Bytes per element of a tensor in @p dtype (the default GPU batch counts activations with it).
[[nodiscard]] int bytesPerElement(Dtype dtype);

/// Where the model runs: the CPU, or one CUDA device. After the options are parsed a CUDA device
/// always has its index (one device per rank, decided once: gpu/device_choice.h).
struct DeviceSpec
{
    bool cuda = false;
    int index = -1; ///< the CUDA device as this process numbers them; -1: not chosen (the CPU has none)

    [[nodiscard]] bool isCuda() const noexcept { return cuda; }
    [[nodiscard]] bool isCpu() const noexcept { return !cuda; }
    [[nodiscard]] bool hasIndex() const noexcept { return index >= 0; }
    /// "cpu", "cuda" or "cuda:N", as c10::Device::str() writes them (the result's "device").
    [[nodiscard]] std::string str() const;
};

/// @brief Which library runs the dense layers' matrix products on the CPU.
enum class GemmBackend {
    Auto,   ///< Native for float32 on the CPU, else LibTorch's own (at::linear)
    Native, ///< the agent's own kernels (cpu_gemm.h): packed weights, cpuid-selected, thread-count-independent bits
    Blas,   ///< the BLAS LibTorch links (OpenBLAS here), through at::linear
    OneDnn, ///< oneDNN (mkldnn) with weights packed once at load
};

/// "auto", "native", "onednn" or "blas" -> the GemmBackend; throws ConfigError naming the choices otherwise.
[[nodiscard]] GemmBackend gemmFromName(const std::string &name);

} // namespace cppl::agent
