#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Random Llama checkpoints of real models' shapes for scripts/gpu-bench.sh: config.json (the real
config's sizes, rope_scaling and tying) and bfloat16 safetensors shards of at most --max-shard-bytes
with model.safetensors.index.json, as save_pretrained writes them (one file, no index, when it fits).

Fast: the values are one block of N(0, 0.02^2) bfloat16 numbers drawn once and written again and
again from a different offset for each tensor (norm weights 1), so the 8B shape's 16 GB go at the
disk's speed. Speed measurements do not depend on the values; the perplexity of such a model is
near the vocabulary's size. An existing directory with the same config.json is kept (reused).

  gpu_bench_model.py --shape llama-1b|llama-8b|tiny --out DIR [--max-shard-bytes N]
Prints the directory's parameter count and bytes.
"""
import argparse
import json
import os
import struct

import torch

SHAPES = {
    # meta-llama/Llama-3.2-1B's config.json sizes.
    "llama-1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=64, vocab_size=128256, tie_word_embeddings=True, max_position_embeddings=131072,
                     rope_scaling={"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}),
    # meta-llama/Llama-3.1-8B's.
    "llama-8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                     head_dim=128, vocab_size=128256, tie_word_embeddings=False, max_position_embeddings=131072,
                     rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}),
    # The CPU self-test's: the same structure (GQA, llama3 rope, untied), seconds on a CPU.
    "tiny": dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 head_dim=16, vocab_size=4096, tie_word_embeddings=False, max_position_embeddings=4096,
                 rope_scaling={"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                               "original_max_position_embeddings": 256, "rope_type": "llama3"}),
}


def config_of(shape):
    c = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", rms_norm_eps=1e-5, rope_theta=500000.0,
             attention_bias=False, mlp_bias=False, bos_token_id=128000, eos_token_id=128001, torch_dtype="bfloat16")
    c.update(SHAPES[shape])
    return c


def tensors_of(c):
    """(name, shape) in transformers' state-dict order."""
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd, nh, kv = c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
    out = [("model.embed_tokens.weight", (V, H))]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj.weight", (nh * hd, H)), (p + "self_attn.k_proj.weight", (kv * hd, H)),
                (p + "self_attn.v_proj.weight", (kv * hd, H)), (p + "self_attn.o_proj.weight", (H, nh * hd)),
                (p + "mlp.gate_proj.weight", (I, H)), (p + "mlp.up_proj.weight", (I, H)), (p + "mlp.down_proj.weight", (H, I)),
                (p + "input_layernorm.weight", (H,)), (p + "post_attention_layernorm.weight", (H,))]
    out.append(("model.norm.weight", (H,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", (V, H)))
    return out


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def shards_of(tensors, max_bytes):
    shards, cur, size = [], [], 0
    for name, shape in tensors:
        b = 2 * numel(shape)
        if cur and size + b > max_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append((name, shape))
        size += b
    shards.append(cur)
    return shards


def write_shard(path, tensors, block):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in tensors:
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + 2 * numel(shape)]}
        offset += 2 * numel(shape)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    raw = block.view(torch.int16).numpy().tobytes()
    ones = torch.ones(1 << 16, dtype=torch.bfloat16).view(torch.int16).numpy().tobytes()
    with open(path + ".part", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i, (name, shape) in enumerate(tensors):
            left = 2 * numel(shape)
            src = ones if name.endswith("norm.weight") else raw
            start = (i * 7919 * 64) % (len(src) // 2) if src is raw else 0
            while left > 0:
                piece = src[start:start + left]
                f.write(piece)
                left -= len(piece)
                start = 0
    os.replace(path + ".part", path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True, choices=sorted(SHAPES))
    p.add_argument("--out", required=True)
    p.add_argument("--max-shard-bytes", type=int, default=5 * 10**9, help="save_pretrained's default 5GB")
    a = p.parse_args()
    c = config_of(a.shape)
    tensors = tensors_of(c)
    params = sum(numel(s) for _, s in tensors)
    cfg_path = os.path.join(a.out, "config.json")
    if os.path.exists(cfg_path) and json.load(open(cfg_path)) == c and os.path.exists(os.path.join(a.out, "done")):
        print(f"{a.out}: kept, {params} parameters, {2 * params} bytes")
        return
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):
        os.remove(os.path.join(a.out, f))
    g = torch.Generator().manual_seed(0)
    biggest = max(numel(s) for _, s in tensors)
    block = (torch.randn(min(1 << 24, biggest), generator=g) * 0.02).to(torch.bfloat16)  # at most 32 MiB of values
    shards = shards_of(tensors, a.max_shard_bytes)
    names = ["model.safetensors"] if len(shards) == 1 else [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    for name, shard in zip(names, shards):
        write_shard(os.path.join(a.out, name), shard, block)
    if len(shards) > 1:
        index = {"metadata": {"total_size": 2 * params}, "weight_map": {t: n for n, s in zip(names, shards) for t, _ in s}}
        json.dump(index, open(os.path.join(a.out, "model.safetensors.index.json"), "w"), indent=2)
    json.dump(c, open(cfg_path, "w"), indent=2)
    open(os.path.join(a.out, "done"), "w").close()
    print(f"{a.out}: written, {params} parameters, {2 * params} bytes in {len(shards)} file(s)")


if __name__ == "__main__":
    main()
