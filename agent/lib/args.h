// SPDX-License-Identifier: MIT
#pragma once

#include "cppl/rank_env.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cppl::agent {

/// @brief Minimal `--flag value` / `--flag=value` / `--switch` parser: the agent links no Qt.
/// Every accessor throws ConfigError with the flag's name and what was expected.
class Args
{
public:
    /// @param valued flags that take a value; @param switches flags that take none.
    Args(const std::vector<std::string> &argv, std::set<std::string> valued, std::set<std::string> switches);

    [[nodiscard]] bool has(const std::string &flag) const { return m_values.count(flag) || m_switches.count(flag); }
    [[nodiscard]] std::optional<std::string> get(const std::string &flag) const;
    [[nodiscard]] std::string require(const std::string &flag, const std::string &what) const;
    [[nodiscard]] std::int64_t integer(const std::string &flag, std::int64_t fallback, std::int64_t min, std::int64_t max) const;

    /// @brief `--sync-every-tokens T|end|inf` (0: every batch; end/inf: once, kSyncAtEnd).
    [[nodiscard]] std::int64_t syncEveryTokens() const;

    /// @brief Who this rank is, as flags give it: `--rank`, `--world-size`, `--local-rank`,
    /// `--local-world-size`, `--master-port`, `--master-addr` (each absent: not set; the torchrun /
    /// Slurm / Open MPI environment decides, resolveRankIdentity()).
    [[nodiscard]] RankOverrides rankOverrides() const;

private:
    std::map<std::string, std::string> m_values;
    std::set<std::string> m_switches;
};

/// @brief Throws ConfigError unless @p id is a usable run id: it becomes a directory name, so 1..128
/// characters of A-Z a-z 0-9 . _ -, not starting with a dot. @p origin names where it came from.
void validateRunId(const std::string &id, const std::string &origin);

} // namespace cppl::agent
