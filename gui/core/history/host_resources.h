// SPDX-License-Identifier: MIT
#pragma once

// What each host of a run had to run its ranks on (CPU cores, GPUs), as the run's record keeps it
// (RunRecord::hosts[].cpus and .gpus, docs/run-history.md), and whether the ranks outnumbered
// them. Ranks that share a host's cores (or GPUs) measure that host's contention, not how the
// evaluation scales across a network: a sweep or a projection over them would read wrongly.

#include "history/run_record.h"

#include <QString>

#include <vector>

namespace cppl::core::history {

/// Fills @p run.hosts' "cpus" (the CPUs the agents may use there: pre-flight's `cpus.allowed`) and
/// "gpus" (pre-flight's `cuda.devices`) from @p run.preflight, and the first host's CPUs, when
/// pre-flight did not say, from the result (rank 0's `cpus.allowed`). What is not known stays
/// absent. Recorded as the run goes (RunRecorder) and back-filled by the schema's version 3.
void recordHostResources(RunRecord &run);

/// A machine whose ranks outnumbered its cores (a CPU run) or its GPUs (a GPU run).
struct SharedHost
{
    QString host;      ///< the profile's host name (a local run: its first host, the one machine)
    int ranks = 0;     ///< ranks the run placed there
    int capacity = 0;  ///< its CPU cores or GPUs
    bool gpus = false; ///< a GPU run: the ranks share GPUs; else CPU cores
    /// "4 ranks share the 2 CPU cores of localhost", "8 ranks share the 4 GPUs of node-000".
    [[nodiscard]] QString text() const;
};

/// The machines of @p run whose ranks outnumbered their cores or GPUs; empty when none did, or
/// when what they had is not known (no pre-flight and no result, a Slurm allocation).
/// A local run's hosts are all this machine; an SSH run's are told apart by address.
[[nodiscard]] std::vector<SharedHost> sharedHosts(const RunRecord &run);

/// Whether @p run evaluated on GPUs: the result's device, else the settings' (auto: the hosts'
/// pre-flight found GPUs).
[[nodiscard]] bool ranOnGpus(const RunRecord &run);

} // namespace cppl::core::history
