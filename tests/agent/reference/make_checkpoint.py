#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes a tiny, randomly initialised Hugging Face checkpoint directory (config.json + safetensors).

Architectures: llama (LlamaForCausalLM), qwen2 (Qwen2ForCausalLM: q/k/v biases, no o bias) and gpt2
(GPT2LMHeadModel: Conv1D weights stored [in, out], head tied to wte). Tensors use transformers'
names and shapes (model.layers.N.self_attn.q_proj.weight, model.layers.N.mlp.gate_proj.weight, ...;
h.N.attn.c_attn.weight, ... for GPT-2). Values are deterministic for a given --seed and set of flags,
drawn at a scale that keeps every op visible in the logits (weights ~ N(0, 0.2^2 * 32/fan_in), embeddings
~ N(0, 0.5^2 * 32/hidden),
biases ~ N(0, 0.1^2), norm weights ~ 1 + N(0, 0.1^2)), generated in float32 and then rounded to
--dtype. --sharded splits the tensors, in transformers' state-dict order, into two files with a
model.safetensors.index.json, as save_pretrained does.

Prints a JSON summary (directory, files, tensor count, config) on stdout. Run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference  # noqa: E402
from ref_common import UsageError, run_main  # noqa: E402

DTYPES = {"F32": (torch.float32, "float32"), "F16": (torch.float16, "float16"),
          "BF16": (torch.bfloat16, "bfloat16")}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--arch", required=True, choices=["llama", "qwen2", "gpt2"])
    p.add_argument("--out", required=True, help="output directory (created; old model files replaced)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="F32", choices=sorted(DTYPES), help="stored tensor dtype")
    p.add_argument("--sharded", action="store_true", help="two shards + model.safetensors.index.json")
    p.add_argument("--tied", action="store_true",
                   help="tie_word_embeddings (no lm_head.weight); GPT-2 is always tied")
    p.add_argument("--gqa", action="store_true", help="num_key_value_heads = heads / 2 (llama, qwen2)")
    p.add_argument("--kv-heads", type=int, default=None, help="explicit num_key_value_heads (llama, qwen2)")
    p.add_argument("--rope-scaling", choices=["none", "llama3"], default="none", help="(llama, qwen2)")
    p.add_argument("--rope-original-max", type=int, default=16,
                   help="llama3 rope_scaling original_max_position_embeddings")
    p.add_argument("--attention-bias", action="store_true", help="llama: biases on q, k, v and o")
    p.add_argument("--rope-theta", type=float, default=None,
                   help="rope_theta (llama, qwen2; default 10000 / qwen2 1000000)")
    p.add_argument("--head-dim", type=int, default=None,
                   help="write an explicit head_dim (llama, qwen2; may differ from hidden/heads)")
    p.add_argument("--vocab", type=int, default=97)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--intermediate", type=int, default=48, help="MLP width (llama, qwen2; GPT-2 uses 4*hidden)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--max-positions", type=int, default=64,
                   help="max_position_embeddings / GPT-2 n_positions (size of wpe)")
    p.add_argument("--norm-eps", type=float, default=None,
                   help="rms_norm_eps / layer_norm_epsilon (default llama 1e-5, qwen2 1e-6, gpt2 1e-5)")
    p.add_argument("--gpt2-prefix", action="store_true",
                   help="gpt2: store names as transformer.* (newer save_pretrained layout)")
    p.add_argument("--gpt2-mask-buffers", action="store_true",
                   help="gpt2: also store the h.N.attn.bias causal-mask buffers [1,1,P,P] of old checkpoints")
    return p.parse_args(argv)


def check(a):
    def positive(name, v):
        if v is None or v < 1:
            raise UsageError("--%s must be >= 1 (got %s)" % (name, v))
    for name in ("vocab", "hidden", "intermediate", "layers", "heads", "max_positions"):
        positive(name.replace("_", "-"), getattr(a, name))
    if a.vocab < 2:
        raise UsageError("--vocab must be >= 2")
    if a.arch == "gpt2":
        bad = [f for f, on in (("--gqa", a.gqa), ("--kv-heads", a.kv_heads is not None),
                               ("--rope-scaling", a.rope_scaling != "none"), ("--attention-bias", a.attention_bias),
                               ("--rope-theta", a.rope_theta is not None), ("--head-dim", a.head_dim is not None))
               if on]
        if bad:
            raise UsageError("%s do(es) not apply to --arch gpt2" % ", ".join(bad))
        if a.hidden % a.heads:
            raise UsageError("--hidden %d is not a multiple of --heads %d" % (a.hidden, a.heads))
        return
    if a.gpt2_prefix or a.gpt2_mask_buffers:
        raise UsageError("--gpt2-prefix / --gpt2-mask-buffers apply to --arch gpt2 only")
    if a.arch == "qwen2" and a.attention_bias:
        raise UsageError("--attention-bias does not apply to qwen2 (q/k/v biases always, o bias never)")
    if a.gqa and a.kv_heads is not None:
        raise UsageError("give --gqa or --kv-heads, not both")
    if a.gqa:
        if a.heads % 2:
            raise UsageError("--gqa needs an even --heads (got %d)" % a.heads)
        a.kv_heads = a.heads // 2
    if a.kv_heads is None:
        a.kv_heads = a.heads
    positive("kv-heads", a.kv_heads)
    if a.heads % a.kv_heads:
        raise UsageError("--heads %d is not a multiple of num_key_value_heads %d" % (a.heads, a.kv_heads))
    if a.head_dim is None and a.hidden % a.heads:
        raise UsageError("--hidden %d is not a multiple of --heads %d (or give --head-dim)" % (a.hidden, a.heads))
    head_dim = a.head_dim if a.head_dim is not None else a.hidden // a.heads
    if head_dim < 2 or head_dim % 2:
        raise UsageError("head_dim must be even and >= 2 for RoPE (got %d)" % head_dim)
    if a.rope_theta is not None and not a.rope_theta > 0:
        raise UsageError("--rope-theta must be > 0")
    positive("rope-original-max", a.rope_original_max)


def llama_config(a):
    qwen = a.arch == "qwen2"
    c = {
        "architectures": ["Qwen2ForCausalLM" if qwen else "LlamaForCausalLM"],
        "model_type": a.arch,
        "vocab_size": a.vocab,
        "hidden_size": a.hidden,
        "intermediate_size": a.intermediate,
        "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads,
        "num_key_value_heads": a.kv_heads,
        "max_position_embeddings": a.max_positions,
        "hidden_act": "silu",
        "rms_norm_eps": a.norm_eps if a.norm_eps is not None else (1e-6 if qwen else 1e-5),
        "rope_theta": a.rope_theta if a.rope_theta is not None else (1000000.0 if qwen else 10000.0),
        "rope_scaling": None,
        "tie_word_embeddings": bool(a.tied),
        "torch_dtype": DTYPES[a.dtype][1],
        "bos_token_id": 1,
        "eos_token_id": 2,
        "initializer_range": 0.02,
        "use_cache": True,
    }
    if a.head_dim is not None:
        c["head_dim"] = a.head_dim
    if qwen:
        c.update({"use_sliding_window": False, "sliding_window": a.max_positions, "max_window_layers": a.layers})
    else:
        c.update({"attention_bias": bool(a.attention_bias), "attention_dropout": 0.0, "mlp_bias": False,
                  "pretraining_tp": 1})
    if a.rope_scaling == "llama3":
        c["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": a.rope_original_max}
    return c


def gpt2_config(a):
    return {
        "architectures": ["GPT2LMHeadModel"],
        "model_type": "gpt2",
        "vocab_size": a.vocab,
        "n_positions": a.max_positions,
        "n_ctx": a.max_positions,
        "n_embd": a.hidden,
        "n_layer": a.layers,
        "n_head": a.heads,
        "n_inner": None,
        "layer_norm_epsilon": a.norm_eps if a.norm_eps is not None else 1e-5,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
        "torch_dtype": DTYPES[a.dtype][1],
        "bos_token_id": a.vocab - 1,
        "eos_token_id": a.vocab - 1,
        "initializer_range": 0.02,
    }


class Init:
    def __init__(self, seed):
        self.g = torch.Generator().manual_seed(seed)

    def normal(self, shape, std):
        return torch.randn(*shape, generator=self.g, dtype=torch.float32) * std

    def weight(self, shape, fan_in):
        return self.normal(shape, 0.2 * (32.0 / fan_in) ** 0.5)

    def bias(self, n):
        return self.normal((n,), 0.1)

    def norm(self, n):
        return 1.0 + self.normal((n,), 0.1)


def llama_tensors(c, init):
    """transformers' LlamaForCausalLM / Qwen2ForCausalLM state dict, in its order."""
    qwen = c["model_type"] == "qwen2"
    H, V, I = c["hidden_size"], c["vocab_size"], c["intermediate_size"]
    nh, nkv = c["num_attention_heads"], c["num_key_value_heads"]
    hd = c.get("head_dim") or H // nh
    qkv_bias = qwen or c.get("attention_bias", False)
    o_bias = (not qwen) and c.get("attention_bias", False)
    t = {"model.embed_tokens.weight": init.normal((V, H), 0.5 * (32.0 / H) ** 0.5)}
    for i in range(c["num_hidden_layers"]):
        pre = "model.layers.%d." % i
        for name, rows in (("q_proj", nh * hd), ("k_proj", nkv * hd), ("v_proj", nkv * hd)):
            t[pre + "self_attn.%s.weight" % name] = init.weight((rows, H), H)
            if qkv_bias:
                t[pre + "self_attn.%s.bias" % name] = init.bias(rows)
        t[pre + "self_attn.o_proj.weight"] = init.weight((H, nh * hd), nh * hd)
        if o_bias:
            t[pre + "self_attn.o_proj.bias"] = init.bias(H)
        t[pre + "mlp.gate_proj.weight"] = init.weight((I, H), H)
        t[pre + "mlp.up_proj.weight"] = init.weight((I, H), H)
        t[pre + "mlp.down_proj.weight"] = init.weight((H, I), I)
        t[pre + "input_layernorm.weight"] = init.norm(H)
        t[pre + "post_attention_layernorm.weight"] = init.norm(H)
    t["model.norm.weight"] = init.norm(H)
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = init.weight((V, H), H)
    return t


def gpt2_tensors(c, init, prefix, mask_buffers):
    """transformers' GPT2Model state dict (the LM head is tied to wte), in its order."""
    E, V, P = c["n_embd"], c["vocab_size"], c["n_positions"]
    t = {"wte.weight": init.normal((V, E), 0.5 * (32.0 / E) ** 0.5),
         "wpe.weight": init.normal((P, E), 0.3 * (32.0 / E) ** 0.5)}
    for i in range(c["n_layer"]):
        pre = "h.%d." % i
        t[pre + "ln_1.weight"] = init.norm(E)
        t[pre + "ln_1.bias"] = init.bias(E)
        if mask_buffers:
            t[pre + "attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        t[pre + "attn.c_attn.weight"] = init.weight((E, 3 * E), E)
        t[pre + "attn.c_attn.bias"] = init.bias(3 * E)
        t[pre + "attn.c_proj.weight"] = init.weight((E, E), E)
        t[pre + "attn.c_proj.bias"] = init.bias(E)
        t[pre + "ln_2.weight"] = init.norm(E)
        t[pre + "ln_2.bias"] = init.bias(E)
        t[pre + "mlp.c_fc.weight"] = init.weight((E, 4 * E), E)
        t[pre + "mlp.c_fc.bias"] = init.bias(4 * E)
        t[pre + "mlp.c_proj.weight"] = init.weight((4 * E, E), 4 * E)
        t[pre + "mlp.c_proj.bias"] = init.bias(E)
    t["ln_f.weight"] = init.norm(E)
    t["ln_f.bias"] = init.bias(E)
    if prefix:
        t = {"transformer." + k: v for k, v in t.items()}
    return t


MODEL_FILES = ("model.safetensors", "model.safetensors.index.json",
               "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")


def write(a, config, tensors):
    os.makedirs(a.out, exist_ok=True)
    for name in os.listdir(a.out):  # stale files would change what a loader picks up
        if name in MODEL_FILES or (name.startswith("model-") and name.endswith(".safetensors")):
            os.remove(os.path.join(a.out, name))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    meta = {"format": "pt"}
    if not a.sharded:
        hf_reference.save_safetensors(os.path.join(a.out, "model.safetensors"), tensors, meta)
        return ["config.json", "model.safetensors"]
    names = list(tensors)  # state-dict order, split into two non-empty halves
    cut = max(1, len(names) // 2)
    files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    parts = [names[:cut], names[cut:]]
    weight_map = {}
    for fname, part in zip(files, parts):
        hf_reference.save_safetensors(os.path.join(a.out, fname), {n: tensors[n] for n in part}, meta)
        for n in part:
            weight_map[n] = fname
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return ["config.json"] + files + ["model.safetensors.index.json"]


def main(argv=None):
    a = parse_args(argv)
    check(a)
    init = Init(a.seed)
    if a.arch == "gpt2":
        config = gpt2_config(a)
        tensors = gpt2_tensors(config, init, a.gpt2_prefix, a.gpt2_mask_buffers)
    else:
        config = llama_config(a)
        tensors = llama_tensors(config, init)
    dtype = DTYPES[a.dtype][0]
    tensors = {k: v.to(dtype).contiguous() for k, v in tensors.items()}
    files = write(a, config, tensors)
    print(json.dumps({"dir": os.path.abspath(a.out), "arch": a.arch, "dtype": a.dtype, "files": files,
                      "tensors": len(tensors),
                      "parameters": sum(t.numel() for t in tensors.values()), "config": config}))
    return 0


if __name__ == "__main__":
    run_main(main)
