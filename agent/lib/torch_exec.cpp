// SPDX-License-Identifier: MIT
#include "torch_exec.h"

#include "exit_codes.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ostream>

namespace fs = std::filesystem;

namespace cppl::agent {

std::vector<std::string> torchAgentCandidates(const std::string &self)
{
    const fs::path dir = fs::path(self).parent_path();
    return {(dir / kTorchAgentName).string(), (dir / ".." / "lib" / "clusterppl" / kTorchAgentName).lexically_normal().string()};
}

int execTorchAgent(const std::string &argv0, const std::vector<std::string> &args, std::ostream &out, std::ostream &err)
{
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec)
        throw ExitError(kExitRuntime, args.front() + " loads LibTorch in " + kTorchAgentName + ", and /proc/self/exe, which says where "
                                          "to find it, is unreadable: " + ec.message());
    std::vector<char *> argv;
    argv.push_back(const_cast<char *>(argv0.c_str()));
    for (const auto &a : args)
        argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    out.flush();
    err.flush();
    std::string tried;
    for (const auto &candidate : torchAgentCandidates(self.string())) {
        if (::access(candidate.c_str(), F_OK) == 0) {
            ::execv(candidate.c_str(), argv.data());
            throw ExitError(kExitRuntime, args.front() + ": cannot start " + candidate + ": " + std::strerror(errno));
        }
        tried += (tried.empty() ? "" : ", ") + candidate;
    }
    throw ExitError(kExitRuntime, args.front() + " loads LibTorch in " + kTorchAgentName + ", which is not installed beside "
                                      + self.string() + " (looked for " + tried + "); install the clusterppl-agent package "
                                      "whole, or copy " + kTorchAgentName + " next to clusterppl-agent");
}

} // namespace cppl::agent
