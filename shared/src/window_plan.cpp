// SPDX-License-Identifier: MIT
#include "cppl/window_plan.h"

#include "cppl/errors.h"

#include <algorithm>

namespace cppl {

std::string_view protocolName(Protocol p) noexcept
{
    switch (p) {
    case Protocol::HfSliding:
        return "hf-sliding";
    case Protocol::LlamaCpp:
        return "llama.cpp";
    case Protocol::LmEvalRolling:
        return "lm-eval-rolling";
    }
    return "unknown";
}

std::optional<Protocol> parseProtocol(std::string_view name) noexcept
{
    for (auto p : {Protocol::HfSliding, Protocol::LlamaCpp, Protocol::LmEvalRolling})
        if (protocolName(p) == name)
            return p;
    return std::nullopt;
}

namespace {

} // namespace

void validatePlanOptions(const PlanOptions &o)
{
    if (o.context < 2)
        throw ConfigError("context " + std::to_string(o.context)
                          + " is too small: a window needs at least one token of context and one target; use --context 2 or more");
    if (o.protocol == Protocol::HfSliding) {
        const std::int64_t stride = o.stride == 0 ? o.context : o.stride;
        if (stride < 1)
            throw ConfigError("stride " + std::to_string(o.stride) + " must be at least 1");
        if (stride > o.context)
            throw ConfigError("stride " + std::to_string(stride) + " is larger than the context " + std::to_string(o.context)
                              + ": tokens between windows would never be scored; use a stride <= context");
    } else if (o.stride != 0 && o.stride != o.context) {
        throw ConfigError("stride applies to hf-sliding only; " + std::string(protocolName(o.protocol))
                          + " fixes its own windows (got stride " + std::to_string(o.stride) + ")");
    }
    if (o.bosFirst && o.bosToken < 0)
        throw ConfigError("BOS overwrite requested but no BOS token id was given");
}

namespace {

// The HF loop: for begin in range(0, n, stride): end = min(begin + C, n); trg_len = end - prev_end;
// labels[:-trg_len] = -100; the model shifts labels left, so the window's first token is never a target.
void planHf(const PlanOptions &o, std::int64_t offset, std::int64_t n, std::vector<Window> &out)
{
    const std::int64_t stride = o.stride == 0 ? o.context : o.stride;
    std::int64_t prevEnd = 0;
    for (std::int64_t begin = 0; begin < n; begin += stride) {
        const std::int64_t end = std::min(begin + o.context, n);
        const std::int64_t scoredBegin = std::max(begin + 1, prevEnd);
        if (scoredBegin < end)
            out.push_back({offset + begin, offset + end, offset + scoredBegin, offset + end, false});
        prevEnd = end;
        if (end == n)
            break;
    }
}

// llama.cpp perplexity: n/C chunks, first = C/2, logits first..C-2 score chunk tokens first+1..C-1.
void planLlama(const PlanOptions &o, std::int64_t offset, std::int64_t n, std::vector<Window> &out)
{
    const std::int64_t chunks = n / o.context;
    const std::int64_t first = o.context / 2;
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t begin = offset + c * o.context;
        out.push_back({begin, begin + o.context, begin + first + 1, begin + o.context, o.bosFirst});
    }
}

// lm-eval get_rolling_token_windows(tokens, prefix, max_seq_len=C, context_len=1) followed by
// make_disjoint_window; prefix at `offset`, document tokens at offset+1 .. offset+n.
void planRolling(const PlanOptions &o, std::int64_t offset, std::int64_t n, std::vector<Window> &out)
{
    if (n == 0)
        return;
    const std::int64_t C = o.context;
    const std::int64_t firstLen = std::min(C, n);
    // ([prefix] + doc[:first-1], doc[:first]) -> input flat [0, first), targets flat [1, first].
    out.push_back({offset, offset + firstLen, offset + 1, offset + firstLen + 1, false});
    std::int64_t predicted = firstLen;
    while (predicted < n) {
        const std::int64_t predLen = std::min(n - predicted, C);
        const std::int64_t end = predicted + predLen; // doc index one past the last target
        // input doc[end-C-1 : end-1] = flat [end-C, end); targets doc[end-predLen : end] = flat [end-predLen+1, end+1)
        out.push_back({offset + end - C, offset + end, offset + end - predLen + 1, offset + end + 1, false});
        predicted = end;
    }
}

void finish(WindowPlan &plan)
{
    for (const Window &w : plan.windows) {
        CPPL_ENFORCE(w.inputBegin < w.scoredBegin && w.scoredBegin <= w.scoredEnd && w.scoredEnd <= w.inputEnd + 1,
                     "window plan produced an inconsistent window");
        plan.scoredTokens += w.scored();
        plan.maxScored = std::max(plan.maxScored, w.scored());
        plan.maxInput = std::max(plan.maxInput, w.inputLength());
    }
}

} // namespace

WindowPlan planStream(const PlanOptions &options, std::int64_t numTokens)
{
    validatePlanOptions(options);
    if (options.protocol == Protocol::LmEvalRolling)
        throw ConfigError("lm-eval-rolling plans documents, not a single stream: give a document dataset");
    if (numTokens <= 0)
        throw ConfigError("the token stream is empty: nothing to evaluate");
    if (numTokens < 2)
        throw ConfigError("the token stream has 1 token: perplexity needs at least 2 (one context, one target)");
    WindowPlan plan;
    plan.options = options;
    plan.flatLength = numTokens;
    if (options.protocol == Protocol::HfSliding) {
        planHf(options, 0, numTokens, plan.windows);
    } else {
        if (numTokens < options.context)
            throw ConfigError("llama.cpp needs at least one full chunk: the stream has " + std::to_string(numTokens)
                              + " tokens but --context is " + std::to_string(options.context)
                              + "; use a smaller context or more data");
        planLlama(options, 0, numTokens, plan.windows);
    }
    finish(plan);
    plan.droppedTokens = numTokens - plan.scoredTokens;
    return plan;
}

std::vector<std::int64_t> documentOffsets(Protocol protocol, std::span<const std::int64_t> lengths)
{
    std::vector<std::int64_t> offsets;
    offsets.reserve(lengths.size());
    const std::int64_t prefix = protocol == Protocol::LmEvalRolling ? 1 : 0;
    std::int64_t at = 0;
    for (std::int64_t len : lengths) {
        offsets.push_back(at);
        at += prefix + len;
    }
    return offsets;
}

WindowPlan planDocuments(const PlanOptions &options, std::span<const std::int64_t> lengths)
{
    validatePlanOptions(options);
    if (lengths.empty())
        throw ConfigError("the dataset has no documents: nothing to evaluate");
    WindowPlan plan;
    plan.options = options;
    plan.documents = static_cast<std::int64_t>(lengths.size());
    const auto offsets = documentOffsets(options.protocol, lengths);
    const std::int64_t prefix = options.protocol == Protocol::LmEvalRolling ? 1 : 0;
    std::int64_t total = 0;
    for (std::size_t d = 0; d < lengths.size(); ++d) {
        const std::int64_t n = lengths[d];
        if (n < 0)
            throw ConfigError("document " + std::to_string(d) + " has a negative length");
        if (n == 0) {
            ++plan.emptyDocuments;
            continue;
        }
        switch (options.protocol) {
        case Protocol::LmEvalRolling:
            planRolling(options, offsets[d], n, plan.windows);
            break;
        case Protocol::HfSliding:
            planHf(options, offsets[d], n, plan.windows);
            break;
        case Protocol::LlamaCpp:
            planLlama(options, offsets[d], n, plan.windows);
            break;
        }
        total += n;
    }
    plan.flatLength = lengths.empty() ? 0 : offsets.back() + prefix + lengths.back();
    if (plan.windows.empty())
        throw ConfigError("no document is long enough to score a single token with " + std::string(protocolName(options.protocol))
                          + " at context " + std::to_string(options.context));
    finish(plan);
    plan.droppedTokens = total - plan.scoredTokens;
    return plan;
}

} // namespace cppl
