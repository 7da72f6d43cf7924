// SPDX-License-Identifier: MIT
#include "compute_spec.h"

#include "cppl/errors.h"

namespace cppl::agent {

Dtype dtypeFromName(const std::string &name)
{
    if (name == "float32")
        return Dtype::Float32;
    if (name == "bfloat16")
        return Dtype::BFloat16;
    if (name == "float16")
        return Dtype::Float16;
    throw ConfigError("--dtype \"" + name + "\" is not supported (float32, bfloat16, float16)");
}

std::string dtypeName(Dtype dtype)
{
    switch (dtype) {
    case Dtype::Float32:
        return "float32";
    case Dtype::BFloat16:
        return "bfloat16";
    case Dtype::Float16:
        return "float16";
    }
    return "other";
}

int bytesPerElement(Dtype dtype)
{
    return dtype == Dtype::Float32 ? 4 : 2;
}

std::string DeviceSpec::str() const
{
    if (!cuda)
        return "cpu";
    return hasIndex() ? "cuda:" + std::to_string(index) : std::string("cuda");
}

GemmBackend gemmFromName(const std::string &name)
{
    if (name == "auto")
        return GemmBackend::Auto;
    if (name == "native")
        return GemmBackend::Native;
    if (name == "onednn")
        return GemmBackend::OneDnn;
    if (name == "blas")
        return GemmBackend::Blas;
    throw ConfigError("--gemm \"" + name + "\" is not one of auto, native, onednn, blas");
}

} // namespace cppl::agent
