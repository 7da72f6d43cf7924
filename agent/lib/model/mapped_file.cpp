// SPDX-License-Identifier: MIT
#include "mapped_file.h"

#include "cppl/errors.h"

#include "cppl/config.h"

#if CLUSTERPPL_HAVE_OPENSSL_SHA
#include <openssl/evp.h>
#elif CLUSTERPPL_HAVE_SODIUM
#include <sodium.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cppl::agent {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string &path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw IoError(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw IoError(path + ": not a regular file");
    }
    std::shared_ptr<MappedFile> f(new MappedFile);
    f->m_path = path;
    f->m_size = static_cast<std::size_t>(st.st_size);
    if (f->m_size > 0) {
        void *p = ::mmap(nullptr, f->m_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int e = errno;
            ::close(fd);
            throw IoError(path + ": cannot memory-map " + std::to_string(f->m_size) + " bytes: " + std::strerror(e));
        }
        f->m_data = static_cast<const unsigned char *>(p);
    }
    ::close(fd);
    return f;
}

MappedFile::~MappedFile()
{
    if (m_data)
        ::munmap(const_cast<unsigned char *>(m_data), m_size);
}

void MappedFile::releaseRange(const unsigned char *begin, std::size_t bytes) const noexcept
{
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    auto first = (reinterpret_cast<std::uintptr_t>(begin) + page - 1) / page * page; // whole pages only:
    const auto last = (reinterpret_cast<std::uintptr_t>(begin) + bytes) / page * page; // neighbours keep theirs
    if (last > first)
        ::madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED);
}

namespace {

#if CLUSTERPPL_HAVE_OPENSSL_SHA || CLUSTERPPL_HAVE_SODIUM
std::string hex(const unsigned char *digest, std::size_t n)
{
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    for (std::size_t i = 0; i < n; ++i) {
        out += kHex[digest[i] >> 4];
        out += kHex[digest[i] & 15];
    }
    return out;
}

/// One running sha256: OpenSSL's libcrypto where the build has it (the CPU's SHA instructions:
/// 1.7 GB/s on this project's EPYC), else libsodium's portable one (0.19 GB/s); the same digests.
class Sha256
{
public:
#if CLUSTERPPL_HAVE_OPENSSL_SHA
    Sha256()
        : m_ctx(EVP_MD_CTX_new())
    {
        if (!m_ctx || EVP_DigestInit_ex(m_ctx.get(), EVP_sha256(), nullptr) != 1)
            throw Error("sha256: OpenSSL's libcrypto failed to start a digest");
    }
    void update(const void *data, std::size_t size)
    {
        if (EVP_DigestUpdate(m_ctx.get(), data, size) != 1)
            throw Error("sha256: OpenSSL's libcrypto failed to hash");
    }
    std::string hexDigest()
    {
        unsigned char digest[EVP_MAX_MD_SIZE];
        unsigned int size = 0;
        if (EVP_DigestFinal_ex(m_ctx.get(), digest, &size) != 1)
            throw Error("sha256: OpenSSL's libcrypto failed to finish a digest");
        return hex(digest, size);
    }

private:
    struct Free
    {
        void operator()(EVP_MD_CTX *ctx) const { EVP_MD_CTX_free(ctx); }
    };
    std::unique_ptr<EVP_MD_CTX, Free> m_ctx;
#else
    Sha256()
    {
        static const bool ready = sodium_init() >= 0;
        if (!ready)
            throw Error("libsodium failed to initialise");
        crypto_hash_sha256_init(&m_state);
    }
    void update(const void *data, std::size_t size) { crypto_hash_sha256_update(&m_state, static_cast<const unsigned char *>(data), size); }
    std::string hexDigest()
    {
        unsigned char digest[crypto_hash_sha256_BYTES];
        crypto_hash_sha256_final(&m_state, digest);
        return hex(digest, sizeof digest);
    }

private:
    crypto_hash_sha256_state m_state;
#endif
};

/// A file's identity for the digest cache: the same path, inode, size and modification time.
struct FileStamp
{
    std::string path;
    dev_t device = 0;
    ino_t inode = 0;
    off_t size = 0;
    std::int64_t mtimeNs = 0;
    auto operator<=>(const FileStamp &) const = default;
};

std::optional<FileStamp> stampOf(const std::string &path)
{
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0)
        return std::nullopt;
    return FileStamp{path, st.st_dev, st.st_ino, st.st_size, std::int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
}

/// Digests already computed in this process: the run's fingerprint hashes the weight files on a
/// thread beside the evaluation, and the result names the same files' digests at the end; a 70B
/// checkpoint is read once, not twice. A file changed in between has another stamp.
class DigestCache
{
public:
    std::optional<std::string> find(const FileStamp &stamp)
    {
        const std::lock_guard lock(m_mutex);
        const auto it = m_digests.find(stamp);
        return it == m_digests.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    void insert(const FileStamp &stamp, const std::string &digest)
    {
        const std::lock_guard lock(m_mutex);
        m_digests.emplace(stamp, digest);
    }

private:
    std::mutex m_mutex;
    std::map<FileStamp, std::string> m_digests;
};

DigestCache &digestCache()
{
    static DigestCache cache;
    return cache;
}

std::string hashMappedFile(const std::string &path, const std::atomic<bool> *stop)
{
    const auto f = MappedFile::open(path);
    Sha256 sha;
    // Each chunk's pages are dropped from this process once hashed: the whole file read through the
    // mapping would otherwise stay in the resident set until the end (4.9 GB for a 1B float32 model,
    // on top of its packed weights while rank 0 hashes them during the evaluation).
    constexpr std::size_t kChunk = std::size_t{1} << 24;
    for (std::size_t at = 0; at < f->size(); at += kChunk) {
        if (stop && stop->load(std::memory_order_relaxed))
            return {};
        const std::size_t n = std::min(kChunk, f->size() - at);
        sha.update(f->data() + at, n);
        f->releaseRange(f->data() + at, n);
    }
    return sha.hexDigest();
}
#endif

} // namespace

std::string sha256File(const std::string &path, const std::atomic<bool> *stop)
{
#if !(CLUSTERPPL_HAVE_OPENSSL_SHA || CLUSTERPPL_HAVE_SODIUM)
    (void)path;
    (void)stop;
    return "unavailable (built without libcrypto or libsodium)";
#else
    const std::optional<FileStamp> before = stampOf(path);
    if (before)
        if (std::optional<std::string> known = digestCache().find(*before))
            return *known;
    std::string digest = hashMappedFile(path, stop);
    if (!digest.empty() && before && stampOf(path) == before)
        digestCache().insert(*before, digest);
    return digest;
#endif
}

std::string sha256Bytes(const void *data, std::size_t size)
{
#if !(CLUSTERPPL_HAVE_OPENSSL_SHA || CLUSTERPPL_HAVE_SODIUM)
    (void)data;
    (void)size;
    return "unavailable (built without libcrypto or libsodium)";
#else
    Sha256 sha;
    sha.update(data, size);
    return sha.hexDigest();
#endif
}

} // namespace cppl::agent
