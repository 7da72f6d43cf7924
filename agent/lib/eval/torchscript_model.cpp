// SPDX-License-Identifier: MIT
// TorchScript models: any architecture a user can export, as int64 ids [B, T] -> logits [B, T, V].
#include "compute_spec_c10.h"
#include "language_model.h"

#include "cppl/errors.h"

#include <c10/core/InferenceMode.h>
#include <torch/script.h>

#include <filesystem>

namespace cppl::agent {

namespace {

// The interpreter's message starts with a traceback; the cause is its last non-empty line.
std::string lastLine(std::string s)
{
    while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
        s.pop_back();
    const auto nl = s.rfind('\n');
    return nl == std::string::npos ? s : s.substr(nl + 1);
}

class TorchScriptModel final : public LanguageModel
{
public:
    TorchScriptModel(const std::string &path, const LoadOptions &o) : m_opts(o)
    {
        try {
            m_module = torch::jit::load(path, o.device);
        } catch (const c10::Error &e) {
            std::string what = e.what_without_backtrace();
            if (what.size() > 200)
                what = what.substr(0, 200) + "...";
            throw IoError(path + ": not a TorchScript module (torch::jit::load failed: " + what
                          + "); export one with torch.jit.trace or torch.jit.script, or give a Hugging Face directory");
        }
        m_module.eval();
        for (auto p : m_module.parameters())
            p.set_requires_grad(false); // evaluation only: no autograd state anywhere
        if (o.dtype != at::kFloat)
            m_module.to(o.dtype);
        m_info.path = path;
        m_info.format = "torchscript";
        m_info.arch = "torchscript";
        for (const auto &p : m_module.parameters())
            m_info.params += p.numel();
        for (const auto &b : m_module.buffers())
            m_info.weightBytes += b.numel() * static_cast<std::int64_t>(b.element_size());
        m_info.weightBytes += m_info.params * static_cast<std::int64_t>(c10::elementSize(o.dtype));
        m_info.weightFiles = {path};
        m_info.gemm = "torchscript";
        m_info.device = toDeviceSpec(o.device);
    }

    const ModelInfo &info() const override { return m_info; }

    at::Tensor logits(const at::Tensor &ids) override
    {
        c10::InferenceMode guard;
        c10::IValue out;
        try {
            out = m_module.forward({ids.to(m_opts.device)});
        } catch (const c10::Error &e) {
            throw Error(m_info.path + ": the TorchScript module failed on ids of shape [" + std::to_string(ids.size(0)) + ", "
                        + std::to_string(ids.size(1)) + "]: " + e.what_without_backtrace());
        } catch (const std::exception &e) { // the interpreter reports shape mismatches as runtime_error
            throw Error(m_info.path + ": the TorchScript module failed on ids of shape [" + std::to_string(ids.size(0)) + ", "
                        + std::to_string(ids.size(1)) + "] (a traced module accepts only the shape it was traced with: use that --batch and --context): "
                        + lastLine(e.what()));
        }
        if (out.isTuple())
            out = out.toTupleRef().elements().at(0);
        else if (out.isGenericDict())
            out = out.toGenericDict().at("logits");
        if (!out.isTensor())
            throw Error(m_info.path + ": forward() must return logits [B, T, V] (a tensor, a tuple starting with one, or a dict with \"logits\")");
        at::Tensor t = out.toTensor();
        if (t.dim() != 3 || t.size(0) != ids.size(0) || t.size(1) != ids.size(1))
            throw Error(m_info.path + ": forward() returned shape " + std::to_string(t.dim()) + "-D, expected logits [B, T, V] for ids [B, T]");
        return t;
    }

    void prepare(std::int64_t batch, std::int64_t width) override
    {
        if (m_info.vocab == 0)
            m_info.vocab = logits(at::zeros({batch, width}, at::TensorOptions().dtype(at::kLong))).size(-1);
    }

private:
    LoadOptions m_opts;
    torch::jit::Module m_module;
    ModelInfo m_info;
};

} // namespace

std::unique_ptr<LanguageModel> loadTorchScriptModel(const std::string &path, const LoadOptions &options)
{
    return std::make_unique<TorchScriptModel>(path, options);
}

std::unique_ptr<LanguageModel> loadModel(const std::string &path, const LoadOptions &options)
{
    namespace fs = std::filesystem;
    if (!fs::exists(path))
        throw IoError(path + ": the model does not exist (give a Hugging Face directory or a TorchScript .pt file)");
    if (fs::is_directory(path))
        return loadNativeModel(path, options);
    return loadTorchScriptModel(path, options);
}

} // namespace cppl::agent
