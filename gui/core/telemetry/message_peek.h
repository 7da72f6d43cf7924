// SPDX-License-Identifier: MIT
#pragma once

// Qt-free. When the collector's receive thread falls behind (a loaded machine, 10,000+ messages a
// second), it reads what is queued in one go and decodes only what still matters: a rank's
// progress carries cumulative totals and its heartbeat only a phase, so an older one of either,
// followed in the same batch by a newer one of the same rank, would be overwritten at once.
// peekHeader() finds the few fields that tell this without decoding; decode() still judges every
// message that is applied.

#include "cppl/telemetry.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace cppl::core::telemetry {

struct PeekedHeader
{
    std::string_view run;        ///< points into the peeked bytes
    std::int64_t rank = -1;
    std::int64_t worldSize = 0;
    std::int64_t seq = -1;
    cppl::telemetry::Kind kind = cppl::telemetry::Kind::Heartbeat;
};

/**
 * A quick scan of one flat JSON object (no allocation, no decoding of numbers beyond these
 * integers, nothing else validated) for `run`, `rank`, `world_size`, `seq` and `kind`. nullopt
 * unless all five appear once each as plain values: a run or kind with escapes, a key with
 * escapes, a fraction or exponent, a nested value or any syntax it does not follow leaves the
 * message to decode().
 */
[[nodiscard]] std::optional<PeekedHeader> peekHeader(std::string_view bytes) noexcept;

/**
 * For each message of a batch received together (@p peeks in arrival order): true when it is a
 * progress or heartbeat and a later message of the batch with the same run, world size, rank and
 * kind has a higher seq. Applying the batch without those gives the same totals and states.
 */
void markSuperseded(const std::vector<std::optional<PeekedHeader>> &peeks, std::vector<char> &superseded);

} // namespace cppl::core::telemetry
