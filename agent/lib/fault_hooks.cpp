// SPDX-License-Identifier: MIT
#include "fault_hooks.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#include <unistd.h>

#include <atomic>
#include <charconv>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <string_view>
#include <system_error>

namespace cppl::agent {

namespace {

#if !CLUSTERPPL_FAULT_HOOKS
// Every hook, for the refusal of a build without them.
constexpr const char *kHookNames[] = {
    "CLUSTERPPL_TEST_SLOW_COLLECTIVE", "CLUSTERPPL_TEST_DIE",          "CLUSTERPPL_TEST_HOLD_CONNECT",     "CLUSTERPPL_TEST_HOLD_WATCHDOG",
    "CLUSTERPPL_TEST_HOLD_FINISH",     "CLUSTERPPL_TEST_HOLD_WATCHDOG_STOP", "CLUSTERPPL_TEST_HOLD_FAILURE", "CLUSTERPPL_TEST_HOLD_RESULT",
    "CLUSTERPPL_TEST_HOLD_FINGERPRINT", "CLUSTERPPL_TEST_SLOW_RANK",   "CLUSTERPPL_TEST_ROUND_LINES",      "CLUSTERPPL_TEST_GPU_FREE_BYTES",
    "CLUSTERPPL_TEST_MESH_CANDIDATES", "CLUSTERPPL_TEST_TRACE_WATCHDOG", "CLUSTERPPL_TEST_NO_GLOO",
    "CLUSTERPPL_TEST_DEVICE_KIND",     "CLUSTERPPL_TEST_SLOW_LOAD",       "CLUSTERPPL_TEST_LONG_LINES",
    "CLUSTERPPL_TEST_STAGED_UPLOAD",
};
#else
constexpr long kMaxHoldMs = 600000;

// One "NAME=value" hook being read: its value, and the refusal that names both.
class Hook
{
public:
    Hook(const EnvLookup &env, const char *name) : m_name(name)
    {
        const char *v = env(name);
        m_value = v ? v : "";
    }
    [[nodiscard]] bool set() const { return !m_value.empty(); }
    [[nodiscard]] std::string_view value() const { return m_value; }
    [[noreturn]] void refuse(const std::string &form) const
    {
        throw ConfigError("$" + std::string(m_name) + " \"" + m_value + "\" is not " + form);
    }

private:
    const char *m_name;
    std::string m_value;
};

// A whole decimal number in [lo, hi], or nothing.
bool parseInt(std::string_view s, long lo, long hi, long &out)
{
    long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
        return false;
    out = v;
    return true;
}

// "R:REST" -> R (>= 0) and REST.
bool splitRank(std::string_view item, int &rank, std::string_view &rest)
{
    const std::size_t colon = item.find(':');
    long r = 0;
    if (colon == std::string_view::npos || !parseInt(item.substr(0, colon), 0, 1 << 30, r))
        return false;
    rank = static_cast<int>(r);
    rest = item.substr(colon + 1);
    return true;
}

std::vector<std::string_view> splitList(std::string_view s)
{
    std::vector<std::string_view> items;
    while (!s.empty()) {
        const std::size_t comma = s.find(',');
        items.push_back(s.substr(0, comma));
        s = comma == std::string_view::npos ? std::string_view() : s.substr(comma + 1);
    }
    return items;
}

std::chrono::milliseconds millisecondsOf(const Hook &h, long hi, const std::string &form)
{
    long ms = 0;
    if (!parseInt(h.value(), 0, hi, ms))
        h.refuse(form);
    return std::chrono::milliseconds(ms);
}

// "R:MS" with MS in [0, 600000].
RankHold rankHoldOf(const Hook &h)
{
    RankHold hold;
    std::string_view rest;
    long ms = 0;
    if (!splitRank(h.value(), hold.rank, rest) || !parseInt(rest, 0, kMaxHoldMs, ms))
        h.refuse("RANK:MILLISECONDS (0-600000)");
    hold.ms = std::chrono::milliseconds(ms);
    return hold;
}

void readHolds(const EnvLookup &env, FaultHooks &f)
{
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_CONNECT"); h.set()) {
        int r = -1;
        std::string_view rest;
        if (splitRank(h.value(), r, rest) && rest == "collective")
            f.holdConnectUntilCollective = r;
        else if (long ms = 0; splitRank(h.value(), r, rest) && parseInt(rest, 0, kMaxHoldMs, ms))
            f.holdConnect = {r, std::chrono::milliseconds(ms)};
        else
            h.refuse("RANK:MILLISECONDS (0-600000) or RANK:collective");
    }
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_WATCHDOG"); h.set())
        f.holdWatchdog = rankHoldOf(h);
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_WATCHDOG_STOP"); h.set())
        f.holdWatchdogStop = rankHoldOf(h);
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_FAILURE"); h.set())
        f.holdFailure = rankHoldOf(h);
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_RESULT"); h.set())
        f.holdResult = rankHoldOf(h);
    if (const Hook h(env, "CLUSTERPPL_TEST_SLOW_LOAD"); h.set())
        f.slowLoad = rankHoldOf(h);
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_FINGERPRINT"); h.set())
        f.holdFingerprint = millisecondsOf(h, kMaxHoldMs, "a number of milliseconds (0-600000)");
    if (const Hook h(env, "CLUSTERPPL_TEST_HOLD_FINISH"); h.set())
        for (const std::string_view item : splitList(h.value())) {
            FaultHooks::FinishHold hold;
            std::string_view rest;
            long ms = 0;
            if (!splitRank(item, hold.rank, rest))
                h.refuse("a list of RANK:MILLISECONDS (0-600000) or RANK:hub");
            if (rest == "hub")
                hold.untilHub = true;
            else if (parseInt(rest, 0, kMaxHoldMs, ms))
                hold.ms = std::chrono::milliseconds(ms);
            else
                h.refuse("a list of RANK:MILLISECONDS (0-600000) or RANK:hub");
            f.holdFinish.push_back(hold);
        }
}

void readFailures(const EnvLookup &env, FaultHooks &f)
{
    if (const Hook h(env, "CLUSTERPPL_TEST_SLOW_COLLECTIVE"); h.set())
        f.slowCollective = millisecondsOf(h, 60000, "a number of milliseconds (0-60000)");
    if (const Hook h(env, "CLUSTERPPL_TEST_DIE"); h.set())
        for (const std::string_view item : splitList(h.value())) {
            FaultHooks::Death d;
            std::string_view point;
            if (!splitRank(item, d.rank, point) || (point != "closing" && point != "gather" && point != "gathered" && point != "tp-range"))
                h.refuse("a list of RANK:POINT (POINT: closing, gather, gathered or tp-range)");
            d.point = point;
            f.die.push_back(d);
        }
    if (const Hook h(env, "CLUSTERPPL_TEST_SLOW_RANK"); h.set()) {
        std::string_view rest;
        long ms = 0;
        f.slowEveryRank = h.value().starts_with("*:");
        const bool ok = f.slowEveryRank ? parseInt(h.value().substr(2), 0, kMaxHoldMs, ms)
                                        : splitRank(h.value(), f.slowRank, rest) && parseInt(rest, 0, kMaxHoldMs, ms);
        if (!ok)
            h.refuse("RANK:MILLISECONDS or *:MILLISECONDS (0-600000)");
        f.slowMs = std::chrono::milliseconds(ms);
    }
    if (const Hook h(env, "CLUSTERPPL_TEST_NO_GLOO"); h.set())
        f.noGloo = h.value() == "1";
    if (const Hook h(env, "CLUSTERPPL_TEST_DEVICE_KIND"); h.set()) {
        std::string_view kind;
        if (!splitRank(h.value(), f.cudaKindRank, kind) || kind != "cuda")
            h.refuse("RANK:cuda");
    }
}

void readSwitches(const EnvLookup &env, FaultHooks &f)
{
    if (const Hook h(env, "CLUSTERPPL_TEST_ROUND_LINES"); h.set()) {
        if (h.value() != "all")
            h.refuse("\"all\"");
        f.everyRoundLine = true;
    }
    if (const Hook h(env, "CLUSTERPPL_TEST_GPU_FREE_BYTES"); h.set())
        for (const std::string_view item : splitList(h.value())) {
            std::int64_t v = 0;
            const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
            if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0)
                h.refuse("a list of byte counts B0,B1,...");
            f.gpuFreeBytes.push_back(v);
        }
    if (const Hook h(env, "CLUSTERPPL_TEST_MESH_CANDIDATES"); h.set()) {
        long k = 0;
        if (!parseInt(h.value(), 1, 1000000, k))
            h.refuse("a number of ranks (1-1000000)");
        f.meshCandidates = static_cast<int>(k);
    }
    if (const Hook h(env, "CLUSTERPPL_TEST_TRACE_WATCHDOG"); h.set())
        f.traceWatchdog = h.value() != "0";
    if (const Hook h(env, "CLUSTERPPL_TEST_LONG_LINES"); h.set()) {
        long bytes = 0;
        if (!parseInt(h.value(), 1, 1 << 20, bytes))
            h.refuse("a number of bytes (1-1048576)");
        f.longLines = static_cast<std::size_t>(bytes);
    }
    if (const Hook h(env, "CLUSTERPPL_TEST_STAGED_UPLOAD"); h.set()) {
        long bytes = 0;
        if (!parseInt(h.value(), 1, 1L << 30, bytes))
            h.refuse("a chunk size in bytes (1-1073741824)");
        f.stagedUploadChunk = bytes;
    }
}
#endif

} // namespace

std::string FaultHooks::deathPoint(int rank) const
{
    for (const Death &d : die)
        if (d.rank == rank)
            return d.point;
    return {};
}

FaultHooks parseFaultHooks(const EnvLookup &env)
{
    FaultHooks f;
#if CLUSTERPPL_FAULT_HOOKS
    readHolds(env, f);
    readFailures(env, f);
    readSwitches(env, f);
#else
    for (const char *name : kHookNames)
        if (const char *v = env(name); v && *v)
            throw ConfigError(std::string("$") + name + " is set, but this agent was built without fault hooks (-DCLUSTERPPL_FAULT_HOOKS=OFF): "
                              "unset it, or run the tests against a build configured with the default CLUSTERPPL_FAULT_HOOKS=ON");
#endif
    return f;
}

namespace {

FaultHooks fromEnvironment()
{
    return parseFaultHooks([](const char *name) -> const char * { return std::getenv(name); });
}

// Every version ever parsed stays: a reference handed out stays valid while another thread reloads.
std::mutex g_hooksMutex;
std::vector<std::unique_ptr<const FaultHooks>> g_hooksVersions;
std::atomic<const FaultHooks *> g_hooks{nullptr};

} // namespace

const FaultHooks &faultHooks()
{
    if (const FaultHooks *h = g_hooks.load(std::memory_order_acquire))
        return *h;
    const std::lock_guard lock(g_hooksMutex);
    if (const FaultHooks *h = g_hooks.load(std::memory_order_acquire))
        return *h;
    g_hooksVersions.push_back(std::make_unique<const FaultHooks>(fromEnvironment()));
    g_hooks.store(g_hooksVersions.back().get(), std::memory_order_release);
    return *g_hooksVersions.back();
}

void reloadFaultHooks()
{
    auto fresh = std::make_unique<const FaultHooks>(fromEnvironment());
    const std::lock_guard lock(g_hooksMutex);
    g_hooksVersions.push_back(std::move(fresh));
    g_hooks.store(g_hooksVersions.back().get(), std::memory_order_release);
}

void sayHook(const std::string &line)
{
    const std::string text = line.ends_with('\n') ? line : line + '\n';
    (void)!::write(2, text.data(), text.size());
}

} // namespace cppl::agent
