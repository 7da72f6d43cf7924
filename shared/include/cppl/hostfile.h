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

} // namespace cppl
