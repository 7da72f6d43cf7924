// SPDX-License-Identifier: MIT
// Whether a reference model (--reference-model) reads the same tokens as the model evaluated: the
// comparison is over the same windows of ids, so a different tokenizer would compare distributions
// over different things. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cppl::agent {

/**
 * Refuses (ConfigError, with the reason) a reference whose vocabulary is not the model's: the
 * vocabulary sizes (the widths of their logits) differ; config.json's bos/eos/pad token ids, where
 * both name one, differ; or a tokenizer file both directories hold (tokenizer.json,
 * tokenizer.model, vocab.json, merges.txt) differs (SHA-256). Returns notes for what could not be
 * compared (a tokenizer file only one directory has). The same directory passes at once.
 */
std::vector<std::string> checkSameTokenizer(const std::string &modelPath, std::int64_t modelVocab, const std::string &referencePath,
                                            std::int64_t referenceVocab);

} // namespace cppl::agent
