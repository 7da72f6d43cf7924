// SPDX-License-Identifier: MIT
#include "cppl/agent_lines.h"

#include "cppl/sharding.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <climits>

namespace cppl::lines {

namespace {

using Json = nlohmann::ordered_json; // members keep their order: a line reads as it was written

constexpr std::array<std::string_view, kKindCount> kTags{"CLUSTERPPL_RESULT",  "CLUSTERPPL_LEDGER",    "CLUSTERPPL_CHECKPOINT",
                                                         "CLUSTERPPL_REGROUP", "CLUSTERPPL_RANK_LOST", "CLUSTERPPL_STORE"};
constexpr std::array<std::string_view, kProblemCount> kProblemNames{"ok",           "too_large",  "not_json",     "not_object",
                                                                    "bad_version", "missing_field", "wrong_type", "out_of_range"};
constexpr std::string_view kCheckpointFormat = "clusterppl-checkpoint";
constexpr std::size_t kMaxHostBytes = 255;       // RFC 1035 host name
constexpr std::size_t kMaxTextBytes = 64u << 10; // a cause, a fingerprint's plan

std::string dump(const Json &j)
{
    // Invalid UTF-8 (a cause cut mid-character) becomes U+FFFD instead of an exception.
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// A line's object in ASCII alone (other characters as \u and four hex digits): a line cut at any byte on its way
/// (srun -l cuts at 1 KiB) and passed on as text before it is joined again then never splits a
/// character in two.
std::string dumpAscii(const Json &j)
{
    return j.dump(-1, ' ', true, Json::error_handler_t::replace);
}

// ---- encoding ---------------------------------------------------------------------------------

Json ledgerObject(const Ledger &e)
{
    Json j;
    j["rank"] = e.rank;
    j["round"] = e.round;
    j["batches"] = formatBatchRanges(e.batches);
    if (e.epoch > 0)
        j["epoch"] = e.epoch;
    return j;
}

Json checkpointObject(const Checkpoint &e)
{
    Json j;
    j["format"] = kCheckpointFormat;
    j["version"] = e.formatVersion;
    j["round"] = e.round;
    Json words = Json::array();
    for (const std::int64_t w : e.words)
        words.push_back(std::to_string(w));
    j["words"] = std::move(words);
    j["schedule"] = e.schedule;
    j["world_size"] = e.worldSize;
    j["sync_every_tokens"] = e.syncEvery == kSyncAtEnd ? Json("end") : Json(e.syncEvery);
    j["batch_count"] = e.batchCount;
    if (e.batch > 0)
        j["batch"] = e.batch;
    j["fingerprint"] = {{"model", e.fingerprint.model}, {"data", e.fingerprint.data}, {"plan", e.fingerprint.plan}};
    if (e.epoch > 0)
        j["epoch"] = e.epoch;
    for (const auto &[name, text] : e.more)
        if (name != "v" && !j.contains(name))
            if (Json value = Json::parse(text, nullptr, false); !value.is_discarded())
                j[name] = std::move(value);
    return j;
}

Json regroupObject(const Regroup &e)
{
    Json j;
    j["epoch"] = e.epoch;
    j["first_round"] = e.firstRound;
    Json lost = Json::array();
    for (const LostBatches &l : e.lost)
        lost.push_back({{"rank", l.rank}, {"round", l.round}, {"batches", formatBatchRanges(l.batches)}});
    j["lost"] = std::move(lost);
    return j;
}

Json rankLostObject(const RankLost &e)
{
    return {{"rank", e.rank},
            {"host", e.host},
            {"cause", e.cause},
            {"round", e.round},
            {"windows_kept", e.windowsKept},
            {"batches_requeued", e.batchesRequeued},
            {"ranks_left", e.ranksLeft},
            {"after_last_round", e.afterLastRound}};
}

Json storeObject(const StoreReady &e)
{
    return {{"port", e.port}, {"addr", e.addr}};
}

// ---- decoding ---------------------------------------------------------------------------------

/// Reads the members of one object into typed fields; the first problem is kept in the Decoded,
/// named by its path ("fingerprint.model", "lost[1].batches").
class Fields
{
public:
    Fields(const Json &object, Decoded &d, std::string path = {}) : m_o(object), m_d(d), m_path(std::move(path)) {}

    /// The member @p key, which must be of @p type (object or array); nullptr after a failure.
    const Json *member(const char *key, Json::value_t type)
    {
        const auto it = m_o.find(key);
        if (it == m_o.end())
            return fail(Problem::MissingField, key), nullptr;
        if (it->type() != type)
            return fail(Problem::WrongType, key), nullptr;
        return &*it;
    }
    [[nodiscard]] std::string pathOf(std::string_view key) const { return m_path.empty() ? std::string(key) : m_path + "." + std::string(key); }

    template <typename Int>
    bool integer(const char *key, Int &out, std::int64_t min, std::int64_t max, bool required = true)
    {
        const auto it = m_o.find(key);
        if (it == m_o.end())
            return !required || fail(Problem::MissingField, key);
        if (!it->is_number_integer())
            return fail(Problem::WrongType, key);
        if (it->is_number_unsigned() && it->template get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            return fail(Problem::OutOfRange, key);
        const auto v = it->template get<std::int64_t>();
        if (v < min || v > max)
            return fail(Problem::OutOfRange, key);
        out = static_cast<Int>(v);
        return true;
    }
    bool text(const char *key, std::string &out, std::size_t minBytes, std::size_t maxBytes)
    {
        const auto it = m_o.find(key);
        if (it == m_o.end())
            return fail(Problem::MissingField, key);
        if (!it->is_string())
            return fail(Problem::WrongType, key);
        const auto &s = it->get_ref<const std::string &>();
        if (s.size() < minBytes || s.size() > maxBytes)
            return fail(Problem::OutOfRange, key);
        out = s;
        return true;
    }
    bool ranges(const char *key, BatchRanges &out)
    {
        std::string text;
        if (!this->text(key, text, 0, kMaxLineBytes))
            return false;
        auto parsed = parseBatchRanges(text);
        if (!parsed)
            return fail(Problem::OutOfRange, key);
        out = std::move(*parsed);
        return true;
    }
    bool flag(const char *key, bool &out)
    {
        const auto it = m_o.find(key);
        if (it == m_o.end())
            return true; // optional: false
        if (!it->is_boolean())
            return fail(Problem::WrongType, key);
        out = it->get<bool>();
        return true;
    }
    bool fail(Problem p, std::string_view key)
    {
        if (m_d.problem == Problem::None) {
            m_d.problem = p;
            m_d.field = pathOf(key);
        }
        return false;
    }
    [[nodiscard]] Decoded &decoded() const noexcept { return m_d; }

private:
    const Json &m_o;
    Decoded &m_d;
    std::string m_path;
};

constexpr std::int64_t kMaxInt = INT_MAX;
constexpr std::int64_t kMaxCount = INT64_MAX;

bool readLedger(Fields &f, Ledger &e)
{
    return f.integer("rank", e.rank, 0, kMaxInt) && f.integer("round", e.round, 0, kMaxInt) && f.ranges("batches", e.batches)
           && f.integer("epoch", e.epoch, 0, kMaxInt, false);
}

bool readWords(Fields &f, NllStats::Words &out)
{
    const Json *words = f.member("words", Json::value_t::array);
    if (!words)
        return false;
    if (words->size() != out.size())
        return f.fail(Problem::OutOfRange, "words");
    for (std::size_t i = 0; i < out.size(); ++i) {
        const Json &w = (*words)[i];
        const std::string at = "words[" + std::to_string(i) + "]";
        if (!w.is_string())
            return f.fail(Problem::WrongType, at);
        const auto &t = w.get_ref<const std::string &>();
        const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), out[i]);
        if (t.empty() || ec != std::errc() || p != t.data() + t.size())
            return f.fail(Problem::OutOfRange, at);
    }
    return true;
}

bool readSyncEvery(const Json &o, Fields &f, std::int64_t &out)
{
    const auto it = o.find("sync_every_tokens");
    if (it != o.end() && it->is_string()) {
        if (it->get_ref<const std::string &>() != "end")
            return f.fail(Problem::OutOfRange, "sync_every_tokens");
        out = kSyncAtEnd;
        return true;
    }
    return f.integer("sync_every_tokens", out, 0, kMaxCount);
}

bool readFingerprint(Fields &f, Fingerprint &out)
{
    const Json *o = f.member("fingerprint", Json::value_t::object);
    if (!o)
        return false;
    Fields inner(*o, f.decoded(), f.pathOf("fingerprint"));
    return inner.text("model", out.model, 1, kMaxTextBytes) && inner.text("data", out.data, 1, kMaxTextBytes)
           && inner.text("plan", out.plan, 1, kMaxTextBytes);
}

bool readCheckpoint(const Json &o, Fields &f, Checkpoint &e)
{
    std::string format;
    if (!f.text("format", format, 0, 64))
        return false;
    if (format != kCheckpointFormat)
        return f.fail(Problem::OutOfRange, "format");
    if (!f.integer("version", e.formatVersion, 1, kMaxInt) || !f.integer("round", e.round, 0, kMaxInt) || !readWords(f, e.words)
        || !f.text("schedule", e.schedule, 1, 64) || !f.integer("world_size", e.worldSize, 1, kMaxInt) || !readSyncEvery(o, f, e.syncEvery)
        || !f.integer("batch_count", e.batchCount, 0, kMaxCount) || !f.integer("batch", e.batch, 1, kMaxCount, false)
        || !readFingerprint(f, e.fingerprint) || !f.integer("epoch", e.epoch, 0, kMaxInt, false))
        return false;
    static const std::set<std::string_view> known{"format",      "version", "round", "words",       "schedule", "world_size",
                                                  "sync_every_tokens", "batch_count", "batch", "fingerprint", "epoch",    "v"};
    for (const auto &[name, value] : o.items())
        if (!known.count(name))
            e.more.emplace_back(name, dump(value));
    return true;
}

bool readRegroup(Fields &f, Regroup &e)
{
    if (!f.integer("epoch", e.epoch, 1, kMaxInt) || !f.integer("first_round", e.firstRound, 0, kMaxInt))
        return false;
    const Json *lost = f.member("lost", Json::value_t::array);
    if (!lost)
        return false;
    if (lost->empty())
        return f.fail(Problem::OutOfRange, "lost"); // a regrouping is always without someone
    for (std::size_t i = 0; i < lost->size(); ++i) {
        const std::string at = "lost[" + std::to_string(i) + "]";
        if (!(*lost)[i].is_object())
            return f.fail(Problem::WrongType, at);
        Fields l((*lost)[i], f.decoded(), f.pathOf(at));
        LostBatches b;
        if (!l.integer("rank", b.rank, 0, kMaxInt) || !l.integer("round", b.round, -1, kMaxInt) || !l.ranges("batches", b.batches))
            return false;
        e.lost.push_back(std::move(b));
    }
    return true;
}

bool readRankLost(Fields &f, RankLost &e)
{
    return f.integer("rank", e.rank, 0, kMaxInt) && f.text("host", e.host, 1, kMaxHostBytes) && f.text("cause", e.cause, 0, kMaxTextBytes)
           && f.integer("round", e.round, 0, kMaxInt) && f.integer("windows_kept", e.windowsKept, 0, kMaxCount)
           && f.integer("batches_requeued", e.batchesRequeued, 0, kMaxCount) && f.integer("ranks_left", e.ranksLeft, 0, kMaxInt)
           && f.flag("after_last_round", e.afterLastRound);
}

bool readStore(Fields &f, StoreReady &e)
{
    return f.integer("port", e.port, 1, 65535) && f.text("addr", e.addr, 1, kMaxHostBytes);
}

/// The result object as the agent's --json holds it: without "v" (re-written then), else as sent.
bool readResult(Json &o, std::string_view body, Result &e)
{
    if (o.erase("v") == 0)
        e.json = std::string(body);
    else
        e.json = dump(o);
    return true;
}

bool readEvent(Kind kind, Json &o, std::string_view body, Decoded &d)
{
    Fields f(o, d);
    switch (kind) {
    case Kind::Result: return readResult(o, body, d.event.emplace<Result>());
    case Kind::Ledger: return readLedger(f, d.event.emplace<Ledger>());
    case Kind::Checkpoint: return readCheckpoint(o, f, d.event.emplace<Checkpoint>());
    case Kind::Regroup: return readRegroup(f, d.event.emplace<Regroup>());
    case Kind::RankLost: return readRankLost(f, d.event.emplace<RankLost>());
    case Kind::StoreReady: return readStore(f, d.event.emplace<StoreReady>());
    }
    return false;
}

/// The tag of a line of ours ("CLUSTERPPL_" + [A-Z0-9_]+, then a space or the end); empty otherwise.
std::string_view tagOfLine(std::string_view line) noexcept
{
    if (!line.starts_with(kPrefix))
        return {};
    std::size_t i = kPrefix.size();
    while (i < line.size() && i < kMaxTagBytes && ((line[i] >= 'A' && line[i] <= 'Z') || (line[i] >= '0' && line[i] <= '9') || line[i] == '_'))
        ++i;
    if (i == kPrefix.size() || (i < line.size() && line[i] != ' '))
        return {};
    return line.substr(0, i);
}

Decoded malformed(Decoded d, Problem p, std::string field = {})
{
    d.status = Status::Malformed;
    d.problem = p;
    d.field = std::move(field);
    return d;
}

/// A known kind's object after the tag: its version, then its members.
Decoded decodeBody(Decoded d, std::string_view line, std::string_view body)
{
    if (line.size() > kMaxLineBytes)
        return malformed(std::move(d), Problem::TooLarge);
    Json o = Json::parse(body, nullptr, false);
    if (o.is_discarded())
        return malformed(std::move(d), Problem::NotJson);
    if (!o.is_object())
        return malformed(std::move(d), Problem::NotObject);
    d.version = 1;
    if (const auto v = o.find("v"); v != o.end()) {
        if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            || v->get<std::int64_t>() < 1)
            return malformed(std::move(d), Problem::BadVersion, "v");
        d.version = v->get<std::int64_t>();
    }
    if (d.version > kVersion) {
        d.status = Status::NewerVersion;
        d.raw = std::string(line);
        return d;
    }
    if (!readEvent(*d.kind, o, body, d)) {
        d.status = Status::Malformed;
        d.event = Event{};
        return d;
    }
    d.status = Status::Accepted;
    return d;
}

Decoded decodeLine(std::string_view line)
{
    if (line.ends_with('\r'))
        line.remove_suffix(1);
    Decoded d;
    const std::string_view tag = tagOfLine(line);
    if (tag.empty())
        return d; // NotOurs
    d.tag = std::string(tag);
    d.kind = kindFromTag(tag);
    if (!d.kind) { // a newer agent's kind: whatever follows is its business
        d.status = Status::UnknownKind;
        d.raw = std::string(line.substr(0, std::min(line.size(), kMaxLineBytes)));
        return d;
    }
    const std::string_view body = line.substr(std::min(line.size(), tag.size() + 1));
    return decodeBody(std::move(d), line, body);
}

} // namespace

std::string_view tagOf(Kind k) noexcept
{
    return kTags[static_cast<std::size_t>(k)];
}

std::optional<Kind> kindFromTag(std::string_view tag) noexcept
{
    for (std::size_t i = 0; i < kTags.size(); ++i)
        if (kTags[i] == tag)
            return static_cast<Kind>(i);
    return std::nullopt;
}

std::string_view problemName(Problem p) noexcept
{
    return kProblemNames[static_cast<std::size_t>(p)];
}

Kind kindOf(const Event &e) noexcept
{
    return static_cast<Kind>(e.index());
}

std::string formatBatchRanges(std::span<const BatchRange> ranges)
{
    std::string s;
    for (const BatchRange &r : ranges) {
        if (r.end <= r.first)
            continue;
        if (!s.empty())
            s += ',';
        s += std::to_string(r.first);
        if (r.end - r.first > 1)
            s += '-' + std::to_string(r.end - 1);
    }
    return s;
}

std::optional<BatchRanges> parseBatchRanges(std::string_view text)
{
    BatchRanges out;
    if (text.empty())
        return out;
    std::size_t pos = 0;
    auto number = [&](std::int64_t &v) {
        const char *b = text.data() + pos;
        const auto [p, ec] = std::from_chars(b, text.data() + text.size(), v);
        if (ec != std::errc() || p == b || v < 0 || *b == '-' || *b == '+')
            return false;
        pos = static_cast<std::size_t>(p - text.data());
        return true;
    };
    for (;;) {
        std::int64_t a = 0;
        if (!number(a))
            return std::nullopt;
        std::int64_t b = a;
        if (pos < text.size() && text[pos] == '-') {
            ++pos;
            if (!number(b) || b < a)
                return std::nullopt;
        }
        if (b == INT64_MAX) // its end would not fit
            return std::nullopt;
        out.push_back({a, b + 1});
        if (pos == text.size())
            return out;
        if (text[pos++] != ',')
            return std::nullopt;
    }
}

std::string encode(const Event &e)
{
    Json j;
    switch (kindOf(e)) {
    case Kind::Result: {
        const std::string &text = std::get<Result>(e).json;
        j = Json::parse(text, nullptr, false);
        if (j.is_discarded() || !j.is_object())
            return std::string(tagOf(Kind::Result)) + ' ' + text;
        j.erase("v");
        break;
    }
    case Kind::Ledger: j = ledgerObject(std::get<Ledger>(e)); break;
    case Kind::Checkpoint: j = checkpointObject(std::get<Checkpoint>(e)); break;
    case Kind::Regroup: j = regroupObject(std::get<Regroup>(e)); break;
    case Kind::RankLost: j = rankLostObject(std::get<RankLost>(e)); break;
    case Kind::StoreReady: j = storeObject(std::get<StoreReady>(e)); break;
    }
    // Last, so that every line begins as it did before the member existed (scripts match on that).
    j["v"] = kVersion;
    return std::string(tagOf(kindOf(e))) + ' ' + dumpAscii(j);
}

std::string checkpointDocument(const Checkpoint &c)
{
    return dump(checkpointObject(c));
}

std::string describe(const RankLost &e)
{
    std::string s = "rank " + std::to_string(e.rank) + " (" + e.host + ") " + e.cause;
    if (e.afterLastRound)
        return s + "; lost after the last round (" + std::to_string(e.round) + "), all " + std::to_string(e.windowsKept)
               + " of its windows kept, nothing to redo";
    return s + "; lost after round " + std::to_string(e.round) + ", " + std::to_string(e.windowsKept) + " of its windows kept, "
           + std::to_string(e.batchesRequeued) + " batches queued again so far";
}

std::string Decoded::reason() const
{
    switch (status) {
    case Status::Accepted: return {};
    case Status::NotOurs: return "not a line of the agent protocol";
    case Status::UnknownKind: return tag + " is a kind of line this ClusterPPL does not know";
    case Status::NewerVersion:
        return tag + " of version " + std::to_string(version) + ", newer than this ClusterPPL reads (" + std::to_string(kVersion) + ")";
    case Status::Malformed: break;
    }
    std::string why;
    switch (problem) {
    case Problem::TooLarge: why = "longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB"; break;
    case Problem::NotJson: why = "not one JSON object after the tag"; break;
    case Problem::NotObject: why = "JSON, but not an object"; break;
    case Problem::BadVersion: why = "\"v\" is not an integer >= 1"; break;
    case Problem::MissingField: why = "\"" + field + "\" is missing"; break;
    case Problem::WrongType: why = "\"" + field + "\" has the wrong type"; break;
    case Problem::OutOfRange: why = "\"" + field + "\" is out of range"; break;
    case Problem::None: why = "?"; break;
    }
    return "malformed " + tag + " line: " + why;
}

Decoded decode(std::string_view line) noexcept
{
    try {
        return decodeLine(line);
    } catch (const std::bad_alloc &) {
        return malformed({}, Problem::TooLarge);
    } catch (const std::exception &) { // nlohmann on a corner it throws on rather than reports
        return malformed({}, Problem::NotJson);
    }
}

bool endsEarly(std::string_view line) noexcept
{
    const std::string_view tag = tagOfLine(line);
    if (tag.empty() || line.size() > kMaxLineBytes)
        return false;
    const std::string_view body = line.substr(std::min(line.size(), tag.size() + 1));
    try {
        const Json whole = Json::parse(body);
        return whole.is_discarded(); // never: parse() throws rather than discard
    } catch (const Json::parse_error &e) {
        return e.byte > body.size(); // the parser wanted more input (a syntax error stops before the end)
    } catch (...) {
        return false;
    }
}

std::optional<Kind> peekKind(std::string_view line) noexcept
{
    const std::string_view tag = tagOfLine(line);
    return tag.empty() ? std::nullopt : kindFromTag(tag);
}

std::int64_t Counters::malformedTotal() const noexcept
{
    std::int64_t n = 0;
    for (const auto x : malformed)
        n += x;
    return n;
}

Decoded LineReader::read(std::string_view line)
{
    Decoded d = decode(line);
    switch (d.status) {
    case Status::Accepted: ++m_counters.accepted; break;
    case Status::NotOurs: ++m_counters.notOurs; break;
    case Status::Malformed: ++m_counters.malformed[static_cast<std::size_t>(d.problem)]; break;
    case Status::UnknownKind: ++m_counters.unknownKind; break;
    case Status::NewerVersion: ++m_counters.newerVersion; break;
    }
    const bool keep = d.status == Status::UnknownKind || d.status == Status::NewerVersion;
    if (keep && m_warned.emplace(d.tag, d.version).second)
        d.warning = d.reason() + " (from a newer agent?): kept as output, not acted on; run agents of this ClusterPPL's version, or "
                                 "update ClusterPPL here to theirs (docs/agent-lines.md)";
    return d;
}

} // namespace cppl::lines
