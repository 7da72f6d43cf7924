#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes a tiny, randomly initialised Hugging Face checkpoint directory (config.json + safetensors).

Architectures: llama (LlamaForCausalLM), qwen2 (Qwen2ForCausalLM: q/k/v biases, no o bias) and gpt2
(GPT2LMHeadModel: Conv1D weights stored [in, out], head tied to wte); and the families of issue 42,
whose configs and tensors family_checkpoints.py writes: qwen3, gemma2, gemma3 (gemma3_text), phi3,
mistral, mixtral, qwen2_moe. Tensors use transformers'
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
import family_checkpoints  # noqa: E402
import hf_reference  # noqa: E402
from ref_common import UsageError, run_main  # noqa: E402

DTYPES = {"F32": (torch.float32, "float32"), "F16": (torch.float16, "float16"),
          "BF16": (torch.bfloat16, "bfloat16")}
FAMILIES = tuple(family_checkpoints.FAMILY)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--arch", required=True, choices=["llama", "qwen2", "gpt2"] + list(FAMILIES))
    p.add_argument("--out", required=True, help="output directory (created; old model files replaced)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="F32", choices=sorted(DTYPES), help="stored tensor dtype")
    p.add_argument("--sharded", action="store_true", help="two shards + model.safetensors.index.json")
    p.add_argument("--tied", action="store_true",
                   help="tie_word_embeddings (no lm_head.weight); GPT-2 is always tied")
    p.add_argument("--gqa", action="store_true", help="num_key_value_heads = heads / 2 (not gpt2)")
    p.add_argument("--kv-heads", type=int, default=None,
                   help="explicit num_key_value_heads (not gpt2; family defaults: qwen3, gemma2, mistral, mixtral 2, gemma3 1)")
    p.add_argument("--rope-scaling", choices=["none", "llama3", "linear", "longrope", "su"], default=None,
                   help="llama3 (llama, qwen2), linear (gemma3 global layers; its default), longrope / su (phi3)")
    p.add_argument("--rope-original-max", type=int, default=16,
                   help="original_max_position_embeddings of llama3 / phi3 longrope scaling")
    p.add_argument("--rope-factor", type=float, default=8.0, help="gemma3 linear rope_scaling factor")
    p.add_argument("--attention-bias", action="store_true", help="llama, qwen3, gemma2, gemma3: biases on q, k, v and o")
    p.add_argument("--rope-theta", type=float, default=None,
                   help="rope_theta (default 10000; qwen2, qwen3, gemma3, mixtral, qwen2_moe 1000000)")
    p.add_argument("--head-dim", type=int, default=None,
                   help="write an explicit head_dim (may differ from hidden/heads; qwen3 and gemma always write it, "
                        "default 16)")
    p.add_argument("--vocab", type=int, default=97)
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--intermediate", type=int, default=None,
                   help="MLP width (default 48; mixtral's experts 24; GPT-2 uses 4*hidden)")
    p.add_argument("--layers", type=int, default=None, help="default 2; gemma2 3, gemma3 4")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--max-positions", type=int, default=64,
                   help="max_position_embeddings / GPT-2 n_positions (size of wpe)")
    p.add_argument("--norm-eps", type=float, default=None,
                   help="rms_norm_eps / layer_norm_epsilon (default 1e-5; qwen2, qwen3, gemma, qwen2_moe 1e-6)")
    p.add_argument("--gpt2-prefix", action="store_true",
                   help="gpt2: store names as transformer.* (newer save_pretrained layout)")
    p.add_argument("--gpt2-mask-buffers", action="store_true",
                   help="gpt2: also store the h.N.attn.bias causal-mask buffers [1,1,P,P] of old checkpoints")
    family_args(p)
    return p.parse_args(argv)


def family_args(p):
    g = p.add_argument_group("issue-42 families (qwen3, gemma2, gemma3, phi3, mistral, mixtral, qwen2_moe)")
    g.add_argument("--sliding-window", default=None,
                   help="sliding_window W or none (mistral 6, gemma 4, phi3 max-positions - 1 as Phi-3-mini-4k, "
                        "mixtral none); a query at t sees keys t-W+1 .. t")
    g.add_argument("--attn-softcap", default=None, help="gemma attn_logit_softcapping or none (gemma2 1.5, gemma3 none)")
    g.add_argument("--final-softcap", default=None, help="gemma final_logit_softcapping or none (gemma2 3.0, gemma3 none)")
    g.add_argument("--query-pre-attn-scalar", type=float, default=None, help="gemma (default 24: not head_dim)")
    g.add_argument("--sliding-window-pattern", type=int, default=None,
                   help="gemma3: every Nth layer is global (default 3)")
    g.add_argument("--rope-local-theta", type=float, default=None, help="gemma3 rope_local_base_freq (default 10000)")
    g.add_argument("--partial-rotary", type=float, default=None, help="phi3 partial_rotary_factor (as Phi-4-mini)")
    g.add_argument("--experts", type=int, default=None, help="mixtral num_local_experts / qwen2_moe num_experts (4)")
    g.add_argument("--top-k", type=int, default=None, help="num_experts_per_tok (2)")
    g.add_argument("--moe-intermediate", type=int, default=None, help="qwen2_moe moe_intermediate_size (24)")
    g.add_argument("--shared-intermediate", type=int, default=None,
                   help="qwen2_moe shared_expert_intermediate_size (40)")
    g.add_argument("--norm-topk-prob", action="store_true", help="qwen2_moe: renormalise the top-k weights")
    g.add_argument("--decoder-sparse-step", type=int, default=1, help="qwen2_moe: every Nth layer is sparse")
    g.add_argument("--mlp-only-layers", default="", help="qwen2_moe: comma-separated dense layers")
    g.add_argument("--no-router-tie", action="store_true",
                   help="mixtral / qwen2_moe: no exact tie (by default layer 0's experts 1 and 2 share a router row)")


def positive(name, v):
    if v is None or v < 1:
        raise UsageError("--%s must be >= 1 (got %s)" % (name, v))


def check(a):
    a.layers = a.layers if a.layers is not None else family_checkpoints.FAMILY.get(a.arch, {}).get("layers", 2)
    if a.arch in FAMILIES:
        return check_family(a)
    if a.intermediate is None:
        a.intermediate = 48
    if a.rope_scaling is None:
        a.rope_scaling = "none"
    family_only = [f for f, on in (("--sliding-window", a.sliding_window is not None), ("--attn-softcap", a.attn_softcap),
                                   ("--final-softcap", a.final_softcap), ("--experts", a.experts),
                                   ("--query-pre-attn-scalar", a.query_pre_attn_scalar is not None),
                                   ("--partial-rotary", a.partial_rotary is not None), ("--top-k", a.top_k),
                                   ("--norm-topk-prob", a.norm_topk_prob), ("--mlp-only-layers", a.mlp_only_layers))
                   if on]
    if family_only or a.rope_scaling not in ("none", "llama3"):
        raise UsageError("%s do(es) not apply to --arch %s" % (", ".join(family_only) or "--rope-scaling " + a.rope_scaling,
                                                             a.arch))
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


def optional_number(name, text, kind=float):
    """A flag that takes a number or "none" (a config null)."""
    if text is None or str(text).lower() in ("none", "null"):
        return None
    try:
        v = kind(text)
    except ValueError:
        raise UsageError("--%s takes a number or none (got %r)" % (name, text))
    if v <= 0:
        raise UsageError("--%s must be > 0 (got %s)" % (name, text))
    return v


def family_defaults(a):
    d = family_checkpoints.FAMILY[a.arch]
    gemma = a.arch in ("gemma2", "gemma3")
    if a.intermediate is None:
        a.intermediate = d.get("intermediate", 48)
    if a.kv_heads is None and not a.gqa:
        a.kv_heads = d["kv_heads"] if d.get("kv_heads") else a.heads
    if a.gqa:
        a.kv_heads = a.heads // 2
    a.head_dim_given = a.head_dim is not None
    if a.head_dim is None:
        a.head_dim = d.get("head_dim") or a.hidden // a.heads
    a.rope_theta = a.rope_theta if a.rope_theta is not None else d["theta"]
    a.norm_eps = a.norm_eps if a.norm_eps is not None else d["eps"]
    a.rope_scaling = a.rope_scaling or d.get("rope_scaling", "none")
    window = d.get("window", a.max_positions - 1 if a.arch == "phi3" else None)
    a.sliding_window = optional_number("sliding-window", a.sliding_window, int) if a.sliding_window is not None else window
    a.attn_softcap = optional_number("attn-softcap", a.attn_softcap) if a.attn_softcap is not None else d.get("attn_cap")
    a.final_softcap = optional_number("final-softcap", a.final_softcap) if a.final_softcap is not None else d.get("final_cap")
    a.query_pre_attn_scalar = a.query_pre_attn_scalar or d.get("qpas")
    a.sliding_window_pattern = a.sliding_window_pattern or d.get("pattern")
    a.rope_local_theta = a.rope_local_theta or d.get("local_theta")
    a.experts = a.experts or d.get("experts")
    a.top_k = a.top_k or d.get("top_k")
    a.moe_intermediate = a.moe_intermediate or d.get("moe_intermediate")
    a.shared_intermediate = a.shared_intermediate or d.get("shared_intermediate")
    a.torch_dtype = DTYPES[a.dtype][1]
    return gemma


def check_family(a):
    """Resolves the family's defaults and refuses flags that do not apply to it."""
    if a.gqa and a.kv_heads is not None:
        raise UsageError("give --gqa or --kv-heads, not both")
    gemma = family_defaults(a)
    moe = a.arch in ("mixtral", "qwen2_moe")
    wrong = [f for f, on in (
        ("--gpt2-prefix/--gpt2-mask-buffers", a.gpt2_prefix or a.gpt2_mask_buffers),
        ("--tied", a.tied and gemma),
        ("--attention-bias", a.attention_bias and a.arch not in ("qwen3", "gemma2", "gemma3")),
        ("--head-dim", a.head_dim_given and a.arch == "phi3"),
        ("--attn-softcap/--final-softcap/--query-pre-attn-scalar",
         not gemma and (a.attn_softcap or a.final_softcap or a.query_pre_attn_scalar)),
        ("--sliding-window", a.sliding_window is not None and a.arch in ("qwen3", "qwen2_moe")),
        ("--sliding-window-pattern/--rope-local-theta", a.arch != "gemma3" and (a.sliding_window_pattern or a.rope_local_theta)),
        ("--partial-rotary", a.partial_rotary is not None and a.arch != "phi3"),
        ("--experts/--top-k/--no-router-tie", not moe and (a.experts or a.top_k or a.no_router_tie)),
        ("--moe-intermediate/--shared-intermediate/--norm-topk-prob/--mlp-only-layers/--decoder-sparse-step",
         a.arch != "qwen2_moe" and (a.moe_intermediate or a.shared_intermediate or a.norm_topk_prob
                                    or a.mlp_only_layers or a.decoder_sparse_step != 1)),
        ("--rope-scaling %s" % a.rope_scaling, a.rope_scaling not in
         {"gemma3": ("none", "linear"), "phi3": ("none", "longrope", "su")}.get(a.arch, ("none",))),
    ) if on]
    if wrong:
        raise UsageError("%s do(es) not apply to --arch %s" % (", ".join(wrong), a.arch))
    for name in ("vocab", "hidden", "intermediate", "layers", "heads", "max_positions", "kv_heads", "rope_original_max"):
        positive(name.replace("_", "-"), getattr(a, name))
    if a.heads % a.kv_heads:
        raise UsageError("--heads %d is not a multiple of num_key_value_heads %d" % (a.heads, a.kv_heads))
    if a.arch == "phi3" and a.hidden % a.heads:
        raise UsageError("--hidden %d is not a multiple of --heads %d" % (a.hidden, a.heads))
    rot = int(a.head_dim * (a.partial_rotary or 1.0))
    if rot < 2 or rot % 2:
        raise UsageError("the rotary width must be even and >= 2 (head_dim %d, partial rotary %s)"
                         % (a.head_dim, a.partial_rotary))
    if moe:
        positive("experts", a.experts)
        if not 1 <= a.top_k <= a.experts:
            raise UsageError("--top-k must be 1 .. --experts (got %d of %d)" % (a.top_k, a.experts))
    try:
        a.mlp_only_layers = [int(x) for x in a.mlp_only_layers.split(",") if x.strip()]
    except ValueError:
        raise UsageError("--mlp-only-layers takes comma-separated layer numbers (got %r)" % a.mlp_only_layers)
    positive("decoder-sparse-step", a.decoder_sparse_step)


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

    def wide_norm(self, n, arch):
        """Norm weights far from 1: multipliers 1.5 +- 0.5; Gemma stores w of (1 + w)."""
        w = 1.5 + self.normal((n,), 0.5)
        return w - 1.0 if arch in ("gemma2", "gemma3") else w


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
    if a.arch in FAMILIES:
        config = family_checkpoints.family_config(a, a.arch)
        tensors = family_checkpoints.family_tensors(config, init, a.arch, not a.no_router_tie)
    elif a.arch == "gpt2":
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
