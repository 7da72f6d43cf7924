// SPDX-License-Identifier: MIT
#include "eval_data.h"

#include "data/text_dataset.h"
#include "token_file.h"
#include "tokenizer/tokenizer.h"

#include "cppl/errors.h"

namespace cppl::agent {

std::int64_t EvalInput::totalTokens() const
{
    std::int64_t n = 0;
    for (const auto &d : documents)
        n += static_cast<std::int64_t>(d.size());
    return n;
}

EvalInput loadEvalInput(const EvalInputOptions &o)
{
    EvalInput in;
    if (!o.tokensPath.empty()) {
        TokenStream t = readTokenFile(o.tokensPath);
        in.path = t.path;
        in.format = t.format;
        in.documents.push_back(std::move(t.ids));
        return in;
    }
    const auto format = parseDatasetFormat(o.dataset);
    if (!format)
        throw ConfigError("--dataset \"" + o.dataset + "\" is not one of plain, wikitext, jsonl, dir");
    const auto bosMode = parseBosMode(o.bos);
    if (!bosMode)
        throw ConfigError("--bos \"" + o.bos + "\" is not one of auto, always, never");
    std::unique_ptr<Tokenizer> tokenizer;
    if (o.tokenizer.empty())
        throw ConfigError("--text needs --tokenizer: \"bytes\" for byte-level models, or a tokenizer.json, SentencePiece .model or model directory");
    if (o.tokenizer != "bytes") {
        tokenizer = Tokenizer::load(o.tokenizer);
        in.notes = tokenizer->notes();
        const BosDecision d = tokenizer->bosDecision(*bosMode);
        in.bosAdded = d.add;
        in.bosReason = d.reason;
        if (d.add)
            in.bosId = d.id;
        else if (*bosMode != BosMode::Never) {
            try { // the id lm-eval-rolling may use as its prefix, even when auto adds none
                in.bosId = tokenizer->bosDecision(BosMode::Always).id;
            } catch (const ConfigError &) {
            }
        }
    } else {
        if (*bosMode == BosMode::Always)
            throw ConfigError("--bos always: byte-level input has no BOS token; use --bos never (and --prefix-id for lm-eval-rolling)");
        in.bosReason = "byte-level ids: no BOS";
    }
    in.bosMode = std::string(bosModeName(*bosMode));
    const TextDataset ds = loadTextDataset(o.textPath, *format, o.jsonlField, o.replaceInvalidUtf8 ? InvalidUtf8::Replace : InvalidUtf8::Error);
    in.path = o.textPath;
    in.dataset = std::string(datasetFormatName(*format));
    in.tokenizer = tokenizer ? tokenizer->description() : "bytes";
    in.format = in.dataset + "+" + (tokenizer ? "tokenizer" : "bytes");
    in.replacedUtf8 = ds.replacedSequences;
    for (const TextDocument &doc : ds.documents) {
        in.bytes += doc.bytes;
        in.words += doc.words;
        if (tokenizer) {
            in.documents.push_back(tokenizer->encode(doc.text));
        } else {
            in.documents.emplace_back(doc.text.begin(), doc.text.end());
            for (auto &id : in.documents.back())
                id &= 0xffU; // char may be signed: ids are the bytes 0..255
        }
    }
    return in;
}

} // namespace cppl::agent
