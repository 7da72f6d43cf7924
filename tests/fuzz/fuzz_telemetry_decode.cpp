// SPDX-License-Identifier: MIT
// libFuzzer target for the telemetry decoder (docs/telemetry.md, "Fuzzing"): any bytes must be
// either rejected with a reason or decoded into a message that re-encodes and decodes to itself.
#include "cppl/telemetry.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl::telemetry;
    Message m;
    const auto r = decode(std::string_view(reinterpret_cast<const char *>(data), size), m);
    if (!r.ok()) {
        if (r.error == DecodeError::None || decodeErrorName(r.error).empty())
            std::abort();
        return 0;
    }
    // Accepted: the invariants the collector relies on hold, and the round trip is stable.
    if (m.header.rank < 0 || m.header.rank >= m.header.worldSize || m.header.seq < 0)
        std::abort();
    if (m.header.kind == Kind::Progress && m.progress.windowsDone > m.progress.windowsTotal)
        std::abort();
    const std::string once = encode(m);
    Message again;
    if (!decode(once, again).ok() || encode(again) != once)
        std::abort();
    return 0;
}
