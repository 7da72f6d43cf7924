#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes a float checkpoint with its linear layers' weights as `eval --quantize` stores them, dequantized.

The quantizers are transcribed from their definition (docs/models.md, "Quantized weights"; quantize.h),
independently of the C++ code, in NumPy float32 (each operation separately rounded, as the agent's):
groups of --group consecutive input features per output row, the scale computed in float32 and
rounded to float16, then code = clamp(round half to even(w / scale)) against that rounded scale:
  int8       scale = max|w| / 127, codes -127..127, w' = scale * code;
  int4-sym   scale = (the weight of largest magnitude, the first on a tie) / -8, codes -8..7;
  int4-asym  lo = min(w, 0), hi = max(w, 0), scale = (hi - lo) / 15, z = clamp(rhe(-lo / scale), 0, 15),
             code = clamp(rhe(w / scale) + z, 0, 15), w' = scale * (code - z);
a group whose scale rounds to 0 dequantizes to zeros. Each w' is exactly a float32 (a float16 times a
small integer), so the output checkpoint (F32) holds the very weights the quantized model multiplies by.
Linear layers: a Llama's model.layers.*_proj (qwen2_moe's experts and shared expert among them; not the
routers, `mlp.gate` and `shared_expert_gate`), mixtral's experts' w1/w2/w3 (not `block_sparse_moe.gate`), GPT-2's c_attn/c_proj/c_fc (stored [in, out]: grouped
along the stored rows); the head (lm_head) only with --head: a Llama's tied head is written untied
(lm_head.weight = the embedding's rows dequantized, tie_word_embeddings false: the agent quantizes a
tied head's rows and keeps the embedding as it is), GPT-2's refused; embeddings and norms never. Only single-file F32 checkpoints. NumPy only; run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_quantized_checkpoint import UsageError, load_safetensors, run_main, save_safetensors  # noqa: E402

GPT2_LINEARS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
MIXTRAL_EXPERT_LINEARS = (".w1.weight", ".w2.weight", ".w3.weight")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="float checkpoint directory (config.json, model.safetensors F32)")
    p.add_argument("--out", required=True)
    p.add_argument("--scheme", required=True, choices=["int8", "int4", "int4-sym", "int4-asym"])
    p.add_argument("--group", type=int, default=32)
    p.add_argument("--head", action="store_true", help="the vocabulary head too (--quantize-head)")
    return p.parse_args(argv)


def f16(x):
    """float32 -> float16 (round to nearest even) -> float32, as the agent's stored scale."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def dequantize_group(w, scheme):
    """One group (float32 [n]) -> its dequantized weights (float32)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if scheme == "int8":
            s = f16(np.max(np.abs(w)) / np.float32(127))
            if s == 0:
                return np.zeros_like(w)
            return (s * np.clip(np.rint(w / s), -127, 127)).astype(np.float32)
        if scheme in ("int4", "int4-sym"):
            extreme = w[int(np.argmax(np.abs(w)))]  # argmax: the first on a tie
            s = f16(extreme / np.float32(-8))
            if s == 0:
                return np.zeros_like(w)
            return (s * np.clip(np.rint(w / s), -8, 7)).astype(np.float32)
        lo, hi = min(np.float32(0), w.min()), max(np.float32(0), w.max())
        s = f16((hi - lo) / np.float32(15))
        if s == 0:
            return np.zeros_like(w)
        z = np.clip(np.rint(-lo / s), 0, 15)
        codes = np.clip(np.rint(w / s) + z, 0, 15)
        return (s * (codes - z)).astype(np.float32)


def dequantize(weight, scheme, group):
    """weight float32 [out, in], groups along in."""
    out = np.empty_like(weight)
    for r in range(weight.shape[0]):
        for g0 in range(0, weight.shape[1], group):
            out[r, g0:g0 + group] = dequantize_group(weight[r, g0:g0 + group], scheme)
    return out


def is_linear(name, config, head):
    if config.get("model_type") == "gpt2":
        return name.endswith(GPT2_LINEARS)
    if name.startswith("model.layers.") and name.endswith("_proj.weight"):
        return True
    if name.startswith("model.layers.") and ".block_sparse_moe.experts." in name and name.endswith(MIXTRAL_EXPERT_LINEARS):
        return True
    return head and name == "lm_head.weight"


def check_head(config, head):
    """GPT-2 has no untied head to write the quantized rows to (its head is wte)."""
    if head and config.get("model_type") == "gpt2":
        raise UsageError("--head on GPT-2: its head is wte, which one tensor cannot hold quantized and not")


def untie_head(config, tensors, head):
    """A tied Llama head quantized leaves the embedding as it is: two tensors, so the output is untied."""
    if head and config.get("tie_word_embeddings") and "lm_head.weight" not in tensors:
        tensors["lm_head.weight"] = np.array(tensors["model.embed_tokens.weight"], dtype=np.float32)
        config["tie_word_embeddings"] = False


def main(argv=None):
    a = parse_args(argv)
    with open(os.path.join(a.model, "config.json")) as f:
        config = json.load(f)
    check_head(config, a.head)
    tensors = dict(load_safetensors(os.path.join(a.model, "model.safetensors")))
    untie_head(config, tensors, a.head)
    count = 0
    for name in sorted(tensors):
        if not is_linear(name, config, a.head):
            continue
        t = np.asarray(tensors[name], dtype=np.float32)
        if t.dtype != np.float32 or t.ndim != 2:
            raise UsageError("%s: %s is not a 2-D float32 tensor" % (a.model, name))
        conv1d = config.get("model_type") == "gpt2" and not name.endswith("wte.weight")
        tensors[name] = dequantize(t.T.copy(), a.scheme, a.group).T.copy() if conv1d else dequantize(t, a.scheme, a.group)
        count += 1
    os.makedirs(a.out, exist_ok=True)
    save_safetensors(os.path.join(a.out, "model.safetensors"), {k: np.ascontiguousarray(v) for k, v in tensors.items()})
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    print(json.dumps({"directory": a.out, "quantized": count, "scheme": a.scheme, "group": a.group}))
    return 0


if __name__ == "__main__":
    run_main(main)
