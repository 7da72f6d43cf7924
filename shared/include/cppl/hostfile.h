// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/cluster_profile.h"

#include <string>
#include <string_view>
#include <vector>

namespace cppl {

/**
 * @brief DeepSpeed hostfiles: one `HOST slots=N` per line, `#` comments, blank lines ignored.
 * ClusterPPL's extension `group=NAME` labels the host's node group (e.g. its rack).
 */
struct HostfileParseResult
{
    std::vector<HostSpec> hosts;
    std::vector<std::string> errors; ///< "hosts.txt:3: ..." one per problem
    [[nodiscard]] bool ok() const noexcept { return errors.empty(); }
};

[[nodiscard]] HostfileParseResult parseHostfile(std::string_view text, std::string_view source = "hostfile");

/**
 * @brief DeepSpeed's --include / --exclude filters: `host1:0,1@host2` selects slots 0 and 1 of
 * host1 and every slot of host2. Include keeps only what is listed; exclude removes it (a host left
 * without slots disappears). Both at once is an error, as in DeepSpeed. Throws ConfigError naming the
 * host or slot that does not exist.
 */
[[nodiscard]] std::vector<HostSpec> applyHostFilter(const std::vector<HostSpec> &hosts, std::string_view include,
                                                    std::string_view exclude);

/// @brief Writes hosts back as a hostfile (with `group=` where set). Device lists that a hostfile
/// cannot express are written as comments with the equivalent --include filter.
[[nodiscard]] std::string hostfileFromHosts(const std::vector<HostSpec> &hosts);

/// @brief A profile for the hosts: grouped by label when any host has one, by host otherwise.
[[nodiscard]] ClusterProfile profileFromHosts(std::vector<HostSpec> hosts, std::string launcher = "ssh");

/// @brief What every host of @p from shares and a hostfile cannot say (the agent's path, the
/// working directory, the environment, the SSH user, port, key and password login), set on every
/// host of @p to: a cluster re-imported from a hostfile keeps its setup. A field the hosts of
/// @p from do not all share, or share at its default, is left alone. The names of the fields set
/// ("agent", "workdir", "env", "ssh user", "ssh port", "ssh key", "password login"), in that order.
std::vector<std::string> carrySharedHostSettings(const std::vector<HostSpec> &from, std::vector<HostSpec> &to);

} // namespace cppl
