#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The PyTorch eager baseline of scripts/gpu-check.sh's speed row: the same Llama checkpoint, the
same windows (context x batch, stride = context, token file order), bfloat16 weights, float32
log-softmax, on the same GPU, as a plain eager loop (transformers' LlamaForCausalLM with SDPA
attention, written out). Prints one line: both tokens/s and MFU against a measured bf16 GEMM peak.

  gpu_eager_bench.py --model DIR --context T --batch B --tokens N --agent-json RESULT.json
"""
import argparse
import json
import os
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, required=True, help="tokens of the .u32 file next to the agent's result to use")
    p.add_argument("--agent-json", required=True)
    a = p.parse_args()
    dev = torch.device("cuda")
    c, t = hf_reference.load_hf_dir(a.model)
    w = {k: v.to(dev, torch.bfloat16) for k, v in t.items()}
    H, nh = c["hidden_size"], c["num_attention_heads"]
    kv, hd, L, eps = c.get("num_key_value_heads", nh), H // nh, c["num_hidden_layers"], c.get("rms_norm_eps", 1e-6)
    inv = 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, hd, 2, device=dev).float() / hd))
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    # Parameters in matrix products: all but the embedding lookup (a tied head is the embedding).
    params = sum(v.numel() for v in w.values()) - (w["model.embed_tokens.weight"].numel() if "lm_head.weight" in w else 0)

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
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H)
            x = x + F.linear(o, g("self_attn.o_proj.weight"))
            h = rms(x, g("post_attention_layernorm.weight"), eps)
            x = x + F.linear(F.silu(F.linear(h, g("mlp.gate_proj.weight"))) * F.linear(h, g("mlp.up_proj.weight")), g("mlp.down_proj.weight"))
        return F.linear(rms(x, w["model.norm.weight"], eps), head)

    agent = json.load(open(a.agent_json))
    tokens_path = agent["data"]["path"]
    ids_all = torch.from_file(tokens_path, dtype=torch.int32, size=a.tokens).long()
    T, B = a.context, a.batch
    windows = ids_all.numel() // T
    # GEMM peak as measured here (bf16, 8192^3): the MFU denominator for both.
    m = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    for _ in range(3):
        m @ m
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        m @ m
    torch.cuda.synchronize()
    peak = 20 * 2 * 8192 ** 3 / (time.perf_counter() - t0)
    del m

    scored, nll = 0, 0.0
    with torch.inference_mode():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for b0 in range(0, windows, B):
            ids = ids_all[b0 * T:min(windows, b0 + B) * T].view(-1, T).pin_memory().to(dev, non_blocking=True)
            logp = torch.log_softmax(forward(ids)[:, :-1].float(), -1).gather(-1, ids[:, 1:, None])
            nll -= logp.double().sum().item()
            scored += logp.numel()
        secs = time.perf_counter() - t0
    eager = scored / secs
    ours = agent["tokens_per_second"]
    flops = 2 * params + 2 * L * T * H  # per token: the matrix products, plus causal attention
    print(f"agent {ours:,.0f} tok/s (MFU {flops * ours / peak:.1%}), eager PyTorch {eager:,.0f} tok/s (MFU {flops * eager / peak:.1%}), "
          f"ratio {ours / eager:.2f}; {params / 1e6:.0f}M params, bf16 GEMM peak measured {peak / 1e12:.0f} TFLOP/s; "
          f"ppl agent {agent['ppl']:.4f} eager {float(torch.exp(torch.tensor(nll / scored))):.4f}")


if __name__ == "__main__":
    main()
