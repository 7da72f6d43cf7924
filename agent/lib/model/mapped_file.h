// SPDX-License-Identifier: MIT
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

namespace cppl::agent {

/// @brief A read-only memory map of a whole file. Weights are used in place (no copy in RAM);
/// the kernel pages them in on demand and may drop them under memory pressure.
class MappedFile
{
public:
    /// Throws IoError naming the file when it cannot be opened or mapped.
    static std::shared_ptr<const MappedFile> open(const std::string &path);
    ~MappedFile();
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    [[nodiscard]] const unsigned char *data() const noexcept { return m_data; }
    [[nodiscard]] std::size_t size() const noexcept { return m_size; }
    [[nodiscard]] const std::string &path() const noexcept { return m_path; }
    /// @brief Tells the kernel this process no longer needs the whole pages inside [begin, begin +
    /// bytes) now (MADV_DONTNEED; the pages a neighbour shares stay): after weights were repacked,
    /// the originals stop counting in the resident set. Tensors still over the mapping fault their
    /// pages back in from the file on demand.
    void releaseRange(const unsigned char *begin, std::size_t bytes) const noexcept;

private:
    MappedFile() = default;
    const unsigned char *m_data = nullptr;
    std::size_t m_size = 0;
    std::string m_path;
};

/// @brief SHA-256 of a file's bytes, lower-case hex (result identity in the JSON). With @p stop:
/// empty once it reads true (checked every 16 MiB), for a hash nobody waits for any more.
[[nodiscard]] std::string sha256File(const std::string &path, const std::atomic<bool> *stop = nullptr);
/// @brief SHA-256 of @p size bytes at @p data, lower-case hex.
[[nodiscard]] std::string sha256Bytes(const void *data, std::size_t size);

} // namespace cppl::agent
