// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/exact_sum.h"
#include "cppl/statistics.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/**
 * @file
 * @brief The telemetry wire schema (docs/telemetry.md): one flat JSON object per ZeroMQ message,
 * sent by every rank (PUSH) to the collector (PULL). Version 1.
 */
namespace cppl::telemetry {

/// @brief Schema version carried in `v`. A decoder accepts exactly this version.
inline constexpr std::int64_t kSchemaVersion = 1;

/// @brief Limits the decoder enforces; a message beyond any of them is dropped.
inline constexpr std::size_t kMaxMessageBytes = 4u << 20;  ///< rank 0's result JSON with 1024+ rank rows
inline constexpr std::size_t kMaxRunIdBytes = 128;
inline constexpr std::size_t kMaxHostBytes = 255;          ///< RFC 1035 host name
inline constexpr std::size_t kMaxTextBytes = 64u << 10;    ///< one log line or error message
inline constexpr std::int64_t kMaxWorldSize = std::int64_t{1} << 20;

enum class Kind : std::uint8_t { Hello, Heartbeat, Progress, Sync, Log, Result, Error, Bye };
inline constexpr int kKindCount = 8;

/// @brief What a rank is doing, carried by hello and heartbeat (`phase`).
enum class Phase : std::uint8_t { Connecting, Loading, Evaluating, Syncing, Finishing };

enum class LogLevel : std::uint8_t { Debug, Info, Warning, Error };

[[nodiscard]] std::string_view kindName(Kind k) noexcept;
[[nodiscard]] std::optional<Kind> kindFromName(std::string_view name) noexcept;
[[nodiscard]] std::string_view phaseName(Phase p) noexcept;
[[nodiscard]] std::optional<Phase> phaseFromName(std::string_view name) noexcept;
[[nodiscard]] std::string_view logLevelName(LogLevel l) noexcept;
[[nodiscard]] std::optional<LogLevel> logLevelFromName(std::string_view name) noexcept;

/// @brief Fields of every message.
struct Header
{
    std::string run;            ///< `run`: run id, [A-Za-z0-9._:-]{1,128}
    std::int64_t rank = 0;      ///< `rank`: 0 <= rank < world_size
    std::string host;           ///< `host`: 1..255 printable ASCII bytes
    std::int64_t group = 0;     ///< `group`: node group index, 0 <= group < world_size
    std::int64_t localRank = 0; ///< `local_rank`: 0 <= local_rank < world_size
    std::int64_t worldSize = 1; ///< `world_size`: 1..2^20
    std::int64_t seq = 0;       ///< `seq`: per rank, +1 each message (drops leave gaps), >= 0
    double t = 0;               ///< `t`: seconds since the Unix epoch, finite, >= 0
    Kind kind = Kind::Heartbeat;
    std::int64_t droppedTotal = 0; ///< `dropped_total`: messages this sender dropped so far
};

/// @brief `progress`: this rank's cumulative totals (a later message supersedes an earlier one).
struct Progress
{
    std::int64_t tokensScoredTotal = 0;    ///< `tokens_scored_total`
    double tokensPerSecond = 0;            ///< `tokens_per_second` (recent rate)
    std::int64_t windowsDone = 0;          ///< `windows_done` <= `windows_total`
    std::int64_t windowsTotal = 0;         ///< `windows_total`
    double computeSecondsTotal = 0;        ///< `compute_seconds_total`
    double commWaitSecondsTotal = 0;       ///< `comm_wait_seconds_total`
    double commTransferSecondsTotal = 0;   ///< `comm_transfer_seconds_total`
    ExactSum nll;                          ///< `nll_exact`: Σ NLL of this rank's scored tokens ("xs1:…")
    ExactSum nllSquared;                   ///< `nll_sq_exact`: Σ NLL²
    std::int64_t rssBytes = 0;             ///< `rss_bytes`
    std::optional<std::int64_t> deviceMemoryBytes; ///< `device_memory_bytes`, only with a device: in use on it
    /// `device_memory_total_bytes`: the device's memory (needs `device_memory_bytes` <= it)
    std::optional<std::int64_t> deviceMemoryTotalBytes;
    /// `gpu_utilization_percent`, 0..100: share of the last sample period the GPU was busy (NVML)
    std::optional<std::int64_t> gpuUtilizationPercent;
    /// `tp_size`, 1..world_size, only with --tensor-parallel: the size of this rank's tensor-parallel
    /// group (group = rank / tp_size); `tp_rank`, 0..tp_size-1 (needs `tp_size`): its member, 0 the
    /// leader. A follower's (tp_rank > 0) totals are its leader's: a collector counts none of them.
    std::optional<std::int64_t> tpSize;
    std::optional<std::int64_t> tpRank;
    /// `tp_collective_seconds_total` (needs `tp_size`): in the group's reductions inside the forward
    /// passes (part of compute_seconds_total), apart from the sync rounds' wait and transfer.
    std::optional<double> tpCollectiveSecondsTotal;
    /// With --reference-model only, all three or none: `ref_tokens_total` (the tokens compared,
    /// cumulative), `kld_exact` (Σ KL(P_ref || P_model) over them, exact accumulator text, as
    /// `nll_exact`) and `same_top_total` (<= ref_tokens_total: those whose top tokens agree).
    struct Reference
    {
        std::int64_t tokens = 0;
        ExactSum kld;
        std::int64_t sameTop = 0;
    };
    std::optional<Reference> reference;

    /// @brief The accumulators and counts as NllStats (bytes and words are not streamed: 0).
    [[nodiscard]] NllStats stats() const;
};

/// @brief `sync`: one sync round finished on this rank.
struct Sync
{
    std::int64_t round = 0;          ///< `round`: 1-based, <= `rounds_total`
    std::int64_t roundsTotal = 0;    ///< `rounds_total`
    double waitSeconds = 0;          ///< `wait_seconds`: this round, waiting for the last rank
    double transferSeconds = 0;      ///< `transfer_seconds`: this round, the rest of the collective
};

/// @brief One decoded (or to-be-encoded) message. Only the part for `header.kind` is meaningful.
struct Message
{
    Header header;
    Phase phase = Phase::Connecting;   ///< hello, heartbeat: `phase`
    Progress progress;                 ///< progress
    Sync sync;                         ///< sync
    LogLevel level = LogLevel::Info;   ///< log: `level`
    std::string text;                  ///< log, error: `message`
    std::optional<std::int64_t> exitCode; ///< error (required), bye (optional): `exit_code`, 0..255
    std::string resultJson;            ///< result: `result_json`, a JSON object as text (may be empty)
};

/// @brief Encodes to one flat JSON object (header fields first).
[[nodiscard]] std::string encode(const Message &m);

/// @brief Why a message was dropped.
enum class DecodeError : std::uint8_t {
    None,
    TooLarge,      ///< more than kMaxMessageBytes
    NotJson,       ///< syntax error, invalid UTF-8, or trailing bytes
    NotFlatObject, ///< not an object, or a nested object/array as a value
    DuplicateKey,
    BadVersion,    ///< `v` missing or not kSchemaVersion
    MissingField,
    WrongType,     ///< e.g. a string where a number belongs, 5.0 where an integer belongs
    OutOfRange,    ///< negative counts, rank >= world_size, non-finite seconds, over-long strings, ...
    UnknownKind,
    BadExactSum,   ///< `nll_exact`/`nll_sq_exact` not in the "xs1:" form
};
inline constexpr int kDecodeErrorCount = 11;
[[nodiscard]] std::string_view decodeErrorName(DecodeError e) noexcept;

struct DecodeResult
{
    DecodeError error = DecodeError::None;
    std::string field; ///< the offending key, when there is one
    [[nodiscard]] bool ok() const noexcept { return error == DecodeError::None; }
};

/**
 * @brief Decodes and validates one message. Never throws on any input; on failure @p out is left
 * in an unspecified but valid state. Unknown keys are ignored (later v1 senders may add optional
 * fields); missing required keys, wrong types and out-of-range values are errors.
 */
[[nodiscard]] DecodeResult decode(std::string_view bytes, Message &out) noexcept;

/// @brief Counts of decoded and dropped messages, by reason.
struct DecodeCounters
{
    std::int64_t accepted = 0;
    std::array<std::int64_t, kDecodeErrorCount> rejected{}; ///< indexed by DecodeError
    void count(DecodeError e) noexcept
    {
        if (e == DecodeError::None)
            ++accepted;
        else
            ++rejected[static_cast<std::size_t>(e)];
    }
    [[nodiscard]] std::int64_t rejectedTotal() const noexcept;
};

/**
 * @brief The exact totals of an agent result JSON (`nll_sum_exact`, `nll_sq_sum_exact`,
 * `tokens_scored`, `windows`), e.g. rank 0's aggregated result carried by `result`; nullopt when
 * any is missing or malformed. Lets the collector check its live merge against the final result.
 */
[[nodiscard]] std::optional<NllStats> resultStats(std::string_view resultJson) noexcept;

/// @brief CURVE keys as 40-character Z85 strings (ZeroMQ's zmq_curve_keypair form).
struct CurveKeyPair
{
    std::string publicKey;
    std::string secretKey;
};

/**
 * @brief A run's telemetry credentials, read from a 0600 file or stdin, never from argv.
 *
 * Text format (docs/telemetry.md), one `key = value` per line, `#` comments:
 *
 *     # clusterppl telemetry credentials v1
 *     server_public = <40 Z85 characters>
 *     server_secret = <40>        (collector only)
 *     client_public = <40>        (agent: its own; collector: every admitted key, one line each)
 *     client_secret = <40>        (agent only)
 */
struct Credentials
{
    std::string serverPublic;
    std::string serverSecret;
    std::vector<std::string> clientPublic;
    std::string clientSecret;

    [[nodiscard]] bool hasClient() const noexcept
    {
        return !serverPublic.empty() && clientPublic.size() == 1 && !clientSecret.empty();
    }
    [[nodiscard]] bool hasServer() const noexcept
    {
        return !serverPublic.empty() && !serverSecret.empty() && !clientPublic.empty();
    }
};

/// @brief True for 40 characters of the Z85 alphabet.
[[nodiscard]] bool isZ85Key(std::string_view key) noexcept;
/// @brief Parses the text form; throws ConfigError naming @p origin and the line.
[[nodiscard]] Credentials parseCredentials(std::string_view text, const std::string &origin);
/// @brief The text form (what parseCredentials reads).
[[nodiscard]] std::string formatCredentials(const Credentials &c);
/// @brief Reads a credentials file, refusing it (ConfigError) unless it is a regular file owned by
/// this user without group or other permissions (chmod 600 or 400). "-" reads stdin to its end.
[[nodiscard]] Credentials readCredentialsFile(const std::string &path);
/// @brief Writes a credentials file created with mode 0600 (an existing file is replaced).
void writeCredentialsFile(const std::string &path, const Credentials &c);

/// @brief One run's credentials: the collector's half (server pair + the admitted client public
/// key) and the agents' half (server public + the run's client pair; never the server secret).
struct RunCredentials
{
    Credentials collector; ///< for CollectorOptions::curve
    Credentials agent;     ///< for the agents, as formatKeyLine() (stdin) or writeCredentialsFile()
};

/// @brief A fresh CURVE key pair (zmq_curve_keypair). ConfigError in a build without ZeroMQ or
/// with a libzmq that has no CURVE (libsodium).
[[nodiscard]] CurveKeyPair generateCurveKeyPair();
/// @brief Fresh credentials for one run: a server pair and one client pair shared by its ranks.
[[nodiscard]] RunCredentials generateCredentials();

/// @brief Where a CURVE server's ZAP handler binds (a REP socket), fixed by ZeroMQ's RFC 27; it must
/// be bound before any CURVE server socket of the same context accepts a peer.
inline constexpr const char *kZapEndpoint = "inproc://zeromq.zap.01";
/**
 * @brief Makes @p socket (a libzmq socket, as void * so that this header needs no zmq.h) a CURVE
 * server with @p serverSecret whose handshakes go to the ZAP handler under @p zapDomain. Every
 * option must hold: a socket left without CURVE or ZAP would take anyone's messages, in clear.
 * ConfigError starting with @p who (the collector, the relay) when one does not, or in a build
 * without ZeroMQ.
 */
void makeCurveServer(void *socket, const std::string &serverSecret, std::string_view zapDomain, const std::string &who);
/// @brief What answerZap() did with one ZAP request.
enum class ZapVerdict
{
    NoRequest, ///< no whole request was waiting; nothing was answered
    Admitted,  ///< a CURVE client with an admitted public key: 200
    Refused,   ///< any other client or mechanism: 400 "client key not admitted to this run"
};
/// @brief Reads one ZAP request (RFC 27) waiting on @p zapSocket, the REP socket bound to
/// kZapEndpoint, without blocking, and answers it: only a CURVE client whose public key (Z85) is
/// in @p admitted gets through. NoRequest in a build without ZeroMQ.
ZapVerdict answerZap(void *zapSocket, const std::vector<std::string> &admitted);

/// @brief First word of the key line a launcher writes to an agent's stdin (`--telemetry-keys-stdin`).
inline constexpr std::string_view kKeyLineTag = "clusterppl-telemetry-keys-v1";
/// @brief The agents' half as one stdin line: `TAG SERVER_PUBLIC CLIENT_PUBLIC CLIENT_SECRET\n`.
/// ConfigError unless @p agent hasClient().
[[nodiscard]] std::string formatKeyLine(const Credentials &agent);
/// @brief Parses a key line (with or without its newline). ConfigError saying what is wrong; the
/// message never repeats the line, which holds a secret.
[[nodiscard]] Credentials parseKeyLine(std::string_view line);

/// @brief `tcp://HOST:PORT` split up; ConfigError when malformed.
struct Endpoint
{
    std::string host;
    int port = 0;
    [[nodiscard]] bool isLoopback() const noexcept; ///< 127.0.0.0/8, ::1, localhost
    [[nodiscard]] std::string zmq() const;          ///< back to tcp://HOST:PORT
};
[[nodiscard]] Endpoint parseEndpoint(std::string_view text);

} // namespace cppl::telemetry
