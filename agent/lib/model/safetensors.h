// SPDX-License-Identifier: MIT
#pragma once

#include "mapped_file.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cppl::agent {

/// Float tensors (weights) and the integer ones of quantized checkpoints (GPTQ/AWQ's packed I32
/// qweight/qzeros/g_idx; I8/U8/I64 as other tools store them): at() hands out float tensors only.
enum class StoredDtype { F32, F16, BF16, I8, U8, I32, I64 };
[[nodiscard]] const char *storedDtypeName(StoredDtype d) noexcept;
[[nodiscard]] std::size_t storedDtypeSize(StoredDtype d) noexcept;

/// @brief One tensor inside a memory-mapped safetensors file.
struct TensorView
{
    std::string name;
    StoredDtype dtype = StoredDtype::F32;
    std::vector<std::int64_t> shape;
    const unsigned char *data = nullptr; ///< points into the mapping; valid while `file` lives
    std::size_t bytes = 0;
    std::shared_ptr<const MappedFile> file;
};

/// @brief One tensor as a safetensors header describes it (offsets relative to the data section).
struct SafetensorsEntry
{
    std::string name;
    StoredDtype dtype = StoredDtype::F32;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

/// @brief Parses and validates a safetensors JSON header against a data section of `dataSize`
/// bytes (dtype, shape without overflow, offsets inside the data, size matching the shape).
/// Throws IoError naming `source` and the tensor; never anything else (a fuzz target, tests/fuzz).
[[nodiscard]] std::vector<SafetensorsEntry> parseSafetensorsHeader(std::string_view header, std::uint64_t dataSize,
                                                                   const std::string &source);

/**
 * @brief The tensors of a Hugging Face checkpoint: `model.safetensors`, or the files listed by
 * `model.safetensors.index.json`. Every header is validated before use (length within the file,
 * JSON, dtypes, shapes against byte ranges, offsets inside the data, no overlaps); each problem
 * throws IoError naming the file and the tensor.
 */
class SafetensorsCheckpoint
{
public:
    static SafetensorsCheckpoint openDirectory(const std::string &dir);
    static SafetensorsCheckpoint openFile(const std::string &path);

    [[nodiscard]] bool contains(const std::string &name) const { return m_tensors.count(name) != 0; }
    /// Throws IoError "missing tensor NAME" listing what the checkpoint does have nearby, and for an
    /// integer tensor (a quantized checkpoint's packed data), which is no weight to read as floats:
    /// the quantized readers take those from tensors() (quant/gptq_awq.h).
    [[nodiscard]] const TensorView &at(const std::string &name) const;
    [[nodiscard]] const std::map<std::string, TensorView> &tensors() const noexcept { return m_tensors; }
    [[nodiscard]] const std::vector<std::string> &files() const noexcept { return m_files; }
    [[nodiscard]] const std::string &directory() const noexcept { return m_dir; }

private:
    void addFile(const std::string &path);
    std::map<std::string, TensorView> m_tensors;
    std::vector<std::string> m_files;
    std::string m_dir;
};

} // namespace cppl::agent
