// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cppl {

/// @brief Who this process is in a distributed run, and where the rendezvous store lives.
struct RankIdentity
{
    int rank = 0;
    int worldSize = 1;
    int localRank = 0;
    int localWorldSize = 1;
    std::string masterAddr = "127.0.0.1";
    int masterPort = 29500;
    std::string source = "default"; ///< torchrun, slurm, openmpi, flags or default (one rank)
};

/// @brief Flag values that override the environment (unset = take the environment's).
struct RankOverrides
{
    std::optional<int> rank, worldSize, localRank, localWorldSize, masterPort;
    std::optional<std::string> masterAddr;
};

/// @brief Looks a variable up; the default reads the process environment (getenv).
using EnvLookup = std::function<std::optional<std::string>(const std::string &)>;
[[nodiscard]] EnvLookup processEnvironment();

/**
 * @brief Resolves the rank identity users already have: torchrun's RANK/WORLD_SIZE/LOCAL_RANK/
 * LOCAL_WORLD_SIZE/MASTER_ADDR/MASTER_PORT, else Slurm's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID
 * (master: MASTER_ADDR, else the first host of SLURM_NODELIST), else Open MPI's OMPI_COMM_WORLD_*;
 * flags override all of them. Throws ConfigError naming the variable or flag that is missing,
 * not an integer, or out of range (e.g. RANK >= WORLD_SIZE).
 */
[[nodiscard]] RankIdentity resolveRankIdentity(const EnvLookup &env, const RankOverrides &flags = {});

/// @brief The first host of a Slurm node list: "gpu[03-05,07],cpu1" -> "gpu03". Throws ConfigError if malformed.
[[nodiscard]] std::string firstSlurmHost(std::string_view nodelist);

/// @brief Node groups of a run: groups[g] lists its ranks ascending; the leader is groups[g].front().
struct RankGroups
{
    std::vector<std::vector<int>> groups;
    std::vector<int> groupOf; ///< rank -> group index
    [[nodiscard]] int leaderOf(int rank) const { return groups[static_cast<std::size_t>(groupOf[static_cast<std::size_t>(rank)])].front(); }
};

/**
 * @brief `--groups`: "by-host" (ranks sharing a hostname; hostOfRank gives each rank's host),
 * "size:K" (K consecutive ranks) or an explicit list "0-3;4-7" / "0,2;1,3". Every rank must be in
 * exactly one group; ConfigError names the rank or range that is wrong.
 */
[[nodiscard]] RankGroups parseRankGroups(std::string_view spec, int worldSize, const std::vector<std::string> &hostOfRank = {});

} // namespace cppl
