// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/cluster_profile.h"

#include <QString>

namespace cppl::core::run {

/// For a local profile whose agent is a bare name that is not on PATH: the agent installed next to
/// this executable (a package) or in this build tree's agent/ directory, canonical; empty when
/// there is none (the profile's name is then used as it is, and pre-flight says it is missing).
[[nodiscard]] QString localAgentFor(const ClusterProfile &profile);

} // namespace cppl::core::run
