// SPDX-License-Identifier: MIT
#pragma once

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

} // namespace cppl::agent
