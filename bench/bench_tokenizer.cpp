// SPDX-License-Identifier: MIT
// Tokenizer throughput on one thread: a fresh tokenizer over the whole corpus (cold word cache, what
// `clusterppl-agent tokenize` does) and a second pass with the cache filled. bench/tokenizer_speed.sh
// runs it next to the npm gpt-tokenizer on the same text and checks both give the same ids.
//   bench_tokenizer [TOKENIZER] [TEXT] [OUT.u32]
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

double seconds(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char **argv)
{
    const std::string tokenizerPath = argc > 1 ? argv[1] : CPPL_SOURCE_DIR "/../shared/data/tokenizers/gpt2";
    const std::string textPath = argc > 2 ? argv[2] : CPPL_SOURCE_DIR "/../shared/data/wikitext-2-raw/wiki.test.raw";
    std::ifstream in(textPath, std::ios::binary);
    if (!in) {
        std::fprintf(stderr, "bench_tokenizer: cannot open %s\n", textPath.c_str());
        return 1;
    }
    std::ostringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    const double mb = static_cast<double>(text.size()) / 1e6;

    try {
        auto t0 = std::chrono::steady_clock::now();
        auto tokenizer = cppl::agent::Tokenizer::load(tokenizerPath);
        const double load = seconds(t0);
        std::vector<std::uint32_t> ids;
        double cold = 1e30;
        for (int rep = 0; rep < 3; ++rep) { // best of 3 fresh tokenizers (cold cache each time)
            auto fresh = cppl::agent::Tokenizer::load(tokenizerPath);
            ids.clear();
            t0 = std::chrono::steady_clock::now();
            fresh->encode(text, ids);
            cold = std::min(cold, seconds(t0));
        }
        double warm = 1e30;
        (void)tokenizer->encode(text); // fill the cache
        for (int rep = 0; rep < 3; ++rep) {
            std::vector<std::uint32_t> again;
            t0 = std::chrono::steady_clock::now();
            tokenizer->encode(text, again);
            warm = std::min(warm, seconds(t0));
        }
        std::printf("{\"tokenizer\": \"%s\", \"text\": \"%s\", \"bytes\": %zu, \"ids\": %zu, \"load_s\": %.3f, "
                    "\"cold_s\": %.4f, \"cold_mb_per_s\": %.2f, \"warm_s\": %.4f, \"warm_mb_per_s\": %.2f, \"ids_per_s\": %.0f}\n",
                    tokenizer->path().c_str(), textPath.c_str(), text.size(), ids.size(), load, cold, mb / cold, warm, mb / warm,
                    static_cast<double>(ids.size()) / cold);
        if (argc > 3) {
            std::ofstream out(argv[3], std::ios::binary);
            for (const auto id : ids) {
                const char b[4] = {static_cast<char>(id & 0xFF), static_cast<char>((id >> 8) & 0xFF), static_cast<char>((id >> 16) & 0xFF),
                                   static_cast<char>(id >> 24)};
                out.write(b, 4);
            }
        }
    } catch (const std::exception &e) {
        std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
        return 1;
    }
    return 0;
}
