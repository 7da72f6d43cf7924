// SPDX-License-Identifier: MIT
// libFuzzer target for safetensors files (agent/lib/model/safetensors.*, docs/fuzzing.md): any
// bytes are refused with IoError or give tensors that lie inside the file's data section, do not
// overlap, and hold exactly shape x dtype bytes (computed here without overflow).
#include "fuzz_support.h"

#include "cppl/errors.h"
#include "model/safetensors.h"

#include <algorithm>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    using namespace cppl;
    const std::string &path = fuzz::writeInputFile(data, size, ".safetensors");
    try {
        const auto checkpoint = agent::SafetensorsCheckpoint::openFile(path);
        std::vector<std::pair<const unsigned char *, const unsigned char *>> ranges;
        for (const auto &[name, t] : checkpoint.tensors()) {
            if (t.name != name || !t.file)
                fuzz::fail("a tensor without its name or file", name);
            const unsigned char *begin = t.file->data();
            const unsigned char *end = begin + t.file->size();
            if (t.data < begin + 8 || t.data > end || t.bytes > static_cast<std::size_t>(end - t.data))
                fuzz::fail("a tensor outside the file", name);
            unsigned __int128 bytes = agent::storedDtypeSize(t.dtype);
            for (const std::int64_t d : t.shape) {
                if (d < 0)
                    fuzz::fail("a negative dimension", name);
                bytes *= static_cast<unsigned __int128>(d);
                if (bytes > t.file->size())
                    fuzz::fail("the shape needs more bytes than the file has", name);
            }
            if (bytes != t.bytes)
                fuzz::fail("shape x dtype differs from the tensor's byte count", name);
            if (t.bytes > 0)
                ranges.emplace_back(t.data, t.data + t.bytes);
        }
        std::sort(ranges.begin(), ranges.end());
        for (std::size_t i = 1; i < ranges.size(); ++i)
            if (ranges[i].first < ranges[i - 1].second)
                fuzz::fail("two tensors overlap");
    } catch (const Error &e) {
        if (std::string_view(e.what()).empty())
            fuzz::fail("an empty error message");
    }
    return 0;
}
