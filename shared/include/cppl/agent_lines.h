// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/statistics.h"

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

/**
 * @file
 * @brief The agent -> launcher line protocol (docs/agent-lines.md): the lines an agent prints on
 * stdout for the program that started it, among its other output. Each is one line,
 * `CLUSTERPPL_<KIND> {JSON object}`, the object's last member `"v"`: the version. Version 1.
 *
 * Producers (the agent's eval, store) call encode(); consumers (the run engine, the run directory,
 * the launchers, the CLI) call decode() or a LineReader, which never throws: a line is an event,
 * not ours (any other output), malformed (with the reason), of a kind this side does not know, or
 * of a newer version. The last two are kept as they are (their raw text) and warned about once.
 */
namespace cppl::lines {

/// @brief The version this side writes, and the newest it reads. A line without `"v"` is version 1
/// (what agents wrote before the member existed). Members a version adds later are optional, so an
/// older reader ignores them; a version is raised only for a change an older reader would misread.
inline constexpr std::int64_t kVersion = 1;
/// @brief Every line's tag begins so: `CLUSTERPPL_` + the kind's name in capitals, then a space.
inline constexpr std::string_view kPrefix = "CLUSTERPPL_";
/// @brief The longest line decoded: a result with rows for 1024+ ranks, with room.
inline constexpr std::size_t kMaxLineBytes = 8u << 20;
/// @brief The longest tag (prefix included) taken as ours.
inline constexpr std::size_t kMaxTagBytes = 48;

enum class Kind : std::uint8_t { Result, Ledger, Checkpoint, Regroup, RankLost, StoreReady };
inline constexpr int kKindCount = 6;

/// @brief The tag of @p k: "CLUSTERPPL_RESULT", "CLUSTERPPL_LEDGER", "CLUSTERPPL_CHECKPOINT",
/// "CLUSTERPPL_REGROUP", "CLUSTERPPL_RANK_LOST", "CLUSTERPPL_STORE".
[[nodiscard]] std::string_view tagOf(Kind k) noexcept;
[[nodiscard]] std::optional<Kind> kindFromTag(std::string_view tag) noexcept;

/// @brief Global batches [first, end) (batch indices, not windows). Lines carry them as "0-3,8"
/// (inclusive ranges, comma separated; "" for none).
struct BatchRange
{
    std::int64_t first = 0;
    std::int64_t end = 0;
    friend auto operator<=>(const BatchRange &, const BatchRange &) noexcept = default;
};
using BatchRanges = std::vector<BatchRange>;
/// @brief "0-3,8,10-11"; empty ranges are left out.
[[nodiscard]] std::string formatBatchRanges(std::span<const BatchRange> ranges);
/// @brief The ranges of "0-3,8" in the order written; nullopt unless the text is exactly that form
/// (digits, `a-b` with a <= b, no spaces, no empty parts).
[[nodiscard]] std::optional<BatchRanges> parseBatchRanges(std::string_view text);

/// @brief `CLUSTERPPL_RESULT`: the reporting rank's result (docs/result-json.md), once, at the end.
struct Result
{
    std::string json; ///< the result JSON object, as the agent's --json file holds it (without `"v"`)
};

/// @brief `CLUSTERPPL_LEDGER`: rank R's global batches of round N, before the round's collective.
struct Ledger
{
    int rank = 0;
    int round = 0;
    BatchRanges batches;
    int epoch = 0; ///< the membership it was printed in (0 until a regrouping; written only when > 0)
};

/// @brief What a checkpoint must match to be resumed (sha256 of the weights and of the token
/// stream, the plan's settings in words).
struct Fingerprint
{
    std::string model, data, plan;
    friend bool operator==(const Fingerprint &, const Fingerprint &) = default;
};

/// @brief `CLUSTERPPL_CHECKPOINT`: round N's exact global words, from the reporting rank after the
/// round's collective, with what a resume must match and how the run was planned. The object is a
/// `clusterppl-checkpoint` document (the run directory's checkpoint.json, docs/communication.md).
struct Checkpoint
{
    int round = 0;
    NllStats::Words words{};       ///< as decimal strings: JSON readers that keep numbers as doubles would round them
    std::string schedule;          ///< "static" or "dynamic"
    int worldSize = 1;
    std::int64_t syncEvery = 0;    ///< --sync-every-tokens; kSyncAtEnd (cppl/sharding.h) is written "end"
    std::int64_t batchCount = 0;
    std::int64_t batch = 0;        ///< windows per forward pass; 0: not recorded (agents before it was)
    Fingerprint fingerprint;
    int epoch = 0;                 ///< the reporting rank's membership (written only when > 0)
    int formatVersion = 1;         ///< the document's own "version" (the checkpoint format's)
    /// Members this side does not know, name -> JSON text, kept in order: a newer agent's additions
    /// reach checkpoint.json, and the agent that resumes from it, unchanged.
    std::vector<std::pair<std::string, std::string>> more;
};

/// @brief One lost rank as a regroup line names it.
struct LostBatches
{
    int rank = 0;
    int round = -1;        ///< the last round (checkpoint numbering) whose sums count with it; -1: none
    BatchRanges batches;   ///< its batches that count (in the totals from then on)
};

/// @brief `CLUSTERPPL_REGROUP`: the survivors regrouped for epoch E; checkpoints are complete again
/// from round F on; @p lost names every rank lost so far (the line stands alone when the reporting
/// rank changed).
struct Regroup
{
    int epoch = 1;
    int firstRound = 0;
    std::vector<LostBatches> lost;
};

/// @brief `CLUSTERPPL_RANK_LOST`: the reporting rank's word that the others went on without a rank
/// (--on-rank-loss continue): who, where, why, and what of its work counts.
struct RankLost
{
    int rank = 0;
    std::string host;
    std::string cause;              ///< the watchdog's words: "died: its connection closed", ...
    int round = 0;                  ///< lost after this round (the rounds it took part in)
    std::int64_t windowsKept = 0;   ///< its windows whose sums count
    std::int64_t batchesRequeued = 0; ///< batches queued again so far (its unfinished ones, every loss so far)
    int ranksLeft = 0;              ///< the ranks that go on (0 after the last round)
    bool afterLastRound = false;    ///< lost in the closing gather: every window of it counts, nothing is redone
};

/// @brief `CLUSTERPPL_STORE`: `clusterppl-agent store` serves the rendezvous store.
struct StoreReady
{
    int port = 0;
    std::string addr; ///< the address it is bound to (0.0.0.0: every interface)
};

using Event = std::variant<Result, Ledger, Checkpoint, Regroup, RankLost, StoreReady>;
[[nodiscard]] Kind kindOf(const Event &e) noexcept;

/// @brief One line, without its newline. Strings that are not UTF-8 are written with U+FFFD in
/// place of the bad bytes. A Result whose json is not a JSON object is written as it is (decode()
/// then calls the line malformed), so a launcher that relays a result read elsewhere need not check it.
[[nodiscard]] std::string encode(const Event &e);

/// @brief The clusterppl-checkpoint document of @p c: the line's object without `"v"`, what the
/// run directory's checkpoint.json holds (with the launcher's additions) and --resume-state reads.
[[nodiscard]] std::string checkpointDocument(const Checkpoint &c);

/// @brief "recovered: "'s words for humans, one line: "rank 2 (node1) died: its connection closed;
/// lost after round 4, 120 of its windows kept, 3 batches queued again so far" (or "lost after the
/// last round (N), all W of its windows kept, nothing to redo"). Nothing parses it.
[[nodiscard]] std::string describe(const RankLost &e);

enum class Status : std::uint8_t {
    Accepted,     ///< decoded: event holds it
    NotOurs,      ///< any other output (no tag)
    Malformed,    ///< a tag of ours, a bad object: problem and field say why
    UnknownKind,  ///< a well-formed tag of a kind this side does not know (a newer agent's)
    NewerVersion, ///< a known kind of a version above kVersion
};

/// @brief Why a line of ours is malformed.
enum class Problem : std::uint8_t {
    None,
    TooLarge,     ///< more than kMaxLineBytes
    NotJson,      ///< nothing after the tag, a syntax error, invalid UTF-8, trailing bytes
    NotObject,    ///< JSON, but not an object
    BadVersion,   ///< `"v"` not an integer >= 1
    MissingField,
    WrongType,    ///< a string where a number belongs, 5.0 where an integer belongs, ...
    OutOfRange,   ///< a negative rank, an epoch 0 where one is needed, "0-x" as batches, ...
};
inline constexpr int kProblemCount = 8;
[[nodiscard]] std::string_view problemName(Problem p) noexcept;

struct Decoded
{
    Status status = Status::NotOurs;
    std::optional<Kind> kind;   ///< the tag's kind when it is known (also when malformed or newer)
    std::string tag;            ///< the tag as sent, for any line of ours
    std::int64_t version = 0;   ///< the line's `"v"` (1 when absent); 0 when not read
    Event event;                ///< Status::Accepted only
    Problem problem = Problem::None;
    std::string field;          ///< the offending member, when there is one
    std::string raw;            ///< UnknownKind, NewerVersion: the whole line, kept as it is
    std::string warning;        ///< LineReader: set on the first line of each unknown kind and newer version
    [[nodiscard]] bool ok() const noexcept { return status == Status::Accepted; }
    /// @brief In words, for logs and notices: "malformed CLUSTERPPL_LEDGER line: \"round\" is missing".
    [[nodiscard]] std::string reason() const;
};

/// @brief Decodes one line (a trailing '\r' is ignored). Never throws; unknown members are
/// ignored (a later version 1 agent may add optional ones).
[[nodiscard]] Decoded decode(std::string_view line) noexcept;

/// @brief Whether @p line is a line of ours whose JSON stops before its value is whole: a line cut
/// on its way (srun -l cuts a labelled line over 1 KiB into pieces), which what follows may
/// complete. A line with a syntax error before its end, or none of ours, does not end early.
[[nodiscard]] bool endsEarly(std::string_view line) noexcept;

/// @brief The kind of a line of ours by its tag alone (no JSON read): for a launcher that only
/// needs to know that a result came; decode() says whether it is well formed.
[[nodiscard]] std::optional<Kind> peekKind(std::string_view line) noexcept;

/// @brief Lines read, by what they were.
struct Counters
{
    std::int64_t accepted = 0;
    std::int64_t notOurs = 0;
    std::int64_t unknownKind = 0;
    std::int64_t newerVersion = 0;
    std::array<std::int64_t, kProblemCount> malformed{}; ///< indexed by Problem
    [[nodiscard]] std::int64_t malformedTotal() const noexcept;
};

/**
 * @brief decode() with counters and the warnings: the first line of each unknown tag, and of each
 * kind at each newer version, comes back with Decoded::warning set, saying that it is kept as
 * output, not acted on, and what to do. One reader per stream of lines (a run's ranks share one).
 */
class LineReader
{
public:
    [[nodiscard]] Decoded read(std::string_view line);
    [[nodiscard]] const Counters &counters() const noexcept { return m_counters; }

private:
    Counters m_counters;
    std::set<std::pair<std::string, std::int64_t>> m_warned;
};

} // namespace cppl::lines
