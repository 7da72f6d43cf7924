// SPDX-License-Identifier: MIT
#pragma once

#include "communicator.h"
#include "rendezvous_store.h"

#include <chrono>
#include <memory>
#include <string>

namespace cppl::agent::dist {

/**
 * @brief LibTorch's c10d as the distributed layer uses it: the TCPStore client every rank reaches
 * the rendezvous store with (the server is RendezvousServer, torch-free), and Gloo's process
 * groups. Only clusterppl_agent_libtorch implements them (libtorchC10d(): c10d_store.cpp,
 * gloo_backend.cpp); DistributedRun and the commands that make one are handed them, so the rest of
 * the layer (the run, the schedule, the watchdog, NCCL) builds, links and is tested without LibTorch.
 */
struct C10d
{
    /// Serves a store on @p port (0: any free one) when @p serve, and connects to it at
    /// @p host:port, retrying until @p timeout (the server may start after its clients). A server
    /// listens on @p bind (RendezvousServer: empty for every interface).
    std::unique_ptr<RendezvousStore> (*openStore)(const std::string &host, int port, bool serve, std::chrono::milliseconds timeout,
                                                  const std::string &bind) = nullptr;
    /// c10d ProcessGroupGloo communicators over @p store, one openStore() made (subgroups through PrefixStore).
    Communicators (*makeGloo)(RendezvousStore &store, const BackendOptions &options) = nullptr;
    /// Why Gloo cannot combine ranks in this build (a pip torch has no Gloo headers), or empty when it
    /// can. A group of one rank needs no Gloo either way.
    std::string (*glooUnavailableReason)() = nullptr;
};

// The LibTorch library's (clusterppl_agent_libtorch); nothing in clusterppl_agent_torchfree calls them.

/// @brief LibTorch's c10d: the functions below.
[[nodiscard]] const C10d &libtorchC10d();
[[nodiscard]] std::unique_ptr<RendezvousStore> openTcpStore(const std::string &host, int port, bool server, std::chrono::milliseconds timeout,
                                                            const std::string &bind = {});
[[nodiscard]] Communicators makeGlooCommunicators(RendezvousStore &store, const BackendOptions &options);
[[nodiscard]] std::string glooUnavailableReason();

} // namespace cppl::agent::dist
