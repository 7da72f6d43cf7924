// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/errors.h"

#include <cstdint>
#include <exception>
#include <string>

namespace cppl::agent {

/// Documented in docs/exit-codes.md; launchers map them to a cause without parsing text.
enum ExitCode : int {
    kExitOk = 0,
    kExitRuntime = 1,       ///< anything else that failed at run time
    kExitBadArguments = 2,  ///< unknown flag, missing value, value out of range
    kExitBadModel = 3,      ///< model missing, unreadable or unsupported
    kExitBadData = 4,       ///< token/text file missing, malformed or out of vocabulary
    kExitCollective = 5,    ///< a collective failed or a peer died
    kExitTimeout = 6,       ///< rendezvous or a collective exceeded --timeout
};

/// @brief A failure whose exit code its context decides (a ConfigError while loading the model is a
/// bad model, not a bad argument). Thrown where that context is known; mapped by exitCodeFor().
class ExitError : public Error
{
public:
    /// Which ranks a failure holds for: this rank's own (its host, its files, its device) or the
    /// whole run (every rank would hit it: isRunWide()).
    enum class Scope : std::uint8_t { Rank, Run };
    ExitError(int code, const std::string &message, Scope scope = Scope::Rank) : Error(message), m_code(code), m_scope(scope) {}
    [[nodiscard]] int code() const noexcept { return m_code; }
    [[nodiscard]] Scope scope() const noexcept { return m_scope; }

private:
    int m_code;
    Scope m_scope;
};

/// @brief Whether @p e holds for the whole run, not for this rank alone: a ConfigError (the
/// arguments, the same on every rank) or an ExitError of Scope::Run (the arguments against the
/// model, a resume that does not match its checkpoint). A run that goes on after a lost rank
/// (`--on-rank-loss continue`) ends with such a failure instead of going on without the rank
/// (docs/communication.md, "Losing a rank").
[[nodiscard]] bool isRunWide(const std::exception &e) noexcept;

/// @brief The one mapping from an exception to the agent's exit code: ExitError its own code,
/// TimeoutError 6, CollectiveError and ProtocolError 5, ConfigError 2, IoError 4, any other
/// failure 1. Every subcommand's exceptions reach agentMain(), which calls this.
[[nodiscard]] int exitCodeFor(const std::exception &e) noexcept;

/// @brief The message to print for @p e: its text, marked "unexpected failure" when it is not a
/// ClusterPPL error (std::bad_alloc, a library's exception).
[[nodiscard]] std::string exitMessageFor(const std::exception &e);

} // namespace cppl::agent
