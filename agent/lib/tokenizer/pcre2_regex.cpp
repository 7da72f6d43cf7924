// SPDX-License-Identifier: MIT
#include "pcre2_regex.h"

#include "cppl/config.h"
#include "cppl/errors.h"

#if CLUSTERPPL_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

namespace cppl::agent {

#if CLUSTERPPL_HAVE_PCRE2

namespace {

std::string pcre2Message(int code)
{
    PCRE2_UCHAR buffer[256];
    const int n = pcre2_get_error_message(code, buffer, sizeof buffer);
    if (n < 0)
        return "PCRE2 error " + std::to_string(code);
    return std::string(reinterpret_cast<const char *>(buffer), static_cast<std::size_t>(n));
}

} // namespace

struct Pcre2Regex::State
{
    pcre2_code *code = nullptr;
    pcre2_match_data *matchData = nullptr;
    pcre2_match_context *matchContext = nullptr;
    pcre2_jit_stack *jitStack = nullptr;

    ~State()
    {
        pcre2_match_data_free(matchData);
        pcre2_match_context_free(matchContext);
        pcre2_jit_stack_free(jitStack);
        pcre2_code_free(code);
    }
};

Pcre2Regex::Pcre2Regex(std::string_view pattern, const std::string &context)
    : m_state(std::make_unique<State>()), m_pattern(pattern), m_context(context)
{
    int error = 0;
    PCRE2_SIZE offset = 0;
    m_state->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                                  &offset, nullptr);
    if (!m_state->code)
        throw ConfigError(context + ": PCRE2 rejects the regex at offset " + std::to_string(offset) + ": " + pcre2Message(error)
                          + " (pattern \"" + std::string(pattern) + "\"; Oniguruma-only syntax has no PCRE2 equivalent)");
    m_jit = pcre2_jit_compile(m_state->code, PCRE2_JIT_COMPLETE) == 0;
    m_state->matchData = pcre2_match_data_create_from_pattern(m_state->code, nullptr);
    m_state->matchContext = pcre2_match_context_create(nullptr);
    if (m_jit) {
        // Long runs of whitespace against `\s+(?!\S)` recurse; the default 32 KiB JIT stack is too small.
        m_state->jitStack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
        pcre2_jit_stack_assign(m_state->matchContext, nullptr, m_state->jitStack);
    }
}

#else // built without PCRE2 (e.g. scripts/gpu-check.sh's LibTorch-only build)

struct Pcre2Regex::State
{
};

Pcre2Regex::Pcre2Regex(std::string_view pattern, const std::string &context) : m_pattern(pattern), m_context(context)
{
    throw ConfigError(context + ": this agent was built without PCRE2, which Hugging Face tokenizer.json regexes need; rebuild with "
                              "libpcre2-dev installed, or tokenize elsewhere (clusterppl-agent tokenize) and pass --tokens FILE");
}

std::optional<Pcre2Regex::Match> Pcre2Regex::run(std::string_view, std::size_t, bool) const
{
    return std::nullopt;
}

#endif

Pcre2Regex::~Pcre2Regex() = default;
Pcre2Regex::Pcre2Regex(Pcre2Regex &&) noexcept = default;
Pcre2Regex &Pcre2Regex::operator=(Pcre2Regex &&) noexcept = default;

std::size_t Pcre2Regex::nextCharLength(std::string_view s, std::size_t at)
{
    if (at >= s.size())
        return 1;
    const auto c = static_cast<unsigned char>(s[at]);
    if (c < 0x80)
        return 1;
    if (c >= 0xF0)
        return 4;
    if (c >= 0xE0)
        return 3;
    return 2;
}

#if CLUSTERPPL_HAVE_PCRE2
std::optional<Pcre2Regex::Match> Pcre2Regex::run(std::string_view subject, std::size_t from, bool anchored) const
{
    const auto options = PCRE2_NO_UTF_CHECK | (anchored ? PCRE2_ANCHORED : 0u);
    const auto *data = reinterpret_cast<PCRE2_SPTR>(subject.data());
    // pcre2_jit_match does not support PCRE2_ANCHORED on a pattern compiled without it.
    const int rc = (m_jit && !anchored)
                       ? pcre2_jit_match(m_state->code, data, subject.size(), from, options, m_state->matchData, m_state->matchContext)
                       : pcre2_match(m_state->code, data, subject.size(), from, options, m_state->matchData, m_state->matchContext);
    if (rc == PCRE2_ERROR_NOMATCH)
        return std::nullopt;
    if (rc < 0)
        throw Error(m_context + ": PCRE2 failed while matching at byte " + std::to_string(from) + ": " + pcre2Message(rc));
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m_state->matchData);
    return Match{ov[0], ov[1]};
}

#endif

std::optional<Pcre2Regex::Match> Pcre2Regex::find(std::string_view subject, std::size_t from) const
{
    return run(subject, from, false);
}

std::optional<Pcre2Regex::Match> Pcre2Regex::matchAt(std::string_view subject, std::size_t at) const
{
    return run(subject, at, true);
}

} // namespace cppl::agent
