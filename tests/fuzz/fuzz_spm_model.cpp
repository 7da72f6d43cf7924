// SPDX-License-Identifier: MIT
// libFuzzer target for the SentencePiece tokenizer.model reader (the protobuf wire format the agent
// checks before handing a file to the shim; agent/lib/tokenizer/sentencepiece_tokenizer.*,
// docs/fuzzing.md): any bytes are refused with ConfigError or summarised consistently.
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "tokenizer/sentencepiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    try {
        const auto s = agent::spm::readModelFile("tokenizer.model", fuzz::asText(data, size));
        if (s.pieces < 1 || s.bytePieces < 0 || s.bytePieces > s.pieces)
            fuzz::fail("an accepted model with inconsistent piece counts");
        // Each piece costs at least 4 bytes (tag, length, text tag, text length).
        if (s.pieces > static_cast<std::int64_t>(size / 4))
            fuzz::fail("more pieces than the file can hold");
        (void)agent::spm::modelTypeName(s.modelType);
    } catch (const Error &e) {
        if (std::string_view(e.what()).empty())
            fuzz::fail("an empty error message");
    }
    return 0;
}
