// SPDX-License-Identifier: MIT
#pragma once

// What every launcher does with a child: cut its output into lines, and turn how it ended into
// one exit code. One implementation for the agent's `run --standalone` and the dashboard's local
// and SSH launchers, so "killed by signal 9" reads the same everywhere.

#include <string>
#include <string_view>

namespace cppl {

/**
 * @brief Splits a byte stream into lines ('\n' removed, a trailing '\r' kept as received).
 * Bytes after the last newline wait for the next feed(); flush() delivers them at the end.
 */
class LineSplitter
{
public:
    template <typename OnLine>
    void feed(std::string_view bytes, OnLine &&onLine)
    {
        m_pending.append(bytes);
        std::size_t start = 0;
        for (std::size_t nl; (nl = m_pending.find('\n', start)) != std::string::npos; start = nl + 1)
            onLine(std::string_view(m_pending).substr(start, nl - start));
        m_pending.erase(0, start);
    }
    template <typename OnLine>
    void flush(OnLine &&onLine)
    {
        if (!m_pending.empty())
            onLine(std::string_view(m_pending));
        m_pending.clear();
    }

private:
    std::string m_pending;
};

/// @brief A waitpid() status as a shell reports it: the exit code, or 128 + the signal number.
[[nodiscard]] int exitCodeFromWaitStatus(int status) noexcept;
/// @brief "exited with code 3", "was killed by signal 9 (Killed)".
[[nodiscard]] std::string describeWaitStatus(int status);

} // namespace cppl
