// SPDX-License-Identifier: MIT
#include "spm_shim_loader.h"

#include "spm_config.h"

#include "cppl/errors.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <variant>
#include <vector>

namespace cppl::agent::spm {

namespace fs = std::filesystem;

namespace {

constexpr const char *kEnv = "CLUSTERPPL_SPM_SHIM";

// RTLD_DEEPBIND: the shim and libsentencepiece look symbols up in their own dependency tree first,
// so libsentencepiece's built-in protobuf 3.14 never binds to the libprotobuf 3.21 LibTorch already
// loaded (which aborts the process in protobuf's version check). RTLD_LOCAL keeps the 3.14 symbols
// out of everyone else's lookups. AddressSanitizer refuses RTLD_DEEPBIND, so sanitizer builds load
// the shim without it (fine in processes without LibTorch's protobuf, such as the tokenizer tests).
#if defined(__SANITIZE_ADDRESS__)
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

/// A loaded shim, or why it could not be loaded (without the model path, which differs per caller).
using Loaded = std::variant<ShimApi, std::string>;

Loaded open(const std::string &path)
{
    void *handle = ::dlopen(path.c_str(), kDlopenFlags);
    if (handle == nullptr) {
        const char *error = ::dlerror();
        const std::string why = error != nullptr ? error : "dlopen failed";
        const bool libraryMissing = why.find("libsentencepiece") != std::string::npos;
        return "cannot load the SentencePiece shim " + path + ": " + why
               + (libraryMissing ? "; it needs libsentencepiece0 at run time (apt-get install libsentencepiece0)"
                                 : "; reinstall libclusterppl_spm.so from the agent's build, or use a tokenizer.json");
    }
    ShimApi api;
    api.path = path;
    std::string missing;
#define CPPL_SPM_RESOLVE(name, type)                                                                                   \
    api.name = reinterpret_cast<type>(::dlsym(handle, "cppl_spm_" #name));                                              \
    if (api.name == nullptr)                                                                                            \
        missing += std::string(missing.empty() ? "" : ", ") + "cppl_spm_" #name;
    CPPL_SPM_SYMBOLS(CPPL_SPM_RESOLVE)
#undef CPPL_SPM_RESOLVE
    if (!missing.empty()) {
        ::dlclose(handle);
        return path + " is not the ClusterPPL SentencePiece shim (it does not export " + missing + ")";
    }
    if (const int version = api.abi_version(); version != CPPL_SPM_ABI_VERSION) {
        // Left open: it is a SentencePiece shim, whose static state is not worth the risk of unloading.
        return "the SentencePiece shim " + path + " speaks interface version " + std::to_string(version) + ", this agent "
               + std::to_string(CPPL_SPM_ABI_VERSION) + "; install the agent and libclusterppl_spm.so from the same build";
    }
    return api; // the handle stays open for the life of the process
}

const ShimApi &cachedOpen(const std::string &path, const std::string &modelPath)
{
    static std::mutex mutex;
    static std::map<std::string, Loaded> cache; // node-based: references stay valid
    std::lock_guard lock(mutex);
    auto it = cache.find(path);
    if (it == cache.end())
        it = cache.emplace(path, open(path)).first;
    if (const auto *error = std::get_if<std::string>(&it->second))
        throw ConfigError(modelPath + ": " + *error);
    return std::get<ShimApi>(it->second);
}

} // namespace

bool builtWithSentencePiece()
{
    return CLUSTERPPL_HAVE_SENTENCEPIECE != 0;
}

const ShimApi &shimApi(const std::string &modelPath)
{
    if (!builtWithSentencePiece())
        throw ConfigError(modelPath + ": this agent was built without SentencePiece support; install libsentencepiece-dev "
                                      "and rebuild, or use a tokenizer.json");
    if (const char *env = std::getenv(kEnv); env != nullptr && *env != '\0') {
        std::error_code ec;
        if (!fs::exists(env, ec))
            throw ConfigError(modelPath + ": " + kEnv + "=" + env + " does not exist; point it at libclusterppl_spm.so or unset it");
        return cachedOpen(env, modelPath);
    }
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    std::vector<fs::path> candidates;
    if (!ec) {
        candidates.push_back(exe.parent_path() / CPPL_SPM_SHIM_FILE_NAME);
        candidates.push_back((exe.parent_path() / CLUSTERPPL_SPM_SHIM_FROM_BIN / CPPL_SPM_SHIM_FILE_NAME).lexically_normal());
    }
    std::string tried;
    for (const auto &candidate : candidates) {
        if (fs::exists(candidate, ec))
            return cachedOpen(candidate.string(), modelPath);
        tried += (tried.empty() ? "" : ", ") + candidate.string();
    }
    throw ConfigError(modelPath + ": the SentencePiece shim " CPPL_SPM_SHIM_FILE_NAME " was not found (looked in "
                      + (tried.empty() ? std::string("no place: /proc/self/exe is unreadable") : tried)
                      + "); install it next to clusterppl-agent, set " + kEnv + " to its path, or use a tokenizer.json");
}

} // namespace cppl::agent::spm
