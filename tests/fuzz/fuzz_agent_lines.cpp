// SPDX-License-Identifier: MIT
// libFuzzer target for the agent -> launcher line decoder (docs/agent-lines.md): any bytes must be
// not ours, malformed with a reason, an unknown kind or a newer version kept as sent, or an event
// whose encoding decodes to itself (encode -> decode -> encode is a fixed point); a line that ends
// early (endsEarly) is never one that decodes.
#include "cppl/agent_lines.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void check(bool ok)
{
    if (!ok)
        std::abort();
}

void checkEvent(const cppl::lines::Event &e)
{
    using namespace cppl::lines;
    const auto validRanges = [](const BatchRanges &r) {
        for (const BatchRange &b : r)
            if (b.first < 0 || b.end <= b.first)
                return false;
        return true;
    };
    if (const auto *l = std::get_if<Ledger>(&e))
        check(l->rank >= 0 && l->round >= 0 && l->epoch >= 0 && validRanges(l->batches));
    if (const auto *r = std::get_if<Regroup>(&e)) {
        check(r->epoch >= 1 && r->firstRound >= 0 && !r->lost.empty());
        for (const auto &l : r->lost)
            check(l.rank >= 0 && l.round >= -1 && validRanges(l.batches));
    }
    if (const auto *s = std::get_if<StoreReady>(&e))
        check(s->port >= 1 && s->port <= 65535 && !s->addr.empty());
    if (const auto *c = std::get_if<Checkpoint>(&e))
        check(c->round >= 0 && c->worldSize >= 1 && c->formatVersion >= 1 && !c->fingerprint.plan.empty());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl::lines;
    const std::string_view line(reinterpret_cast<const char *>(data), size);
    LineReader reader;
    const Decoded d = reader.read(line);
    const bool early = endsEarly(line); // the Slurm launcher's test for a cut line
    check(!early || (d.status != Status::Accepted && d.status != Status::NotOurs));
    switch (d.status) {
    case Status::NotOurs:
        check(!d.kind && !peekKind(line));
        return 0;
    case Status::Malformed:
        check(d.problem != Problem::None && !problemName(d.problem).empty() && d.reason().starts_with("malformed"));
        return 0;
    case Status::UnknownKind:
    case Status::NewerVersion:
        check(!d.raw.empty() && !d.warning.empty()); // kept, and said once
        check(reader.read(line).warning.empty());
        return 0;
    case Status::Accepted: break;
    }
    check(d.kind == kindOf(d.event) && peekKind(line) == d.kind && d.version >= 1 && d.version <= kVersion);
    checkEvent(d.event);
    const std::string once = encode(d.event);
    const Decoded again = decode(once);
    check(again.ok() && encode(again.event) == once);
    return 0;
}
