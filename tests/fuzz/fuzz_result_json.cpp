// SPDX-License-Identifier: MIT
// libFuzzer target for the result JSON that `clusterppl-agent merge` reads (agent/lib/result_json.*,
// docs/fuzzing.md): any bytes are refused with IoError, or give a shard whose exact sums re-encode
// to themselves and that merges with another shard of the same run (as `merge` does with two files)
// without overflow, ending in a perplexity.
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "cppl/statistics.h"
#include "result_json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    agent::ShardResult r;
    try {
        r = agent::parseResultJson(fuzz::asText(data, size), "result.json");
    } catch (const IoError &e) {
        if (std::string_view(e.what()).empty())
            fuzz::fail("an empty error message");
        return 0;
    }
    const std::string input(fuzz::asText(data, size));
    if (r.count < 1 || r.rank < 0 || r.rank >= r.count)
        fuzz::fail("an accepted shard outside 0..count-1", input);
    if (r.stats.tokens < 0 || r.stats.windows < 0 || r.stats.bytes < 0 || r.stats.words < 0)
        fuzz::fail("an accepted negative count", input);
    if (r.runIdentity.size() != 7)
        fuzz::fail("the run identity does not have its seven keys", input);
    for (const ExactSum *sum : {&r.stats.nll, &r.stats.nllSquared}) {
        const auto again = ExactSum::fromString(sum->toString());
        if (!again || !(*again == *sum))
            fuzz::fail("an exact sum does not re-encode to itself", input);
    }
    NllStats total;
    total.merge(r.stats);
    total.merge(r.stats);
    const Perplexity p = computePerplexity(total);
    (void)p;
    (void)total.nll.toString();
    return 0;
}
