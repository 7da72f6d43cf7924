// SPDX-License-Identifier: MIT
#include "tensor_parallel_check.h"

#include "nccl_device.h"

#include "eval/tensor_parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>

namespace cppl::agent::dist {

namespace {

std::uint64_t mix(std::uint64_t x) noexcept // splitmix64's finaliser
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

template<typename T> bool sameBits(T a, T b) noexcept
{
    return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Counts the elements of @p got that differ (in bits) from @p want, naming the first.
template<typename T>
std::int64_t countWrong(const char *what, const std::vector<T> &got, const std::vector<T> &want, std::string &first)
{
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!sameBits(got[i], want[i]) && wrong++ == 0 && first.empty()) {
            char line[200];
            std::snprintf(line, sizeof line, "%s, element %zu of %zu: expected %.9g, got %.9g", what, i, got.size(), static_cast<double>(want[i]),
                          static_cast<double>(got[i]));
            first = line;
        }
    return wrong;
}

/// This member's values and what every member must get back: the sums in member order, the maxima.
struct Expected
{
    std::vector<float> mine, sum, max;
    std::vector<double> mineWide, sumWide;
};

Expected expectedFor(int member, int members, std::int64_t n)
{
    Expected e;
    for (std::int64_t i = 0; i < n; ++i) {
        float s = tensorParallelCheckValue(0, i), m = s;
        double w = static_cast<double>(s) * (1 + 0x1p-40);
        for (int k = 1; k < members; ++k) {
            const float v = tensorParallelCheckValue(k, i);
            s += v;
            m = std::max(m, v);
            w += static_cast<double>(v) * (1 + 0x1p-40);
        }
        const float v = tensorParallelCheckValue(member, i);
        e.mine.push_back(v);
        e.mineWide.push_back(static_cast<double>(v) * (1 + 0x1p-40));
        e.sum.push_back(s);
        e.max.push_back(m);
        e.sumWide.push_back(w);
    }
    return e;
}

/// The GPU's all-gather (NCCL groups), then the member-order sum of its rows, here on the host.
std::int64_t checkDeviceGather(TensorParallelGroup &group, const Expected &e, std::string &first)
{
    const std::size_t n = e.mine.size(), members = static_cast<std::size_t>(group.size());
    DeviceBuffer in(-1, n * sizeof(float)), out(-1, n * members * sizeof(float));
    in.upload(e.mine.data(), n * sizeof(float));
    group.allGatherOnDevice(static_cast<const float *>(in.data()), static_cast<float *>(out.data()), static_cast<std::int64_t>(n));
    std::vector<float> all(n * members), rows(n * members), sum(n);
    out.download(all.data(), all.size() * sizeof(float));
    for (std::size_t m = 0; m < members; ++m)
        for (std::size_t i = 0; i < n; ++i)
            rows[m * n + i] = tensorParallelCheckValue(static_cast<int>(m), static_cast<std::int64_t>(i));
    std::int64_t wrong = countWrong("device all-gather", all, rows, first);
    for (std::size_t i = 0; i < n; ++i) {
        sum[i] = all[i];
        for (std::size_t m = 1; m < members; ++m)
            sum[i] += all[m * n + i];
    }
    return wrong + countWrong("device all-gather's ordered sum", sum, e.sum, first);
}

std::int64_t checkCommand(TensorParallelGroup &group, std::int64_t n, std::string &first)
{
    std::vector<std::int64_t> words{group.rank() == 0 ? n : -1, group.rank() == 0 ? -n : -1, 7};
    group.broadcastCommand(words.data(), static_cast<std::int64_t>(words.size()));
    return countWrong("command broadcast", words, std::vector<std::int64_t>{n, -n, 7}, first);
}

} // namespace

float tensorParallelCheckValue(int member, std::int64_t i) noexcept
{
    const std::uint64_t bits = mix(static_cast<std::uint64_t>(member) << 40 ^ static_cast<std::uint64_t>(i));
    const float mantissa = static_cast<float>(bits & 0xffffff) / 16777216.0F - 0.5F; // 24 random bits, either sign
    return std::ldexp(mantissa, static_cast<int>((bits >> 24) % 17) - 8);           // exponents 2^-8 .. 2^8
}

std::int64_t checkTensorParallelGroup(TensorParallelGroup &group, int groupIndex, const std::vector<std::int64_t> &sizes, std::ostream &out,
                                      std::ostream &err, std::string &firstWrong)
{
    std::int64_t total = 0;
    for (const std::int64_t n : sizes) {
        const Expected e = expectedFor(group.rank(), group.size(), n);
        const auto t0 = std::chrono::steady_clock::now();
        std::vector<float> sum = e.mine, max = e.mine;
        std::vector<double> wide = e.mineWide;
        group.allReduceSum(sum.data(), n);
        group.allReduceSum(wide.data(), n);
        group.allReduceMax(max.data(), n);
        std::int64_t wrong = countWrong("float32 ordered sum", sum, e.sum, firstWrong) + countWrong("float64 ordered sum", wide, e.sumWide, firstWrong)
                             + countWrong("maximum", max, e.max, firstWrong) + checkCommand(group, n, firstWrong);
        if (group.gathersOnDevice())
            wrong += checkDeviceGather(group, e, firstWrong);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        total += wrong;
        char line[200];
        std::snprintf(line, sizeof line, "comm-check: tensor-parallel group %d, member %d: %lld elements: %s, %.3f ms\n", groupIndex, group.rank(),
                      static_cast<long long>(n), wrong == 0 ? "exact" : (std::to_string(wrong) + " WRONG").c_str(), seconds * 1e3);
        if (wrong > 0)
            err << line << std::flush;
        else if (group.rank() == 0 && groupIndex == 0)
            out << line << std::flush;
    }
    return total;
}

} // namespace cppl::agent::dist
