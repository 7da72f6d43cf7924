// SPDX-License-Identifier: MIT
#pragma once

#include <QStringList>

class QTextStream;

namespace cppl::core {

/**
 * @brief `clusterppl-cli run --profile PROFILE.json [--accept-new-host-keys] [--json OUT]
 * [--run-id ID] [--master-port P] [--agent PATH] [--ssh-config FILE] [--known-hosts FILE]
 * [--connect-timeout S] [--no-preflight]`: pre-flight on every host, then one agent per rank
 * through the profile's launcher; rank 0's progress and final estimate on the terminal, the other
 * ranks' messages prefixed, the result JSON written, a summary of who failed and why. Exit 0 on
 * success, else the agents' code (docs/exit-codes.md), 2 for bad arguments.
 */
int runCommand(const QStringList &arguments, QTextStream &out, QTextStream &err);

} // namespace cppl::core
