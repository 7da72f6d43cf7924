// SPDX-License-Identifier: MIT
#pragma once

#include <stdexcept>
#include <string>

namespace cppl {

/// @brief Base of every recoverable ClusterPPL failure. The message says what went wrong, where
/// (file, line, host, rank) and what to do about it; callers print it as is.
class Error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

/// @brief Bad user input: a flag, a profile field, a hostfile line, a plan parameter.
class ConfigError : public Error
{
public:
    using Error::Error;
};

/// @brief A file that cannot be read or written, or whose contents are malformed.
class IoError : public Error
{
public:
    using Error::Error;
};

/// @brief A peer or a message that breaks the wire protocol.
class ProtocolError : public Error
{
public:
    using Error::Error;
};

/// @brief A collective, a peer or the rendezvous failed.
class CollectiveError : public Error
{
public:
    using Error::Error;
};

/// @brief Something did not answer within its timeout (rendezvous, a collective, a peer's heartbeat).
class TimeoutError : public CollectiveError
{
public:
    using CollectiveError::CollectiveError;
};

[[noreturn]] void enforceFailed(const char *expr, const char *file, int line, const std::string &msg);

} // namespace cppl

/// Broken invariants (programming errors, never user input) abort with file:line.
#define CPPL_ENFORCE(cond, msg)                                                                    \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ::cppl::enforceFailed(#cond, __FILE__, __LINE__, (msg));                               \
    } while (false)
