// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace cppl::agent {

/**
 * @brief One compiled PCRE2 pattern (8-bit, UTF + UCP, JIT when the library has it).
 *
 * Subjects must be valid UTF-8: matching runs with PCRE2_NO_UTF_CHECK, because PCRE2 would
 * otherwise re-validate the whole subject on every call (quadratic over a corpus). Tokenizer
 * inputs are validated once, up front. Not thread-safe: the match data is reused between calls.
 */
class Pcre2Regex
{
public:
    struct Match
    {
        std::size_t start = 0;
        std::size_t end = 0;
    };

    /// Throws ConfigError "<context>: PCRE2 rejects the regex at offset N: <PCRE2's message> ...".
    Pcre2Regex(std::string_view pattern, const std::string &context);
    ~Pcre2Regex();
    Pcre2Regex(Pcre2Regex &&) noexcept;
    Pcre2Regex &operator=(Pcre2Regex &&) noexcept;
    Pcre2Regex(const Pcre2Regex &) = delete;
    Pcre2Regex &operator=(const Pcre2Regex &) = delete;

    /// @brief The leftmost match at or after @p from, or nothing.
    [[nodiscard]] std::optional<Match> find(std::string_view subject, std::size_t from) const;
    /// @brief A match that starts exactly at @p at (anchored there), or nothing.
    [[nodiscard]] std::optional<Match> matchAt(std::string_view subject, std::size_t at) const;

    /**
     * @brief Calls f(start, end) for every match, left to right, with Oniguruma's iteration rule
     * (the Rust `onig` crate Hugging Face tokenizers use): an empty match right where the previous
     * match ended is skipped and the search moves on by one character.
     */
    template<typename F>
    void forEachMatch(std::string_view subject, F &&f) const
    {
        std::size_t last = 0;
        std::optional<std::size_t> lastMatchEnd;
        while (last <= subject.size()) {
            const auto m = find(subject, last);
            if (!m)
                return;
            if (m->start == m->end && lastMatchEnd && *lastMatchEnd == m->end) {
                last += nextCharLength(subject, last);
                continue;
            }
            last = m->end;
            lastMatchEnd = m->end;
            f(m->start, m->end);
        }
    }

    [[nodiscard]] const std::string &pattern() const { return m_pattern; }
    [[nodiscard]] bool jit() const { return m_jit; }

private:
    static std::size_t nextCharLength(std::string_view s, std::size_t at);
    [[nodiscard]] std::optional<Match> run(std::string_view subject, std::size_t from, bool anchored) const;

    struct State;
    std::unique_ptr<State> m_state;
    std::string m_pattern;
    std::string m_context;
    bool m_jit = false;
};

} // namespace cppl::agent
