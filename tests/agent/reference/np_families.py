# SPDX-License-Identifier: MIT
"""A second, independent float64 transcription of the issue-42 families in NumPy, for
check_families.py: loops per head, per query and per token where families_reference.py uses
batched tensors, the window as an explicit key range, routing as a Python sort on
(-probability, expert). Shares no code with families_reference.py. Run with /usr/bin/python3.
"""
import math

import numpy as np


def bf16_round(x):
    """float32 -> nearest bfloat16 (ties to even), as a float32 value."""
    u = np.array([x], dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return float(u.view(np.float32)[0])


def stored_scale(H, dtype):
    """sqrt(H) as the embedding's stored dtype holds it."""
    v = math.sqrt(H)
    return {"F32": float(np.float32(v)), "F16": float(np.float16(v)), "BF16": bf16_round(v)}[dtype]


def inv_freq_f32(base, dim, divide_by=None, ext=None):
    """transformers' float32 inverse frequencies: 1 / (ext * base ** (2j / dim)) [/ factor]."""
    expo = np.arange(0, dim, 2).astype(np.float32) / np.float32(dim)
    power = np.power(np.float32(base), expo, dtype=np.float32)
    if ext is not None:
        power = np.asarray(ext, dtype=np.float32) * power
    inv = np.float32(1.0) / power
    if divide_by is not None:
        inv = inv / np.float32(divide_by)
    return inv.astype(np.float32)


def rope_tables(cfg, T, local):
    """(cos, sin, scale) for the half-width rotation of pairs (j, j + rot/2), float64 [T, rot/2]."""
    fam = cfg["model_type"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    rot = int(hd * cfg.get("partial_rotary_factor", 1.0))
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    scale = 1.0
    if fam == "gemma3_text" and local:
        inv = inv_freq_f32(cfg["rope_local_base_freq"], rot)
    elif kind == "linear":
        inv = inv_freq_f32(cfg["rope_theta"], rot, divide_by=rs["factor"])
    elif kind in ("longrope", "su"):
        orig = cfg["original_max_position_embeddings"]
        ext = rs["long_factor"] if T > orig else rs["short_factor"]
        inv = inv_freq_f32(cfg["rope_theta"], rot, ext=ext)
        f = cfg["max_position_embeddings"] / orig
        scale = math.sqrt(1 + math.log(f) / math.log(orig)) if f > 1 else 1.0
    else:
        assert kind is None, kind
        inv = inv_freq_f32(cfg["rope_theta"], rot)
    ang = (np.arange(T, dtype=np.float32)[:, None] * inv[None, :]).astype(np.float64)
    return np.cos(ang) * scale, np.sin(ang) * scale, rot


def rotate_pairs(x, cos, sin, rot):
    """x [T, hd]; rotates (x[j], x[j + rot/2]) by the angle of pair j; features past rot unchanged."""
    half = rot // 2
    y = x.copy()
    a, b = x[:, :half], x[:, half:rot]
    y[:, :half] = a * cos - b * sin
    y[:, half:rot] = b * cos + a * sin
    return y


def rms(x, w, eps, plus_one):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * (1.0 + w) if plus_one else y * w


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


class Model:
    def __init__(self, cfg, W, dtypes):
        self.c, self.W = cfg, W
        self.fam = fam = cfg["model_type"]
        self.gemma = fam in ("gemma2", "gemma3_text")
        self.H = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads") or self.nh
        self.hd = cfg.get("head_dim") or self.H // self.nh
        self.eps = cfg["rms_norm_eps"]
        self.embed_dtype = dtypes["model.embed_tokens.weight"]

    def lin(self, x, name):
        y = x @ self.W[name + ".weight"].T
        b = self.W.get(name + ".bias")
        return y if b is None else y + b

    def norm(self, x, name):
        return rms(x, self.W[name + ".weight"], self.eps, self.gemma)

    def sliding(self, i):
        c = self.c
        if self.fam in ("qwen3", "qwen2_moe"):
            return False
        if self.fam == "gemma2":
            return i % 2 == 0
        if self.fam == "gemma3_text":
            return (i + 1) % c.get("sliding_window_pattern", 6) != 0
        return c.get("sliding_window") is not None

    def attention(self, p, h, i):
        """One sequence h [T, H]."""
        c, T, hd = self.c, h.shape[0], self.hd
        nq, nk = self.nh * hd, self.nkv * hd
        if self.fam == "phi3":
            qkv = self.lin(h, p + "self_attn.qkv_proj")
            q, k, v = qkv[:, :nq], qkv[:, nq:nq + nk], qkv[:, nq + nk:]
        else:
            q, k, v = (self.lin(h, p + "self_attn." + n) for n in ("q_proj", "k_proj", "v_proj"))
        local = self.sliding(i)
        cos, sin, rot = rope_tables(c, T, local)
        W = c.get("sliding_window") if local else None
        scale = c["query_pre_attn_scalar"] ** -0.5 if self.gemma else 1.0 / math.sqrt(hd)
        cap = c.get("attn_logit_softcapping") if self.gemma else None
        out = np.zeros((T, nq))
        for head in range(self.nh):
            g = head // (self.nh // self.nkv)
            qh, kh, vh = q[:, head * hd:(head + 1) * hd], k[:, g * hd:(g + 1) * hd], v[:, g * hd:(g + 1) * hd]
            if self.fam in ("qwen3", "gemma3_text"):
                qh = rms(qh, self.W[p + "self_attn.q_norm.weight"], self.eps, self.gemma)
                kh = rms(kh, self.W[p + "self_attn.k_norm.weight"], self.eps, self.gemma)
            qh, kh = rotate_pairs(qh, cos, sin, rot), rotate_pairs(kh, cos, sin, rot)
            for t in range(T):
                lo = 0 if W is None else max(0, t - W + 1)
                s = kh[lo:t + 1] @ qh[t] * scale
                if cap is not None:
                    s = cap * np.tanh(s / cap)
                e = np.exp(s - s.max())
                out[t, head * hd:(head + 1) * hd] = (e / e.sum()) @ vh[lo:t + 1]
        return self.lin(out, p + "self_attn.o_proj")

    def glu(self, h, gate, up, down):
        act = gelu_tanh if self.gemma else silu
        return self.lin(act(self.lin(h, gate)) * self.lin(h, up), down)

    def moe_token(self, x, router, k, renorm, expert):
        z = np.array([np.dot(row, x) for row in router])  # one dot per expert: equal rows, equal logits
        pr = np.exp(z - z.max())
        pr = pr / pr.sum()
        pick = sorted(range(len(pr)), key=lambda e: (-pr[e], e))[:k]
        wts = np.array([pr[e] for e in pick])
        if renorm:
            wts = wts / wts.sum()
        return sum(wt * expert(e, x[None])[0] for wt, e in zip(wts, pick))

    def mlp(self, p, h, i):
        c = self.c
        if self.fam == "phi3":
            gu = self.lin(h, p + "mlp.gate_up_proj")
            I = gu.shape[1] // 2
            return self.lin(silu(gu[:, :I]) * gu[:, I:], p + "mlp.down_proj")
        if self.fam == "mixtral":
            q = p + "block_sparse_moe."
            f = lambda e, x: self.glu(x, q + "experts.%d.w1" % e, q + "experts.%d.w3" % e, q + "experts.%d.w2" % e)
            return np.stack([self.moe_token(x, self.W[q + "gate.weight"], c["num_experts_per_tok"], True, f) for x in h])
        if self.fam == "qwen2_moe" and i not in (c.get("mlp_only_layers") or []) and (i + 1) % c["decoder_sparse_step"] == 0:
            q = p + "mlp."
            f = lambda e, x: self.glu(x, *(q + "experts.%d.%s" % (e, n) for n in ("gate_proj", "up_proj", "down_proj")))
            routed = np.stack([self.moe_token(x, self.W[q + "gate.weight"], c["num_experts_per_tok"], c["norm_topk_prob"], f)
                               for x in h])
            shared = self.glu(h, q + "shared_expert.gate_proj", q + "shared_expert.up_proj", q + "shared_expert.down_proj")
            g = 1.0 / (1.0 + np.exp(-(h @ self.W[q + "shared_expert_gate.weight"].T)))
            return routed + g * shared
        return self.glu(h, p + "mlp.gate_proj", p + "mlp.up_proj", p + "mlp.down_proj")

    def sequence(self, ids):
        c = self.c
        x = self.W["model.embed_tokens.weight"][ids]
        if self.gemma:
            x = x * stored_scale(self.H, self.embed_dtype)
        for i in range(c["num_hidden_layers"]):
            p = "model.layers.%d." % i
            a = self.attention(p, self.norm(x, p + "input_layernorm"), i)
            x = x + (self.norm(a, p + "post_attention_layernorm") if self.gemma else a)
            if self.gemma:
                x = x + self.norm(self.mlp(p, self.norm(x, p + "pre_feedforward_layernorm"), i), p + "post_feedforward_layernorm")
            else:
                x = x + self.mlp(p, self.norm(x, p + "post_attention_layernorm"), i)
        x = self.norm(x, "model.norm")
        tied = c.get("tie_word_embeddings", self.gemma)
        z = x @ (self.W["model.embed_tokens.weight"] if tied else self.W["lm_head.weight"]).T
        cap = c.get("final_logit_softcapping") if self.gemma else None
        return z if cap is None else cap * np.tanh(z / cap)


def np_family(cfg, W, dtypes, ids):
    """Logits [B, T, V] in float64 for ids [B, T]."""
    m = Model(cfg, W, dtypes)
    return np.stack([m.sequence(np.asarray(row)) for row in ids])
