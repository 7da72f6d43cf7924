// SPDX-License-Identifier: MIT
#include "telemetry/message_peek.h"

#include <unordered_map>

namespace cppl::core::telemetry {

namespace {

class Scanner
{
public:
    explicit Scanner(std::string_view s) : m_s(s) {}

    void skipSpace() noexcept
    {
        while (m_i < m_s.size() && (m_s[m_i] == ' ' || m_s[m_i] == '\t' || m_s[m_i] == '\n' || m_s[m_i] == '\r'))
            ++m_i;
    }
    bool take(char c) noexcept
    {
        skipSpace();
        if (m_i < m_s.size() && m_s[m_i] == c) {
            ++m_i;
            return true;
        }
        return false;
    }
    [[nodiscard]] bool atEnd() noexcept
    {
        skipSpace();
        return m_i == m_s.size();
    }
    [[nodiscard]] char peek() noexcept
    {
        skipSpace();
        return m_i < m_s.size() ? m_s[m_i] : '\0';
    }
    // After the opening quote: the string up to its closing quote. escaped: it held a backslash
    // (the raw text is then not the value).
    bool string(std::string_view &out, bool &escaped) noexcept
    {
        const std::size_t start = m_i;
        escaped = false;
        while (m_i < m_s.size()) {
            const char c = m_s[m_i];
            if (c == '"') {
                out = m_s.substr(start, m_i - start);
                ++m_i;
                return true;
            }
            if (c == '\\') {
                escaped = true;
                ++m_i; // the escaped character (\uXXXX's hex digits are plain characters)
            }
            ++m_i;
        }
        return false;
    }
    // A number or literal: everything up to the next delimiter.
    std::string_view bare() noexcept
    {
        const std::size_t start = m_i;
        while (m_i < m_s.size() && m_s[m_i] != ',' && m_s[m_i] != '}' && m_s[m_i] != ' ' && m_s[m_i] != '\t'
               && m_s[m_i] != '\n' && m_s[m_i] != '\r')
            ++m_i;
        return m_s.substr(start, m_i - start);
    }

private:
    std::string_view m_s;
    std::size_t m_i = 0;
};

// A plain non-negative JSON integer of at most 18 digits (no sign, fraction, exponent or leading zero).
std::optional<std::int64_t> plainInteger(std::string_view t) noexcept
{
    if (t.empty() || t.size() > 18 || (t.size() > 1 && t[0] == '0'))
        return std::nullopt;
    std::int64_t v = 0;
    for (const char c : t) {
        if (c < '0' || c > '9')
            return std::nullopt;
        v = v * 10 + (c - '0');
    }
    return v;
}

} // namespace

std::optional<PeekedHeader> peekHeader(std::string_view bytes) noexcept
{
    if (bytes.size() > cppl::telemetry::kMaxMessageBytes)
        return std::nullopt;
    Scanner in(bytes);
    if (!in.take('{'))
        return std::nullopt;
    PeekedHeader h;
    enum : unsigned { Run = 1, Rank = 2, World = 4, Seq = 8, KindBit = 16, All = 31 };
    unsigned seen = 0;
    auto once = [&](unsigned bit) {
        if (seen & bit)
            return false;
        seen |= bit;
        return true;
    };
    if (!in.take('}')) {
        do {
            if (!in.take('"'))
                return std::nullopt;
            std::string_view key;
            bool keyEscaped = false;
            if (!in.string(key, keyEscaped) || keyEscaped || !in.take(':'))
                return std::nullopt;
            const char first = in.peek();
            if (first == '{' || first == '[' || first == '\0')
                return std::nullopt;
            if (first == '"') {
                in.take('"');
                std::string_view value;
                bool escaped = false;
                if (!in.string(value, escaped))
                    return std::nullopt;
                if (key == "run") {
                    if (escaped || !once(Run))
                        return std::nullopt;
                    h.run = value;
                } else if (key == "kind") {
                    const auto k = escaped ? std::nullopt : cppl::telemetry::kindFromName(value);
                    if (!k || !once(KindBit))
                        return std::nullopt;
                    h.kind = *k;
                } else if (key == "rank" || key == "world_size" || key == "seq") {
                    return std::nullopt; // a string where decode() wants an integer
                }
            } else {
                const std::string_view value = in.bare();
                std::int64_t *field = key == "rank" ? &h.rank : key == "world_size" ? &h.worldSize : key == "seq" ? &h.seq : nullptr;
                if (field) {
                    const auto v = plainInteger(value);
                    if (!v || !once(key == "rank" ? Rank : key == "world_size" ? World : Seq))
                        return std::nullopt;
                    *field = *v;
                } else if (key == "run" || key == "kind" || value.empty()) {
                    return std::nullopt;
                }
            }
        } while (in.take(','));
        if (!in.take('}'))
            return std::nullopt;
    }
    if (!in.atEnd() || seen != All)
        return std::nullopt;
    return h;
}

void markSuperseded(const std::vector<std::optional<PeekedHeader>> &peeks, std::vector<char> &superseded)
{
    using cppl::telemetry::Kind;
    superseded.assign(peeks.size(), 0);
    // Per rank and kind: the message of the batch with the highest seq.
    std::unordered_map<std::int64_t, std::size_t> newest;
    newest.reserve(peeks.size());
    auto keyOf = [](const PeekedHeader &p) { return p.rank * 2 + (p.kind == Kind::Progress ? 1 : 0); };
    auto coalescable = [](const std::optional<PeekedHeader> &p) {
        return p && (p->kind == Kind::Progress || p->kind == Kind::Heartbeat) && p->rank >= 0;
    };
    for (std::size_t i = 0; i < peeks.size(); ++i) {
        if (!coalescable(peeks[i]))
            continue;
        const auto [it, inserted] = newest.try_emplace(keyOf(*peeks[i]), i);
        if (!inserted && peeks[i]->seq >= peeks[it->second]->seq)
            it->second = i;
    }
    for (std::size_t i = 0; i < peeks.size(); ++i) {
        if (!coalescable(peeks[i]))
            continue;
        const PeekedHeader &p = *peeks[i];
        const PeekedHeader &n = *peeks[newest.at(keyOf(p))];
        superseded[i] = n.seq > p.seq && n.run == p.run && n.worldSize == p.worldSize ? 1 : 0;
    }
}

} // namespace cppl::core::telemetry
