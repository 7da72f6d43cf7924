// SPDX-License-Identifier: MIT
// libFuzzer target for .npy token files (agent/lib/token_file.*, docs/fuzzing.md): any bytes are
// refused with IoError or give ids that the file's payload really holds (no more ids than the bytes
// after the 10-byte preamble allow, in one of the four supported widths).
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "token_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    const std::string &path = fuzz::writeInputFile(data, size, ".npy");
    try {
        const agent::TokenStream t = agent::readTokenFile(path);
        if (t.ids.empty())
            fuzz::fail("an accepted token file without tokens");
        if (t.fileBytes != static_cast<std::int64_t>(size))
            fuzz::fail("fileBytes differs from the file's size");
        const std::size_t width = t.format == "npy:u2" ? 2 : t.format == "npy:i8" ? 8 : t.format == "npy:i4" || t.format == "npy:u4" ? 4 : 0;
        if (width == 0)
            fuzz::fail("an unexpected format", t.format);
        if (t.ids.size() > (size - 10) / width)
            fuzz::fail("more ids than the payload can hold", t.format);
    } catch (const Error &e) {
        if (std::string_view(e.what()).empty())
            fuzz::fail("an empty error message");
    }
    return 0;
}
