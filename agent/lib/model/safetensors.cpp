// SPDX-License-Identifier: MIT
#include "safetensors.h"

#include "cppl/errors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

namespace cppl::agent {

namespace fs = std::filesystem;
using nlohmann::json;

const char *storedDtypeName(StoredDtype d) noexcept
{
    switch (d) {
    case StoredDtype::F32:
        return "F32";
    case StoredDtype::F16:
        return "F16";
    case StoredDtype::BF16:
        return "BF16";
    case StoredDtype::I8:
        return "I8";
    case StoredDtype::U8:
        return "U8";
    case StoredDtype::I32:
        return "I32";
    case StoredDtype::I64:
        return "I64";
    }
    return "?";
}

std::size_t storedDtypeSize(StoredDtype d) noexcept
{
    switch (d) {
    case StoredDtype::I8:
    case StoredDtype::U8:
        return 1;
    case StoredDtype::F16:
    case StoredDtype::BF16:
        return 2;
    case StoredDtype::F32:
    case StoredDtype::I32:
        return 4;
    case StoredDtype::I64:
        return 8;
    }
    return 4;
}

namespace {

StoredDtype parseDtype(const std::string &dtype, const std::string &where)
{
    static const std::pair<const char *, StoredDtype> kDtypes[] = {{"F32", StoredDtype::F32}, {"F16", StoredDtype::F16},
                                                                   {"BF16", StoredDtype::BF16}, {"I8", StoredDtype::I8},
                                                                   {"U8", StoredDtype::U8}, {"I32", StoredDtype::I32},
                                                                   {"I64", StoredDtype::I64}};
    const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const auto &d) { return dtype == d.first; });
    if (known == std::end(kDtypes))
        throw IoError(where + "unsupported dtype " + dtype.substr(0, 40) + " (supported: F32, F16, BF16, I8, U8, I32, I64)");
    return known->second;
}

// The dimensions into `dims`; returns their product. Checked products: a shape whose element count
// overflows must not pass the byte-size check.
std::uint64_t parseShape(const json &shape, const std::string &where, std::vector<std::int64_t> &dims)
{
    if (!shape.is_array())
        throw IoError(where + "shape must be a list of non-negative integers, got " + shape.dump().substr(0, 40));
    std::uint64_t elements = 1;
    for (const json &d : shape) {
        if (!d.is_number_unsigned() || d.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
            throw IoError(where + "shape must be a list of non-negative integers, got " + shape.dump().substr(0, 80));
        const auto n = d.get<std::uint64_t>();
        if (n != 0 && elements > static_cast<std::uint64_t>(INT64_MAX) / n)
            throw IoError(where + "shape " + shape.dump().substr(0, 80) + " has more than 2^63 elements");
        dims.push_back(static_cast<std::int64_t>(n));
        elements *= n;
    }
    return elements;
}

void parseOffsets(const json &off, const std::string &where, std::uint64_t dataSize, SafetensorsEntry &t)
{
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
        throw IoError(where + "data_offsets must be [begin, end]");
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    if (t.begin > t.end || t.end > dataSize)
        throw IoError(where + "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + ") lie outside the "
                      + std::to_string(dataSize) + " data bytes (truncated file?)");
}

// One header entry: dtype, shape, offsets, and the shape's bytes against the offsets' span.
SafetensorsEntry parseEntry(const std::string &name, const json &info, std::uint64_t dataSize, const std::string &path)
{
    SafetensorsEntry t;
    t.name = name;
    const std::string where = path + ": tensor \"" + t.name + "\": ";
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
        throw IoError(where + "header entry needs dtype, shape and data_offsets");
    const std::string dtype = info["dtype"].is_string() ? info["dtype"].get<std::string>() : info["dtype"].dump();
    t.dtype = parseDtype(dtype, where);
    const json &shape = info["shape"];
    const std::uint64_t elements = parseShape(shape, where, t.shape);
    parseOffsets(info["data_offsets"], where, dataSize, t);
    const std::uint64_t itemSize = storedDtypeSize(t.dtype);
    if (elements > UINT64_MAX / itemSize) // else the product wraps and may match the span by accident
        throw IoError(where + "shape " + shape.dump().substr(0, 80) + " of " + dtype + " needs more than 2^64 bytes");
    if (t.end - t.begin != elements * itemSize)
        throw IoError(where + "shape needs " + std::to_string(elements * itemSize) + " bytes but data_offsets span "
                      + std::to_string(t.end - t.begin));
    return t;
}

} // namespace

std::vector<SafetensorsEntry> parseSafetensorsHeader(std::string_view text, std::uint64_t dataSize, const std::string &path)
{
    json header;
    try {
        header = json::parse(text.begin(), text.end());
    } catch (const json::exception &e) {
        throw IoError(path + ": the safetensors header is not valid JSON (" + e.what() + ")");
    }
    if (!header.is_object())
        throw IoError(path + ": the safetensors header is not a JSON object");
    std::vector<SafetensorsEntry> out;
    for (auto it = header.begin(); it != header.end(); ++it)
        if (it.key() != "__metadata__")
            out.push_back(parseEntry(it.key(), it.value(), dataSize, path));
    return out;
}

void SafetensorsCheckpoint::addFile(const std::string &path)
{
    const auto file = MappedFile::open(path);
    const std::size_t size = file->size();
    if (size < 8)
        throw IoError(path + ": truncated safetensors file (" + std::to_string(size) + " bytes; the 8-byte header length is missing)");
    std::uint64_t headerLen = 0;
    for (int b = 0; b < 8; ++b)
        headerLen |= std::uint64_t{file->data()[b]} << (8 * b);
    if (headerLen > size - 8)
        throw IoError(path + ": header length " + std::to_string(headerLen) + " is larger than the file (" + std::to_string(size)
                      + " bytes): truncated or not a safetensors file");
    const std::size_t dataStart = 8 + headerLen;
    const auto entries = parseSafetensorsHeader(std::string_view(reinterpret_cast<const char *>(file->data()) + 8, headerLen),
                                                size - dataStart, path);
    struct Range
    {
        std::size_t begin, end;
        std::string name;
    };
    std::vector<Range> ranges;
    for (const auto &e : entries) {
        TensorView t;
        t.name = e.name;
        t.dtype = e.dtype;
        t.shape = e.shape;
        t.data = file->data() + dataStart + e.begin;
        t.bytes = e.end - e.begin;
        t.file = file;
        if (!m_tensors.emplace(e.name, std::move(t)).second)
            throw IoError(path + ": tensor \"" + e.name + "\": defined in more than one file");
        ranges.push_back({e.begin, e.end, e.name});
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range &a, const Range &b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].begin < ranges[i - 1].end)
            throw IoError(path + ": tensors \"" + ranges[i - 1].name + "\" and \"" + ranges[i].name + "\" overlap in the data section");
    m_files.push_back(path);
}

SafetensorsCheckpoint SafetensorsCheckpoint::openFile(const std::string &path)
{
    SafetensorsCheckpoint c;
    c.m_dir = fs::path(path).parent_path().string();
    c.addFile(path);
    return c;
}

SafetensorsCheckpoint SafetensorsCheckpoint::openDirectory(const std::string &dir)
{
    SafetensorsCheckpoint c;
    c.m_dir = dir;
    const fs::path single = fs::path(dir) / "model.safetensors";
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (fs::exists(index)) {
        std::ifstream in(index);
        json j;
        try {
            j = json::parse(in);
        } catch (const json::exception &e) {
            throw IoError(index.string() + ": not valid JSON (" + e.what() + ")");
        }
        if (!j.contains("weight_map") || !j["weight_map"].is_object())
            throw IoError(index.string() + ": no \"weight_map\" object");
        std::set<std::string> files;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            if (!it.value().is_string())
                throw IoError(index.string() + ": weight_map entry \"" + it.key() + "\" is not a file name");
            files.insert(it.value().get<std::string>());
        }
        for (const auto &f : files) {
            const fs::path p = fs::path(dir) / f;
            if (!fs::exists(p))
                throw IoError(index.string() + ": lists shard \"" + f + "\", which is missing from " + dir);
            c.addFile(p.string());
        }
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it)
            if (!c.contains(it.key()))
                throw IoError(index.string() + ": tensor \"" + it.key() + "\" is mapped to " + it.value().get<std::string>()
                              + " but that file does not contain it");
    } else if (fs::exists(single)) {
        c.addFile(single.string());
    } else {
        throw IoError(dir + ": no model.safetensors or model.safetensors.index.json (a Hugging Face model directory needs one)");
    }
    return c;
}

const TensorView &SafetensorsCheckpoint::at(const std::string &name) const
{
    auto it = m_tensors.find(name);
    if (it == m_tensors.end())
        throw IoError(m_dir + ": missing tensor \"" + name + "\" (the checkpoint has " + std::to_string(m_tensors.size())
                      + " tensors; is it the architecture config.json says?)");
    const StoredDtype d = it->second.dtype;
    if (d != StoredDtype::F32 && d != StoredDtype::F16 && d != StoredDtype::BF16)
        throw IoError(it->second.file->path() + ": tensor \"" + name + "\" is " + storedDtypeName(d)
                      + ", not a float weight (F32, F16, BF16): integer tensors belong to quantized checkpoints");
    return it->second;
}

} // namespace cppl::agent
