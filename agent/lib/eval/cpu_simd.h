// SPDX-License-Identifier: MIT
// For the kernels' sources only (cpu_gemm.cpp, cpu_attention.cpp): x86 intrinsics where the target has
// them, and the choice between a function's AVX-512 version and its portable one.
#pragma once

#include "cpu_gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPPL_X86 1
#else
#define CPPL_X86 0
#endif

// The AVX-512 version of a function where this CPU has it, else the portable one (the only one
// compiled off x86).
#if CPPL_X86
#define CPPL_BY_ISA(avx512, generic) (::cppl::agent::cpu::detectIsa() == ::cppl::agent::cpu::Isa::Avx512 ? (avx512) : (generic))
#else
#define CPPL_BY_ISA(avx512, generic) (generic)
#endif
