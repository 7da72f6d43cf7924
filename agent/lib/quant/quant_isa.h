// SPDX-License-Identifier: MIT
// Which integer and bfloat16 kernels this CPU runs, by cpuid (the compiler's builtins), checked once.
#pragma once

namespace cppl::agent::quant {

/// The int8 / int4 kernels, widest first. Every path computes the same int32 dot products and
/// combines them with the scales in the same float32 operations, so all give the same bits
/// (qgemm.h); they differ only in speed.
enum class IntIsa {
    Avx512Vnni, ///< AVX-512 F/BW/VL + VNNI: vpdpbusd on 512-bit vectors
    AvxVnni,    ///< AVX2 + AVX-VNNI (VEX vpdpbusd on 256-bit vectors), CPUs without AVX-512
    Avx2,       ///< AVX2 + FMA: vpmaddubsw / vpmaddwd
    Generic,    ///< portable C++
};

/// The bfloat16 kernels. The portable one follows vdpbf16ps's published definition operation by
/// operation (bf16_gemm.h), so both give the same bits.
enum class Bf16Isa {
    Avx512Bf16, ///< AVX-512 F/BW/VL + AVX512_BF16: vdpbf16ps
    Generic,    ///< portable C++
};

[[nodiscard]] IntIsa detectIntIsa();
[[nodiscard]] Bf16Isa detectBf16Isa();
/// Whether this CPU can run `isa` (tests and the benchmark run every path the CPU has).
[[nodiscard]] bool supported(IntIsa isa);
[[nodiscard]] bool supported(Bf16Isa isa);
[[nodiscard]] const char *isaName(IntIsa isa);
[[nodiscard]] const char *isaName(Bf16Isa isa);
/// The CPU features the kernels look at, as cpuinfo names ("avx2 fma f16c avx512f ..."), for logs
/// and benchmark output.
[[nodiscard]] const char *cpuFlagsSeen();

} // namespace cppl::agent::quant
