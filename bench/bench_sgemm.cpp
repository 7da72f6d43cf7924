// SPDX-License-Identifier: MIT
// The machine's fp32 GEMM ceiling through the same LibTorch + BLAS the agent uses, at the shapes an
// evaluation runs (rows = batch * context, hidden -> intermediate). Prints JSON for bench/eval_speed.sh.
#include "eval/cpu_gemm.h"
#include "eval/intra_op.h"
#include "eval/runtime_info.h"

#include <ATen/ATen.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
    const std::int64_t M = argc > 2 ? std::atoll(argv[2]) : 4096; // batch 8 x context 512
    const std::int64_t K = argc > 3 ? std::atoll(argv[3]) : 512;
    const std::int64_t N = argc > 4 ? std::atoll(argv[4]) : 1376;
    // "blas": at::linear (the BLAS); "onednn": mkldnn_linear on a packed weight, converting the
    // activations in and out; "native": the agent's own kernels (cpu_gemm.h) on a packed weight.
    const std::string mode = argc > 5 ? argv[5] : "blas";
    cppl::agent::setThreads(threads, threads);
    const at::Tensor a = at::randn({M, K});
    const at::Tensor b = at::randn({N, K}); // [out, in] like a Linear weight: x @ W^T
    const at::Tensor packed = mode == "onednn" ? b.to_mkldnn() : at::Tensor();
    cppl::agent::cpu::PackedMatrix native;
    at::Tensor c = at::empty({M, N});
    const cppl::agent::cpu::ParallelFor &pool = cppl::agent::intraOp(); // the agent's own pool (intra_op.h)
    if (mode == "native") {
        native = cppl::agent::cpu::PackedMatrix(N, K);
        native.packRows(0, b.data_ptr<float>(), K, N);
    }
    auto run = [&] {
        if (mode == "native")
            cppl::agent::cpu::gemm(a.data_ptr<float>(), K, M, native.view(), c.data_ptr<float>(), N, nullptr, false, pool);
        else if (mode == "onednn")
            (void)at::mkldnn_linear(a.to_mkldnn(), packed).to_dense();
        else
            (void)at::linear(a, b);
    };
    for (int i = 0; i < 3; ++i)
        run();
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double gflops = 2.0 * static_cast<double>(M * K * N) / best / 1e9;
    std::string blas = cppl::agent::describe(cppl::agent::runtimeInfo());
    for (char &ch : blas)
        if (ch == '\n' || ch == '"')
            ch = ' '; // stays one JSON string
    const std::string isa = cppl::agent::cpu::isaName(cppl::agent::cpu::detectIsa());
    std::printf("{\"gflops\": %.2f, \"isa\": \"%s\", \"mode\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"threads\": %d, \"blas\": \"%s\"}\n", gflops, isa.c_str(), mode.c_str(),
                static_cast<long long>(M), static_cast<long long>(K), static_cast<long long>(N), threads,
                blas.c_str());
    return 0;
}
