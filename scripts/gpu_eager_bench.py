#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch eager baseline of scripts/gpu-check.sh's speed row and scripts/gpu-bench.sh: the same
Llama checkpoint, the same windows (context x batch, stride = context, token file order), bfloat16
weights, the full logits' log-softmax in float32 as users write it, on the same GPU, as a plain
eager loop (transformers' LlamaForCausalLM with SDPA attention, grouped K/V heads repeated, llama3
rope scaling, written out). Prints one line: both tokens/s and MFU against a measured bf16 GEMM
peak; --json also writes the eager figures (its batch: --batch, halved while it runs out of memory;
peak memory; load seconds). --device cpu runs the same loop on the CPU (gpu-bench.sh's self-test).

  gpu_eager_bench.py --model DIR --context T --batch B --tokens N --agent-json RESULT.json [--json OUT]
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "agent", "reference"))
import hf_reference  # noqa: E402  (its safetensors reader; its modules build tables on the CPU)


def rms(x, w, eps):
    h = x.float()
    return w * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def causal_sdpa(q, k, v):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # torch < 2.0 (Debian's, gpu-bench.sh's CPU self-test): the same attention written out.
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s.float(), -1).to(q.dtype) @ v


def load_weights(directory, dev):
    """Every tensor of the safetensors files, each read from a memory map straight to @p dev in
    bfloat16 (a 16 GB checkpoint never sits whole in host memory)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    kinds = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32}
    out = {}
    for name in files:
        path = os.path.join(directory, name)
        raw = torch.from_file(path, shared=False, size=os.path.getsize(path), dtype=torch.uint8)
        n = struct.unpack("<Q", bytes(raw[:8].tolist()))[0]
        header = json.loads(bytes(raw[8:8 + n].tolist()))
        for key, v in header.items():
            if key == "__metadata__":
                continue
            b, e = v["data_offsets"]
            t = raw[8 + n + b:8 + n + e].view(kinds[v["dtype"]]).view(v["shape"])
            out[key] = t.to(dev, torch.bfloat16)
    return out


def gemm_peak(dev):
    """bf16 GEMM rate measured here (8192^3 on a GPU, 512^3 on the CPU): the MFU denominator for both."""
    size, reps = (8192, 20) if dev.type == "cuda" else (512, 3)
    m = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        m @ m
    sync(dev)
    t0 = time.perf_counter()
    for _ in range(reps):
        m @ m
    sync(dev)
    return reps * 2 * size ** 3 / (time.perf_counter() - t0)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def make_forward(c, w, dev):
    H, nh = c["hidden_size"], c["num_attention_heads"]
    kv, L, eps = c.get("num_key_value_heads", nh), c["num_hidden_layers"], c.get("rms_norm_eps", 1e-6)
    hd = c.get("head_dim") or H // nh
    inv = hf_reference.llama_inv_freq(c).float().to(dev)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])

    def forward(ids):
        B, T = ids.shape
        x = F.embedding(ids, w["model.embed_tokens.weight"])
        f = torch.outer(torch.arange(T, device=dev).float(), inv)
        emb = torch.cat((f, f), -1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for i in range(L):
            g = lambda n: w[f"model.layers.{i}.{n}"]  # noqa: E731
            h = rms(x, g("input_layernorm.weight"), eps)
            q = F.linear(h, g("self_attn.q_proj.weight")).view(B, T, nh, hd).transpose(1, 2)
            k = F.linear(h, g("self_attn.k_proj.weight")).view(B, T, kv, hd).transpose(1, 2)
            v = F.linear(h, g("self_attn.v_proj.weight")).view(B, T, kv, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            if kv != nh:
                k, v = k.repeat_interleave(nh // kv, 1), v.repeat_interleave(nh // kv, 1)
            o = causal_sdpa(q, k, v).transpose(1, 2).reshape(B, T, nh * hd)
            x = x + F.linear(o, g("self_attn.o_proj.weight"))
            h = rms(x, g("post_attention_layernorm.weight"), eps)
            x = x + F.linear(F.silu(F.linear(h, g("mlp.gate_proj.weight"))) * F.linear(h, g("mlp.up_proj.weight")), g("mlp.down_proj.weight"))
        return F.linear(rms(x, w["model.norm.weight"], eps), head)

    return forward


def run_eager(forward, ids_all, T, B, dev):
    """Every window at batch B, as users write it: the full logits, log-softmax in float32, gather."""
    windows = ids_all.numel() // T
    scored, nll = 0, 0.0
    with torch.inference_mode():
        sync(dev)
        t0 = time.perf_counter()
        for b0 in range(0, windows, B):
            ids = ids_all[b0 * T:min(windows, b0 + B) * T].view(-1, T)
            ids = (ids.pin_memory() if dev.type == "cuda" else ids).to(dev, non_blocking=True)
            logp = torch.log_softmax(forward(ids)[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])
            nll -= logp.double().sum().item()
            scored += logp.numel()
        secs = time.perf_counter() - t0
    return scored, nll, secs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8, help="the eager loop's batch; halved while it runs out of GPU memory")
    p.add_argument("--tokens", type=int, required=True, help="tokens of the .u32 file named in the agent's result to use")
    p.add_argument("--agent-json", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--json", help="also write the eager figures here (scripts/gpu-bench.sh)")
    a = p.parse_args()
    dev = torch.device(a.device)
    c = json.load(open(os.path.join(a.model, "config.json")))
    t_load = time.perf_counter()
    w = load_weights(a.model, dev)
    sync(dev)
    load_seconds = time.perf_counter() - t_load
    H, nh, L = c["hidden_size"], c["num_attention_heads"], c["num_hidden_layers"]
    hd = c.get("head_dim") or H // nh
    # Parameters in matrix products: all but the embedding lookup (a tied head is the embedding).
    params = sum(v.numel() for v in w.values()) - (w["model.embed_tokens.weight"].numel() if "lm_head.weight" in w else 0)
    forward = make_forward(c, w, dev)
    agent = json.load(open(a.agent_json))
    ids_all = torch.from_file(agent["data"]["path"], dtype=torch.int32, size=a.tokens).long()
    T, B = a.context, a.batch
    peak = gemm_peak(dev)
    run_eager(forward, ids_all[:T], T, 1, dev)  # warm-up: kernel modules, cuBLAS handles
    while True:
        try:
            if dev.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            scored, nll, secs = run_eager(forward, ids_all, T, B, dev)
            break
        except torch.cuda.OutOfMemoryError:
            if B == 1:
                raise
            B //= 2
            torch.cuda.empty_cache()
    eager = scored / secs
    ours = agent["tokens_per_second"]
    # Per token: 2 x the parameters in matrix products, plus causal attention: QK^T and AV, each
    # 2 x T x (heads x head_dim) per layer for a full row, half of that under the causal mask.
    flops = 2 * params + 2 * L * T * nh * hd
    ppl_eager = float(torch.exp(torch.tensor(nll / scored)))
    figures = dict(eager_tokens_per_second=eager, eager_mfu=flops * eager / peak, eager_batch=B, eager_ppl=ppl_eager,
                   eager_peak_bytes=torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0, eager_load_seconds=load_seconds,
                   agent_mfu=flops * ours / peak, ratio=ours / eager, params=params, flops_per_token=flops, gemm_peak=peak)
    if a.json:
        json.dump(figures, open(a.json, "w"), indent=2)
    print(f"agent {ours:,.0f} tok/s (MFU {flops * ours / peak:.1%}), eager PyTorch {eager:,.0f} tok/s (MFU {flops * eager / peak:.1%}), "
          f"ratio {ours / eager:.2f}; {params / 1e6:.0f}M params, bf16 GEMM peak measured {peak / 1e12:.0f} TFLOP/s; "
          f"ppl agent {agent['ppl']:.4f} eager {ppl_eager:.4f}")


if __name__ == "__main__":
    main()
