// SPDX-License-Identifier: MIT
#include "mapped_file.h"

#include "cppl/errors.h"

#include "cppl/config.h"

#if CLUSTERPPL_HAVE_SODIUM
#include <sodium.h>
#endif

#include <cerrno>
#include <cstdint>
#include <cstring>
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

#if CLUSTERPPL_HAVE_SODIUM
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

void sodiumReady()
{
    static const bool ready = sodium_init() >= 0;
    if (!ready)
        throw Error("libsodium failed to initialise");
}
#endif

} // namespace

std::string sha256File(const std::string &path, const std::atomic<bool> *stop)
{
#if !CLUSTERPPL_HAVE_SODIUM
    (void)path;
    (void)stop;
    return "unavailable (built without libsodium)";
#else
    sodiumReady();
    const auto f = MappedFile::open(path);
    crypto_hash_sha256_state state;
    crypto_hash_sha256_init(&state);
    // Each chunk's pages are dropped from this process once hashed: the whole file read through the
    // mapping would otherwise stay in the resident set until the end (4.9 GB for a 1B float32 model,
    // on top of its packed weights while rank 0 hashes them during the evaluation).
    constexpr std::size_t kChunk = std::size_t{1} << 24;
    for (std::size_t at = 0; at < f->size(); at += kChunk) {
        if (stop && stop->load(std::memory_order_relaxed))
            return {};
        const std::size_t n = std::min(kChunk, f->size() - at);
        crypto_hash_sha256_update(&state, f->data() + at, n);
        f->releaseRange(f->data() + at, n);
    }
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&state, digest);
    return hex(digest, sizeof digest);
#endif
}

std::string sha256Bytes(const void *data, std::size_t size)
{
#if !CLUSTERPPL_HAVE_SODIUM
    (void)data;
    (void)size;
    return "unavailable (built without libsodium)";
#else
    sodiumReady();
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(digest, static_cast<const unsigned char *>(data), size);
    return hex(digest, sizeof digest);
#endif
}

} // namespace cppl::agent
