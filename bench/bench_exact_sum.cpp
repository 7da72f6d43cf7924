// SPDX-License-Identifier: MIT
// Cost of exactness: ExactSum::add against a plain double sum, Kahan summation and long double,
// measured side by side on the same values in one run, plus the "#wrong" column (nccl-tests'
// habit): how many shardings give a different result from one rank.
#include "cppl/exact_sum.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

template<typename F>
double bestSeconds(F &&f, int reps = 5)
{
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

volatile double g_sink;

} // namespace

int main(int argc, char **argv)
{
    const std::size_t n = argc > 1 ? std::stoul(argv[1]) : 20'000'000;
    std::mt19937_64 rng(42);
    std::gamma_distribution<double> nll(2.0, 1.5); // NLL-like: positive, mean 3 nats, long tail
    std::vector<double> v(n);
    for (auto &x : v)
        x = nll(rng);

    std::printf("values: %zu NLL-like doubles (gamma k=2, theta=1.5); best of 5 runs; 1 thread\n\n", n);
    std::printf("%-22s %12s %10s %s\n", "method", "Mvalues/s", "ns/value", "result");
    // The result is read through a getter, after the timed runs have produced it.
    auto report = [&](const char *name, double secs, auto result) {
        std::printf("%-22s %12.1f %10.2f %.17g\n", name, static_cast<double>(n) / secs / 1e6, secs * 1e9 / static_cast<double>(n), result());
    };
    double plain = 0;
    report("double +=", bestSeconds([&] {
               double s = 0;
               for (double x : v)
                   s += x;
               plain = s;
               g_sink = s;
           }),
           [&] { return plain; });
    double kahan = 0;
    report("Kahan", bestSeconds([&] {
               double s = 0;
               double c = 0;
               for (double x : v) {
                   const double y = x - c;
                   const double t = s + y;
                   c = (t - s) - y;
                   s = t;
               }
               kahan = s;
               g_sink = s;
           }),
           [&] { return kahan; });
    long double ld = 0;
    report("long double +=", bestSeconds([&] {
               long double s = 0;
               for (double x : v)
                   s += x;
               ld = s;
               g_sink = static_cast<double>(s);
           }),
           [&] { return static_cast<double>(ld); });
    cppl::ExactSum exact;
    report("ExactSum::add", bestSeconds([&] {
               cppl::ExactSum s;
               for (double x : v)
                   s.add(x);
               exact = s;
               g_sink = s.toDouble();
           }),
           [&] { return exact.toDouble(); });
    cppl::ExactSum both;
    report("ExactSum add+addSquare", bestSeconds([&] {
               cppl::ExactSum s;
               cppl::ExactSum s2;
               for (double x : v) {
                   s.add(x);
                   s2.addSquare(x);
               }
               both = s;
               g_sink = s2.toDouble();
           }),
           [&] { return both.toDouble(); });

    // Reading a sum out: the dashboard converts each rank's two sums on every snapshot that changed
    // them (1024 ranks at up to 25 Hz). Sums of 1 .. 4096 values (as ranks' partial sums grow),
    // positive and negative, each converted `reps` times.
    {
        std::vector<cppl::ExactSum> sums(4096);
        cppl::ExactSum running;
        for (std::size_t i = 0; i < sums.size(); ++i) {
            running.add(i % 2 == 0 ? v[i % n] : -0.5 * v[i % n]);
            sums[i] = running;
        }
        const int reps = 200;
        double checksum = 0;
        const double secs = bestSeconds([&] {
            double c = 0;
            for (int r = 0; r < reps; ++r)
                for (const auto &s : sums)
                    c += s.toDouble();
            checksum = c;
            g_sink = c;
        });
        std::printf("\n%-22s %10.1f ns/call (%zu sums x %d; checksum %.17g)\n", "ExactSum::toDouble", secs * 1e9 / (static_cast<double>(sums.size()) * reps),
                    sums.size(), reps, checksum);
    }

    // #wrong: shard the same values R ways (strided, like ranks), merge, compare bits with 1 rank.
    std::printf("\nsharding check (bits compared with one rank):\n%8s %10s %10s\n", "ranks", "#wrong", "double#wrong");
    for (int ranks : {2, 3, 8, 64, 1024}) {
        cppl::ExactSum total;
        double dtotal = 0;
        for (int r = 0; r < ranks; ++r) {
            cppl::ExactSum part;
            double dpart = 0;
            for (std::size_t i = static_cast<std::size_t>(r); i < n; i += static_cast<std::size_t>(ranks)) {
                part.add(v[i]);
                dpart += v[i];
            }
            total.merge(part);
            dtotal += dpart;
        }
        std::printf("%8d %10d %10d\n", ranks, total == exact ? 0 : 1, dtotal == plain ? 0 : 1);
    }
    return 0;
}
