// SPDX-License-Identifier: MIT
#pragma once

// One SSH connection as the SSH launcher's host threads open it: libssh's options (~/.ssh/config
// first, the profile's values over it), the host key against known_hosts as OpenSSH checks it (a
// new key refused, accepted or asked about, as the settings say), then authentication. libssh only:
// the caller shows what it says on its own thread.

#include "launch_plan.h"
#include "launcher.h"

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <memory>
#include <string>
#include <type_traits>

namespace cppl::core {

struct SshSessionDeleter
{
    void operator()(ssh_session s) const
    {
        ssh_disconnect(s);
        ssh_free(s);
    }
};
using SshSession = std::unique_ptr<std::remove_pointer_t<ssh_session>, SshSessionDeleter>;

/**
 * @brief Connects to @p first's host (its alias, else its address), checks its key, authenticates.
 * An error text saying what failed and what to do, or empty. @p note gets what the user should read
 * even so (a new host key accepted, recorded or not). libssh keeps @p callbacks (passphrase prompts)
 * and @p settings for the session's life: their owner outlives @p session.
 */
[[nodiscard]] std::string openSshSession(const RankCommand &first, const LauncherSettings &settings, SshSession &session,
                                         ssh_callbacks_struct &callbacks, std::string &note);

} // namespace cppl::core
