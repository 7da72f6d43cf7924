// SPDX-License-Identifier: MIT
#include "cppl/telemetry.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace cppl::telemetry {

namespace {

constexpr std::array<std::string_view, kKindCount> kKindNames{"hello", "heartbeat", "progress", "sync",
                                                              "log",   "result",    "error",    "bye"};
constexpr std::array<std::string_view, 5> kPhaseNames{"connecting", "loading", "evaluating", "syncing", "finishing"};
constexpr std::array<std::string_view, 4> kLevelNames{"debug", "info", "warning", "error"};
constexpr std::array<std::string_view, kDecodeErrorCount> kDecodeErrorNames{
    "ok",           "too_large",   "not_json",     "not_flat_object", "duplicate_key", "bad_version",
    "missing_field", "wrong_type", "out_of_range", "unknown_kind",    "bad_exact_sum"};

template <typename E, std::size_t N>
std::optional<E> fromName(const std::array<std::string_view, N> &names, std::string_view name) noexcept
{
    for (std::size_t i = 0; i < N; ++i)
        if (names[i] == name)
            return static_cast<E>(i);
    return std::nullopt;
}

// ---- encoding ---------------------------------------------------------------------------------

class Writer
{
public:
    Writer() { m_out.reserve(512); m_out += '{'; }
    void key(std::string_view k)
    {
        if (m_out.size() > 1)
            m_out += ',';
        m_out += '"';
        m_out += k; // keys are ours: plain ASCII
        m_out += "\":";
    }
    void integer(std::string_view k, std::int64_t v)
    {
        key(k);
        char buf[24];
        auto r = std::to_chars(buf, buf + sizeof buf, v);
        m_out.append(buf, r.ptr);
    }
    void number(std::string_view k, double v)
    {
        key(k);
        if (!std::isfinite(v))
            v = 0; // JSON has no NaN/inf; the decoder would drop the whole message
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, v); // shortest round-trip form
        m_out.append(buf, r.ptr);
        // "1e+20" and "5" are valid JSON numbers; keep a float a float so a reader sees its type.
        if (std::string_view(buf, r.ptr).find_first_of(".eEn") == std::string_view::npos)
            m_out += ".0";
    }
    void string(std::string_view k, std::string_view v)
    {
        key(k);
        // Invalid UTF-8 (a log line cut mid-character) becomes U+FFFD instead of an exception.
        m_out += nlohmann::json(std::string(v)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    std::string finish()
    {
        m_out += '}';
        return std::move(m_out);
    }

private:
    std::string m_out;
};

// ---- decoding ---------------------------------------------------------------------------------

enum class F : std::uint8_t {
    V, Run, Rank, Host, Group, LocalRank, WorldSize, Seq, T, Kind, Dropped,
    Phase,
    Tokens, Tps, WindowsDone, WindowsTotal, Compute, Wait, Transfer, Nll, NllSq, Rss, DeviceMem, DeviceMemTotal, GpuUtil,
    TpSize, TpRank, TpSeconds, RefTokens, Kld, SameTop,
    Round, RoundsTotal, RoundWait, RoundTransfer,
    Level, MessageText, ExitCode, ResultJson,
    Count,
    Unknown
};
constexpr std::size_t kFieldCount = static_cast<std::size_t>(F::Count);

constexpr std::array<std::string_view, kFieldCount> kFieldNames{
    "v", "run", "rank", "host", "group", "local_rank", "world_size", "seq", "t", "kind", "dropped_total",
    "phase",
    "tokens_scored_total", "tokens_per_second", "windows_done", "windows_total", "compute_seconds_total",
    "comm_wait_seconds_total", "comm_transfer_seconds_total", "nll_exact", "nll_sq_exact", "rss_bytes",
    "device_memory_bytes", "device_memory_total_bytes", "gpu_utilization_percent",
    "tp_size", "tp_rank", "tp_collective_seconds_total", "ref_tokens_total", "kld_exact", "same_top_total",
    "round", "rounds_total", "wait_seconds", "transfer_seconds",
    "level", "message", "exit_code", "result_json"};

F fieldOf(std::string_view key) noexcept
{
    static const std::unordered_map<std::string_view, F> map = [] {
        std::unordered_map<std::string_view, F> m;
        for (std::size_t i = 0; i < kFieldCount; ++i)
            m.emplace(kFieldNames[i], static_cast<F>(i));
        return m;
    }();
    auto it = map.find(key);
    return it == map.end() ? F::Unknown : it->second;
}

struct Slot
{
    enum Type : std::uint8_t { Absent, Null, Bool, Int, Float, String } type = Absent;
    std::int64_t i = 0;
    double d = 0;
    bool uintOverflow = false; ///< an unsigned integer above INT64_MAX
    std::string s;
};

// A SAX handler that accepts exactly one flat object and files each known key's value in a slot,
// so no DOM is built (the collector decodes 100k+ messages per second).
class FlatHandler
{
public:
    explicit FlatHandler(std::array<Slot, kFieldCount> &slots) : m_slots(slots) {}

    DecodeResult result;

    bool null() { return value(Slot::Null); }
    bool boolean(bool) { return value(Slot::Bool); }
    bool number_integer(std::int64_t v)
    {
        if (Slot *s = slot(Slot::Int))
            s->i = v;
        return ok();
    }
    bool number_unsigned(std::uint64_t v)
    {
        if (Slot *s = slot(Slot::Int)) {
            s->uintOverflow = v > static_cast<std::uint64_t>(INT64_MAX);
            s->i = s->uintOverflow ? 0 : static_cast<std::int64_t>(v);
        }
        return ok();
    }
    bool number_float(double v, const std::string &)
    {
        if (Slot *s = slot(Slot::Float))
            s->d = v;
        return ok();
    }
    bool string(std::string &v)
    {
        if (Slot *s = slot(Slot::String))
            s->s.swap(v);
        return ok();
    }
    bool binary(std::vector<std::uint8_t> &) { return fail(DecodeError::NotJson); }
    bool start_object(std::size_t)
    {
        if (m_depth++ > 0)
            return fail(DecodeError::NotFlatObject);
        return true;
    }
    bool end_object()
    {
        --m_depth;
        return true;
    }
    bool start_array(std::size_t) { return fail(DecodeError::NotFlatObject); }
    bool end_array() { return fail(DecodeError::NotFlatObject); }
    bool key(std::string &k)
    {
        m_current = fieldOf(k);
        if (m_current != F::Unknown && m_slots[static_cast<std::size_t>(m_current)].type != Slot::Absent) {
            result.field = k;
            return fail(DecodeError::DuplicateKey);
        }
        return true;
    }
    template <typename Exception>
    bool parse_error(std::size_t, const std::string &, const Exception &)
    {
        if (result.ok())
            result.error = DecodeError::NotJson;
        return false;
    }

private:
    bool ok() const { return result.ok(); }
    bool fail(DecodeError e)
    {
        if (result.ok())
            result.error = e;
        return false;
    }
    Slot *slot(Slot::Type type)
    {
        if (m_depth != 1) {
            fail(DecodeError::NotFlatObject); // a bare scalar at the top
            return nullptr;
        }
        if (m_current == F::Unknown)
            return nullptr;
        Slot &s = m_slots[static_cast<std::size_t>(m_current)];
        s.type = type;
        return &s;
    }
    bool value(Slot::Type type)
    {
        slot(type);
        return ok();
    }

    std::array<Slot, kFieldCount> &m_slots;
    int m_depth = 0;
    F m_current = F::Unknown;
};

class Validator
{
public:
    explicit Validator(std::array<Slot, kFieldCount> &slots) : m_slots(slots) {}
    DecodeResult result;

    bool has(F f) const { return at(f).type != Slot::Absent; }

    bool integer(F f, std::int64_t &out, std::int64_t min, std::int64_t max)
    {
        const Slot &s = at(f);
        if (s.type == Slot::Absent)
            return fail(DecodeError::MissingField, f);
        if (s.type != Slot::Int)
            return fail(DecodeError::WrongType, f);
        if (s.uintOverflow || s.i < min || s.i > max)
            return fail(DecodeError::OutOfRange, f);
        out = s.i;
        return true;
    }
    bool number(F f, double &out, double min, double max)
    {
        const Slot &s = at(f);
        if (s.type == Slot::Absent)
            return fail(DecodeError::MissingField, f);
        double v = 0;
        if (s.type == Slot::Float)
            v = s.d;
        else if (s.type == Slot::Int && !s.uintOverflow)
            v = static_cast<double>(s.i); // "3" for 3 seconds is fine
        else
            return fail(s.type == Slot::Int ? DecodeError::OutOfRange : DecodeError::WrongType, f);
        if (!std::isfinite(v) || v < min || v > max)
            return fail(DecodeError::OutOfRange, f);
        out = v;
        return true;
    }
    bool text(F f, std::string &out, std::size_t minBytes, std::size_t maxBytes)
    {
        Slot &s = at(f);
        if (s.type == Slot::Absent)
            return fail(DecodeError::MissingField, f);
        if (s.type != Slot::String)
            return fail(DecodeError::WrongType, f);
        if (s.s.size() < minBytes || s.s.size() > maxBytes)
            return fail(DecodeError::OutOfRange, f);
        out.swap(s.s);
        return true;
    }
    bool exact(F f, ExactSum &out)
    {
        const Slot &s = at(f);
        if (s.type == Slot::Absent)
            return fail(DecodeError::MissingField, f);
        if (s.type != Slot::String)
            return fail(DecodeError::WrongType, f);
        auto x = ExactSum::fromString(s.s);
        if (!x)
            return fail(DecodeError::BadExactSum, f);
        out = *x;
        return true;
    }
    bool fail(DecodeError e, F f)
    {
        result.error = e;
        result.field = std::string(kFieldNames[static_cast<std::size_t>(f)]);
        return false;
    }

private:
    Slot &at(F f) const { return m_slots[static_cast<std::size_t>(f)]; }
    std::array<Slot, kFieldCount> &m_slots;
};

bool validRunId(std::string_view s) noexcept
{
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' || c == '-'))
            return false;
    return true;
}

bool printableAscii(std::string_view s) noexcept
{
    for (char c : s)
        if (c <= 0x20 || c >= 0x7f)
            return false;
    return true;
}

constexpr double kMaxSeconds = 1e12;        // ~31,700 years: any real duration or epoch time
constexpr double kMaxRate = 1e15;           // tokens per second
constexpr std::int64_t kMaxCount = INT64_MAX;

/// `v`, the header fields and `kind`; false on the first problem (in v.result).
bool validateHeader(Validator &v, Message &m)
{
    Header &h = m.header;
    std::int64_t version = 0;
    std::string kind;
    // `v` first: a message of another version is "bad version", whatever else it contains.
    if (!v.integer(F::V, version, INT64_MIN, INT64_MAX) || version != kSchemaVersion) {
        v.result.error = DecodeError::BadVersion;
        v.result.field = "v";
        return false;
    }
    if (!v.text(F::Run, h.run, 1, kMaxRunIdBytes))
        return false;
    if (!validRunId(h.run))
        return v.fail(DecodeError::OutOfRange, F::Run);
    if (!v.text(F::Host, h.host, 1, kMaxHostBytes))
        return false;
    if (!printableAscii(h.host))
        return v.fail(DecodeError::OutOfRange, F::Host);
    if (!v.integer(F::WorldSize, h.worldSize, 1, kMaxWorldSize) || !v.integer(F::Rank, h.rank, 0, h.worldSize - 1)
        || !v.integer(F::Group, h.group, 0, h.worldSize - 1) || !v.integer(F::LocalRank, h.localRank, 0, h.worldSize - 1)
        || !v.integer(F::Seq, h.seq, 0, kMaxCount) || !v.number(F::T, h.t, 0, kMaxSeconds)
        || !v.integer(F::Dropped, h.droppedTotal, 0, kMaxCount) || !v.text(F::Kind, kind, 1, 16))
        return false;
    const auto k = kindFromName(kind);
    if (!k)
        return v.fail(DecodeError::UnknownKind, F::Kind);
    h.kind = *k;
    return true;
}

bool validatePhase(Validator &v, Message &m)
{
    std::string name;
    if (!v.text(F::Phase, name, 1, 16))
        return false;
    const auto p = phaseFromName(name);
    if (!p)
        return v.fail(DecodeError::OutOfRange, F::Phase);
    m.phase = *p;
    return true;
}

bool validateExitCode(Validator &v, Message &m, bool required)
{
    m.exitCode.reset();
    if (!required && !v.has(F::ExitCode))
        return true;
    std::int64_t code = 0;
    if (!v.integer(F::ExitCode, code, 0, 255))
        return false;
    m.exitCode = code;
    return true;
}

/// The tensor-parallel fields (optional, later than v1's first readers, which ignore them): tp_rank
/// and the seconds only beside tp_size.
bool validateTensorParallel(Validator &v, Progress &p, std::int64_t worldSize)
{
    p.tpSize.reset();
    p.tpRank.reset();
    p.tpCollectiveSecondsTotal.reset();
    if (!v.has(F::TpSize)) {
        if (v.has(F::TpRank))
            return v.fail(DecodeError::MissingField, F::TpSize);
        if (v.has(F::TpSeconds))
            return v.fail(DecodeError::MissingField, F::TpSize);
        return true;
    }
    std::int64_t size = 0, rank = 0;
    if (!v.integer(F::TpSize, size, 1, worldSize) || (v.has(F::TpRank) && !v.integer(F::TpRank, rank, 0, size - 1)))
        return false;
    p.tpSize = size;
    if (v.has(F::TpRank))
        p.tpRank = rank;
    if (v.has(F::TpSeconds)) {
        double seconds = 0;
        if (!v.number(F::TpSeconds, seconds, 0, kMaxSeconds))
            return false;
        p.tpCollectiveSecondsTotal = seconds;
    }
    return true;
}

/// The reference model's running comparison (optional, later than v1's first readers, which
/// ignore it): all three keys together.
bool validateReference(Validator &v, Progress &p)
{
    p.reference.reset();
    if (!v.has(F::RefTokens)) {
        if (v.has(F::Kld))
            return v.fail(DecodeError::MissingField, F::RefTokens);
        if (v.has(F::SameTop))
            return v.fail(DecodeError::MissingField, F::RefTokens);
        return true;
    }
    Progress::Reference r;
    if (!v.integer(F::RefTokens, r.tokens, 0, kMaxCount) || !v.exact(F::Kld, r.kld) || !v.integer(F::SameTop, r.sameTop, 0, r.tokens))
        return false;
    p.reference = r;
    return true;
}

bool validateProgress(Validator &v, Progress &p, std::int64_t worldSize)
{
    if (!v.integer(F::Tokens, p.tokensScoredTotal, 0, kMaxCount) || !v.number(F::Tps, p.tokensPerSecond, 0, kMaxRate)
        || !v.integer(F::WindowsTotal, p.windowsTotal, 0, kMaxCount) || !v.integer(F::WindowsDone, p.windowsDone, 0, p.windowsTotal)
        || !v.number(F::Compute, p.computeSecondsTotal, 0, kMaxSeconds) || !v.number(F::Wait, p.commWaitSecondsTotal, 0, kMaxSeconds)
        || !v.number(F::Transfer, p.commTransferSecondsTotal, 0, kMaxSeconds) || !v.exact(F::Nll, p.nll)
        || !v.exact(F::NllSq, p.nllSquared) || !v.integer(F::Rss, p.rssBytes, 0, kMaxCount))
        return false;
    p.deviceMemoryBytes.reset();
    p.deviceMemoryTotalBytes.reset();
    p.gpuUtilizationPercent.reset();
    // Optional device fields (schema v1 additions, absent without a GPU): each validated, and
    // the total only beside the used bytes it bounds.
    auto optional = [&](F f, std::int64_t lo, std::int64_t hi, std::optional<std::int64_t> &out) {
        if (!v.has(f))
            return true;
        std::int64_t value = 0;
        if (!v.integer(f, value, lo, hi))
            return false;
        out = value;
        return true;
    };
    if (!optional(F::DeviceMem, 0, kMaxCount, p.deviceMemoryBytes))
        return false;
    if (v.has(F::DeviceMemTotal) && !p.deviceMemoryBytes)
        return v.fail(DecodeError::MissingField, F::DeviceMem);
    if (!optional(F::DeviceMemTotal, p.deviceMemoryBytes.value_or(0), kMaxCount, p.deviceMemoryTotalBytes))
        return false;
    if (!optional(F::GpuUtil, 0, 100, p.gpuUtilizationPercent))
        return false;
    return validateTensorParallel(v, p, worldSize) && validateReference(v, p);
}

bool validateLog(Validator &v, Message &m)
{
    std::string level;
    if (!v.text(F::Level, level, 1, 16))
        return false;
    const auto l = logLevelFromName(level);
    if (!l)
        return v.fail(DecodeError::OutOfRange, F::Level);
    m.level = *l;
    return v.text(F::MessageText, m.text, 0, kMaxTextBytes);
}

bool validateResult(Validator &v, Message &m)
{
    m.resultJson.clear();
    if (v.has(F::ResultJson) && v.text(F::ResultJson, m.resultJson, 0, kMaxMessageBytes) && !m.resultJson.empty()) {
        // Carried as text so the message stays flat; it must still be a JSON object.
        const auto parsed = nlohmann::json::parse(m.resultJson, nullptr, false);
        if (parsed.is_discarded() || !parsed.is_object())
            return v.fail(DecodeError::WrongType, F::ResultJson);
    }
    return true;
}

DecodeResult validate(std::array<Slot, kFieldCount> &slots, Message &m)
{
    Validator v(slots);
    if (!validateHeader(v, m))
        return v.result;
    switch (m.header.kind) {
    case Kind::Hello:
    case Kind::Heartbeat: validatePhase(v, m); break;
    case Kind::Progress: validateProgress(v, m.progress, m.header.worldSize); break;
    case Kind::Sync:
        if (v.integer(F::RoundsTotal, m.sync.roundsTotal, 1, kMaxCount) && v.integer(F::Round, m.sync.round, 1, m.sync.roundsTotal)
            && v.number(F::RoundWait, m.sync.waitSeconds, 0, kMaxSeconds))
            v.number(F::RoundTransfer, m.sync.transferSeconds, 0, kMaxSeconds);
        break;
    case Kind::Log: validateLog(v, m); break;
    case Kind::Result: validateResult(v, m); break;
    case Kind::Error:
        if (v.text(F::MessageText, m.text, 0, kMaxTextBytes))
            validateExitCode(v, m, true);
        break;
    case Kind::Bye: validateExitCode(v, m, false); break;
    }
    return v.result;
}

} // namespace

std::string_view kindName(Kind k) noexcept { return kKindNames[static_cast<std::size_t>(k)]; }
std::optional<Kind> kindFromName(std::string_view name) noexcept { return fromName<Kind>(kKindNames, name); }
std::string_view phaseName(Phase p) noexcept { return kPhaseNames[static_cast<std::size_t>(p)]; }
std::optional<Phase> phaseFromName(std::string_view name) noexcept { return fromName<Phase>(kPhaseNames, name); }
std::string_view logLevelName(LogLevel l) noexcept { return kLevelNames[static_cast<std::size_t>(l)]; }
std::optional<LogLevel> logLevelFromName(std::string_view name) noexcept { return fromName<LogLevel>(kLevelNames, name); }
std::string_view decodeErrorName(DecodeError e) noexcept { return kDecodeErrorNames[static_cast<std::size_t>(e)]; }

NllStats Progress::stats() const
{
    NllStats s;
    s.nll = nll;
    s.nllSquared = nllSquared;
    s.tokens = tokensScoredTotal;
    s.windows = windowsDone;
    return s;
}

std::int64_t DecodeCounters::rejectedTotal() const noexcept
{
    std::int64_t n = 0;
    for (auto x : rejected)
        n += x;
    return n;
}

std::string encode(const Message &m)
{
    const Header &h = m.header;
    Writer w;
    w.integer("v", kSchemaVersion);
    w.string("run", h.run);
    w.integer("rank", h.rank);
    w.string("host", h.host);
    w.integer("group", h.group);
    w.integer("local_rank", h.localRank);
    w.integer("world_size", h.worldSize);
    w.integer("seq", h.seq);
    w.number("t", h.t);
    w.string("kind", kindName(h.kind));
    w.integer("dropped_total", h.droppedTotal);
    switch (h.kind) {
    case Kind::Hello:
    case Kind::Heartbeat:
        w.string("phase", phaseName(m.phase));
        break;
    case Kind::Progress: {
        const Progress &p = m.progress;
        w.integer("tokens_scored_total", p.tokensScoredTotal);
        w.number("tokens_per_second", p.tokensPerSecond);
        w.integer("windows_done", p.windowsDone);
        w.integer("windows_total", p.windowsTotal);
        w.number("compute_seconds_total", p.computeSecondsTotal);
        w.number("comm_wait_seconds_total", p.commWaitSecondsTotal);
        w.number("comm_transfer_seconds_total", p.commTransferSecondsTotal);
        w.string("nll_exact", p.nll.toString());
        w.string("nll_sq_exact", p.nllSquared.toString());
        w.integer("rss_bytes", p.rssBytes);
        if (p.deviceMemoryBytes)
            w.integer("device_memory_bytes", *p.deviceMemoryBytes);
        if (p.deviceMemoryBytes && p.deviceMemoryTotalBytes)
            w.integer("device_memory_total_bytes", *p.deviceMemoryTotalBytes);
        if (p.gpuUtilizationPercent)
            w.integer("gpu_utilization_percent", *p.gpuUtilizationPercent);
        if (p.tpSize) {
            w.integer("tp_size", *p.tpSize);
            if (p.tpRank)
                w.integer("tp_rank", *p.tpRank);
            if (p.tpCollectiveSecondsTotal)
                w.number("tp_collective_seconds_total", *p.tpCollectiveSecondsTotal);
        }
        if (p.reference) {
            w.integer("ref_tokens_total", p.reference->tokens);
            w.string("kld_exact", p.reference->kld.toString());
            w.integer("same_top_total", p.reference->sameTop);
        }
        break;
    }
    case Kind::Sync:
        w.integer("round", m.sync.round);
        w.integer("rounds_total", m.sync.roundsTotal);
        w.number("wait_seconds", m.sync.waitSeconds);
        w.number("transfer_seconds", m.sync.transferSeconds);
        break;
    case Kind::Log:
        w.string("level", logLevelName(m.level));
        w.string("message", m.text);
        break;
    case Kind::Result:
        if (!m.resultJson.empty())
            w.string("result_json", m.resultJson);
        break;
    case Kind::Error:
        w.string("message", m.text);
        w.integer("exit_code", m.exitCode.value_or(1));
        break;
    case Kind::Bye:
        if (m.exitCode)
            w.integer("exit_code", *m.exitCode);
        break;
    }
    return w.finish();
}

DecodeResult decode(std::string_view bytes, Message &out) noexcept
{
    if (bytes.size() > kMaxMessageBytes)
        return {DecodeError::TooLarge, {}};
    try {
        // One slot array per thread, reused: its strings keep their capacity between messages.
        thread_local std::array<Slot, kFieldCount> slots;
        for (auto &s : slots) {
            s.type = Slot::Absent;
            s.uintOverflow = false;
        }
        FlatHandler handler(slots);
        const bool parsed = nlohmann::json::sax_parse(bytes.begin(), bytes.end(), &handler, nlohmann::json::input_format_t::json, true, false);
        if (!handler.result.ok())
            return handler.result;
        if (!parsed)
            return {DecodeError::NotJson, {}};
        return validate(slots, out);
    } catch (const std::bad_alloc &) {
        return {DecodeError::TooLarge, {}};
    } catch (const nlohmann::json::exception &) {
        return {DecodeError::NotJson, {}};
    }
}

std::optional<NllStats> resultStats(std::string_view resultJson) noexcept
{
    try {
        const auto j = nlohmann::json::parse(resultJson, nullptr, false);
        if (!j.is_object())
            return std::nullopt;
        auto str = [&](const char *k) -> std::optional<ExactSum> {
            auto it = j.find(k);
            if (it == j.end() || !it->is_string())
                return std::nullopt;
            return ExactSum::fromString(it->get_ref<const std::string &>());
        };
        auto count = [&](const char *k) -> std::optional<std::int64_t> {
            auto it = j.find(k);
            if (it == j.end() || !it->is_number_integer())
                return std::nullopt;
            return it->get<std::int64_t>();
        };
        const auto nll = str("nll_sum_exact");
        const auto sq = str("nll_sq_sum_exact");
        const auto tokens = count("tokens_scored");
        const auto windows = count("windows");
        if (!nll || !sq || !tokens || !windows)
            return std::nullopt;
        NllStats s;
        s.nll = *nll;
        s.nllSquared = *sq;
        s.tokens = *tokens;
        s.windows = *windows;
        return s;
    } catch (const std::exception &) {
        return std::nullopt;
    }
}

// ---- credentials and endpoints ----------------------------------------------------------------

bool isZ85Key(std::string_view key) noexcept
{
    static constexpr std::string_view kAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    if (key.size() != 40)
        return false;
    for (char c : key)
        if (kAlphabet.find(c) == std::string_view::npos)
            return false;
    return true;
}

Credentials parseCredentials(std::string_view text, const std::string &origin)
{
    Credentials c;
    std::size_t lineNo = 0;
    while (!text.empty()) {
        ++lineNo;
        const auto nl = text.find('\n');
        std::string_view line = text.substr(0, nl);
        text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
        auto trim = [](std::string_view s) {
            while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
                s.remove_prefix(1);
            while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
                s.remove_suffix(1);
            return s;
        };
        line = trim(line);
        if (line.empty() || line.front() == '#')
            continue;
        const auto eq = line.find('=');
        const std::string where = origin + ":" + std::to_string(lineNo);
        if (eq == std::string_view::npos)
            throw ConfigError(where + ": expected `key = value` (keys: server_public, server_secret, client_public, client_secret)");
        const auto key = trim(line.substr(0, eq));
        const auto value = trim(line.substr(eq + 1));
        if (!isZ85Key(value))
            throw ConfigError(where + ": " + std::string(key) + " must be a 40-character Z85 CURVE key (as zmq_curve_keypair makes)");
        auto once = [&](std::string &field) {
            if (!field.empty())
                throw ConfigError(where + ": " + std::string(key) + " is given twice");
            field = value;
        };
        if (key == "server_public")
            once(c.serverPublic);
        else if (key == "server_secret")
            once(c.serverSecret);
        else if (key == "client_secret")
            once(c.clientSecret);
        else if (key == "client_public")
            c.clientPublic.emplace_back(value);
        else
            throw ConfigError(where + ": unknown key `" + std::string(key)
                              + "` (keys: server_public, server_secret, client_public, client_secret)");
    }
    return c;
}

std::string formatCredentials(const Credentials &c)
{
    std::string out = "# clusterppl telemetry credentials v1 (keep this file 0600)\n";
    if (!c.serverPublic.empty())
        out += "server_public = " + c.serverPublic + "\n";
    if (!c.serverSecret.empty())
        out += "server_secret = " + c.serverSecret + "\n";
    for (const auto &k : c.clientPublic)
        out += "client_public = " + k + "\n";
    if (!c.clientSecret.empty())
        out += "client_secret = " + c.clientSecret + "\n";
    return out;
}

Endpoint parseEndpoint(std::string_view text)
{
    const std::string shown(text);
    auto bad = [&](const std::string &why) {
        return ConfigError("telemetry endpoint `" + shown + "`: " + why + " (expected tcp://HOST:PORT, e.g. tcp://10.0.0.5:5557)");
    };
    if (!text.starts_with("tcp://"))
        throw bad("only tcp:// is supported");
    text.remove_prefix(6);
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
        throw bad("missing host or port");
    Endpoint e;
    std::string_view host = text.substr(0, colon);
    if (host.starts_with('[') && host.ends_with(']'))
        host = host.substr(1, host.size() - 2);
    if (host.empty() || host == "*" || !printableAscii(host))
        throw bad("bad host");
    e.host = std::string(host);
    const auto port = text.substr(colon + 1);
    int value = 0;
    const auto r = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || r.ec != std::errc{} || r.ptr != port.data() + port.size() || value < 1 || value > 65535)
        throw bad("port must be 1..65535");
    e.port = value;
    return e;
}

std::string Endpoint::zmq() const
{
    const bool v6 = host.find(':') != std::string::npos;
    return "tcp://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

} // namespace cppl::telemetry
