// SPDX-License-Identifier: MIT
#include "exit_codes.h"

namespace cppl::agent {

int exitCodeFor(const std::exception &e) noexcept
{
    if (const auto *coded = dynamic_cast<const ExitError *>(&e))
        return coded->code();
    if (dynamic_cast<const TimeoutError *>(&e)) // before CollectiveError, its base
        return kExitTimeout;
    if (dynamic_cast<const CollectiveError *>(&e) || dynamic_cast<const ProtocolError *>(&e))
        return kExitCollective;
    if (dynamic_cast<const ConfigError *>(&e))
        return kExitBadArguments;
    if (dynamic_cast<const IoError *>(&e))
        return kExitBadData;
    return kExitRuntime;
}

bool isRunWide(const std::exception &e) noexcept
{
    if (const auto *coded = dynamic_cast<const ExitError *>(&e))
        return coded->scope() == ExitError::Scope::Run;
    return dynamic_cast<const ConfigError *>(&e) != nullptr;
}

std::string exitMessageFor(const std::exception &e)
{
    if (dynamic_cast<const Error *>(&e))
        return e.what();
    return std::string("unexpected failure: ") + e.what();
}

} // namespace cppl::agent
