// SPDX-License-Identifier: MIT
#include "preflight.h"

#include "args.h"
#include "distributed/c10d.h"
#include "eval/cpu_affinity.h"
#include "eval/cpu_gemm.h"
#include "gpu/device_choice.h"
#include "exit_codes.h"

#include "cppl/config.h"
#include "cppl/errors.h"
#include "cppl/host.h"

#include <ATen/Context.h>
#include <torch/version.h>

#include <nlohmann/json.hpp>

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>

namespace cppl::agent {

namespace {

std::int64_t memAvailableBytes()
{
    std::ifstream f("/proc/meminfo");
    std::string key;
    std::int64_t kb = 0;
    std::string unit;
    while (f >> key >> kb >> unit)
        if (key == "MemAvailable:")
            return kb * 1024;
    return -1;
}

/// "readable", or why not.
std::string pathStatus(const std::string &path)
{
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto st = fs::status(path, ec);
    if (ec || !fs::exists(st))
        return "missing";
    if (fs::is_directory(st)) {
        fs::directory_iterator it(path, ec);
        return ec ? "not readable: " + ec.message() : "readable";
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return std::string("not readable: ") + std::strerror(errno);
    ::close(fd);
    return "readable";
}

/// Can this host open a TCP connection to host:port? "listening", "reachable (nothing listening
/// yet)", or why not (name not resolved, timeout: a firewall or no route).
std::string masterStatus(const std::string &host, int port)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
        return std::string("unreachable: cannot resolve ") + host + ": " + gai_strerror(rc);
    std::string status = "unreachable: no address answered";
    for (addrinfo *ai = res; ai; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            if (::poll(&p, 1, 3000) == 1) {
                int soErr = 0;
                socklen_t len = sizeof soErr;
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &len);
                rc = soErr == 0 ? 0 : -1;
                errno = soErr;
            } else {
                errno = ETIMEDOUT;
            }
        }
        const int e = errno;
        ::close(fd);
        if (rc == 0) {
            status = "listening";
            break;
        }
        if (e == ECONNREFUSED) {
            status = "reachable (nothing listening yet)";
            break;
        }
        status = std::string("unreachable: ") + std::strerror(e) + " (a firewall, or no route to " + host + ")";
    }
    freeaddrinfo(res);
    return status;
}

/// The interface and source address this host's kernel would use toward @p host (what `ip route
/// get` says): a UDP socket's connect() picks the route and sends nothing. NCCL and Gloo without
/// NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME pick their own interface, which may not be this one:
/// the report shows the two side by side (issue 43, point 1).
nlohmann::ordered_json routeTo(const std::string &host, int port)
{
    addrinfo hints{};
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo *res = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
        return {{"error", std::string("cannot resolve ") + host + ": " + gai_strerror(rc)}};
    sockaddr_storage src{};
    socklen_t srcLen = 0;
    std::string error = "no address of " + host;
    for (addrinfo *ai = res; ai && srcLen == 0; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        socklen_t len = sizeof src;
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::getsockname(fd, reinterpret_cast<sockaddr *>(&src), &len) == 0)
            srcLen = len;
        else
            error = std::string("no route to ") + host + ": " + std::strerror(errno);
        ::close(fd);
    }
    freeaddrinfo(res);
    if (srcLen == 0)
        return {{"error", error}};
    char text[NI_MAXHOST] = {};
    getnameinfo(reinterpret_cast<const sockaddr *>(&src), srcLen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
    std::string name;
    ifaddrs *ifs = nullptr;
    if (getifaddrs(&ifs) == 0) {
        for (const ifaddrs *i = ifs; i && name.empty(); i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != src.ss_family)
                continue;
            char a[NI_MAXHOST] = {};
            const socklen_t alen = i->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
            if (getnameinfo(i->ifa_addr, alen, a, sizeof a, nullptr, 0, NI_NUMERICHOST) == 0 && std::string(a) == text)
                name = i->ifa_name;
        }
        freeifaddrs(ifs);
    }
    nlohmann::ordered_json r = {{"interface", name.empty() ? std::string("?") : name}, {"source", text}};
    for (const char *v : {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) // what the backends take instead, when set
        if (const char *value = std::getenv(v))
            r[v] = value;
    return r;
}

/// What this host has, gathered once: the JSON and the text both show it.
struct HostFacts
{
    std::string host;
    std::vector<dist::GpuInfo> gpus;
    std::string ncclWhy; ///< empty: NCCL is available
    std::string glooWhy; ///< empty: Gloo is available
    dist::GpuLibraries libs;
    CpuPlan cpu; ///< what each of the slots' ranks gets by default (eval: allowed CPUs / local ranks, pinned)
};

HostFacts gatherFacts(std::int64_t slots)
{
    HostFacts f;
    f.host = localHostName();
    f.gpus = dist::cudaDevices();
    f.ncclWhy = dist::ncclUnavailableReason();
    f.glooWhy = dist::glooUnavailableReason();
    // Which files were loaded, and how: a CUDA LibTorch's own runtime and NCCL come first.
    f.libs = dist::gpuLibraries();
    f.cpu = planCpus(0, static_cast<int>(std::max<std::int64_t>(1, slots)), 0);
    return f;
}

nlohmann::ordered_json factsJson(const HostFacts &f)
{
    nlohmann::ordered_json j;
    j["host"] = f.host;
    j["agent_version"] = CLUSTERPPL_VERSION_STRING;
    j["libtorch_version"] = TORCH_VERSION;
    nlohmann::ordered_json devices = nlohmann::ordered_json::array();
    for (const auto &g : f.gpus)
        devices.push_back({{"name", g.name}, {"memory_bytes", g.memoryBytes}, {"pci_bus_id", g.pciBusId}});
    j["cuda"] = {{"libtorch_has_cuda", at::hasCUDA()}, {"devices", devices}};
    j["nccl"] = {{"available", f.ncclWhy.empty()}, {"reason", f.ncclWhy}, {"host_id", ncclHostId()}, {"share_gpu", ncclShareGpuRequested()}};
    j["gloo"] = {{"available", f.glooWhy.empty()}, {"reason", f.glooWhy}};
    const dist::GpuLibraries &libs = f.libs;
    j["gpu_libraries"] = {{"cudart_path", libs.cudartPath}, {"cudart_how", libs.cudartHow},       {"cuda_runtime_version", libs.runtimeVersion},
                          {"cuda_driver_version", libs.driverVersion}, {"nccl_path", libs.ncclPath}, {"nccl_how", libs.ncclHow},
                          {"nccl_version", libs.ncclVersion},         {"nccl_shrink", libs.ncclShrink}, {"error", libs.error}};
    j["memory_available_bytes"] = memAvailableBytes();
    j["cpus"] = {{"allowed", f.cpu.allowedCpus}, {"threads_per_rank", f.cpu.threads}, {"kernels", cpu::isaName(cpu::detectIsa())}};
    return j;
}

/// Every path readable by this agent, else a problem naming it and the host.
nlohmann::ordered_json checkPaths(const std::vector<std::string> &paths, const std::string &host, std::vector<std::string> &problems)
{
    nlohmann::ordered_json p = nlohmann::ordered_json::array();
    for (const auto &path : paths) {
        const std::string st = pathStatus(path);
        p.push_back({{"path", path}, {"status", st}});
        if (st != "readable")
            problems.push_back(path + ": " + st + " on " + host);
    }
    return p;
}

/// Whether the ranks the launcher means to start here can use the backend it asks for.
void checkBackend(const std::string &backend, std::int64_t slots, const HostFacts &f, std::vector<std::string> &problems)
{
    if (backend == "gloo" && !f.glooWhy.empty() && slots > 1)
        problems.push_back("backend gloo with " + std::to_string(slots) + " slots on " + f.host + ": " + f.glooWhy);
    if (backend != "nccl")
        return;
    if (!f.ncclWhy.empty())
        problems.push_back("backend nccl: " + f.ncclWhy);
    else if (slots > static_cast<std::int64_t>(f.gpus.size()) && !(ncclShareGpuRequested() && !f.gpus.empty()))
        problems.push_back("backend nccl: " + std::to_string(slots) + " slots but " + std::to_string(f.gpus.size()) + " GPUs on " + f.host
                           + " (one GPU per rank; " + kNcclShareGpuVariable + "=1 lets ranks share one as a test mode)");
}

/// "eth0 (10.0.0.2)", or why there is none; empty without a master address.
std::string routeText(const nlohmann::ordered_json &j)
{
    if (!j.contains("master"))
        return {};
    const auto &r = j["master"]["route"];
    if (r.contains("error"))
        return r["error"].get<std::string>();
    return r["interface"].get<std::string>() + " (" + r["source"].get<std::string>() + ")";
}

void printFacts(std::ostream &out, const HostFacts &f, const std::string &route, const std::vector<std::string> &problems)
{
    out << "host " << f.host << ": agent " << CLUSTERPPL_VERSION_STRING << ", LibTorch " << TORCH_VERSION << ", " << f.gpus.size()
        << " CUDA devices, nccl " << (f.ncclWhy.empty() ? "available" : "unavailable (" + f.ncclWhy + ")")
        << (f.glooWhy.empty() ? "" : ", gloo unavailable (built without Gloo's headers)") << '\n'
        << dist::describe(f.libs) << '\n'
        << "cpus: " << f.cpu.allowedCpus << " allowed, " << f.cpu.threads << " threads per rank (" << f.cpu.why << "), "
        << cpu::isaName(cpu::detectIsa()) << " kernels\n";
    if (ncclShareGpuRequested())
        out << "nccl: " << kNcclShareGpuVariable << "=1 (a test mode): NCCL ranks of this host may share GPUs, each its own NCCL host\n";
    if (!route.empty())
        out << "route to the master: " << route << '\n';
    for (const auto &pr : problems)
        out << "problem: " << pr << '\n';
}

} // namespace

int preflightCommand(const std::vector<std::string> &argv, std::ostream &out, std::ostream & /*err: failures are thrown*/)
{
    std::vector<std::string> paths; // --model, --data and --tokenizer may each come several times
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < argv.size(); ++i) {
        if (argv[i] == "--model" || argv[i] == "--data" || argv[i] == "--tokenizer") {
            if (i + 1 >= argv.size())
                throw ConfigError(argv[i] + " needs a value (a path to check)");
            paths.push_back(argv[++i]);
        } else
            rest.push_back(argv[i]);
    }
    const Args a(rest, {"--master-addr", "--master-port", "--backend", "--slots"}, {"--json"});
    const auto slots = a.integer("--slots", 0, 0, 1 << 20);
    const HostFacts facts = gatherFacts(slots);
    nlohmann::ordered_json j = factsJson(facts);
    std::vector<std::string> problems;
    j["paths"] = checkPaths(paths, facts.host, problems);
    if (const auto addr = a.get("--master-addr")) {
        const int port = static_cast<int>(a.integer("--master-port", 29500, 1, 65535));
        const std::string st = masterStatus(*addr, port);
        j["master"] = {{"addr", *addr}, {"port", port}, {"status", st}, {"route", routeTo(*addr, port)}};
        if (st.starts_with("unreachable"))
            problems.push_back("master " + *addr + ":" + std::to_string(port) + " " + st);
    }
    checkBackend(a.get("--backend").value_or("auto"), slots, facts, problems);
    j["problems"] = problems;
    j["ok"] = problems.empty();
    if (a.has("--json"))
        out << j.dump() << '\n';
    else
        printFacts(out, facts, routeText(j), problems);
    return problems.empty() ? kExitOk : kExitRuntime;
}

} // namespace cppl::agent
