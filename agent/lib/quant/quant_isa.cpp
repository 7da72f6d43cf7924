// SPDX-License-Identifier: MIT
#include "quant_isa.h"

#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace cppl::agent::quant {

namespace {

// The CPU features the kernels use, each counted only when the OS also saves the registers it needs
// (xgetbv). Read with cpuid directly: the compilers' __builtin_cpu_supports do not all know avxvnni,
// f16c or avx512bf16.
struct Features
{
    bool avx2 = false, fma = false, f16c = false, avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
    bool avx512vnni = false, avxvnni = false, avx512bf16 = false;

    [[nodiscard]] bool avx2Base() const { return avx2 && fma && f16c; }
    [[nodiscard]] bool avx512Base() const { return avx2Base() && avx512f && avx512bw && avx512vl && avx512dq; }
};

Features readFeatures()
{
    Features r;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1U << 27))) // OSXSAVE
        return r;
    unsigned lo = 0, hi = 0;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const bool avx = (lo & 0x6U) == 0x6U && (c & (1U << 28)); // the OS saves xmm/ymm; the CPU has AVX
    const bool zmm = (lo & 0xE6U) == 0xE6U;                    // ... and the opmask and zmm registers
    r.fma = avx && (c & (1U << 12));
    r.f16c = avx && (c & (1U << 29));
    if (!avx || __get_cpuid_max(0, nullptr) < 7)
        return r;
    __cpuid_count(7, 0, a, b, c, d);
    r.avx2 = b & (1U << 5);
    r.avx512f = zmm && (b & (1U << 16));
    r.avx512dq = r.avx512f && (b & (1U << 17));
    r.avx512bw = r.avx512f && (b & (1U << 30));
    r.avx512vl = r.avx512f && (b & (1U << 31));
    r.avx512vnni = r.avx512f && (c & (1U << 11));
    __cpuid_count(7, 1, a, b, c, d);
    r.avxvnni = a & (1U << 4);
    r.avx512bf16 = r.avx512f && (a & (1U << 5));
#endif
    return r;
}

const Features &features()
{
    static const Features f = readFeatures();
    return f;
}

} // namespace

bool supported(IntIsa isa)
{
    const Features &f = features();
    switch (isa) {
    case IntIsa::Avx512Vnni:
        return f.avx512Base() && f.avx512vnni;
    case IntIsa::AvxVnni:
        return f.avx2Base() && f.avxvnni;
    case IntIsa::Avx2:
        return f.avx2Base();
    case IntIsa::Generic:
        return true;
    }
    return false;
}

bool supported(Bf16Isa isa)
{
    return isa == Bf16Isa::Generic || (features().avx512Base() && features().avx512bf16);
}

IntIsa detectIntIsa()
{
    static const IntIsa isa = [] {
        for (IntIsa i : {IntIsa::Avx512Vnni, IntIsa::AvxVnni, IntIsa::Avx2})
            if (supported(i))
                return i;
        return IntIsa::Generic;
    }();
    return isa;
}

Bf16Isa detectBf16Isa()
{
    static const Bf16Isa isa = supported(Bf16Isa::Avx512Bf16) ? Bf16Isa::Avx512Bf16 : Bf16Isa::Generic;
    return isa;
}

const char *isaName(IntIsa isa)
{
    switch (isa) {
    case IntIsa::Avx512Vnni:
        return "avx512-vnni";
    case IntIsa::AvxVnni:
        return "avx-vnni";
    case IntIsa::Avx2:
        return "avx2";
    case IntIsa::Generic:
        return "generic";
    }
    return "?";
}

const char *isaName(Bf16Isa isa) { return isa == Bf16Isa::Avx512Bf16 ? "avx512-bf16" : "generic"; }

const char *cpuFlagsSeen()
{
    static const std::string flags = [] {
        const Features &f = features();
        const std::pair<const char *, bool> named[] = {{"avx2", f.avx2},         {"fma", f.fma},           {"f16c", f.f16c},
                                                       {"avx512f", f.avx512f},   {"avx512bw", f.avx512bw}, {"avx512vl", f.avx512vl},
                                                       {"avx512dq", f.avx512dq}, {"avx512_vnni", f.avx512vnni}, {"avx_vnni", f.avxvnni},
                                                       {"avx512_bf16", f.avx512bf16}};
        std::string s;
        for (const auto &[name, present] : named)
            if (present)
                s += (s.empty() ? "" : " ") + std::string(name);
        return s.empty() ? std::string("none of the x86 vector extensions") : s;
    }();
    return flags.c_str();
}

} // namespace cppl::agent::quant
