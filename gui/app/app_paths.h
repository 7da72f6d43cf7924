// SPDX-License-Identifier: MIT
#pragma once

#include <QString>

namespace cppl::app {

/// The embedded "This machine" profile: <prefix>/share/clusterppl/profiles next to an installed
/// binary, else the source tree's resources/ for a build-tree binary. Empty when neither exists.
[[nodiscard]] QString defaultProfilePath();

/// The agent as the CLI finds it: a bare @p name on PATH, else next to this executable, else the
/// build tree's agent/ directory. Empty when none is executable.
[[nodiscard]] QString findAgent(const QString &name = QStringLiteral("clusterppl-agent"));

} // namespace cppl::app
